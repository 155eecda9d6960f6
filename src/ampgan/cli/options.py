"""Options shared by several commands, declared once, and the click types that validate values.

A bad value fails in its type, before the command runs, and reads as one line:
`error: --steps must be at least 1, got 0`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import click

from ampgan.config import TrainConfig, build_config, parse_duration, parse_loss_scale, parse_set
from ampgan.config.flags import FLAGS, FLAGS_BY_NAME, Flag, flag_for_path, spec_settings
from ampgan.config.sources import file_changes, option_changes, parse_value
from ampgan.config.tree import DEVICES
from ampgan.errors import AmpganError
from ampgan.precisions import NAMES as PRECISION_NAMES
from ampgan.runs.claim import default_out as default_out  # the commands' default folders, named in one place


class WholeNumber(click.ParamType):
    name = "integer"

    def __init__(self, minimum: int = 1):
        self.minimum = minimum

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            try:
                number = int(str(value).strip())
            except ValueError:
                self.fail(f"must be a whole number, got {value!r}", param, ctx)
        if number < self.minimum:
            self.fail(f"must be at least {self.minimum}, got {number}", param, ctx)
        return number


class Number(click.ParamType):
    """A number that `accept`s; `requirement` completes 'OPTION ... got VALUE' when it does not."""

    name = "number"

    def __init__(self, accept, requirement: str):
        self.accept, self.requirement = accept, requirement

    def convert(self, value, param, ctx):
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"takes a number such as 1e6, got {value!r}", param, ctx)
        if not self.accept(number):
            self.fail(f"{self.requirement}, got {value}", param, ctx)
        return number


def PositiveNumber() -> Number:  # noqa: N802 - reads like the other types where it is used
    """A finite number > 0 (a price, a peak, a count, a number of seconds)."""
    return Number(lambda x: math.isfinite(x) and x > 0, "must be positive and finite")


def Fraction() -> Number:  # noqa: N802
    return Number(lambda x: 0 < x <= 1, "is a fraction in (0, 1]")


class Parsed(click.ParamType):
    """A value read by one of config.py's parsers; the parser's AmpganError becomes the option's error."""

    def __init__(self, parse, name: str):
        self.parse, self.name = parse, name

    def convert(self, value, param, ctx):
        if not isinstance(value, str):  # a default already converted, or None
            return value
        try:
            return self.parse(value)
        except AmpganError as error:
            self.fail(str(error), param, ctx)


def _positive_duration(text: str) -> float:
    seconds = parse_duration(text)
    if not seconds > 0:
        raise AmpganError(f"must be positive, got {text}")
    return seconds


def Duration() -> Parsed:  # noqa: N802 - reads like the other types where it is used
    """90s, 7m, 1h30m or plain seconds -> seconds (> 0)."""
    return Parsed(_positive_duration, "duration")


def LossScale() -> Parsed:  # noqa: N802
    """'dynamic' -> None (GradScaler decides), a number -> that static scale."""
    return Parsed(parse_loss_scale, "scale")


class StepsOrDuration(click.ParamType):
    """'500' -> ('steps', 500); '10m' -> ('seconds', 600.0)."""

    name = "steps|duration"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        text = str(value).strip().lower()
        if text.isdigit() and int(text) >= 1:
            return ("steps", int(text))
        return ("seconds", Duration().convert(text, param, ctx))


class IntList(click.ParamType):
    name = "list"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        try:
            values = tuple(int(part) for part in str(value).split(",") if part.strip())
        except ValueError:
            self.fail(f"takes whole numbers separated by commas, e.g. 16,64,256; got {value!r}", param, ctx)
        if not values or min(values) < 1:
            self.fail(f"needs at least one value, each at least 1; got {value!r}", param, ctx)
        return values


class PrecisionList(click.ParamType):
    name = "precisions"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        names = tuple(p.strip() for p in str(value).split(",") if p.strip())
        if not names:
            self.fail(f"needs at least one of {', '.join(PRECISION_NAMES)}", param, ctx)
        for name in names:
            if name not in PRECISION_NAMES:
                self.fail(f"has unknown precision {name!r}: choose from {', '.join(PRECISION_NAMES)}", param, ctx)
        return names


class NameList(click.ParamType):
    """Comma-separated names; an empty list is refused rather than read as 'the default'."""

    name = "names"

    def convert(self, value, param, ctx):
        names = [n.strip() for n in str(value).split(",") if n.strip()]
        if not names:
            self.fail(f"needs at least one name, got {value!r}", param, ctx)
        return ",".join(names)


def compose(*decorators):
    """Several click decorators applied as one, in the order written."""

    def apply(function):
        for decorator in reversed(decorators):
            function = decorator(function)
        return function

    return apply


def _int_choice(ctx, param, value):
    return int(value) if value else None


def _consent_to_named_model(ctx, param, value):
    """A model named on the command line may be imported (gan/registry.py: the model trust rule)."""
    if value:
        from ampgan.gan.registry import consent_to_import  # imports torch: only when a model is named

        consent_to_import(value)
    return value


