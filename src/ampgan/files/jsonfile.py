"""Reading the JSON (and TOML) documents ampgan is given or wrote: one parser with one rule, and one clear error
when a document is missing or damaged.

Every document ampgan reads (a config, a --set value, config.json, metrics.jsonl, compare.json, study.json, a
cache) is parsed by `parse_json`/`parse_toml`, which turn every way a text can fail into `DamagedDocument`, a
ValueError with a short reason: malformed text, a key given twice (JSON would keep the last silently, TOML
refuses it; ampgan refuses both), or nesting deeper than `MAX_DEPTH` (Python's parsers recurse, and a
hostile file nested 100,000 deep would end in a RecursionError traceback, or pass and break the code that
walks it)."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ampgan.errors import AmpganError, one_line, warn
from ampgan.files import manifest
from ampgan.files.schema import check_shape

# No document ampgan writes or reads nests deeper than 8; 100 leaves room and stays far from Python's
# recursion limit (1000), which the parsers and the code walking a document both spend.
MAX_DEPTH = 100


class DamagedDocument(ValueError):
    """A text that is not a document ampgan can use; str() is the reason in a few words."""


class TooDeep(DamagedDocument):
    def __init__(self) -> None:
        super().__init__(f"nests deeper than {MAX_DEPTH} levels, and no ampgan document does")


class DuplicateKey(DamagedDocument):
    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key!r} appears twice in one table; keep one")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    document = dict(pairs)
    if len(document) != len(pairs):
        seen = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise DuplicateKey(twice)
    return document


def _check_depth(document: Any) -> Any:
    # Iterative: walking a nested document recursively is the failure this rule prevents.
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            if depth > MAX_DEPTH:
                raise TooDeep()
            stack.extend((item, depth + 1) for item in value)
    return document


def parse_json(text: str | bytes) -> Any:
    """The JSON document in `text`, or DamagedDocument saying why not."""
    try:
        return _check_depth(json.loads(text, object_pairs_hook=_unique_keys))
    except RecursionError:
        raise TooDeep() from None
    except json.JSONDecodeError as error:
        raise DamagedDocument(f"{error.msg} at line {error.lineno} column {error.colno}") from None
    except UnicodeDecodeError as error:
        raise DamagedDocument(f"it is not UTF-8 text ({error.reason})") from None


def parse_toml(text: str) -> dict:
    """The TOML document in `text`, or DamagedDocument saying why not."""
    try:
        return _check_depth(tomllib.loads(text))
    except RecursionError:
        raise TooDeep() from None
    except tomllib.TOMLDecodeError as error:
        raise DamagedDocument(str(error).splitlines()[0]) from None


def not_a_regular_file(path: Path, follow_links: bool = True) -> str | None:
    """What `path` is when it exists but is not a regular file ('a FIFO (named pipe)', 'a folder', and with
    `follow_links` False 'a symbolic link'), else None: every message names a kind in these words.
    Path.is_file() is False for all of them, and calling one "missing" sends the user looking for the
    wrong problem; opening a FIFO would block until something writes to it."""
    try:
        mode = (os.stat if follow_links else os.lstat)(path).st_mode
    except OSError:
        return None
    kinds = (
        (stat.S_ISREG, None),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((kind for test, kind in kinds if test(mode)), "a special file")


def refuse_unless_regular_file(path: Path, what: str) -> None:
    """One error line when `path` (given as `what`, e.g. 'config file') exists but is no regular file."""
    kind = not_a_regular_file(path)
    if kind is not None:
        raise AmpganError(f"{what} {one_line(path)} is {kind}, not a regular file: give the file itself")


def read_csv_text(path: Path, what: str, columns: tuple[str, ...]) -> str:
    """A user's CSV file (`what`: 'price catalog') as text; one error line when it is not there, not a
    regular file, or not UTF-8 text."""
    path = Path(path)
    refuse_unless_regular_file(path, f"the {what}")
    if not path.is_file():
        raise AmpganError(f"no {what} at {path}: give a CSV with columns {', '.join(columns)}")
    try:
        # utf-8-sig: spreadsheet programs save "CSV UTF-8" with a byte-order mark.
        return path.read_text("utf-8-sig")
    except UnicodeDecodeError:
        raise AmpganError(f"{path} is not a text CSV file (not UTF-8): export the {what} as CSV") from None


def read_json(path: Path, *, missing: str, damaged: str) -> Any:
    """The parsed document; `missing`/`damaged` are the user-facing sentences for either failure."""
    path = Path(path)
    refuse_unless_regular_file(path, "the document")
    if not path.is_file():
        # Not there yet while another ampgan still writes its folder (a report asked of a study that runs); this
        # process's own lock (a study resumed after its bench folder was deleted) is no other writer to wait for.
        writer = next(
            (pid for f in path.parents[:2] if (pid := manifest.lock_holder(f)) not in (None, str(os.getpid()))), None
        )
        raise AmpganError(
            missing
            if writer is None
            else f"{path} is not written yet: ampgan process {writer or '(unknown)'} is writing {path.parent}; run "
            "this again when it has finished"
        )
    try:
        return parse_json(path.read_text(encoding="utf-8"))
    except (DamagedDocument, UnicodeDecodeError, OSError):
        raise AmpganError(damaged) from None


def read_cache_json(path: Path) -> Any:
    """A cache file's document, or None when there is none or it is damaged: a cache is ampgan's own and
    rebuildable, so a damaged one is one warning line and is written anew, never fatal."""
    path = Path(path)
    kind = not_a_regular_file(path)
    if kind is not None:  # a FIFO's read would block the command forever
        warn(f"the cache {one_line(path)} cannot be read ({kind}, not a regular file): ignoring it")
        return None
    try:
        return parse_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except OSError as error:
        # Nothing is damaged where the cache's folder is a file or the file is not readable: said as it is.
        warn(f"the cache {one_line(path)} cannot be read ({error.strerror or type(error).__name__}): ignoring it")
        return None
    except (DamagedDocument, UnicodeDecodeError) as error:
        reason = error if isinstance(error, DamagedDocument) else type(error).__name__
        warn(f"the cache {one_line(path)} is damaged ({one_line(reason)}): ignoring it; ampgan writes it anew")
        return None


def read_jsonl(
    path: Path,
    said: Callable[[str], None] | None = None,
    shape: dict | None = None,
    fix: str = "",
    rising: str | None = None,
) -> list[dict]:
    """The records of a JSON-lines log ampgan appends to ([] when it does not exist). Only a crash explains
    a bad line, and a crash cuts the last line short: no newline yet, and still plain text (ampgan writes
    ASCII JSON). Such a line is skipped (and `said`, when given: a resume drops it for good). Anything else
    (bytes that are not text, garbage after the last record, a line that is not a JSON object) means the
    file was damaged or edited: one error line naming the line, never a silent resume. With a `shape`, each
    record is checked for it (files/schema.py: one error line naming the file, then `fix`), and with `rising`
    (a log's "step") that field never falls from one record to the next: a log of a run goes forward, and one
    that went back was edited (a resume appended after it, a curve was drawn backwards)."""
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
            record = parse_json(line)
        except UnicodeDecodeError:
            line, record = None, None
        except DamagedDocument:
            record = None
        if not isinstance(record, dict):
            if number == len(lines) and line is not None and line.isprintable():
                if said is not None:
                    said(f"{path}: its last line was cut short when the run stopped; it was dropped")
                continue  # the crash-cut last line
            raise AmpganError(
                f"{path} is damaged (line {number} "
                f"{'holds bytes that are not text' if line is None else 'is not a JSON record'}): it was changed "
                f"after ampgan wrote it; restore it, or delete line {number} and the lines after it to resume"
            )
        records.append(check_shape(record, shape, str(path), fix) if shape is not None else record)
        if rising and len(records) > 1 and records[-1][rising] < records[-2][rising]:
            raise AmpganError(
                f"{path} is damaged (line {number}: {rising} {records[-1][rising]} after {records[-2][rising]}): {fix}"
            )
    return records
