"""Records as JSON, with one description each: the dataclass. A record is written as its fields (tuples as
lists, nested records as tables) and read back checked against its fields' own annotations (files/schema.py
shapes made from them: a field with a default may be absent, `float` takes an int, `X | None` takes null, a
field of type Any is not checked), so a document is never described twice, once as a class and once as a
hand-written shape. Keys a record does not have (written by a later version) are left aside.

A field may say more than its type (`part`): its key in the table, that every document has it, a shape a
reader relies on beyond the type, that it is written only when set, how its value is read and written. A
`Record` also keeps what it read: the keys it has no field for, as written, and the order of the table, so a
document read and written again is the document that was read (study/document.py, compare.json).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing

from ampgan.files.schema import OrNull, check_shape

_FLAT = {int: int, float: (int, float), str: str, bool: bool, type(None): None, dict: dict, list: list, tuple: list}


def part(
    read=None,
    write=None,
    key: str | None = None,
    omit_none: bool = False,
    default: typing.Any = None,
    required: bool = False,
    shape: typing.Any = None,
):
    """A record's field, beyond its type: `read`/`write` for a value its type does not say how to read;
    `key` for a field named otherwise in the table; `omit_none` for a field some documents do not have
    (written only when set); `required` for a field every document has; `shape` where a reader relies on more
    than the type (files/schema.py: a path inside the folder, a share, the final metrics)."""
    metadata = {"read": read, "write": write, "key": key, "omit_none": omit_none, "required": required, "shape": shape}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=type(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@functools.cache
def _declared(kind) -> dict[str, tuple[dataclasses.Field, typing.Any]]:
    """{key in the JSON table: (field, its type)} of a record class (a Record's bookkeeping of what it read is
    no key of the table)."""
    hints = typing.get_type_hints(kind)
    return {
        f.metadata.get("key") or f.name: (f, hints[f.name])
        for f in dataclasses.fields(kind)
        if f.init and not f.metadata.get("kept")
    }


def shape_of(kind) -> typing.Any:
    """The files/schema.py shape of a type annotation (a record, a container of them, a simple type)."""
    if dataclasses.is_dataclass(kind):
        return {
            _key(key, f): f.metadata.get("shape") or shape_of(hint)
            for key, (f, hint) in _declared(kind).items()
            if f.metadata.get("shape") or hint is not typing.Any
        }
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


def _key(key: str, field: dataclasses.Field) -> str:
    """A field's key in a shape: "?key" when a document may leave it out (it has a default, and is not
    `required`)."""
    required = field.metadata.get("required") or (
        field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    )
    return key if required else f"?{key}"


def from_json(kind, value: typing.Any, origin: str, fix: str):
    """The record of class `kind` that `value` (read from `origin`) describes; one error line naming the field
    and `fix` when it does not have the record's shape."""
    return as_records(kind, check_shape(value, shape_of(kind), origin, fix))


def as_records(kind, value: typing.Any):
    """A JSON value as type `kind` holds it: records (and containers of them) read from their tables. Unchecked:
    for values ampgan made (a stage's tables); a document read back goes through from_json."""
    if value is None:
        return None
    if isinstance(kind, type) and issubclass(kind, Record):
        return kind.from_dict(value)  # a record that reads itself
    if dataclasses.is_dataclass(kind):
        return kind(**_fields_read(kind, value))
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return as_records(next(arg for arg in args if arg is not type(None)), value) if len(args) == 2 else value
    if origin in (list, tuple) and args:
        return origin(as_records(args[0], item) for item in value)
    if origin is dict and args:
        return {name: as_records(args[1], item) for name, item in value.items()}
    return value


def _fields_read(kind, table: dict) -> dict:
    """{field name: value} of the keys of `table` that `kind` declares, each read as its type (or its `read`)
    says."""
    return {
        f.name: None
        if table[key] is None
        else (f.metadata.get("read") or functools.partial(as_records, hint))(table[key])
        for key, (f, hint) in _declared(kind).items()
        if key in table
    }


def to_json(value):
    """A record as its fields (nested records as tables; a Record as it writes itself), and a table of them,
    ready for write_json_atomically."""
    if isinstance(value, Record):
        return value.to_dict()
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)
    return {name: to_json(item) for name, item in value.items()} if isinstance(value, dict) else value


@dataclasses.dataclass(frozen=True, kw_only=True)
class Record:
    """A JSON table as typed fields; `extra` holds its other keys, as written, and a key the table did not
    have is not written back: a document read and written again is the document that was read."""

    extra: dict = dataclasses.field(default_factory=dict, repr=False, compare=False, metadata={"kept": True})
    # The keys of the JSON table read, in its order (None: made here): a declared key it did not have (a
    # document from an earlier version) is not written back, and the others are written in the same order.
    read_keys: tuple | None = dataclasses.field(default=None, repr=False, compare=False, metadata={"kept": True})

    @classmethod
    def from_dict(cls, data: dict):
        extra = {key: value for key, value in data.items() if key not in _declared(cls)}
        return cls(**_fields_read(cls, data), extra=extra, read_keys=tuple(data))

    def with_fields(self, **changes):
        """A copy with these fields set (and written, whether or not the table read had them)."""
        if self.read_keys is None:
            return dataclasses.replace(self, **changes)
        added = tuple(
            key for key, (f, _) in _declared(type(self)).items() if f.name in changes and key not in self.read_keys
        )
        return dataclasses.replace(self, **changes, read_keys=self.read_keys + added)

    def to_dict(self) -> dict:
        out = {}
        for key, (declared, _) in _declared(type(self)).items():
            value = getattr(self, declared.name)
            written = self.read_keys is None or key in self.read_keys
            if written and not (value is None and declared.metadata.get("omit_none")):
                out[key] = None if value is None else (declared.metadata.get("write") or to_json)(value)
        return self._in_read_order(out | self.extra)

    def _in_read_order(self, out: dict) -> dict:
        """`out` with the keys the table was read with first, in their order (as made here: unchanged)."""
        if self.read_keys is None:
            return out
        return {key: out[key] for key in self.read_keys if key in out} | out