def _consent_to_set_model(ctx, param, values):
    for text in values or ():
        path, equals, raw = text.partition("=")
        if equals and path.strip() == "model.name":
            name = parse_value(raw)
            if isinstance(name, str):
                _consent_to_named_model(ctx, param, name)
    return values


def _consent_to_any_model(ctx, param, value):
    if value:
        from ampgan.gan.registry import ANY_MODEL

        _consent_to_named_model(ctx, param, ANY_MODEL)
    return value


# Consent to import the model that a folder or file names (the model trust rule): without it, such a
# model is refused with one line saying to name it or pass this flag.
trust_model_option = click.option(
    "--trust-model",
    is_flag=True,
    expose_value=False,
    callback=_consent_to_any_model,
    help="Import the model (not built in) that a run folder, study or config file names, running its code; "
    "without this, ampgan imports only a model you name with --model.",
)


# The settings whose flags --help does not list, by option ('--keep' -> 'checkpoints.keep'): such a flag is no
# option of any command (parsed = shown); given anyway, it is one error line naming its --set path.
_SETTINGS_WITHOUT_FLAG: dict[str, str] = {flag.option: flag.paths[0] for flag in FLAGS if not flag.common}


def moved_to_set(option: str) -> str | None:
    """The --set path of a setting that has no flag (`--keep` -> 'checkpoints.keep'), if `option` names one."""
    return _SETTINGS_WITHOUT_FLAG.get(option)


def _click_type(flag: Flag):
    return {
        "whole": WholeNumber(),
        "whole0": WholeNumber(0),
        "whole4": WholeNumber(4),
        "positive": PositiveNumber(),
        "duration": Duration(),
        "loss_scale": LossScale(),
        "precision": click.Choice(PRECISION_NAMES),
        "device": click.Choice(DEVICES),
        "channels": click.Choice(["1", "3"]),
        "names": NameList(),
        "steps_or_duration": StepsOrDuration(),
    }.get(flag.value)


def _help_with_default(flag: Flag) -> str:
    """The flag's help, ending with the config's own default (read from the tree, never written twice)."""
    if len(flag.paths) != 1 or "default" in flag.help:
        return flag.help
    default = TrainConfig().get(flag.paths[0])
    return flag.help if default is None or default is False or default == "" else f"{flag.help} [default: {default}]"


def _config_option(flag: Flag, always_shown: bool = False):
    """The click option of a config flag (config/flags.py). Its default is None, so it applies only when
    given; the config's own defaults (or a command's) fill in the rest. `always_shown`: for a command
    without --set (`ampgan data`), where the flag is the only way to the field."""
    extra = {}
    if flag.name == "model":
        extra["callback"] = _consent_to_named_model
    if flag.value == "channels":
        extra["callback"] = _int_choice
    if flag.value == "switch":
        return click.option(
            f"{flag.option}/--no-{flag.option[2:]}", flag.name, default=None, help=_help_with_default(flag), **extra
        )
    if flag.value == "flag":
        return click.option(flag.option, flag.name, is_flag=True, default=None, help=_help_with_default(flag), **extra)
    return click.option(
        flag.option, flag.name, type=_click_type(flag), default=None, help=_help_with_default(flag), **extra
    )


def _spec_click_type(value: str):
    return {
        "precision_list": PrecisionList(),
        "int_list": IntList(),
        "fraction": Fraction(),
        "whole2": WholeNumber(2),
        "path": click.Path(path_type=Path),
        "nonnegative": Number(lambda x: math.isfinite(x) and x >= 0, "must be 0 or more"),
    }.get(value) or _click_type(Flag("", (), "", value))


def spec_option_flags(spec_class, section: str):
    """The click options of a command's own spec (config/flags.py spec_field), each field's default and
    help declared once on the dataclass; a field that is not common has no flag: it is reached as
    `--set SECTION.FIELD=VALUE` (and its flag, given, is one error line naming that path)."""
    decorators = []
    for name, default, declared in spec_settings(spec_class):
        option = declared["flag"] or "--" + name.replace("_", "-")
        if not declared["common"] or "." in name:  # a nested spec's settings (compare.bench.*) too: --set only
            _SETTINGS_WITHOUT_FLAG.setdefault(option, f"{section}.{name}")
            continue
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        help_text = declared["help"] + (f" [default: {shown}]" if shown not in (None, "") else "")
        if declared["value"] == "flag":
            decorators.append(click.option(option, name, is_flag=True, default=None, help=declared["help"]))
            continue
        decorators.append(
            click.option(option, name, type=_spec_click_type(declared["value"]), default=None, help=help_text)
        )
    # A moved setting's old flag (--bench-seconds) names its new path.
    _SETTINGS_WITHOUT_FLAG.update(
        {
            "--" + old.replace("_", "-"): f"{section}.{new.split()[0]}"
            for old, new in getattr(spec_class, "MOVED", {}).items()
        }
    )
    return compose(*decorators)


