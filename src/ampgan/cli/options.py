"""The command line made from the declarations: each command's options, `--set` paths and their checks come
from its spec's settings (sections.py `setting`, walked by `settings`); the click types that read values.

A setting's text that is no value of its kind fails in its type (`error: --steps must be a whole number, got 'x'`);
a value out of its kind's range fails where the setting is declared (sections.py RANGES), as the Python API's does,
and reads as one line naming it and its flag: `error: budget.steps (--steps) must be a whole number of at least 1,
got 0`. Options of one command alone (cost's, generate's) validate in their types.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path

import click

from ampgan.bench.spec import BenchSpec
from ampgan.config import TrainConfig, build_config, flag_of, parse_loss_scale, parse_set
from ampgan.config.sources import file_changes, option_changes, parse_value
from ampgan.config.tree import DEVICES
from ampgan.config.values import parse_steps_or_duration, positive_duration
from ampgan.cost.catalog import MOST_PER_HOUR
from ampgan.errors import AmpganError
from ampgan.precisions import NAMES as PRECISION_NAMES
from ampgan.projection.from_results import ProjectSpec
from ampgan.runs import claim
from ampgan.sections import Setting, own_settings, refuse_unknown, settings
from ampgan.seeds import MAX_SEED
from ampgan.study.spec import CompareSpec
from ampgan.training.distributed import rank_zeros, world
from ampgan.trust import ANY_MODEL, consent_to_import


class ShellPath(click.Path):
    """A path option or argument, `~` expanded as the shell expands a word of its own: `--out=~/runs/x` is one
    word the shell leaves alone, and would otherwise make a folder named '~' in the current one."""

    def __init__(self, **checks):
        super().__init__(path_type=Path, **checks)

    def convert(self, value, param, ctx):
        if value == "":  # '--data-dir=$DIR' with DIR unset: Path('') is the current folder, read or written as given
            self.fail("is empty (an unset shell variable?): give the path", param, ctx)
        return super().convert(os.path.expanduser(value) if isinstance(value, str) else value, param, ctx)


def each_once(ctx, param, paths: tuple[Path, ...]) -> tuple[Path, ...]:
    """A list of paths with each folder or file once (`runs/a runs/a/`, a shell glob that matched it again):
    read twice, it would be evaluated twice or counted twice in a table."""
    return tuple({path.resolve(): path for path in paths}.values())


class Number(click.ParamType):
    """A number (`whole`: a whole number, shown as INTEGER) that `accept`s; `requirement` completes
    'OPTION ... got VALUE' when it does not."""

    def __init__(self, accept, requirement: str, whole: bool = False):
        self.accept, self.requirement, self.whole = accept, requirement, whole
        self.name = "integer" if whole else "number"

    def convert(self, value, param, ctx):
        try:
            number = int(str(value).strip()) if self.whole else float(value)
        except (TypeError, ValueError):
            wanted = "must be a whole number" if self.whole else "takes a number such as 1e6"
            self.fail(f"{wanted}, got {value!r}", param, ctx)
        if not self.accept(number):
            self.fail(f"{self.requirement}, got {number if self.whole else value}", param, ctx)
        return number


def WholeNumber(minimum: int = 1) -> Number:  # noqa: N802 - reads like the other types where it is used
    """A whole number of at least `minimum` (a count, a seed, a number of steps)."""
    return Number(lambda x: x >= minimum, f"must be at least {minimum}", whole=True)


SEED = Number(lambda x: 0 <= x <= MAX_SEED, f"must be from 0 to {MAX_SEED}", whole=True)
# A finite number > 0 (a price, a peak, a count, a number of seconds); a type holds no state, so one serves all.
POSITIVE_NUMBER = Number(lambda x: math.isfinite(x) and x > 0, "must be positive and finite")
# An hourly price: past the catalog's bound the cost of a study's training ran to infinity (written as Infinity).
PRICE = Number(lambda x: 0 < x <= MOST_PER_HOUR, f"must be positive and at most {MOST_PER_HOUR:,.0f} (per hour)")
# A setting's number read from its flag or `--set`: its range is checked where it is declared (sections.py RANGES),
# so the command line and the Python API refuse it with the same line.
READ_WHOLE, READ_NUMBER = Number(lambda x: True, "", whole=True), Number(lambda x: True, "")


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


def _whole_numbers(text: str) -> tuple[int, ...]:
    """'16,64,256' -> (16, 64, 256): batch sizes (each at least 1: sections.py RANGES)."""
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise AmpganError(f"takes whole numbers separated by commas, e.g. 16,64,256; got {text!r}") from None


def _precisions(text: str) -> tuple[str, ...]:
    """'fp32,bf16' -> ('fp32', 'bf16') (each a precision's name: the spec checks it, as the Python API's)."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise AmpganError(f"needs at least one of {', '.join(PRECISION_NAMES)}")
    return names


