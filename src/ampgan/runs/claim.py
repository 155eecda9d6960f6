"""Output folders that are never lost and never shared: claiming, replacing, locking.

- A folder ampgan creates gets a marker file (`.ampgan-folder`): a small JSON document naming what the
  folder is (a run, a study, a bench, ...) and what ampgan may write in it (FOLDER_KINDS).
- `--overwrite` replaces only a folder with a valid marker, of the kind the command writes, and only when
  every file inside is one ampgan can show it wrote: its manifest (files/manifest.py) records the file's
  path, size and sha256, and the file still matches. A name is no proof: notes in any subfolder, a sample or
  checkpoint renamed or edited (`step-best-KEEP.pt`), a link, a FIFO make `--overwrite` refuse, naming the
  file. A folder without a marker is never replaced, whatever it holds; one an older ampgan wrote without a
  manifest only while it holds nothing but its marker.
- A folder belongs to one thing (the ownership rule, `check_place`): `--out` is never inside another ampgan
  folder (a run, a study's subfolder) unless it is a part that folder's kind is made of and the command
  making it holds that folder; never a folder of another kind; never inside, or around, a folder the
  command reads as its data (a dataset's images would take in the run's sample grids). Refused before
  anything is written. `--overwrite` never replaces a part from outside (its parent's documents describe it).
- Replacing moves the old folder aside (`.NAME.replaced-PID`, beside it) and deletes what ampgan wrote in it
  only once the new run has something to put there; a command that fails before that moves the old one
  back. An aside left by a command that was killed is put back, deleted (by the same proof) or named, by
  the next command that claims or reopens that folder: never left without a word.
- While a command writes into a folder it holds an exclusive lock (`flock` on `.ampgan-lock`, with its
  pid inside). A second process is refused with that pid. The kernel releases the lock when the
  holder dies, however it dies, so a crashed run never blocks the next one.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import fnmatch
import itertools
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ampgan.errors import AmpganError, one_line, warn, write_fix
from ampgan.files import manifest
from ampgan.files.atomic import HELD, refuse_link, remove_dead_temporaries
from ampgan.files.jsonfile import not_a_regular_file, parse_json
from ampgan.files.schema import newer_format
from ampgan.files.signals import stop_on_signals

MARKER = manifest.FOLDER_MARKER
LOCK = manifest.LOCK
MARKER_FORMAT = "ampgan-folder/2"

# What ampgan writes in a folder of each kind, as paths relative to it (fnmatch patterns: `*` spans
# folders). Every kind also holds its marker, its lock and the temporary files of atomic writes.
_RUN = (
    "config.json",
    "metrics.jsonl",
    "quality.json",
    "quality.jsonl",
    "generator.safetensors",
    "samples/step-*.png",
    "checkpoints/step-*.pt",
    "tensorboard/*",
)
_BENCH = ("results.json", "results.csv", "fig*.png", "sweep.json")
_COST = ("cost.json", "cost.csv", "fig3_cost.png", "vms.csv")
_PROJECTION = (
    "projection.json",
    "projection.csv",
    "projection.md",
    "fig_projection.png",
    "kernels.csv",
    "op_tables.json",
)
_DOCTOR = ("doctor.json", "doctor_*.png")


_DEFAULTS_MADE: dict[Path, os.stat_result] = {}  # default folders made by default_out, not yet known to be used


def default_out(kind: str) -> Path:
    """The folder a command writes when it is given none: runs/KIND-<time>, or runs/KIND-<time>-2, -3, ... when that
    is taken. A second command started in the same second (a script's loop of seeds, a clock set back) was refused
    with '--out ... already holds files' it was never given, and a second compare continued the first's study. The
    name is taken by making its folder (mkdir fails on a name that exists, a link to nowhere too), so two commands
    started in the same instant take two names: one that only chose it was refused by the other's lock. Made empty
    here, it is removed by release_unused_defaults when the command never wrote in it (--dry-run, bad input). Under
    torchrun only rank 0 names it (cli.options.default_out), or a slow rank would take the next."""
    base = Path("runs") / f"{kind}-{dt.datetime.now():%Y%m%d-%H%M%S}"
    try:
        if not base.parent.exists():  # a runs/ made here goes too when left empty (nothing left in the cwd)
            base.parent.mkdir(parents=True, exist_ok=True)
            _DEFAULTS_MADE[base.parent] = base.parent.stat()
        for taken in itertools.count(1):
            path = base if taken == 1 else base.with_name(f"{base.name}-{taken}")
            with suppress(FileExistsError):
                path.mkdir(parents=True)  # parents: another command's release may have removed an empty runs/
                _DEFAULTS_MADE[path] = path.stat()
                return path
    except OSError:  # runs/ unwritable: the command's claim says so in its one line
        return base


def release_unused_defaults() -> None:
    """Remove the default folders (and runs/) this process made and never wrote in (an empty folder only: rmdir
    refuses any other, and the folder's identity is checked, so one made since under the same name is not taken)."""
    for path, made in reversed(_DEFAULTS_MADE.items()):  # a folder before the runs/ it was made in
        with suppress(OSError):
            if os.path.samestat(os.lstat(path), made):
                path.rmdir()
    _DEFAULTS_MADE.clear()


def _under(folder: str, patterns: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{folder}/{pattern}" for pattern in patterns)


FOLDER_KINDS: dict[str, tuple[str, ...]] = {
    "run": _RUN,
    "bench": _BENCH + _COST + _under("cells/*", _BENCH) + _under("projection", _PROJECTION),
    "cost": _COST,
    "projection": _PROJECTION,
    "doctor": _DOCTOR,
    "study": ("study.json", "compare.json", "report.md", "report.html", "fig*.png")
    + _under("runs/*", _RUN)
    + _under("bench", _BENCH + _under("projection", _PROJECTION))
    + _under("cost", _COST)
    + _under("projection", _PROJECTION)
    + _under("doctor", _DOCTOR),
}
# Folders made wholly from their parent's files (a projection of a bench): replaceable inside it.
_DERIVED_KINDS = {"projection"}


def _write_marker(folder: Path, kind: str) -> None:
    path = folder / MARKER
    refuse_link(path)
    document = {
        "format": MARKER_FORMAT,
        "written_by": "ampgan",
        "kind": kind,
        "note": "--overwrite may replace this folder while it holds only what ampgan writes here",
        "may_contain": list(FOLDER_KINDS[kind]),
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(document, indent=1) + "\n")
    manifest.start(folder)


def marker_kind(folder: Path) -> str | None:
    """The kind a folder's marker names, or None when it has no valid marker. A marker of the first format
    (a line of text) names no kind: such a folder is taken for what its own documents say."""
    path = Path(folder) / MARKER
    if path.is_symlink() or not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")[:100_000]
    except (OSError, UnicodeDecodeError):
        return None
    if text.startswith("written by ampgan"):  # ampgan's first marker: its documents tell
        return next((kind for name, kind in _KIND_BY_DOCUMENT if (Path(folder) / name).is_file()), None)
    try:
        document = parse_json(text)
    except ValueError:
        return None
    kind = document.get("kind") if isinstance(document, dict) and document.get("format") == MARKER_FORMAT else None
    return kind if kind in FOLDER_KINDS else None


def _newer_marker(folder: Path) -> str | None:
    """The format of a marker a newer ampgan wrote ('ampgan-folder/3'), else None."""
    path = Path(folder) / MARKER
    if path.is_symlink() or not path.is_file():  # as marker_kind: a link is no marker; a FIFO's read would block
        return None
    try:
        document = parse_json(path.read_text(encoding="utf-8")[:100_000])
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    found = document.get("format") if isinstance(document, dict) else None
    return found if newer_format(found, MARKER_FORMAT) else None


# The document that tells a folder's kind when its marker names none (ampgan's first marker), in this order.
_KIND_BY_DOCUMENT = (
    ("compare.json", "study"),
    ("study.json", "study"),
    ("config.json", "run"),
    ("results.json", "bench"),
    ("sweep.json", "bench"),
    ("doctor.json", "doctor"),
    ("projection.json", "projection"),
    ("cost.json", "cost"),
)


def unproven_entries(folder: Path) -> list[str]:
    """The paths under `folder` (relative, sorted) that ampgan cannot show it wrote (files/manifest.py):
    files, links and special files alike (a link is never followed). A dead writer's temporary file goes first:
    a kill between its creation and its note left it unproven, and the folder refused even with --overwrite."""
    for place, _, _ in os.walk(folder, followlinks=False):
        remove_dead_temporaries(Path(place))
    return manifest.unproven(folder, (MARKER, LOCK))


def remove_written(folder: Path) -> list[str]:
    """Delete what ampgan can show it wrote under `folder`, then its emptied subfolders and `folder`
    itself; the paths it kept (relative, sorted): anything else, which stays where it is."""
    kept = set(unproven_entries(folder))
    for root, folders, files in os.walk(folder, topdown=False):
        for name in files + [f for f in folders if Path(root, f).is_symlink()]:
            if Path(root, name).relative_to(folder).as_posix() not in kept:
                Path(root, name).unlink(missing_ok=True)
        for name in folders:
            with suppress(OSError):  # it holds what was kept
                Path(root, name).rmdir()
    with suppress(OSError):
        folder.rmdir()
    return sorted(kept)


def owning_folder(path: Path) -> Path | None:
    """The nearest folder above `path` that ampgan claimed (a study holding this run), if any."""
    return next((p for p in path.resolve().parents if (p / MARKER).is_file() and not (p / MARKER).is_symlink()), None)


class FolderLock:
    """An exclusive lock on a folder for as long as this object (or the process) lives."""

    def __init__(self, folder: Path, mention_leftovers: bool = True):
        self.folder = Path(folder)
        if mention_leftovers:  # a folder reopened (resumed, evaluated) names what a killed --overwrite left
            settle_leftovers(self.folder)
        path = self.folder / LOCK
        refuse_link(path)
        if kind := not_a_regular_file(path):  # a FIFO or folder there cannot hold a pid (ftruncate: a traceback)
            raise AmpganError(f"{path} is {kind}, not ampgan's lock file: remove it and run again")
        try:
            # O_NOFOLLOW: a link planted at this name would have ampgan truncate and write its target.
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as error:
            refuse_link(path)
            # Reopened (report, evaluate, a resume) there is no --out to choose: the fix is the folder's.
            raise AmpganError(f"cannot write in {self.folder} ({error.strerror}): {write_fix(error)}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(self._fd)
            raise AmpganError(
                f"{self.folder} is in use by another ampgan process (pid {holder}): wait for it to "
                "finish, or choose another folder"
            ) from None
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, str(os.getpid()).encode(), 0)
        except OSError:  # a full disk: the lock is not kept half-taken (its descriptor and flock leaked)
            os.close(self._fd)
            raise
        self._held = path.absolute()
        # A write in here checks the folder was not moved or deleted meanwhile.
        HELD[self._held] = (self._fd, os.stat(self.folder))

    def release(self) -> None:
        """Unlock and close; a second call does nothing."""
        if self._fd is not None:
            HELD.pop(self._held, None)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def check_replaceable(path: Path, kind: str | None = None) -> None:
    """One error line unless --overwrite may replace `path` with a folder of `kind`: ampgan's own folder
    of that kind, no part of another ampgan folder, every file in it proven ampgan's (its manifest)."""
    shown = one_line(path)
    found = marker_kind(path)
    newer = _newer_marker(path)
    if found is None and newer:
        raise AmpganError(
            f"--out {shown} was written by a newer ampgan (format {newer}; this one reads {MARKER_FORMAT}): "
            "upgrade ampgan to replace it, or choose another --out"
        )
    if found is None:
        raise AmpganError(
            f"--out {shown} holds files but no ampgan marker ({MARKER}): --overwrite replaces only "
            "folders ampgan created; choose a new folder, or empty this one yourself"
        )
    if kind is not None and found != kind:
        raise AmpganError(
            f"--out {shown} is ampgan's {found} folder, not a {kind}: --overwrite replaces a folder only "
            f"with one of its own kind; choose another --out"
        )
    owner = owning_folder(path)
    if owner is not None and found not in _DERIVED_KINDS:
        raise AmpganError(
            f"--out {shown} is part of {one_line(owner)} (ampgan's {marker_kind(owner) or 'folder'}), "
            "whose documents describe it: replacing it alone would leave them describing something "
            "else; give a folder outside it (or rerun the command that made it)"
        )
    for control in (LOCK, MARKER):
        refuse_link(path / control)  # named for what it is, before the general rule names it unproven
    unproven = unproven_entries(path)
    if unproven and not (Path(path) / manifest.MANIFEST).is_file():
        raise AmpganError(
            f"--out {shown} was written by an older ampgan, which kept no record of its files "
            f"({manifest.MANIFEST}), so nothing in it can be shown to be ampgan's ({one_line(unproven[0])}, ...): "
            "--overwrite deletes only what ampgan can show it wrote; empty the folder yourself, or choose a new one"
        )
    if unproven:
        more = f" and {len(unproven) - 1} more" if len(unproven) > 1 else ""
        raise AmpganError(
            f"--out {shown} holds {one_line(unproven[0])}{more}, which ampgan did not write, or which changed "
            f"since (its record in {manifest.MANIFEST} does not match): --overwrite would delete it; move it "
            "out of the folder first, or choose another --out"
        )


def _refuse_dangerous(path: Path) -> None:
    """The current folder, one of its parents, the home folder or the root are never output folders."""
    if not str(path).strip():
        raise AmpganError("--out is empty: give the path of a new folder for the results")
    resolved, here = path.resolve(), Path.cwd().resolve()
    # Named for what it is, the most telling first: the home folder is also above a folder inside it.
    for dangerous, what in (
        (resolved == Path(resolved.anchor), "the root folder"),
        (resolved == Path.home().resolve(), "your home folder"),
        (resolved == here, "the current folder"),
        (resolved in here.parents, "a folder above the current one"),
    ):
        if dangerous:
            raise AmpganError(f"--out {one_line(path)} is {what}: give a new folder for the results")


def check_place(path: Path, kind: str, data: tuple[str | Path, ...] = (), given: str = "--out") -> None:
    """The ownership rule: one error line, before anything is written, unless `path` may become a folder
    of `kind`. A folder belongs to one thing: never inside (or around) a dataset folder the command reads
    (`data`), never inside another ampgan folder, except as a part that folder's kind is made of (a
    projection of a bench; a part made by the command that holds its folder). `given`: the option that named
    `path` (a folder resumed is no --out to choose again)."""
    shown, resolved = f"{given} {one_line(path)}", Path(path).resolve()
    outside_data(path, data, f"the {kind}", given)
    owner = owning_folder(path)
    if owner is None:
        return
    owner_kind = marker_kind(owner)
    relative = resolved.relative_to(owner).as_posix()
    part = any(
        fnmatch.fnmatchcase(f"{relative}/{own}", pattern)
        for own in FOLDER_KINDS[kind]
        for pattern in FOLDER_KINDS.get(owner_kind or "", ())
    )
    # A part is made by the command that made its folder: this process holds that folder's lock.
    if part and (kind in _DERIVED_KINDS or manifest.lock_holder(owner) == str(os.getpid())):
        return
    raise AmpganError(
        f"{shown} is inside {one_line(owner)}, ampgan's {owner_kind or 'output'} folder: a folder belongs "
        "to one thing, and that one's files are written only by the command that made it; "
        + ("choose a folder outside it" if given == "--out" else "continue it with that command, or copy it out first")
    )


def outside_data(path: Path, data: tuple[str | Path, ...], what: str, given: str = "--out") -> None:
    """One error line when `path` (a folder or a file a command writes) is inside, is or holds a dataset folder
    the command reads (`data`): what `what` writes there would be read as data."""
    resolved = Path(path).resolve()
    for root in data:
        images = Path(root).expanduser().resolve()
        if resolved == images or resolved.is_relative_to(images) or images.is_relative_to(resolved):
            where = "holds" if images != resolved and images.is_relative_to(resolved) else "is inside"
            raise AmpganError(
                f"{given} {one_line(path)} {where} the dataset folder {one_line(root)}: what {what} writes would "
                "be read as data (a run's sample grids as training images); choose a folder outside the dataset"
            )


def _asides(path: Path) -> list[tuple[Path, int]]:
    """The folders an --overwrite of `path` moved aside (`.NAME.replaced-PID`) and has not yet deleted."""
    prefix = f".{path.name}.replaced-"
    try:
        siblings = list(path.parent.iterdir()) if path.parent.is_dir() else []
    except OSError:
        return []
    return sorted(
        (sibling, int(sibling.name.removeprefix(prefix)))
        for sibling in siblings
        if sibling.name.startswith(prefix)
        and sibling.name.removeprefix(prefix).isdecimal()
        and sibling.is_dir()
        and not sibling.is_symlink()
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: alive
    return True


def settle_leftovers(path: Path, overwrite: bool = False) -> None:
    """What an --overwrite of `path` that was killed midway left beside it (`.NAME.replaced-PID`, the old
    folder) is never left without a word: put back when `path` is gone (it was killed before writing
    anything), deleted with a line when this command replaces `path` anyway and every file in it is proven
    ampgan's, else named in a warning with what to do. One still being replaced by a live process is left
    to it."""
    path = Path(path)
    for aside, pid in _asides(path):
        if pid == os.getpid() or (_alive(pid) and (not path.exists() or manifest.lock_holder(path) is not None)):
            continue  # its command is still running (or is this one)
        shown, old = one_line(path), one_line(aside)
        if _bookkeeping_only(path) and manifest.lock_holder(path) is None:
            # The new folder of an --overwrite stopped before it wrote anything: a second Ctrl-C while the first
            # was putting the old folder back, a kill in between. It goes, and the old one comes back.
            remove_written(path)
        if not path.exists():
            os.replace(aside, path)
            warn(
                f"{shown} was being replaced by --overwrite when its process ({pid}) stopped, before it wrote "
                f"anything: the old folder is back in place ({old} was its name meanwhile)"
            )
        elif overwrite and not unproven_entries(aside):
            remove_written(aside)
            warn(f"deleted {old}: the old {shown} that an --overwrite stopped midway (process {pid}) had set aside")
        else:
            warn(
                f"{old} holds the old {shown}, set aside by an --overwrite whose process ({pid}) stopped "
                f"midway: nothing in it was deleted; take what you need from it and delete it"
                + ("" if overwrite else ", or add --overwrite to delete what ampgan wrote there")
            )


def _bookkeeping_only(path: Path) -> bool:
    """`path` is a folder holding nothing but ampgan's marker, lock and manifest (its command stopped before it
    wrote anything)."""
    return path.is_dir() and {entry.name for entry in path.iterdir()} <= {MARKER, LOCK, manifest.MANIFEST}


class FolderClaim:
    """A claimed output folder: new or replaced, locked; `finish()` when the command has succeeded or
    its folder holds something worth keeping, `abandon()` otherwise (the old folder comes back).
    `data`: the dataset folders the command reads (check_place keeps the output out of them)."""

    def __init__(
        self,
        path: Path,
        overwrite: bool,
        kind: str,
        unfinished: Callable[[Path], bool] | None = None,
        data: tuple[str | Path, ...] = (),
    ):
        # An --out that is a link is the folder it leads to: made there when missing, replaced there by --overwrite
        # (moving the link aside emptied its folder through it and made a new folder in the link's place).
        self.path = Path(path).resolve() if Path(path).is_symlink() else Path(path)
        _refuse_dangerous(self.path)
        self.aside: Path | None = None
        if self.path.exists() and not self.path.is_dir():
            raise AmpganError(
                f"--out {one_line(self.path)} is {not_a_regular_file(self.path) or 'a file'}, not a folder: "
                "choose another path"
            )
        check_place(self.path, kind, data)
        settle_leftovers(self.path, overwrite)
        if self.path.is_dir() and any(self.path.iterdir()):
            # A folder of this kind that a stopped command left unfinished, or holding only ampgan's bookkeeping (a
            # command killed before it wrote anything), is replaced by the same command again, as a finished one
            # is by --overwrite (and by the same rule).
            overwrite = overwrite or (
                marker_kind(self.path) == kind
                and (_bookkeeping_only(self.path) or (unfinished is not None and unfinished(self.path)))
            )
            if not overwrite:
                raise AmpganError(
                    f"--out {one_line(path)} already holds files: choose a new folder or add --overwrite to replace it"
                )
            check_replaceable(self.path, kind)
            FolderLock(self.path, mention_leftovers=False).release()  # refuses while a live process writes there
            self.aside = self.path.with_name(f".{self.path.name}.replaced-{os.getpid()}")
            os.replace(self.path, self.aside)
        self.lock: FolderLock | None = None
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            # Locked before the marker: a folder shows ampgan's marker only while (or after) its writer holds the
            # lock, so a second command given the same --out never takes a marked folder as "killed before it held
            # anything".
            self.lock = FolderLock(self.path, mention_leftovers=False)
            _write_marker(self.path, kind)
        except OSError as error:
            if self.lock is not None:
                self.lock.release()
            if self.aside is not None:  # the new folder holds the lock it took: emptied, the old one goes back
                remove_written(self.path)
            self._restore()
            raise AmpganError(f"cannot create --out {self.path} ({error.strerror}): choose a writable folder") from None

    def finish(self) -> None:
        """The new contents stay: delete what ampgan wrote in the replaced folder, if any (anything else
        someone put there meanwhile is kept, and named)."""
        if self.aside is not None:
            kept = remove_written(self.aside)
            if kept:
                warn(
                    f"kept {one_line(self.aside)}: it holds {one_line(kept[0])}, which ampgan did not write "
                    "(put there while the command ran); take it, then delete the folder"
                )
            self.aside = None

    def abandon(self) -> None:
        """The command failed before writing anything worth keeping: remove the new folder and put
        the replaced one back."""
        self.lock.release()
        kept = remove_written(self.path)
        if kept:
            warn(f"kept {one_line(self.path)}: it holds {one_line(kept[0])}, which ampgan did not write")
            if self.aside is not None:
                warn(f"the folder it replaced is in {one_line(self.aside)}")
            self.aside = None
            return
        self._restore()

    def _restore(self) -> None:
        if self.aside is not None:
            os.replace(self.aside, self.path)
            self.aside = None


@contextmanager
def claimed_folder(
    path: Path,
    overwrite: bool,
    kind: str,
    worth_keeping: Callable[[Path], bool] = lambda folder: False,
    unfinished: Callable[[Path], bool] | None = None,
    data: tuple[str | Path, ...] = (),
) -> Iterator[FolderClaim]:
    """Claim the folder for the block. On success the replaced folder (if any) is deleted; on failure
    the new folder is kept only if `worth_keeping(folder)` (a resumable run), else the old one comes back."""
    claim = FolderClaim(path, overwrite, kind, unfinished, data)
    try:
        yield claim
    except BaseException:
        # Ctrl-C, SIGTERM and the other STOP_SIGNALS wait while the claim is undone or kept, then stop the command
        # as they would have: a second Ctrl-C while the first put the old folder back left it set aside
        # (.NAME.replaced-PID).
        with stop_on_signals() as held:
            if worth_keeping(claim.path):
                claim.finish()
            else:
                claim.abandon()
        if held:
            raise KeyboardInterrupt(held.signum)
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
    if (owner := owning_folder(path)) is not None:  # recorded there as ampgan's: its --overwrite deleted it unsaid
        raise AmpganError(
            f"--out {one_line(path)} is inside {one_line(owner)}, ampgan's {marker_kind(owner) or 'output'} folder: "
            "a folder belongs to one thing, and its --overwrite would delete this file; choose a place outside it"
        )
    if path.exists() and not overwrite:
        raise AmpganError(f"--out {path} already exists: choose another name or add --overwrite to replace it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise AmpganError(
            f"cannot create the folder of --out {path} ({error.strerror}): choose a writable place"
        ) from None
    if not os.access(path.parent, os.W_OK):
        # access() refuses a read-only mount as it refuses a folder not the user's: say which (no chmod helps the first)
        why = "read-only file system" if os.statvfs(path.parent).f_flag & os.ST_RDONLY else "permission denied"
        raise AmpganError(f"cannot write in {path.parent} ({why}): choose a writable --out")
    return path
