"""Reading the JSON documents ampgan writes, with one clear error when one is missing or damaged."""

from __future__ import annotations

import json
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


def read_jsonl(path: Path) -> list[dict]:
    """The records of a JSON-lines file ([] when it does not exist). Its last line may be cut short by a
    crash (an append is not atomic): such a line is skipped. Any other line that is not a JSON object
    means the file was damaged: one error line naming it."""
    path = Path(path)
    if not path.is_file():
        return []
    lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        if not isinstance(record, dict):
            if number == len(lines):
                continue  # the crash-cut last line
            raise AmpganError(
                f"{path} is damaged (line {number} is not a JSON record): delete the file's damaged "
                "lines, or resume from an earlier checkpoint"
            )
        records.append(record)
    return records
