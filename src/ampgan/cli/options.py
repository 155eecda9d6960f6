"""Options shared by several commands, declared once, and the click types that validate values.

A bad value fails in its type, before the command runs, and reads as one line:
`error: --steps must be at least 1, got 0`.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import click

from ampgan.config import PRECISIONS, parse_duration, parse_loss_scale
from ampgan.errors import AmpganError


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
            self.fail(f"needs at least one of {', '.join(PRECISIONS)}", param, ctx)
        for name in names:
            if name not in PRECISIONS:
                self.fail(f"has unknown precision {name!r}: choose from {', '.join(PRECISIONS)}", param, ctx)
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


seed_option = click.option("--seed", type=WholeNumber(0), default=0, show_default=True,
                           help="Seeds weights, data order, noise and evaluation.")
device_option = click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto",
                             show_default=True)
channels_last_option = click.option(
    "--channels-last/--no-channels-last", default=None,
    help="NHWC (or, with --no-, NCHW) memory format for every precision; default: measured per precision on this "
         "machine (cached), channels-last where it is faster.")


compile_option = click.option(
    "--compile/--no-compile", default=None,
    help="torch.compile the networks (or, with --no-, run them eager); default: compiled where it pays for its "
         "compile time over the run's length on this machine (measured once, cached; runs of 5 minutes or more measure it).")


def precisions_given(flag: bool | None, precisions=PRECISIONS) -> tuple[str, ...] | None:
    """The precisions an --X/--no-X speed option (--channels-last, --compile) names: every one, none,
    or, when neither was given, None (decided per precision by measuring)."""
    return None if flag is None else (tuple(precisions) if flag else ())


model_options = compose(
    click.option("--width", type=WholeNumber(), default=64, show_default=True, help="Network width w (channels w, 2w, 4w)."),
    click.option("--z-dim", type=WholeNumber(), default=128, show_default=True, help="Noise size."),
)
image_shape_options = compose(
    click.option("--image-size", type=click.Choice(["28", "32", "64"]), default=None,
                 callback=lambda ctx, param, value: int(value) if value else None, help="Default: the dataset's."),
    click.option("--channels", type=click.Choice(["1", "3"]), default=None,
                 callback=lambda ctx, param, value: int(value) if value else None, help="Default: the dataset's."),
)
data_source_options = compose(
    click.option("--data-dir", default=None, help="Where a file-based dataset lives (cifar10, quickdraw, mnist)."),
    click.option("--classes", type=NameList(), default=None,
                 help="Quick, Draw! classes, comma-separated (default: the study's ten)."),
    click.option("--max-per-class", type=WholeNumber(), default=None, help="Quick, Draw!: rows read per class (10000)."),
)
fetch_options = compose(
    click.option("--download", is_flag=True, help="Fetch missing dataset files (cifar10, quickdraw)."),
    click.option("--cache", is_flag=True, help="folder:PATH: keep a verified .npz cache next to the images."),
)


def out_options(what: str):
    return compose(
        click.option("--out", type=click.Path(path_type=Path), default=None, help=f"Output folder (default runs/{what}-<time>)."),
        click.option("--overwrite", is_flag=True, help="Replace an existing, non-empty output folder."),
    )


def dataset_option(default: str = "digits", help_text: str = "digits (embedded), synthetic, cifar10, quickdraw, mnist, folder:PATH."):
    return click.option("--dataset", default=default, show_default=True, help=help_text)
