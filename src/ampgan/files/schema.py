"""Checking a document ampgan wrote before trusting it: required fields, their types, nested parts.

Every file ampgan reads back is input: it may be cut short by a crash, edited by hand, written by
another version or not ampgan's at all. A reader states the shape it relies on and calls
`check_shape`; a document that does not have it is one error line naming the file, the field and
what to do, never a KeyError or TypeError three calls later.

A shape is a type (or a tuple of types), a dict of field -> shape (a field named "?name" may be
absent; the field "*" gives the shape of every value of a table), or a one-item list: a list whose
items all have that shape. `None` in a tuple allows null. bool is never taken for a number.
"""

from __future__ import annotations

import math
from typing import Any

from ampgan.errors import AmpganError

Number = (int, float)


class ShapeError(Exception):
    def __init__(self, where: str, problem: str):
        self.where, self.problem = where, problem
        super().__init__(f"{where}: {problem}")


def _type_names(wanted) -> str:
    kinds = wanted if isinstance(wanted, tuple) else (wanted,)
    return " or ".join("null" if kind is None else getattr(kind, "__name__", str(kind)) for kind in kinds)


def _matches(value: Any, wanted) -> bool:
    kinds = wanted if isinstance(wanted, tuple) else (wanted,)
    for kind in kinds:
        if kind is None:
            if value is None:
                return True
        elif isinstance(value, bool):
            if kind is bool:
                return True
        elif isinstance(value, kind):
            if isinstance(value, float) and not math.isfinite(value) and kind is not float:
                continue
            return True
    return False


def _check(value: Any, shape, where: str) -> None:
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            raise ShapeError(where or "the document", f"should be a table, got {type(value).__name__}")
        for key, inner in shape.items():
            if key == "*":
                for name, item in value.items():
                    _check(item, inner, f"{where}.{name}" if where else str(name))
                continue
            optional = key.startswith("?")
            name = key.lstrip("?")
            if name not in value:
                if optional:
                    continue
                raise ShapeError(f"{where}.{name}" if where else name, "is missing")
            _check(value[name], inner, f"{where}.{name}" if where else name)
    elif isinstance(shape, list):
        if not isinstance(value, list):
            raise ShapeError(where or "the document", f"should be a list, got {type(value).__name__}")
        for index, item in enumerate(value):
            _check(item, shape[0], f"{where}[{index}]")
    elif not _matches(value, shape):
        raise ShapeError(where or "the document", f"should be {_type_names(shape)}, got {_short(value)}")


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
