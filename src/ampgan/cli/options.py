"""Options shared by several commands, declared once, and the click types that validate values.

A bad value fails in its type, before the command runs, and reads as one line:
`error: --steps must be at least 1, got 0`.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import click

from ampgan.config import TrainConfig, build_config, parse_duration, parse_loss_scale, parse_set
from ampgan.config.sources import OPTION_PATHS, file_changes, option_changes, parse_value
from ampgan.config.tree import DEVICES
from ampgan.errors import AmpganError
from ampgan.precisions import NAMES as PRECISION_NAMES


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


def default_out(kind: str) -> Path:
    return Path("runs") / f"{kind}-{dt.datetime.now():%Y%m%d-%H%M%S}"


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
    "--trust-model", is_flag=True, expose_value=False, callback=_consent_to_any_model,
    help="Import the model (not built in) that a run folder, study or config file names, running its code; "
         "without this, ampgan imports only a model you name with --model.")


# Every flag that sets a config field, declared once: (click option, help). Defaults are None, so a
# flag applies only when given; the config's own defaults (or a command's) fill in the rest, and help
# texts say what those are. `--set section.field=value` reaches every field and model option.
CONFIG_FLAGS = {
    "dataset": click.option("--dataset", default=None,
                            help="digits (embedded, the default), synthetic, cifar10, quickdraw, mnist, folder:PATH."),
    "data_dir": click.option("--data-dir", default=None, help="Where a file-based dataset lives (cifar10, quickdraw, mnist)."),
    "classes": click.option("--classes", type=NameList(), default=None,
                            help="Quick, Draw! classes, comma-separated (default: the study's ten)."),
    "max_per_class": click.option("--max-per-class", type=WholeNumber(), default=None,
                                  help="Quick, Draw!: rows read per class (10000)."),
    "download": click.option("--download", is_flag=True, default=None, help="Fetch missing dataset files (cifar10, quickdraw)."),
    "cache": click.option("--cache", is_flag=True, default=None, help="folder:PATH: keep a verified .npz cache next to the images."),
    "image_size": click.option("--image-size", type=WholeNumber(4), default=None,
                               help="Resize the data (default: the dataset's size; the model says which it draws)."),
    "channels": click.option("--channels", type=click.Choice(["1", "3"]), default=None, callback=_int_choice,
                             help="Grey or colour (default: the dataset's)."),
    "model": click.option("--model", default=None, callback=_consent_to_named_model,
                          help="The GAN: acgan (default), acgan-2019 (the study's network), dcgan, wgan-gp, r1, or "
                               "your own as path/to/file.py:FUNCTION or package.module:FUNCTION (imported and "
                               "run; docs/your-gan.md)."),
    "width": click.option("--width", type=WholeNumber(), default=None,
                          help="Model option `width` (the built-ins' channels w, 2w, 4w; acgan 64, dcgan/wgan-gp 32, r1 16)."),
    "z_dim": click.option("--z-dim", type=WholeNumber(), default=None, help="Model option `z_dim`: the noise size."),
    "lr": click.option("--lr", type=PositiveNumber(), default=None,
                       help="Adam's learning rate for both networks (default: the model's, 2e-4 for the AC-GANs)."),
    "precision": click.option("--precision", type=click.Choice(PRECISION_NAMES), default=None,
                              help="fp32 (default), tf32, bf16 or fp16."),
    "loss_scale": click.option("--loss-scale", type=LossScale(), default=None,
                               help="fp16 only: 'dynamic' (GradScaler, the default) or a fixed number such as 128."),
    "device": click.option("--device", type=click.Choice(DEVICES), default=None, help="auto (default), cpu or cuda."),
    "channels_last": click.option(
        "--channels-last/--no-channels-last", default=None,
        help="NHWC (or, with --no-, NCHW) memory format for every precision; default: measured per precision on "
             "this machine (cached), channels-last where it is faster."),
    "compile": click.option(
        "--compile/--no-compile", default=None,
        help="torch.compile the networks (or, with --no-, run them eager); default: compiled where it pays for its "
             "compile time over the run's length on this machine (measured once, cached; runs of 5 minutes or more "
             "measure it)."),
    "sync_bn": click.option("--sync-bn", is_flag=True, default=None, help="With several processes: SyncBatchNorm (CUDA only)."),
    "batch_size": click.option("--batch-size", type=WholeNumber(), default=None, help="Per process (default 64)."),
    "steps": click.option("--steps", type=WholeNumber(), default=None,
                          help="Stop after this many steps (one step: one G update)."),
    "time_budget": click.option("--time-budget", type=Duration(), default=None,
                                help="Stop after this much training wall time, e.g. 7m, 90s, 1h."),
    "checkpoint_every": click.option("--checkpoint-every", type=StepsOrDuration(), default=None,
                                     help="Steps (default 500) or training time (10m) between checkpoints."),
    "keep": click.option("--keep", type=WholeNumber(), default=None, help="How many recent checkpoints to keep (3)."),
    "sample_every": click.option("--sample-every", type=WholeNumber(), default=None, help="Steps between sample grids (500)."),
    "log_every": click.option("--log-every", type=WholeNumber(), default=None, help="Steps between metric records (10)."),
    "tensorboard": click.option("--tensorboard", is_flag=True, default=None, help="Also write TensorBoard event files."),
    "seed": click.option("--seed", type=WholeNumber(0), default=None, help="Seeds weights, data order, noise and evaluation (0)."),
}
_SOURCES = compose(
    click.option("--config", "config_file", type=click.Path(path_type=Path), default=None,
                 help="A config file (TOML or JSON; a run's config.json too) below the flags."),
    trust_model_option,
    click.option("--set", "sets", multiple=True, metavar="SECTION.FIELD=VALUE", callback=_consent_to_set_model,
                 help="Set any config field or model option, e.g. --set model.mode_seeking=0 (repeatable; applied last)."),
)
DATA_FLAGS = ("dataset", "data_dir", "classes", "max_per_class", "download", "cache", "image_size", "channels")
MODEL_FLAGS = ("model", "width", "z_dim", "lr")


def config_flags(*names: str):
    """The named config flags, plus --config and --set."""
    return compose(*(CONFIG_FLAGS[name] for name in names), _SOURCES)


def flag_of(path: str) -> str | None:
    """The flag that sets a config path ('budget.batch_size' -> '--batch-size'), if one does."""
    for name, paths in OPTION_PATHS.items():
        if path in paths:
            return "--" + {"checkpoint_every_steps": "checkpoint_every", "checkpoint_every_s": "checkpoint_every"}.get(
                name, name).replace("_", "-")
    return None


def given_changes(ctx: click.Context, options: dict) -> dict:
    """{config path: value} the user set: the config file's, then the flags given on the command line,
    then every --set (each later one wins)."""
    changes = dict(file_changes(options["config_file"])) if options.get("config_file") else {}
    given = {name for name in ctx.params
             if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE and name in CONFIG_FLAGS}
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
seed_option = click.option("--seed", type=WholeNumber(0), default=0, show_default=True,
                           help="Seeds the noise of the generated samples.")


def out_options(what: str):
    return compose(
        click.option("--out", type=click.Path(path_type=Path), default=None, help=f"Output folder (default runs/{what}-<time>)."),
        click.option("--overwrite", is_flag=True, help="Replace an existing, non-empty output folder."),
    )
