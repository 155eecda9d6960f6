"""Reading the JSON documents ampgan writes, with one clear error when one is missing or damaged."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ampgan.errors import AmpganError


def read_json(path: Path, *, missing: str, damaged: str) -> Any:
    """The parsed document; `missing`/`damaged` are the user-facing sentences for either failure."""
    path = Path(path)
    if not path.is_file():
        raise AmpganError(missing)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, OSError):
        raise AmpganError(damaged) from None


def read_jsonl(path: Path, said: Callable[[str], None] | None = None) -> list[dict]:
    """The records of a JSON-lines log ampgan appends to ([] when it does not exist). Only a crash explains
    a bad line, and a crash cuts the last line short: no newline yet, and still plain text (ampgan writes
    ASCII JSON). Such a line is skipped (and `said`, when given: a resume drops it for good). Anything else
    (bytes that are not text, garbage after the last record, a line that is not a JSON object) means the
    file was damaged or edited: one error line naming the line, never a silent resume."""
    path = Path(path)
    if not path.is_file():
        return []
    lines = path.read_bytes().split(b"\n")  # a whole file ends in a newline: its last piece is empty
    records = []
    for number, raw in enumerate(lines, start=1):
        if number == len(lines) and not raw:
            break
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            line = None
        try:
            record = json.loads(line) if line is not None else None
        except json.JSONDecodeError:
            record = None
        if not isinstance(record, dict):
            if number == len(lines) and line is not None and line.isprintable():
                if said is not None:
                    said(f"{path}: its last line was cut short when the run stopped; it was dropped")
                continue  # the crash-cut last line
            what = "holds bytes that are not text" if line is None else "is not a JSON record"
            raise AmpganError(
                f"{path} is damaged (line {number} {what}): it was changed after ampgan wrote it; restore it, "
                f"or delete line {number} and the lines after it to resume"
            )
        records.append(record)
    return records
