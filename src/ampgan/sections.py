"""The base of every config section: a frozen, keyword-only dataclass that checks its own fields.

A section knows its name in the config tree (`data`, `budget`, ...), so every problem names the field
by its path (`budget.batch_size must be a whole number of at least 1, got 0`), whoever set it: a
command-line flag, `--set`, a config file or a Python caller. The field's annotation decides which
types it takes (JSON and TOML bring ints where floats are meant: those become floats; a bool is never
taken for a number), its kind (`setting`) the range (RANGES: whole, whole4, positive, duration, ...); a section's
`check()` adds the rest. A command's own spec (BenchSpec, CompareSpec, ProjectSpec) checks its kinds the same way
(check_kinds), so the command line and the Python API refuse a value with the same line.

Every setting is declared once, on its field (`setting(default, help, flag=...)`): in a section, and in a
command's own spec (bench/spec.py BenchSpec, study/spec.py CompareSpec). `settings()` walks a spec and
yields them; the click options, `--set` paths, the Python API's keywords and docs/config.md are made from it.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Iterator
from typing import Any, ClassVar

from ampgan.errors import AmpganError, ConfigError

_SIMPLE = {"int": int, "float": float, "bool": bool, "str": str, "dict": dict, "None": type(None)}


def setting(
    default,
    help: str,
    flag: bool | str = False,
    kind: str = "text",
    skip: tuple[str, ...] = (),
    most: float | None = None,
):
    """A field declared with all there is to know of it: its default (the only one), its help, its flag
    (True: --field-name; a text: that option; False: reached as `--set PATH=VALUE` only) and the kind of
    value a flag or `--set` takes (cli/options.py: whole, positive, duration, int_list, switch, ...; RANGES the
    range of each, with `most` its largest value). A field that is a nested spec (compare's bench) names the
    fields its owner sets itself in `skip`."""
    declared = {"help": help, "flag": flag, "kind": kind, "skip": skip, "most": most}
    return dataclasses.field(default=default, metadata=declared)


def _whole(least: int):
    return (
        lambda x: isinstance(x, int) and not isinstance(x, bool) and x >= least,
        f"must be a whole number of at least {least}",
    )


def _number(accepts, requirement: str):
    return lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and accepts(x), requirement


_POSITIVE = _number(lambda x: math.isfinite(x) and x > 0, "must be a positive, finite number")
# The range each kind of number takes: (accepts the value, what it must be). Checked where the setting is declared
# (check_kinds), whoever gave the value; the command line's types only read the text as a number.
RANGES = {
    "whole": _whole(1),
    **{f"whole{least}": _whole(least) for least in (0, 2, 4)},
    "positive": _POSITIVE,
    "duration": _POSITIVE,
    "nonnegative": _number(lambda x: math.isfinite(x) and x >= 0, "must be 0 or more (and finite)"),
    "fraction": _number(lambda x: 0 < x <= 1, "must be a fraction in (0, 1]"),
    "int_list": (
        lambda x: isinstance(x, tuple) and len(x) > 0 and all(map(_whole(1)[0], x)),
        "must be one or more whole numbers, each at least 1",
    ),
}


def check_kinds(spec) -> None:
    """Each field of `spec` (a section or a command's spec) in the range its kind names (RANGES, up to its `most`),
    else one ConfigError naming it by its path under the spec's NAME. None is the default's own (a field that may not
    be None is refused by its type)."""
    for field in dataclasses.fields(spec):
        value, kind, most = getattr(spec, field.name), field.metadata.get("kind"), field.metadata.get("most")
        if kind not in RANGES or (value is None and "None" in _annotation_names(field.type)):
            continue
        accepts, requirement = RANGES[kind]
        if not accepts(value) or (most is not None and value > most):
            bound = f" and at most {most:,.0f}" if most is not None else ""
            raise ConfigError(_path(spec.NAME, field.name), f"{requirement}{bound}, got {value!r}")


@dataclasses.dataclass(frozen=True)
class Setting:
    path: str  # 'budget.batch_size', 'compare.seeds', 'compare.bench.warmup'
    default: Any
    help: str
    flag: str | None  # '--batch-size', or None: `--set PATH=VALUE` only
    kind: str

    @property
    def name(self) -> str:
        """The flag's name as a click parameter and a keyword ('--time-budget' -> time_budget)."""
        return (self.flag or "--" + self.path.rpartition(".")[2])[2:].replace("-", "_")


def settings(spec, prefix: str = "", skip: tuple[str, ...] = ()) -> Iterator[Setting]:
    """Every setting of a spec (an instance: its defaults are the command's), walking its sections and nested
    specs; a command spec's `base` is the config tree, whose paths have no prefix."""
    for field in dataclasses.fields(spec):
        value, declared = getattr(spec, field.name), field.metadata
        if field.name in skip:
            continue
        if dataclasses.is_dataclass(value):
            inner = "" if field.name == "base" else f"{prefix}{field.name}."
            # A nested spec's settings (compare's bench) are reached by `--set` alone: their flags are its command's.
            for found in settings(value, inner, declared.get("skip", ())):
                yield dataclasses.replace(found, flag=None) if "help" in declared else found
        elif "help" in declared:
            flag, text = declared["flag"], declared["help"]
            flag = "--" + field.name.replace("_", "-") if flag is True else flag or None
            yield Setting(prefix + field.name, value, text() if callable(text) else text, flag, declared["kind"])
    yield from getattr(spec, "OPTION_SETTINGS", ())


def own_settings(spec, prefix: str) -> dict[str, Setting]:
    """A command spec's own settings (not its config tree's), by their path under `prefix`: {'seeds': ...,
    'bench.warmup': ...} of compare's spec with prefix 'compare.'."""
    return {s.path.removeprefix(prefix): s for s in settings(spec, prefix, skip=("base",))}


def refuse_unknown(where: str, name: str, known, moved: str | None = None, also: str = "") -> None:
    """One error line for a setting that does not exist: its new path when it moved, else the closest one."""
    why = f": it moved to {moved}" if moved else close_match_hint(name, known)
    raise AmpganError(f"{where} has no setting {name!r}{why}; its settings are {', '.join(sorted(known))}{also}")


def with_settings(spec, values: dict, where: str, prefix: str = "", **fields):
    """`spec` (a command's spec) with `values` set: {'seeds': 2, 'bench.warmup': 1} (its own settings and fields,
    a nested spec's by FIELD.SETTING), as the command line's flags and `--set` and the Python API give them;
    an unknown name is one error line (`where` names the caller). `fields` (a study's base config) are set in the
    same step, so the spec checks itself once, whole (a base's seed against a default count of seeds is no check)."""
    moved = getattr(spec, "MOVED", {})
    known = set(own_settings(spec, prefix)) | {f.name for f in dataclasses.fields(spec)} - {"base"}
    # A config tree field given by its bare name (`batch_size=8`) belongs in settings= under its path: say so too.
    config = {s.name: s.path for s in settings(spec.base)} if hasattr(spec, "base") else {}
    for name in values:
        if name not in known:
            also = (
                f"; if you meant the config setting, give settings={{'{config[name]}': {values[name]!r}}}"
                if name in config
                else ""
            )
            refuse_unknown(where, name, known, moved.get(name) and prefix + moved[name], also)
    nested: dict[str, dict] = {}
    for name in [name for name in values if "." in name]:
        outer, _, inner = name.partition(".")
        nested.setdefault(outer, {})[inner] = values[name]
    own = {name: value for name, value in values.items() if "." not in name}
    try:
        replaced = {
            outer: dataclasses.replace(getattr(spec, outer), **as_tuples(given, getattr(spec, outer), where))
            for outer, given in nested.items()
        }
    except ConfigError as error:  # a nested spec names its field by its own path: here it is its owner's field's
        raise ConfigError(f"{spec.NAME}.{error.field}", error.problem) from None
    return dataclasses.replace(spec, **as_tuples(own, spec, where), **replaced, **fields)


def _path(name: str, field_name: str) -> str:
    return f"{name}.{field_name}" if name else field_name


def as_tuples(values: dict, spec=None, where: str = "") -> dict:
    """A list given for a tuple-valued setting (batch sizes, precisions), as a spec holds it. A string given for a
    setting declared as a list, a number or a switch is refused: its letters would be read as
    the items ('fp32' as precision 'f'), 'no' would switch on, '5' would fail deep inside as a number."""
    declared = {field.name: str(field.type) for field in dataclasses.fields(spec)} if spec is not None else {}
    for name, value in values.items():
        types = set(_annotation_names(declared.get(name, "str")))
        if isinstance(value, str) and types <= {"tuple", "int", "float", "bool", "None"}:  # a nested spec says its own
            held = getattr(spec, name, None)
            kind = (
                (f"a list ({list(held)!r} by default)" if isinstance(held, tuple) else "a list")
                if "tuple" in types
                else "True or False"
                if "bool" in types
                else "a number"
            )
            raise AmpganError(f"{where}: {name} takes {kind}, not the string {value!r}")
    return {key: tuple(value) if isinstance(value, list) else value for key, value in values.items()}


def _annotation_names(annotation: str) -> list[str]:
    """'tuple[str, ...] | None' -> ['tuple', 'None']: the names a field's annotation joins with '|' (no '|'
    inside brackets in any spec or section)."""
    return [part.strip().split("[")[0] for part in str(annotation).split("|")]


def differences(first: Any, second: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """Where two trees of settings (a config's or a spec's document) differ: (dotted path, first's value,
    second's), in the order of sorted keys; a key one tree lacks reads there as None."""
    if not (isinstance(first, dict) and isinstance(second, dict)):
        return [] if first == second else [(prefix.rstrip("."), first, second)]
    return [
        found
        for key in sorted(set(first) | set(second))
        for found in differences(first.get(key), second.get(key), f"{prefix}{key}.")
    ]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Section:
    NAME: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            # 'int | None' -> (int, NoneType): a section's annotations are written with _SIMPLE's names only.
            allowed = tuple(_SIMPLE[name] for name in _annotation_names(field.type))
            # An int is taken for a float (and becomes one); a bool is taken only for a bool, never for a number.
            int_for_float = float in allowed and isinstance(value, int) and not isinstance(value, bool)
            if not (int_for_float or (bool in allowed if isinstance(value, bool) else isinstance(value, allowed))):
                wanted = " or ".join("null" if t is type(None) else t.__name__ for t in allowed)
                raise ConfigError(self.path(field.name), f"takes {wanted}, got {value!r}")
            if int_for_float:
                object.__setattr__(self, field.name, float(value))
        check_kinds(self)
        self.check()

    def check(self) -> None:
        """Relations between this section's fields and ranges no kind names (types and kinds are checked)."""

    @classmethod
    def path(cls, field_name: str) -> str:
        return _path(cls.NAME, field_name)

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
        if (value is not None or not optional) and not (
            isinstance(value, int) and not isinstance(value, bool) and value >= minimum
        ):
            raise ConfigError(self.path(name), f"must be a whole number of at least {minimum}, got {value!r}")

    def positive(self, name: str, optional: bool = False) -> None:
        value = getattr(self, name)
        if (value is not None or not optional) and not (
            isinstance(value, float) and math.isfinite(value) and value > 0
        ):
            raise ConfigError(self.path(name), f"must be a positive, finite number, got {value!r}")


def close_match_hint(name: str, choices) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""
