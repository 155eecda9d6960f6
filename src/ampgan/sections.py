"""The base of every config section: a frozen, keyword-only dataclass that checks its own fields.

A section knows its name in the config tree (`data`, `budget`, ...), so every problem names the field
by its path (`budget.batch_size must be a whole number of at least 1, got 0`), whoever set it: a
command-line flag, `--set`, a config file or a Python caller. The field's annotation decides which
types it takes (JSON and TOML bring ints where floats are meant: those become floats; a bool is never
taken for a number); a section's `check()` adds the ranges.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from typing import Any, ClassVar

from ampgan.errors import ConfigError

_SIMPLE = {"int": int, "float": float, "bool": bool, "str": str, "dict": dict, "None": type(None)}


def _allowed_types(annotation: str) -> tuple[type, ...]:
    """'int | None' -> (int, NoneType); the annotations here are written with these simple names only."""
    names = [part.strip() for part in annotation.split("|")]
    return tuple(_SIMPLE[name.split("[")[0]] for name in names)


def fits(annotation: str, value: Any) -> bool:
    """Does `value` have the type a dataclass field annotated `annotation` (e.g. 'float | None') takes?
    An int fits a float; a bool fits only bool."""
    allowed = _allowed_types(annotation)
    if isinstance(value, bool):
        return bool in allowed
    if float in allowed and isinstance(value, int):
        return True
    return isinstance(value, allowed)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Section:
    NAME: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            allowed = _allowed_types(str(field.type))
            if not fits(str(field.type), value):
                wanted = " or ".join("null" if t is type(None) else t.__name__ for t in allowed)
                raise ConfigError(self.path(field.name), f"takes {wanted}, got {value!r}")
            if float in allowed and isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, field.name, float(value))
        self.check()

    def check(self) -> None:
        """Ranges and relations between this section's fields (the types are checked already)."""

    @classmethod
    def path(cls, field_name: str) -> str:
        return f"{cls.NAME}.{field_name}" if cls.NAME else field_name

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls, values: Any):
        if not isinstance(values, dict):
            raise ConfigError(cls.NAME or "config", f"must be a table of fields, got {values!r}")
        unknown = sorted(set(values) - set(cls.field_names()))
        if unknown:
            raise ConfigError(
                cls.path(unknown[0]),
                f"is not a field of {cls.NAME or 'the config'}"
                f"{close_match_hint(unknown[0], cls.field_names())} (its fields: "
                f"{', '.join(cls.field_names())})",
            )
        return cls(**values)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    # Shared range checks, each naming the field.
    def whole(self, name: str, minimum: int = 1, optional: bool = False) -> None:
        value = getattr(self, name)
        if value is None and optional:
            return
        if not (isinstance(value, int) and not isinstance(value, bool) and value >= minimum):
            raise ConfigError(self.path(name), f"must be a whole number of at least {minimum}, got {value!r}")

    def positive(self, name: str, optional: bool = False) -> None:
        value = getattr(self, name)
        if value is None and optional:
            return
        if not (isinstance(value, float) and math.isfinite(value) and value > 0):
            raise ConfigError(self.path(name), f"must be a positive, finite number, got {value!r}")


def close_match_hint(name: str, choices) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""
