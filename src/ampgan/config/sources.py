"""Where a config's values come from, lowest first: the defaults, a command's own defaults, a config file
(`--config FILE`, TOML or JSON), the command's flags, then `--set section.field=value` (repeatable).

Flags are shortcuts for fields (`--batch-size 128` is `--set budget.batch_size=128`), declared once on the
field (sections.py setting) for the command line and for `config_from_options`, the same thing from Python
(`config_from_options(dataset="digits", precision="bf16", width=32)`). New knobs need no new flag: every
field and every model option can be set with --set.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ampgan.config.tree import TrainConfig, by_path, set_path
from ampgan.config.values import parse_steps_or_duration
from ampgan.errors import AmpganError, ConfigError
from ampgan.files.jsonfile import (
    DamagedDocument,
    DuplicateKey,
    TooDeep,
    parse_json,
    parse_toml,
    refuse_unless_regular_file,
)
from ampgan.sections import refuse_unknown, settings
from ampgan.trust import absolute_model_name, consent_to_import


def option_changes(options: dict[str, Any]) -> dict[str, Any]:
    """{config path: value} for config settings named as the command line's flags name them (`batch_size`,
    `time_budget`, `model`; a setting without a flag by its field's name: `keep`); --checkpoint-every's steps
    (500) or training time (10m) sets both of its fields."""
    named = {setting.name: setting for setting in settings(TrainConfig())}
    changes = {}
    for name, value in options.items():
        if name not in named:
            refuse_unknown("the config", name, named)
        if named[name].kind == "steps_or_duration":
            value = parse_steps_or_duration(value) if isinstance(value, str) else value  # '500', '10m'
            unit, every = value if isinstance(value, tuple) else ("steps", value)  # a number: steps, checked there
            changes.update({"checkpoints.every_steps": None, "checkpoints.every_s": None})
            changes["checkpoints.every_steps" if unit == "steps" else "checkpoints.every_s"] = every
        else:
            changes[named[name].path] = value
    return changes


_WORDS = {"true": True, "false": False, "null": None, "none": None}  # in any case: True, NULL, None


def parse_value(raw: str) -> Any:
    """A --set value as TOML or JSON would read it (numbers, true/false, null, "quoted", [lists]);
    anything else is the text itself."""
    text = raw.strip()
    if text.lower() in _WORDS:
        return _WORDS[text.lower()]
    errors = []
    for parse in (parse_json, lambda text: parse_toml(f"value = {text}")["value"]):
        try:
            return parse(text)
        except DamagedDocument as error:
            errors.append(error)
    refused = next((error for error in errors if isinstance(error, (TooDeep, DuplicateKey))), None)
    if refused:  # JSON or TOML, but not one ampgan takes: not text either
        raise AmpganError(f"the --set value starting {text[:20]!r}: {refused}")
    return text


def parse_set(text: str) -> tuple[str, Any]:
    """'budget.batch_size=128' -> ('budget.batch_size', 128)."""
    path, equals, raw = text.partition("=")
    if not equals or not path.strip() or any(c.isspace() for c in path.strip()):
        raise AmpganError(f"--set takes section.field=value (e.g. --set model.width=32), got {text!r}")
    return path.strip(), parse_value(raw)


def read_config_file(path: Path) -> dict:
    """A config file as a dict: TOML (.toml) or JSON; a run folder's config.json gives the config the run
    trained with. One error line when it is missing or damaged."""
    path = Path(path)
    refuse_unless_regular_file(path, "config file")
    if not path.is_file():
        raise AmpganError(f"no config file {path}: give a .toml or .json file (or a run's config.json)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise AmpganError(f"cannot read config file {path} ({error}): give a UTF-8 TOML or JSON file") from None
    try:
        document = parse_toml(text) if path.suffix.lower() == ".toml" else parse_json(text)
    except DamagedDocument as error:
        kind = "TOML" if path.suffix.lower() == ".toml" else "JSON"
        raise AmpganError(
            f"config file {path} is not valid {kind} ({error}): ampgan reads TOML from a .toml file and JSON from "
            "any other (not YAML)"
        ) from None
    if isinstance(document, dict) and isinstance(document.get("config"), dict) and "format_version" in document:
        document = document["config"]  # a run folder's config.json
    if not isinstance(document, dict):
        raise AmpganError(f"config file {path} holds {type(document).__name__}, not a table of sections")
    return document


def file_changes(path: Path) -> dict[str, Any]:
    """A config file's values as {config path: value}, checked on their own first so that a bad one is
    reported with the file's name."""
    from ampgan.config.legacy import is_flat_config, tree_from_flat

    document = read_config_file(path)
    if is_flat_config(document):
        document = tree_from_flat(document)
    try:
        TrainConfig.from_dict(document)
    except ConfigError as error:
        raise AmpganError(f"config file {path}: {error}") from None
    return by_path(document)


def build_config(*layers: dict[str, Any], file: Path | None = None, base: TrainConfig | None = None) -> TrainConfig:
    """`base` (the defaults when None), then `file`, then each layer of {path: value} in order. A layer
    that names another model drops the options set for the previous one."""
    tree = (base or TrainConfig()).to_dict()
    for given in ([file_changes(file)] if file is not None else []) + list(layers):
        layer = absolute_paths(given)
        new_model = layer.get("model.name")
        if new_model is not None and new_model != tree["model"].get("name"):
            tree["model"] = {"name": new_model}
        for path, value in layer.items():
            set_path(tree, path, value)
    return TrainConfig.from_dict(tree)


def absolute_paths(layer: dict[str, Any]) -> dict[str, Any]:
    """{config path: value} with the values that name a file or folder made absolute (_ABSOLUTE)."""
    return {
        path: _ABSOLUTE[path](value) if path in _ABSOLUTE and isinstance(value, str) and value.strip() else value
        for path, value in layer.items()
    }


def _absolute(given: str) -> str:
    return os.path.abspath(os.path.expanduser(given))


# The settings that name a file or folder, made absolute where the user named them (a flag, --set, a config file),
# so a later command run from another folder (train or compare --resume, evaluate, doctor --run) reads the same
# files; as given, a relative path led to another folder's files or to none.
_ABSOLUTE = {
    "model.name": absolute_model_name,
    "data.data_dir": _absolute,
    "data.dataset": lambda name: f"folder:{_absolute(name[7:])}" if name.startswith("folder:") and name[7:] else name,
}


def config_from_options(base: TrainConfig | None = None, *, sets: Iterable[str] = (), **options) -> TrainConfig:
    """A TrainConfig from the command line's option names, from Python: `config_from_options(dataset=
    "digits", precision="bf16", batch_size=128, width=32, sets=["model.mode_seeking=0"])`."""
    changes, set_changes = option_changes(options), dict(parse_set(text) for text in sets)
    for named in (changes.get("model.name"), set_changes.get("model.name")):
        if isinstance(named, str):
            consent_to_import(named)  # named by the caller, as --model is on the command line (ampgan/trust.py)
    return build_config(changes, set_changes, base=base)
