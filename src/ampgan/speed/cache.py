"""Decisions already measured on this machine, so repeated runs do not pay for them again.

One JSON file, `precision-decisions.json`, in ampgan's cache folder (files.cache_dir). Keyed by everything that
changes the answer: the hardware (CPU model and flags or GPU and capability), the thread count, the torch version, the
model's shape, the batch size, whether the step is compiled, and the precision. The file is a
convenience: a damaged one is ignored with one warning line and rebuilt, an unwritable one ignored, and so is
any entry that lacks a field or has one of the wrong type (StoredDecision.from_cache): measured again, never an error.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ampgan.errors import warn
from ampgan.files.atomic import write_json_atomically
from ampgan.files.cache_dir import cache_dir
from ampgan.files.jsonfile import read_cache_json
from ampgan.files.schema import has_shape
from ampgan.sections import fits

FORMAT = "ampgan-precision-decisions/1"
FILE_NAME = "precision-decisions.json"


_INTERVAL = {"estimate": (int, float), "low": (int, float), "high": (int, float), "rounds": int}


class StoredDecision:
    """What every cached decision (a frozen dataclass with a `cached` field) reads itself back with."""

    @classmethod
    def from_dict(cls, document: dict, cached: bool = False):
        """The decision from its stored dict; keys of fields it no longer has are ignored."""
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in document.items() if k in fields} | {"cached": cached})

    @classmethod
    def from_cache(cls, document: dict | None):
        """The cached decision, or None when there is none or the entry does not have every field with its
        type (written by another version, or edited): such an entry is measured again, never trusted."""
        if not isinstance(document, dict):
            return None
        for field in dataclasses.fields(cls):
            if field.name == "cached":
                continue
            missing = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
            if field.name not in document:
                if missing:
                    return None
                continue
            if not fits(str(field.type), document[field.name]):
                return None
        if document.get("interval") is not None and not has_shape(document["interval"], _INTERVAL):
            return None
        return cls.from_dict(document, cached=True)


def decision_key(**parts) -> str:
    """A stable text key from the parts that decide a measurement's outcome."""
    return json.dumps(parts, sort_keys=True, default=str)


class DecisionCache:
    def __init__(self, folder: Path | None = None):
        self.path = Path(folder or cache_dir()) / FILE_NAME

    def _read(self) -> dict:
        document = read_cache_json(self.path)
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            return {}
        decisions = document.get("decisions")
        return decisions if isinstance(decisions, dict) else {}

    def get(self, key: str) -> dict | None:
        value = self._read().get(key)
        return value if isinstance(value, dict) else None

    def put(self, key: str, decision: dict) -> None:
        decisions = self._read()
        decisions[key] = decision
        try:
            write_json_atomically(self.path, {"format": FORMAT, "decisions": decisions})
        except OSError as error:
            warn(
                f"could not write the speed-decision cache {self.path} ({error.strerror}): the measurement "
                "will be repeated next time; set AMPGAN_CACHE_DIR to a writable folder"
            )