def spec_values(spec_class, section: str, options: dict) -> dict:
    """{field: value} of the spec fields given on the command line, then by `--set SECTION.FIELD=VALUE` or, for
    a nested spec's, `--set SECTION.FIELD.SETTING=VALUE` (checked by the setting's own type; one error line naming
    the setting otherwise, or its new path when it moved: the spec's MOVED)."""
    values = {name: options[name] for name, _, _ in spec_settings(spec_class) if options.get(name) is not None}
    settings = {name: declared for name, _, declared in spec_settings(spec_class)}
    moved = getattr(spec_class, "MOVED", {})
    for text in options.get("sets") or ():
        path, _, raw = text.partition("=")
        head, dot, name = path.strip().partition(".")
        if head != section or not dot:
            continue
        if name not in settings:
            raise AmpganError(
                f"--set {path.strip()}: "
                + (f"it moved to {section}.{moved[name]}" if name in moved else f"{section} has no setting {name!r}")
                + f" (its settings: {', '.join(settings)})"
            )
        try:
            kind = settings[name]["value"]
            values[name] = (
                raw.strip()
                if kind == "text"
                else parse_value(raw) is True
                if kind == "flag"
                else _spec_click_type(kind).convert(raw.strip(), None, None)
            )
        except click.BadParameter as error:
            raise AmpganError(f"--set {path.strip()} {error.message}") from None
    for outer in {name.partition(".")[0] for name in values if "." in name}:  # a nested spec's, as one spec
        given = {name.partition(".")[2]: values.pop(name) for name in list(values) if name.startswith(outer + ".")}
        values[outer] = replace(getattr(spec_class, outer), **given)
    return values


def config_sets(options: dict, spec_sections: tuple[str, ...]) -> dict:
    """`options` with the --set texts that name a command's spec (`compare.seeds=2`) left out: the rest
    set config fields."""
    sets = tuple(text for text in options.get("sets") or () if text.partition(".")[0].strip() not in spec_sections)
    return {**options, "sets": sets}


# Every common flag that sets a config field (config/flags.py), as a click option.
CONFIG_FLAGS = {flag.name: _config_option(flag) for flag in FLAGS if flag.common}


def shown_config_flags(*names: str):
    """The named config flags, every one listed by --help (for commands that have no --set)."""
    return compose(*(_config_option(FLAGS_BY_NAME[name], always_shown=True) for name in names))


_SOURCES = compose(
    click.option(
        "--config",
        "config_file",
        type=click.Path(path_type=Path),
        default=None,
        help="A config file (TOML or JSON; a run's config.json too) below the flags.",
    ),
    trust_model_option,
    click.option(
        "--set",
        "sets",
        multiple=True,
        metavar="SECTION.FIELD=VALUE",
        callback=_consent_to_set_model,
        help="Set any config field or model option, e.g. --set model.mode_seeking=0 (repeatable; applied last).",
    ),
)
DATA_FLAGS = ("dataset", "data_dir", "download", "image_size")
MODEL_FLAGS = ("model", "width")


def config_flags(*names: str):
    """The named config flags, plus --config and --set."""
    return compose(*(CONFIG_FLAGS[name] for name in names), _SOURCES)


def flag_of(path: str) -> str | None:
    """The flag that sets a config path ('budget.batch_size' -> '--batch-size'), if one does."""
    flag = flag_for_path(path)
    return flag.option if flag is not None else None


def given_changes(ctx: click.Context, options: dict) -> dict:
    """{config path: value} the user set: the config file's, then the flags given on the command line,
    then every --set (each later one wins)."""
    changes = dict(file_changes(options["config_file"])) if options.get("config_file") else {}
    given = {
        name
        for name in ctx.params
        if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE and name in CONFIG_FLAGS
    }
    flat = {name: options[name] for name in given if name != "checkpoint_every"}
    if "checkpoint_every" in given:
        unit, every = options["checkpoint_every"]
        flat["checkpoint_every_steps"] = every if unit == "steps" else None
        flat["checkpoint_every_s"] = every if unit == "seconds" else None
    changes.update(option_changes(flat))
    for text in options.get("sets") or ():
        path, value = parse_set(text)
        changes[path] = value
    return changes


def config_from_cli(ctx: click.Context, options: dict, defaults: dict | None = None) -> TrainConfig:
    """The config a command runs: the defaults, the command's own (`defaults`, {path: value}), then what
    the user gave (given_changes)."""
    return build_config(dict(defaults or {}), given_changes(ctx, options))


def precisions_given(flag: bool | None, precisions=PRECISION_NAMES) -> tuple[str, ...] | None:
    """The precisions an --X/--no-X speed option (--channels-last, --compile) names: every one, none,
    or, when neither was given, None (decided per precision by measuring)."""
    return None if flag is None else (tuple(precisions) if flag else ())


# A seed that is not a run's config (the noise of `evaluate` and `generate`).
seed_option = click.option(
    "--seed", type=WholeNumber(0), default=0, show_default=True, help="Seeds the noise of the generated samples."
)


def out_options(what: str):
    return compose(
        click.option(
            "--out", type=click.Path(path_type=Path), default=None, help=f"Output folder (default runs/{what}-<time>)."
        ),
        click.option("--overwrite", is_flag=True, help="Replace an existing, non-empty output folder."),
    )
