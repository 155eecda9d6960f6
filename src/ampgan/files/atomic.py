"""Writing files so that a crash never leaves a half-written one under the final name.

Write to a temporary file in the same directory, flush and fsync it, `os.replace` it over the
final name (atomic on POSIX), then fsync the directory so the rename itself is durable.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def write_atomically(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def write_json_atomically(path: Path, value: Any) -> None:
    text = json.dumps(value, indent=2, sort_keys=False) + "\n"
    write_atomically(path, lambda stream: stream.write(text.encode("utf-8")))


def os_error_behind(error: BaseException) -> OSError | None:
    """The operating system's error behind `error`, if any: torch.save reports a full disk as a
    RuntimeError ("unexpected pos ...") whose context is the OSError that says what happened."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OSError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # some platforms cannot open directories; the rename is still atomic there
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