def _names(text: str) -> str:
    """Comma-separated names, tidied; an empty list is refused rather than read as 'the default'."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise AmpganError(f"needs at least one name, got {text!r}")
    return ",".join(names)


def compose(*decorators):
    """Several click decorators applied as one, in the order written."""

    def apply(function):
        for decorator in reversed(decorators):
            function = decorator(function)
        return function

    return apply


def _consent_to_named_model(ctx, param, value):
    """A model named on the command line may be imported (ampgan/trust.py: the model trust rule); --trust-model
    (True) consents to any model a folder or file names."""
    consent_to_import(ANY_MODEL if value is True else value)  # nothing for None, False or an empty name
    return value


def _consent_to_set_model(ctx, param, values):
    for text in values or ():
        path, equals, raw = text.partition("=")
        if equals and path.strip() == "model.name":
            consent_to_import(parse_value(raw))  # nothing for a value that is not a name
    return values


# Consent to import the model that a folder or file names (the model trust rule): without it, such a
# model is refused with one line saying to name it or pass this flag.
trust_model_option = click.option(
    "--trust-model",
    is_flag=True,
    expose_value=False,
    callback=_consent_to_named_model,
    help="Import the model (not built in) that a run folder, study or config file names, running its code; "
    "without this, ampgan imports only a model you name with --model.",
)


def _click_type(kind: str):
    """The click type of a setting's kind (sections.py setting); text takes any string."""
    return {
        **dict.fromkeys(("whole", "whole0", "whole2", "whole4"), READ_WHOLE),
        **dict.fromkeys(("positive", "nonnegative", "fraction"), READ_NUMBER),
        "duration": Parsed(positive_duration, "duration"),  # 90s, 7m, 1h30m or plain seconds -> seconds (> 0)
        "loss_scale": Parsed(parse_loss_scale, "scale"),  # 'dynamic' -> None (GradScaler decides), or a number
        "steps_or_duration": Parsed(parse_steps_or_duration, "steps|duration"),  # ('steps', 500), ('seconds', 600.0)
        "precision": click.Choice(PRECISION_NAMES),
        "device": click.Choice(DEVICES),
        "channels": click.Choice(["1", "3"]),
        "names": Parsed(_names, "names"),
        "int_list": Parsed(_whole_numbers, "list"),
        "precision_list": Parsed(_precisions, "precisions"),
        "path": ShellPath(),
    }.get(kind)


def _option(setting: Setting):
    """A setting's flag as a click option. Its default is None, so it applies only when given: the spec's own
    default fills in the rest."""
    callback = _consent_to_named_model if setting.path == "model.name" else None
    # The help ends with the default (the command's spec's own, never written twice).
    default = ",".join(map(str, setting.default)) if isinstance(setting.default, tuple) else setting.default
    quiet = default is None or default is False or default == "" or "default" in setting.help
    shared = {
        "default": None,
        "help": setting.help if quiet else f"{setting.help} [default: {default}]",
        # --channels is a choice of "1" or "3": the config takes the number.
        "callback": (lambda ctx, param, value: int(value) if value else None)
        if setting.kind == "channels"
        else callback,
    }
    if setting.kind == "switch":
        return click.option(f"{setting.flag}/--no-{setting.flag[2:]}", setting.name, **shared)
    if setting.kind == "flag":
        return click.option(setting.flag, setting.name, is_flag=True, **shared)
    return click.option(setting.flag, setting.name, type=_click_type(setting.kind), **shared)


def spec_options(spec=None, prefix: str = "", parts: tuple[str, ...] = ("",), with_set: bool = True):
    """A command's options made from its spec (an instance, its defaults the command's; TrainConfig() when None):
    the flag of each of its own settings (paths under `prefix`, 'compare.') and of the config tree's under `parts`
    ('data.', 'budget.batch_size'), then --config, --trust-model and --set. A setting without a flag is no option
    (options parsed = options shown): its name as a flag, or a moved one (the spec's MOVED), is one error line
    naming its --set path. `with_set=False`: a command without --set (`ampgan data`) shows each one's flag."""
    spec = TrainConfig() if spec is None else spec
    chosen = [s for s in settings(spec, prefix) if s.path.startswith((prefix or "\0", *parts))]
    shown = [
        s if s.flag else replace(s, flag="--" + s.name.replace("_", "-")) for s in chosen if s.flag or not with_set
    ]
    moved = {"--" + s.name.replace("_", "-"): s.path for s in settings(spec, prefix) if not s.flag}
    moved |= {"--" + old.replace("_", "-"): prefix + new.split()[0] for old, new in getattr(spec, "MOVED", {}).items()}
    moved |= {"--" + old: new.split()[0] for old, new in TrainConfig.MOVED.items()}  # the config tree's, any command

    def apply(function):
        function.moved_flags = moved  # read by moved_to_set when click finds no such option
        return compose(*map(_option, shown), *([_SOURCES] if with_set else []))(function)

    return apply


