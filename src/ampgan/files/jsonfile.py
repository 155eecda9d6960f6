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
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise AmpganError(damaged) from None


def read_jsonl(path: Path) -> list[dict]:
    """The records of a JSON-lines file ([] when it does not exist); a line cut short by a crash is skipped."""
    path = Path(path)
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records
