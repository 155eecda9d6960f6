"""Checking a document ampgan wrote before trusting it: required fields, their types, nested parts.

Every file ampgan reads back is input: it may be cut short by a crash, edited by hand, written by
another version or not ampgan's at all. A reader states the shape it relies on and calls
`check_shape`; a document that does not have it is one error line naming the file, the field and
what to do, never a KeyError or TypeError three calls later.

A shape is a type (or a tuple of types), a dict of field -> shape (a field named "?name" may be
absent; the field "*" gives the shape of every value of a table, a OneOf field that of every value of a table
whose every key is one of its names), or a one-item list: a list whose
items all have that shape. `None` in a tuple allows null. bool is never taken for a number, and a
number is finite: NaN or infinity in a count, a time or a score would otherwise reach a table or a figure.
`RelativePath` is a path inside the document's own folder (relative, no `..`, no control characters);
resolve it with files.paths.inside().
"""

from __future__ import annotations

import math
from pathlib import PurePosixPath
from typing import Any

from ampgan.errors import AmpganError

Number = (int, float)


class RelativePath:
    """A shape: a path inside the folder of the document that records it."""


class OrNull:
    """A shape: null, or a value of the shape inside (a table, a list)."""

    def __init__(self, shape):
        self.shape = shape


class Between:
    """A shape: a finite number from `low` to `high` (a share, an accuracy); null too when `or_null`; an int
    when `whole` (a count, a batch size)."""

    def __init__(self, low: float, high: float, or_null: bool = False, says: str = "", whole: bool = False):
        self.low, self.high, self.or_null, self.whole = low, high, or_null, whole
        self.says = says or f"a {'whole ' if whole else ''}number from {low:g} to {high:g}"  # in the error line

    def holds(self, value: Any) -> bool:
        if value is None:
            return self.or_null
        return (
            isinstance(value, int if self.whole else (int, float))
            and not isinstance(value, bool)
            and (isinstance(value, int) or math.isfinite(value))  # isfinite(10**400) raises OverflowError
            and self.low <= value <= self.high
        )


class OneOf:
    """A shape: a name of a registry (a precision, a metric, a GPU): `names` is the registry's live collection of
    names, or a function returning it, so a name registered after import (a user's own precision) is one too. A
    name nobody registered ("fp12" in a results.json) would otherwise reach a table as a row of its own, or a
    lookup three calls later as a KeyError. `other`: (what it says, a test) of the form a user's own takes
    where it needs no registering (a model as FILE.py:FUNCTION, a dataset as folder:PATH)."""

    def __init__(self, what: str, names, other: tuple[str, Any] = ("", lambda name: False)):
        self.what, self.names, self.other = what, names, other

    def holds(self, value: Any) -> bool:
        return isinstance(value, str) and (value in self._names() or self.other[1](value))

    def _names(self):
        return self.names() if callable(self.names) else self.names

    @property
    def says(self) -> str:
        return f"{self.what}: one of {', '.join(sorted(self._names()))}{self.other[0]}"


# A time, a rate or a speedup: something is divided by it, and zero or a negative one would reach a cost table as
# a ZeroDivisionError or a negative price.
POSITIVE = Between(math.ulp(0.0), math.inf, says="a number above 0")
# A count of steps or rounds, a batch size: a negative one reached a report as "-4 steps", a figure's error bars
# as a ValueError traceback.
# Bounded: a count beyond int64 or a batch beyond 2**31 is no run's, and a figure or tensor shape it reached
# overflowed (a 400-digit batch size ended bench --from in matplotlib's OverflowError).
COUNT = Between(0, 2**63 - 1, whole=True, says="a whole number of at least 0")  # int64: no count is beyond it
BATCH_SIZE = Between(1, 2**31, whole=True, says="a whole number from 1 to 2**31")  # a number of processes too


def is_relative_inside(text: Any) -> bool:
    if not isinstance(text, str) or not text or any(not c.isprintable() for c in text) or "\\" in text:
        return False
    path = PurePosixPath(text)
    return not path.is_absolute() and ".." not in path.parts and not text.startswith("~")


class ShapeError(Exception):
    def __init__(self, where: str, problem: str):
        self.where, self.problem = where, problem
        super().__init__(f"{where}: {problem}")


def _type_names(wanted) -> str:
    kinds = wanted if isinstance(wanted, tuple) else (wanted,)
    return " or ".join(
        "null" if kind is None else "a finite number" if kind is float else getattr(kind, "__name__", str(kind))
        for kind in kinds
    )


def _matches(value: Any, wanted) -> bool:
    kinds = wanted if isinstance(wanted, tuple) else (wanted,)
    if isinstance(value, float) and not math.isfinite(value):
        return False  # no shape takes NaN or infinity
    if isinstance(value, bool):  # never taken for a number
        return bool in kinds
    return any(value is None if kind is None else isinstance(value, kind) for kind in kinds)


