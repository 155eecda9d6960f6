"""Output folders that are never lost and never shared: claiming, replacing, locking.

- A folder ampgan creates gets a marker file (`.ampgan-folder`); `--overwrite` replaces only a folder
  with that marker (or one an older ampgan wrote, recognised by its documents). Anything else is
  refused with the reason: ampgan never empties a folder it did not write.
- Replacing moves the old folder aside (`.NAME.replaced-PID`, beside it) and deletes it only once the
  new run has something to put there; a command that fails before that moves the old one back.
- While a command writes into a folder it holds an exclusive lock (`flock` on `.ampgan-lock`, with its
  pid inside). A second process is refused with that pid. The kernel releases the lock when the
  holder dies, however it dies, so a crashed run never blocks the next one.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ampgan.errors import AmpganError

MARKER = ".ampgan-folder"
LOCK = ".ampgan-lock"
# Documents that identify a folder written by ampgan before markers existed.
_LEGACY_DOCUMENTS = ("config.json", "compare.json", "results.json", "doctor.json")


def refuse_link(path: Path) -> None:
    """ampgan's control files (lock, marker) are never opened through a symbolic link: one error line."""
    if Path(path).is_symlink():
        raise AmpganError(f"{path} is a symbolic link: ampgan never opens its own control files through a link "
                          f"(it would write into whatever the link points to); remove the link, or use another folder")


def _write_marker(folder: Path) -> None:
    path = folder / MARKER
    refuse_link(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write("written by ampgan; --overwrite may replace this folder\n")


class FolderLock:
    """An exclusive lock on a folder for as long as this object (or the process) lives."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        path = self.folder / LOCK
        refuse_link(path)
        try:
            # O_NOFOLLOW: a link planted at this name would have ampgan truncate and write its target.
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as error:
            refuse_link(path)
            raise AmpganError(f"cannot write in {self.folder} ({error.strerror}): choose a writable --out") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(self._fd)
            raise AmpganError(f"{self.folder} is in use by another ampgan process (pid {holder}): wait for it to "
                              "finish, or choose another folder") from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        """Unlock and close; a second call does nothing."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def is_ampgan_folder(folder: Path) -> bool:
    """Written by ampgan: it holds the marker, or the documents an older ampgan wrote."""
    folder = Path(folder)
    if (folder / MARKER).is_file() and not (folder / MARKER).is_symlink():
        return True
    for name in _LEGACY_DOCUMENTS:
        try:
            document = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(document, dict) and ("format_version" in document or str(document.get("format", "")).startswith("ampgan-")):
            return True
    return False


def _refuse_dangerous(path: Path) -> None:
    """The current folder, one of its parents, the home folder or the root are never output folders."""
    if str(path).strip() in ("", "."):
        raise AmpganError("--out is empty: give the path of a new folder for the results")
    resolved, here = path.resolve(), Path.cwd().resolve()
    if resolved == here or resolved in here.parents or resolved in (Path.home().resolve(), Path("/")):
        raise AmpganError(f"--out {path} is {'the current folder' if resolved == here else 'a folder above this one'}"
                          ": give a new folder for the results")


class FolderClaim:
    """A claimed output folder: new or replaced, locked; `finish()` when the command has succeeded or
    its folder holds something worth keeping, `abandon()` otherwise (the old folder comes back)."""

    def __init__(self, path: Path, overwrite: bool):
        self.path = Path(path)
        _refuse_dangerous(self.path)
        self.aside: Path | None = None
        if self.path.exists() and not self.path.is_dir():
            raise AmpganError(f"--out {self.path} is a file, not a folder: choose another path")
        if self.path.is_dir() and any(self.path.iterdir()):
            if not overwrite:
                raise AmpganError(f"--out {self.path} already holds files: choose a new folder or add --overwrite "
                                  "to replace it")
            if not is_ampgan_folder(self.path):
                raise AmpganError(f"--out {self.path} holds files ampgan did not write: --overwrite replaces only "
                                  "ampgan's own output folders; choose a new folder")
            FolderLock(self.path).release()  # refuses when a live process still writes there
            self.aside = self.path.with_name(f".{self.path.name}.replaced-{os.getpid()}")
            os.replace(self.path, self.aside)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            _write_marker(self.path)
        except OSError as error:
            self._restore()
            raise AmpganError(f"cannot create --out {self.path} ({error.strerror}): choose a writable folder") from None
        self.lock = FolderLock(self.path)

    def finish(self) -> None:
        """The new contents stay: delete the replaced folder, if any."""
        if self.aside is not None:
            shutil.rmtree(self.aside, ignore_errors=True)
            self.aside = None

    def abandon(self) -> None:
        """The command failed before writing anything worth keeping: remove the new folder and put
        the replaced one back."""
        self.lock.release()
        shutil.rmtree(self.path, ignore_errors=True)
        self._restore()

    def _restore(self) -> None:
        if self.aside is not None:
            os.replace(self.aside, self.path)
            self.aside = None


@contextmanager
def claimed_folder(path: Path, overwrite: bool,
                   worth_keeping: Callable[[Path], bool] = lambda folder: False) -> Iterator[FolderClaim]:
    """Claim the folder for the block. On success the replaced folder (if any) is deleted; on failure
    the new folder is kept only if `worth_keeping(folder)` (a resumable run), else the old one comes back."""
    claim = FolderClaim(path, overwrite)
    try:
        yield claim
    except BaseException:
        if worth_keeping(claim.path):
            claim.finish()
        else:
            claim.abandon()
        raise
    else:
        claim.finish()
    finally:
        claim.lock.release()  # releasing twice (after abandon) is harmless


def output_file(path: Path, suffixes: tuple[str, ...], overwrite: bool) -> Path:
    """A single output file (`generate --out`): checked before any work is done, so an unusable path
    costs nothing. Its folder is created; an existing file is replaced only with `overwrite`."""
    path = Path(path)
    if path.is_dir():
        raise AmpganError(f"--out {path} is a folder: give a file name such as {path / ('samples' + suffixes[0])}")
    if path.suffix.lower() not in suffixes:
        raise AmpganError(f"--out {path}: give a file name ending in {' or '.join(suffixes)}")
    if path.exists() and not overwrite:
        raise AmpganError(f"--out {path} already exists: choose another name or add --overwrite to replace it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise AmpganError(f"cannot create the folder of --out {path} ({error.strerror}): choose a writable "
                          "place") from None
    if not os.access(path.parent, os.W_OK):
        raise AmpganError(f"cannot write in {path.parent} (permission denied): choose a writable --out")
    return path