def setting_flag(path: str) -> str | None:
    """The flag that sets a setting's path: a config field's ('budget.batch_size' -> '--batch-size') or a command's
    own ('bench.steps' -> '--steps'; compare's bench, 'compare.bench.steps', has none: `--set` reaches it)."""
    own = (s for spec in (BenchSpec(), CompareSpec(), ProjectSpec()) for s in settings(spec, f"{spec.NAME}."))
    return flag_of(path) or next((s.flag for s in own if s.path == path), None)


def moved_to_set(command: click.Command | None, option: str) -> str | None:
    """The --set path of a setting that has no flag in `command` (`--keep` -> 'checkpoints.keep'), if `option`
    names one."""
    return getattr(getattr(command, "callback", None), "moved_flags", {}).get(option)


def given_changes(ctx: click.Context, options: dict, spec=None, prefix: str = "") -> dict:
    """{config path: value} the user set: the config file's, then the config flags given on the command line,
    then every --set of a config path (each later one wins; a command's own settings, under `prefix`, are
    own_values')."""
    changes = dict(file_changes(options["config_file"])) if options.get("config_file") else {}
    # The config settings whose flags the command line gave.
    flagged = {
        s.name for s in settings(spec or TrainConfig(), prefix) if s.flag and not s.path.startswith(prefix or "\0")
    }
    typed = click.core.ParameterSource.COMMANDLINE
    changes.update(
        option_changes({n: v for n, v in ctx.params.items() if n in flagged and ctx.get_parameter_source(n) is typed})
    )
    for text in options.get("sets") or ():
        path, value = parse_set(text)
        if not (prefix and path.startswith(prefix)):
            changes[path] = value
    return changes


def own_values(spec, prefix: str, options: dict) -> dict:
    """{setting: value} of the command's own settings the user gave ('seeds', 'bench.warmup'): its flags, then
    `--set PREFIX.SETTING=VALUE`, each read by its setting's kind (one error line naming it otherwise)."""
    declared = own_settings(spec, prefix)
    values = {name: options[s.name] for name, s in declared.items() if s.flag and options.get(s.name) is not None}
    for text in options.get("sets") or ():
        path, _, raw = text.partition("=")
        path = path.strip()
        if not path.startswith(prefix):
            continue
        name = path.removeprefix(prefix)
        if name not in declared:
            moved = getattr(spec, "MOVED", {}).get(name)
            refuse_unknown(f"--set {path}: {prefix[:-1]}", name, declared, moved and prefix + moved)
        kind = declared[name].kind
        try:
            converted = _click_type(kind).convert(raw.strip(), None, None) if _click_type(kind) else raw.strip()
        except click.BadParameter as error:
            raise AmpganError(f"--set {path} {error.message}") from None
        values[name] = parse_value(raw) is True if kind == "flag" else converted
    return values


_SOURCES = compose(
    click.option(
        "--config",
        "config_file",
        type=ShellPath(),
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
# The config tree's parts whose flags a command that trains or builds a model shows.
DATA_AND_MODEL = ("data.", "model.")


def config_from_cli(ctx: click.Context, options: dict, spec: TrainConfig | None = None) -> TrainConfig:
    """The config a command runs: its spec (the one its options were made from, so --help shows the defaults
    it runs with; TrainConfig() when None), then what the user gave (given_changes)."""
    return build_config(given_changes(ctx, options), base=spec)


def precisions_given(flag: bool | None, precisions=PRECISION_NAMES) -> tuple[str, ...] | None:
    """The precisions an --X/--no-X speed option (--channels-last, --compile) names: every one, none,
    or, when neither was given, None (decided per precision by measuring)."""
    return None if flag is None else (tuple(precisions) if flag else ())


# A seed that is not a run's config (the noise of `evaluate` and `generate`).
seed_option = click.option(
    "--seed", type=SEED, default=0, show_default=True, help="Seeds the noise of the generated samples."
)


# Where a run's files are now, if they moved since it trained (evaluate, generate; train --resume, doctor --run and
# compare --resume take the same flags): read from there once they are the run's (their SHA-256).
moved_files_options = compose(
    click.option("--dataset", default=None, help="folder:PATH: where the run's image folder is now, if it moved."),
    click.option("--data-dir", type=ShellPath(), default=None, help="Where the run's dataset files are now, if moved."),
    click.option(
        "--model",
        default=None,
        callback=_consent_to_named_model,
        help="PATH.py:FUNCTION: where the run's model file is now, if it moved (imported: you name it).",
    ),
)


def default_out(kind: str) -> Path:
    """The commands' default folder (runs.claim.default_out), named by rank 0 alone and the same on every rank under
    torchrun: a slower rank would find rank 0's made and take the next name."""
    return rank_zeros(claim.default_out(kind) if world().is_main else None)


def out_options(what: str):
    return compose(
        click.option("--out", type=ShellPath(), default=None, help=f"Output folder (default runs/{what}-<time>)."),
        click.option("--overwrite", is_flag=True, help="Replace an existing, non-empty output folder."),
    )
