"""Decisions already measured on this machine, so repeated runs do not pay for them again.

One JSON file, `precision-decisions.json`, in ampgan's cache folder (files.cache_dir). Keyed by everything that
changes the answer: the hardware (CPU model and flags or GPU and capability), the thread count, the torch version, the
model's shape, the batch size, whether the step is compiled, and the precision. The file is a
convenience: a damaged one is ignored with one warning line and rebuilt, an unwritable one ignored, and so is
any entry that lacks a field or has one of the wrong type (StoredDecision.from_cache): measured again, never an error.
"""

from __future__ import annotations

import json
from dataclasses import KW_ONLY, dataclass, field, fields
from pathlib import Path

from ampgan.errors import warn
from ampgan.files.atomic import write_json_atomically
from ampgan.files.cache_dir import cache_dir
from ampgan.files.jsonfile import read_cache_json
from ampgan.files.records import shape_of
from ampgan.files.schema import BATCH_SIZE, COUNT, POSITIVE, has_shape, newer_format
from ampgan.training.precision import PRECISION_NAME

_INTERVAL = {"estimate": POSITIVE, "low": POSITIVE, "high": POSITIVE, "rounds": COUNT}


@dataclass(frozen=True)
class StoredDecision:
    """What every cached decision shares, and reads itself back with: a subclass's own fields (its two step
    times, its interval, its rounds) follow `verdict`; `note`, `measured_on` and `cached` are named."""

    # A precision nobody registered, or a batch of 0, in an edited entry: measured again, never a row of its own.
    precision: str = field(metadata={"shape": PRECISION_NAME})
    batch_size: int = field(metadata={"shape": BATCH_SIZE})
    verdict: str
    _: KW_ONLY
    note: str = ""  # why measuring stopped early, or what disturbed it
    measured_on: str = ""
    cached: bool = False

    @property
    def note_text(self) -> str:
        """' (the note)' and ' [cached, measured DATE]' as every decision's line shows them ('' without)."""
        return f" ({self.note})" if self.note else ""

    @property
    def cached_text(self) -> str:
        return f" [cached, measured {self.measured_on}]" if self.cached else ""

    @classmethod
    def from_cache(cls, document: dict | None):
        """The cached decision, or None when there is none or the entry does not have every field with its
        type (written by another version, or edited): such an entry is measured again, never trusted. Keys of
        fields it no longer has are ignored."""
        interval = document.get("interval") if isinstance(document, dict) else None
        if not has_shape(document, shape_of(cls)) or (interval is not None and not has_shape(interval, _INTERVAL)):
            return None
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in document.items() if k in names} | {"cached": True})

    @classmethod
    def from_outcome(cls, precision: str, batch_size: int, outcome, **own):
        """The decision from what its rounds say (speed/ab.py Outcome: the verdict, both step times, the
        interval, the rounds, the note, the date), with the fields that are its own (`own`)."""
        return cls(
            precision,
            batch_size,
            outcome.verdict,
            outcome.baseline_step_s,
            outcome.candidate_step_s,
            outcome.interval,
            outcome.rounds,
            note=outcome.note,
            measured_on=outcome.measured_on,
            **own,
        )


def decision_key(**parts) -> str:
    """A stable text key from the parts that decide a measurement's outcome."""
    return json.dumps(parts, sort_keys=True, default=str)


class CacheFile:
    """One JSON file in ampgan's cache folder, {"format": FORMAT, PART: {...}}: read back as its part ({} when
    missing, damaged or of another format), rewritten whole; one that cannot be written is a warning that
    says what is lost (`LOST`), never an error."""

    FORMAT = FILE_NAME = PART = WHAT = LOST = ""

    def __init__(self, folder: Path | None = None):
        self.path = Path(folder or cache_dir()) / self.FILE_NAME
        self.newer = False  # the file is a newer ampgan's: never rewritten by this one (its entries would go)

    def _read(self) -> dict:
        document = read_cache_json(self.path)
        found = document.get("format") if isinstance(document, dict) else None
        self.newer = newer_format(found, self.FORMAT)
        if self.newer:
            warn(
                f"the {self.WHAT} {self.path} was written by a newer ampgan (format {found}; this one reads "
                f"{self.FORMAT}): it is left as it is, unread, so {self.LOST}; upgrade ampgan, or set "
                "AMPGAN_CACHE_DIR to a folder of this version's own"
            )
        part = document.get(self.PART) if found == self.FORMAT else None
        return part if isinstance(part, dict) else {}

    def _write(self, part: dict) -> None:
        if self.newer:
            return
        try:
            write_json_atomically(self.path, {"format": self.FORMAT, self.PART: part})
        except OSError as error:
            warn(
                f"could not write the {self.WHAT} {self.path} ({error.strerror}): {self.LOST}; set "
                "AMPGAN_CACHE_DIR to a writable folder"
            )


class DecisionCache(CacheFile):
    FORMAT, FILE_NAME, PART = "ampgan-precision-decisions/1", "precision-decisions.json", "decisions"
    WHAT, LOST = "speed-decision cache", "the measurement will be repeated next time"

    def get(self, key: str) -> dict | None:
        value = self._read().get(key)
        return value if isinstance(value, dict) else None

    def put(self, key: str, decision: dict) -> None:
        self._write(self._read() | {key: decision})