def _check(value: Any, shape, where: str) -> None:
    if isinstance(shape, OrNull):
        if value is not None:
            _check(value, shape.shape, where)
    elif isinstance(shape, dict):
        if not isinstance(value, dict):
            raise ShapeError(where or "the document", f"should be a table, got {type(value).__name__}")
        for key, inner in shape.items():
            if isinstance(key, OneOf):  # every key a registry's name (compare.json's runs by precision)
                _check_named(value, key, inner, where)
                continue
            name = key.lstrip("?")
            if key == "*":
                for item_name, item in value.items():
                    _check(item, inner, f"{where}.{item_name}" if where else str(item_name))
            elif name in value:
                _check(value[name], inner, f"{where}.{name}" if where else name)
            elif not key.startswith("?"):
                raise ShapeError(f"{where}.{name}" if where else name, "is missing")
    elif isinstance(shape, (Between, OneOf)):
        if not shape.holds(value):
            raise ShapeError(where or "the document", f"should be {shape.says}, got {_short(value)}")
    elif shape is RelativePath:
        if not is_relative_inside(value):
            raise ShapeError(where or "the document", f"should be a path inside its folder, got {_short(value)}")
    elif isinstance(shape, list):
        if not isinstance(value, list):
            raise ShapeError(where or "the document", f"should be a list, got {type(value).__name__}")
        for index, item in enumerate(value):
            _check(item, shape[0], f"{where}[{index}]")
    elif not _matches(value, shape):
        raise ShapeError(where or "the document", f"should be {_type_names(shape)}, got {_short(value)}")


def _check_named(table: dict, names: OneOf, shape, where: str) -> None:
    for item_name, item in table.items():
        inner = f"{where}.{item_name}" if where else str(item_name)
        if not names.holds(item_name):
            raise ShapeError(inner, f"is named {_short(item_name)}, not {names.says}")
        _check(item, shape, inner)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def has_shape(value: Any, shape) -> bool:
    try:
        _check(value, shape, "")
    except ShapeError:
        return False
    return True


def check_shape(value: Any, shape, origin: str, fix: str) -> Any:
    """`value` when it has `shape`; else one AmpganError: '{origin} is damaged ({field} is missing): {fix}'."""
    try:
        _check(value, shape, "")
    except ShapeError as error:
        raise AmpganError(f"{origin} is damaged or foreign ({error.where} {error.problem}): {fix}") from None
    return value


def table_number(text: Any, where: str, field: str, *, whole: bool = False, least: float = 0, most: float) -> float:
    """A number from a cell of a table a person gives (a price catalog, a kernel table): finite, whole when
    `whole`, from `least` to `most`; else one error line naming `where` (the file and line), the column and
    what it takes. `float('inf')`, '1e300' or 'four' would otherwise end in an OverflowError traceback or an
    absurd figure; `most` is the largest value that means something for the column."""
    shown = str(text if text is not None else "").strip()
    kind = "a whole number" if whole else "a number"
    try:
        value = float(shown)
        if not math.isfinite(value) or (whole and value != int(value)):
            raise ValueError
    except (ValueError, OverflowError):
        raise AmpganError(
            f"{where}: {field} is {_short(shown)}, not {kind}: write {kind} from {_plain(least)} to {_plain(most)}"
        ) from None
    if not least <= value <= most:
        raise AmpganError(
            f"{where}: {field} is {_short(shown)[1:-1]}; it must be from {_plain(least)} to {_plain(most)}"
        )
    return int(value) if whole else value


def _plain(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


def format_version(found: Any, expected: str) -> int | None:
    """N of a format 'ampgan-KIND/N' of `expected`'s kind, else None (another kind, or not a format)."""
    kind = expected.rpartition("/")[0] + "/"
    theirs = found.removeprefix(kind) if isinstance(found, str) and found.startswith(kind) else ""
    return int(theirs) if theirs.isdecimal() else None


def newer_format(found: Any, expected: str) -> bool:
    """Whether `found` is `expected`'s kind at a higher N: a newer ampgan's, neither read as this one's nor replaced
    by it."""
    return (format_version(found, expected) or 0) > format_version(expected, expected)


def check_format(
    document: Any, expected: str, origin: str, what: str, fix: str, readable: tuple[str, ...] = (), shape=None
) -> Any:
    """One rule for every versioned document ampgan reads ('format': 'ampgan-KIND/N'): `expected` (or one of
    the older `readable`) passes, and is returned once it has `shape` (check_shape; the format first: a newer
    ampgan's document may be laid out otherwise, and its reader says "upgrade"); the same kind with a higher N
    was written by a newer ampgan (say so: the fix is an upgrade, not a rerun); a lower one by an older ampgan
    (`fix`); anything else is not `what` ('an ampgan comparison'). One error line each, naming `origin` (the
    file)."""
    found = document.get("format") if isinstance(document, dict) else None
    if found == expected or found in readable:
        return document if shape is None else check_shape(document, shape, origin, fix)
    if newer_format(found, expected):
        raise AmpganError(
            f"{origin} was written by a newer ampgan (format {found}; this one reads {expected}): upgrade "
            "ampgan to read it (pip install -U ampgan)"
        )
    if format_version(found, expected) is not None:
        raise AmpganError(f"{origin} was written by an older ampgan (format {found}; this one reads {expected}): {fix}")
    raise AmpganError(
        f"{origin} is not {what} (its format is {_short(found) if found is not None else 'none'}, not {expected})"
    )
