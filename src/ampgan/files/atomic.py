"""Writing files so that a crash never leaves a half-written one under the final name.

Write to a temporary file in the same directory, flush and fsync it, `os.replace` it over the
final name (atomic on POSIX), then fsync the directory so the rename itself is durable. A temporary file
left by a writer killed midway (SIGKILL, a power cut) is removed at the next write or cache read in its
folder, once its name shows its writer is gone (remove_dead_temporaries). Every file
written here, and every log appended to, is then noted in the manifest of the ampgan folder it lies in
(files/manifest.py): what ampgan may later delete, and how a checkpoint proves it is the one written.
"""

from __future__ import annotations

import csv
import errno
import fcntl
import hashlib
import io
import json
import os
import re
import secrets
import socket
import stat
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import IO, Any

from ampgan.errors import IN_THE_WAY, AmpganError, UnwritableFile
from ampgan.files import manifest

# The filesystem's refusals a user fixes (space, a read-only mount, permissions, a folder where the file goes
# or a file where its folder goes): one line, not a traceback. (ENOENT is one only where the folder is known to
# have gone: a held folder, an appended log's; elsewhere, a write callback's own missing file stays its error.)
_REFUSALS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.EFBIG, *IN_THE_WAY}

# The folders this process holds for writing (runs/claim.py's FolderLock): each one's lock file -> the lock's open
# descriptor and the folder's identity (stat) when claimed, so a write checks the folder's name still leads to it.
HELD: dict[Path, tuple[int, os.stat_result]] = {}


def _this_machine() -> str:
    """This machine as 8 hex digits: its host name, boot and pid namespace (a reboot, or a container sharing the
    host name, has other pids: its writers are judged by age, as another machine's are)."""
    seen = [socket.gethostname()]
    with suppress(OSError):
        seen.append(Path("/proc/sys/kernel/random/boot_id").read_text().strip())
    with suppress(OSError):
        seen.append(os.readlink("/proc/self/ns/pid"))
    return hashlib.sha256("\0".join(seen).encode(errors="surrogateescape")).hexdigest()[:8]


# A temporary file's name carries its writer: `.NAME.MACHINE.PID.TOKEN[.DRAWN].writing.tmp`, TOKEN drawn once per
# process so that a later process given the same pid (a container restarted) is told apart. Older ampgans wrote
# `.NAME.writing.tmp`, which names no writer: a name is no proof that ampgan wrote it, so it is left alone.
_MACHINE, _TOKEN = _this_machine(), secrets.token_hex(4)
_TEMPORARY = re.compile(
    r"\..+?(?:\.(?P<machine>[0-9a-f]{8})\.(?P<pid>[1-9][0-9]{0,8})\.(?P<token>[0-9a-f]{8})(?:\.[0-9a-f]{8})?)?"
    r"\.writing\.tmp",
    re.DOTALL,
)
# Past this age untouched, a temporary file whose writer cannot be asked (another machine's) is taken as left
# behind: a write takes seconds to minutes, and its writer touches the file as it writes.
STALE_SECONDS = 24 * 3600


def remove_dead_temporaries(folder: Path) -> None:
    """Remove the temporary files of atomic writes in `folder` whose writer is gone: one of this machine whose
    process is no more, or another machine's untouched for STALE_SECONDS. A live writer's, anywhere, is left alone,
    as is anything not named as ampgan names its writers' (an older ampgan's `.NAME.writing.tmp` too). (A listing
    per write: 5 ms in a folder of 10,000 files.)"""
    with suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if (named := _TEMPORARY.fullmatch(entry.name)) is None:
                continue
            with suppress(OSError):  # gone meanwhile, or a folder ampgan may only read: left as it is
                found = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(found.st_mode) and _writer_gone(named, time.time() - found.st_mtime):
                    os.unlink(entry.path)


