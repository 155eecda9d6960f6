"""A model's options are its function's keyword parameters: `def acgan(data, *, width=64, ...)` has the
option `width`, set with `--set model.width=32` (or `--width 32`), defaulting to 64.

Resolving a model's options checks each given one by name against the function's signature and by type
against its default's (an int where a float is wanted becomes a float; a bool is never a number), fills
in the defaults, and returns every option with its value, which is what config.json records: a run
resumes with exactly the options it started with, whatever the defaults become later.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from functools import partial
from typing import Any

from ampgan.errors import AmpganError, ConfigError
from ampgan.sections import close_match_hint


def option_parameters(builder: Callable) -> tuple[dict[str, inspect.Parameter], bool]:
    """({option name: its parameter}, whether the function takes **options as well)."""
    parameters = list(inspect.signature(builder).parameters.values())
    if not parameters or parameters[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        raise TypeError("a model function takes the data description as its first (positional) argument")
    options = {
        parameter.name: parameter
        for parameter in parameters[1:]
        if parameter.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    return options, any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters[1:])


def resolve_options(model: str, builder: Callable, given: dict[str, Any]) -> dict[str, Any]:
    """Every option of `builder` with its value: `given` ones checked and converted, the rest defaulted."""
    parameters, any_keyword = option_parameters(builder)
    resolved = {}
    for name, value in given.items():
        if name not in parameters and not any_keyword:
            raise ConfigError(
                f"model.{name}",
                f"is not an option of model {model}{close_match_hint(name, parameters)} (its options: "
                f"{', '.join(parameters) or 'none'})",
            )
        default = parameters[name].default if name in parameters else inspect.Parameter.empty
        resolved[name] = _converted(f"model.{name}", value, default)
    for name, parameter in parameters.items():
        if name in resolved:
            continue
        if parameter.default is inspect.Parameter.empty:
            raise ConfigError(f"model.{name}", f"is required by model {model}: add --set model.{name}=VALUE")
        resolved[name] = parameter.default
    return resolved


def _converted(path: str, value: Any, default: Any) -> Any:
    """`value` as the default's type wants it; anything goes when there is no typed default."""
    if default is inspect.Parameter.empty or default is None:
        return value
    wanted = type(default)
    if wanted is bool and not isinstance(value, bool):
        raise ConfigError(path, f"takes true or false, got {value!r}")
    if wanted in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(path, f"takes a number, got {value!r}")
        if wanted is int:
            if isinstance(value, float) and not value.is_integer():
                raise ConfigError(path, f"takes a whole number, got {value!r}")
            return int(value)
        return float(value)
    if wanted is tuple and isinstance(value, list):
        return tuple(value)
    if not isinstance(value, wanted):
        raise ConfigError(path, f"takes {wanted.__name__}, got {value!r}")
    return value


def require_image_size(model: str, data, sizes) -> None:
    """One error line when the data's image size is not one the model draws (`data`: gan.DataSpec)."""
    if data.image_size not in sizes:
        closest = min(sizes, key=lambda size: abs(size - data.image_size))
        raise AmpganError(
            f"model {model} draws {', '.join(map(str, sizes))} px images, not {data.image_size} px: "
            f"add --image-size {closest}"
        )


def is_whole(value, minimum: int) -> bool:
    """A whole number (never a bool) of at least `minimum`."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _require(accept: Callable[[Any], bool], requirement: str, **options) -> None:
    for name, value in options.items():
        if not accept(value):
            raise ConfigError(f"model.{name}", f"{requirement}, got {value!r}")


# Range checks a model function calls on its own options (`require_whole(width=width, z_dim=z_dim)`); each
# names the option by its config path.
require_whole = partial(_require, lambda value: is_whole(value, 1), "must be a whole number of at least 1")
require_non_negative = partial(
    _require, lambda value: isinstance(value, (int, float)) and math.isfinite(value) and value >= 0, "must be 0 or more"
)
require_fraction = partial(
    _require, lambda value: isinstance(value, (int, float)) and 0 < value <= 1, "must be in (0, 1]"
)
