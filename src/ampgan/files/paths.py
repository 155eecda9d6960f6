"""A folder someone gives ampgan is read only inside itself.

- Paths read from a document ampgan wrote name something inside that document's folder, or the document is
  refused (`inside`). A document is input (edited, copied, handed over): a path in it set to
  `/home/you/private` or `../../x` must never make ampgan read, embed or write outside the folder.
- A place a document records for later use (a study's evaluator cache, the bench it reuses) is used only
  inside the document's folder or inside ampgan's own cache folder (`recorded_place`); any other is ignored
  with one warning, never read or written.
- Files ampgan looks for inside a folder it was given (a run's config, metrics and checkpoints, a study's
  documents, figures and sample grids, a sweep's cells) are read only where they lie inside it, links
  followed: a linked file, a linked subfolder on the way or a relative `../` link that leads out is refused
  (`file_in`) or, for what a report merely shows, left out with one warning (`left_out`). Links that stay
  inside are followed. A hard link is a copy as far as the file system can tell, and is read as one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ampgan.errors import AmpganError, one_line, warn
from ampgan.files.cache_dir import cache_dir
from ampgan.files.jsonfile import read_json
from ampgan.files.schema import is_relative_inside


def recorded_place(folder: Path, recorded: object, document: Path, what: str, instead: str) -> Path | None:
    """The place `document` records as `what`, resolved inside `folder` (a relative path) or inside ampgan's
    own cache folder (an absolute one); None when it records none, or (after one warning saying what is
    done `instead`) when it names anywhere else: a document never decides where ampgan reads or writes."""
    if recorded is None:
        return None
    if isinstance(recorded, str) and recorded:
        path = Path(recorded) if Path(recorded).is_absolute() else Path(folder) / recorded
        if not leads_out(folder, path) or not leads_out(cache_dir(), path):
            return path
    warn(
        f"{one_line(document)} names {what} {one_line(repr(recorded))[:120]}, outside {one_line(folder)} and "
        f"ampgan's cache folder: ignored ({instead})"
    )
    return None


def leads_out(folder: Path, path: Path) -> bool:
    """Whether `path`, with every link on the way followed, lies outside `folder` (itself resolved)."""
    try:
        resolved, root = Path(path).resolve(), Path(folder).resolve()
    except (OSError, RuntimeError):  # a loop of links leads nowhere ampgan should read
        return True
    return not (resolved == root or resolved.is_relative_to(root))


def file_in(folder: Path, *names: str) -> Path:
    """`folder / names...`, once it does not lead out of `folder` through a link; else one error line."""
    path = Path(folder).joinpath(*names)
    if leads_out(folder, path):
        raise AmpganError(
            f"{one_line(path)} leads outside {one_line(folder)} through a link: ampgan reads only what lies "
            "inside a folder it is given; copy the file in, or remove the link"
        )
    return path


def read_json_in(folder: Path, name: str, *, missing: str, fix: str) -> tuple[Path, Any]:
    """(the path, the JSON document) of `name` inside `folder` (file_in); one error line when it is missing
    (`missing`) or is not valid JSON (naming the file, then `fix`)."""
    path = file_in(folder, name)
    return path, read_json(path, missing=missing, damaged=f"{path} is damaged (not valid JSON): {fix}")


def left_out(folder: Path, path: Path, where: str) -> bool:
    """True (after one warning line) when `path` leads out of `folder` through a link: what a report or a
    figure would show of it is left out, so nothing outside the folder reaches what people share."""
    if not leads_out(folder, path):
        return False
    warn(
        f"{one_line(path)} is a link leading outside {one_line(folder)}: left out of {where} (ampgan shares "
        "only what lies inside the folder; copy the file in to show it)"
    )
    return True


def inside(
    folder: Path, recorded: object, document: Path, fix: str = "restore the file, or run the command again"
) -> Path:
    """`folder / recorded`, once `recorded` is a relative path that stays inside `folder` (links
    included); else one error line naming the document."""
    folder = Path(folder)
    if is_relative_inside(recorded) and not leads_out(folder, folder / str(recorded)):
        return folder / str(recorded)
    raise AmpganError(
        f"{one_line(document)} records the path {one_line(repr(recorded))[:120]}, which is not inside "
        f"{one_line(folder)}: the file was edited or is foreign; {fix}"
    )