def _writer_gone(named: re.Match, age: float) -> bool:
    if named["machine"] is None:
        return False
    if named["machine"] != _MACHINE:
        return age > STALE_SECONDS
    if int(named["pid"]) == os.getpid():
        return named["token"] != _TOKEN  # an earlier process that had this pid
    try:
        os.kill(int(named["pid"]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass  # alive, another user's
    return False


def write_atomically(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Write `path` whole or not at all. A refusal by the filesystem raises errors.UnwritableFile (an
    OSError and an AmpganError: one line) and leaves no temporary file behind."""
    try:
        _write_atomically(Path(path), write)
    except UnwritableFile:
        raise
    except BaseException as error:
        behind = os_error_behind(error)
        if behind is not None and behind.errno in _REFUSALS:
            raise UnwritableFile(path, behind) from None
        raise


def _write_atomically(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    # A folder moved or deleted while a command writes in it (a user tidying up mid-run) is not made again at
    # its old name by the mkdir below, holding the last few files without the ones that explain them.
    for lock, (fd, folder) in HELD.items():
        if path.absolute().is_relative_to(lock.parent):
            _check_held(path, lock, fd, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_temporaries(path.parent)
    handle, temp_name = _temporary_beside(path)
    try:
        with os.fdopen(handle, "wb") as stream:
            # Known as ampgan's even if this write is killed midway; a Ctrl-C before it is noted removes it (below),
            # or it stayed unproven: the folder a first write made could not be given back or --overwritten.
            manifest.record_temporary(Path(temp_name))
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)
    manifest.record(path)


def _temporary_beside(path: Path) -> tuple[int, str]:
    """The temporary file a write of `path` fills, opened new (O_EXCL: never through a link) with the mode an
    ordinary open() gives, so a report can be served or shared. It names its writer (this machine, process and
    its token), and is the same at every write of `path` by this process, so the manifest records it once, not a
    line more per rewrite. Anything already at that name (another thread's write in flight, someone else's file)
    is left alone: a name is drawn."""
    temp = path.parent / f".{path.name}.{_MACHINE}.{os.getpid()}.{_TOKEN}.writing.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    try:
        return os.open(temp, flags, 0o666), str(temp)
    except FileExistsError:
        temp = temp.with_name(temp.name.replace(".writing.tmp", f".{secrets.token_hex(4)}.writing.tmp"))
        return os.open(temp, flags, 0o666), str(temp)


def _check_held(path: Path, lock: Path, fd: int, folder: os.stat_result) -> None:
    """Refuse a write in a held folder moved or deleted meanwhile (its name leads elsewhere, or nowhere). Its lock
    alone deleted or replaced (a tidy-up of dot files) is taken again, so no other ampgan takes the folder."""
    try:
        moved = not os.path.samestat(os.stat(lock.parent), folder)
    except OSError:
        moved = True
    if moved:
        raise UnwritableFile(
            path, OSError(errno.ENOENT, f"{lock.parent} was moved or deleted while ampgan wrote in it")
        )
    with suppress(FileNotFoundError):
        if os.path.samestat(os.lstat(lock), os.fstat(fd)):
            return
    try:
        again = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        fcntl.flock(again, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise UnwritableFile(
            path, OSError(errno.EEXIST, f"{lock} was replaced while ampgan wrote here; another process may write here")
        ) from None
    os.pwrite(again, str(os.getpid()).encode(), 0)
    os.dup2(again, fd)  # the holder's descriptor now holds the new lock; the deleted one's flock goes with it
    os.close(again)


def write_json_atomically(path: Path, value: Any) -> None:
    write_text_atomically(path, json.dumps(value, indent=2, sort_keys=False) + "\n")


def write_text_atomically(path: Path, text: str) -> None:
    write_atomically(path, lambda stream: stream.write(text.encode("utf-8")))


def write_jsonl_atomically(path: Path, records: list) -> None:
    """A JSON-lines log rewritten whole (cut back on resume): one record per line."""
    write_text_atomically(path, "".join(json.dumps(record) + "\n" for record in records))


def write_csv_atomically(path: Path, columns, rows, **options: Any) -> None:
    """A table as CSV: a header of `columns`, a line per row (a dict); `options` as csv.DictWriter takes them."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, **options)
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomically(path, text.getvalue())


def open_for_append(path: Path) -> AppendLog:
    """A log ampgan appends to (metrics.jsonl, quality.jsonl), opened without following a symbolic link:
    a link planted at that name would otherwise have ampgan write into whatever it points to."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as error:
        refuse_link(path)
        _refused(path, error)
    return AppendLog(Path(path), fd)


def refuse_link(path: Path) -> None:
    """ampgan never opens a file of its own folders (a log, its lock, its marker) through a symbolic link: one line."""
    if Path(path).is_symlink():
        raise AmpganError(
            f"{path} is a symbolic link: ampgan never writes through a link in its own folders (it would write into "
            "whatever the link points to); remove the link, or use another folder"
        )


def _refused(path: Path, error: OSError):
    """Raises the one line of a write the filesystem refused (its folder gone, full, read-only), else `error`."""
    if error.errno in _REFUSALS or error.errno == errno.ENOENT:  # a log's folder gone is the user's to fix
        raise UnwritableFile(path, error) from None
    raise error


class AppendLog:
    """A text log appended to, each flush noted in its folder's manifest: its sha256 is kept running over
    what it held when opened and every line since, so a log is never read back whole per line."""

    def __init__(self, path: Path, fd: int):
        self.path, self._fd = path, fd
        self._root = manifest.manifest_root(path)
        self._sha, self._size = hashlib.sha256(), 0
        if self._root is not None:
            while chunk := os.pread(fd, 1 << 20, self._size):  # the file opened, whatever happens to its name
                self._sha.update(chunk)
                self._size += len(chunk)

    def write(self, text: str) -> int:
        data = memoryview(text.encode("utf-8"))
        while data:
            try:
                written = os.write(self._fd, data)
            except OSError as error:
                _refused(self.path, error)
            if self._root is not None:
                self._sha.update(data[:written])
                self._size += written
            data = data[written:]
        return len(text)

    def flush(self) -> None:
        if self._root is not None:
            manifest.record(self.path, (self._size, self._sha.hexdigest()))

    def close(self) -> None:
        if self._fd is not None:
            self.flush()
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> AppendLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
