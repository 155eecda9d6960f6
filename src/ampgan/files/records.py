"""Records as JSON, with one description each: the dataclass. A record is written as its fields (tuples as
lists, nested records as tables) and read back checked against its fields' own annotations (files/schema.py
shapes made from them: a field with a default may be absent, `float` takes an int, `X | None` takes null), so a
document is never described twice, once as a class and once as a hand-written shape. Keys a record does not
have (written by a later version) are left aside.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from ampgan.files.schema import OrNull, check_shape

_FLAT = {int: int, float: (int, float), str: str, bool: bool, type(None): None, dict: dict, list: list, tuple: list}


def shape_of(kind) -> Any:
    """The files/schema.py shape of a type annotation (a record, a container of them, a simple type)."""
    if dataclasses.is_dataclass(kind):
        if isinstance(getattr(kind, "shape", None), types.MethodType):  # a record stating its own (study/document.py)
            return kind.shape()
        hints = typing.get_type_hints(kind)
        return {_key(f): shape_of(hints[f.name]) for f in dataclasses.fields(kind) if f.init}
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        shapes = [shape_of(arg) for arg in args if arg is not type(None)]
        if all(not isinstance(shape, (dict, list, OrNull)) for shape in shapes):
            flat = tuple(t for shape in shapes for t in (shape if isinstance(shape, tuple) else (shape,)))
            return flat + (None,) * (type(None) in args)
        return OrNull(shapes[0]) if len(shapes) == 1 and type(None) in args else object
    if origin in (list, tuple):
        return [shape_of(args[0])] if args else list
    if origin is dict:
        return {"*": shape_of(args[1])} if args else dict
    return _FLAT.get(kind, object)


def _key(field: dataclasses.Field) -> str:
    """A field's name in a shape: "?name" when it has a default (a document may leave it out)."""
    required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    return field.name if required else f"?{field.name}"


def from_json(kind, value: Any, origin: str, fix: str):
    """The record of class `kind` that `value` (read from `origin`) describes; one error line naming the field
    and `fix` when it does not have the record's shape."""
    return _built(kind, check_shape(value, shape_of(kind), origin, fix))


def _built(kind, value: Any):
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        return kind(
            **{f.name: _built(hints[f.name], value[f.name]) for f in dataclasses.fields(kind) if f.name in value}
        )
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType) and value is not None:
        return _built(next(arg for arg in args if arg is not type(None)), value) if len(args) == 2 else value
    if origin in (list, tuple) and args and value is not None:
        return origin(_built(args[0], item) for item in value)
    return value


def to_json(record) -> dict:
    """The record as its fields (nested records as tables), ready for write_json_atomically."""
    return dataclasses.asdict(record)
