"""What ampgan wrote in a folder, with each file's size and sha256: the proof that lets it delete a file.

A folder ampgan claims (runs/claim.py) holds `.ampgan-written.jsonl`, one JSON line per file written there:
`{"path": "samples/step-000002.png", "size": 1234, "sha256": "..."}`. Every writer records through this
module (files/atomic.py: whole files after their rename, logs after each append), so "ampgan wrote it" is
one rule: the file's size and sha256 equal a line recorded for its path (any such line: a log cut back on
resume matches what it held then). A name is no proof: a file renamed, edited, or put there by someone
else, whatever it is called, matches no line, and nothing that deletes (`--overwrite`, checkpoint
pruning) touches it. The same lines prove a checkpoint is the one written (runs/checkpoint.py).

Each line is one `write` on a file opened O_APPEND, so a crash leaves every earlier line whole; a line cut
short is skipped, and the file it described counts as not proven (kept, never deleted).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat
from pathlib import Path

MANIFEST = ".ampgan-written.jsonl"
_ANY = (-1, "")  # a temporary file's record: whatever it holds (a write killed midway) is ampgan's
FOLDER_MARKER = ".ampgan-folder"  # what kind of folder ampgan claimed (runs/claim.py writes and reads it)
LOCK = ".ampgan-lock"  # held (flock) by the process writing the folder; it holds its pid


def start(folder: Path) -> None:
    """An empty manifest in a folder ampgan has just claimed (never through a link)."""
    os.close(os.open(Path(folder) / MANIFEST, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644))


def manifest_root(path: Path) -> Path | None:
    """The nearest folder holding `path` that has a manifest (the ampgan folder it is written in), if any."""
    try:
        folder = Path(path).absolute().parent.resolve()
    except (OSError, RuntimeError):
        return None
    return next((candidate for candidate in (folder, *folder.parents) if _is_regular(candidate / MANIFEST)), None)


def digest(path: Path) -> tuple[int, str] | None:
    """(size, sha256) of a regular file, read without following a link; None for anything else (a link, a
    FIFO, a folder, a device: never opened, so a FIFO cannot block the reader)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            sha = hashlib.file_digest(handle, "sha256")  # read in chunks, to the end: its size is where it stopped
            return handle.tell(), sha.hexdigest()
    finally:
        os.close(fd)


def record(path: Path, written: tuple[int, str] | None = None) -> None:
    """Note `path` (now complete) in the manifest of the ampgan folder it lies in; nothing outside one.
    `written`: its (size, sha256) when the writer already knows them (a log it appends to)."""
    root = manifest_root(path)
    whole = written is None  # a log's appends are recorded each time: its bytes are new with every line
    if root is not None and (written := written or digest(path)) is not None:
        _append(path, {"size": written[0], "sha256": written[1]}, root, once=whole)


def _append(path: Path, entry: dict, root: Path | None = None, once: bool = False) -> None:
    """`once`: not when the manifest already holds the entry (a file written again with the same bytes, the
    temporary name of a file written before), so a command that rewrites what it found, and then fails or
    not, leaves the folder's bookkeeping as it found it."""
    root = root or manifest_root(path)
    if root is None or (once and _written(entry) in entries(root).get(_relative(path, root), ())):
        return
    fd = os.open(root / MANIFEST, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
    try:
        os.write(fd, (json.dumps({"path": _relative(path, root), **entry}) + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def record_temporary(path: Path) -> None:
    """Note the temporary file an atomic write is about to fill (its name is random): left by a write that
    was killed, it is still known as ampgan's, whatever it holds."""
    _append(path, {"temporary": True}, once=True)


def record_tree(folder: Path) -> None:
    """Note every regular file under `folder` (what a library wrote there for ampgan: TensorBoard's events)."""
    for root, _, files in os.walk(folder):
        for name in files:
            record(Path(root, name))


def entries(root: Path) -> dict[str, set[tuple[int, str]]]:
    """path -> every (size, sha256) recorded for it in `root`'s manifest ({} without one)."""
    found: dict[str, set[tuple[int, str]]] = {}
    path = Path(root) / MANIFEST
    if not _is_regular(path):
        return found
    with open(path, "rb") as handle:
        for line in handle:
            try:
                entry = json.loads(line)
                found.setdefault(entry["path"], set()).add(_written(entry))
            except (ValueError, KeyError, TypeError, AttributeError):  # AttributeError: a line not a {...}
                continue  # a line cut short by a crash (or damaged): what it described stays unproven
    return found


def _written(entry: dict) -> tuple[int, str]:
    """What a manifest line proves of its path: (size, sha256), or any content for a temporary file's."""
    return _ANY if entry.get("temporary") is True else (int(entry["size"]), str(entry["sha256"]))


def recorded(path: Path) -> bool | None:
    """True when `path` matches what its manifest recorded for it, False when it differs from every record,
    None when no manifest has a record of it (a folder of an older ampgan, or a file copied elsewhere)."""
    root = manifest_root(path)
    records = entries(root).get(_relative(path, root)) if root is not None else None
    return _matches(path, records) if records else None


def delete_written(path: Path) -> bool:
    """Delete `path` only if ampgan wrote it and nobody changed it since (its size and sha256 are recorded for
    it); True when it was deleted."""
    if recorded(path) is True:
        Path(path).unlink(missing_ok=True)
        return True
    return False


def unproven(folder: Path, control: tuple[str, ...] = ()) -> list[str]:
    """The paths under `folder` (relative, sorted) that no manifest in it proves ampgan wrote: files,
    links and special files alike (a link is never followed). Each file answers to the nearest manifest
    above it inside `folder`; `control` names (a marker, a lock) and the manifest itself are exempt beside
    a manifest."""
    folder = Path(folder)
    found: list[str] = []
    manifests: dict[Path, dict[str, set[tuple[int, str]]]] = {}
    for root, folders, files in os.walk(folder):
        here = Path(root)
        if _is_regular(here / MANIFEST):
            manifests[here] = entries(here)
        owner = next((m for m in (here, *here.parents) if m in manifests), None)
        for name in files + [f for f in folders if (here / f).is_symlink()]:
            path = here / name
            if here in (owner, folder) and name in (MANIFEST, *control) and not path.is_symlink():
                continue  # beside its manifest, or at the top (an older ampgan's marker, without one)
            # Its path in its manifest; a link, or a file no manifest answers for, is never proven.
            inside = owner is not None and not path.is_symlink() and path.relative_to(owner).as_posix()
            if not inside or not _matches(path, manifests[owner].get(inside, set())):
                found.append(path.relative_to(folder).as_posix())
    return sorted(found)


def _matches(path: Path, records: set[tuple[int, str]]) -> bool:
    if not records:
        return False
    if _ANY in records:
        return True
    try:
        size = os.lstat(path).st_size
    except OSError:
        return False
    if all(size != recorded_size for recorded_size, _ in records):
        return False  # cheaper than hashing: a different size is a different file
    return digest(path) in records


def _relative(path: Path, root: Path) -> str:
    return (Path(path).absolute().parent.resolve() / Path(path).name).relative_to(root).as_posix()


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def lock_holder(folder: Path) -> str | None:
    """The pid written in `folder`'s lock while some live process holds it ("" if unreadable), else None."""
    try:
        # O_NONBLOCK: a FIFO in the lock's place would block the open until something wrote to it
        fd = os.open(Path(folder) / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return holder
    except OSError:  # no file to read a pid from (a FIFO): no lock
        return None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
