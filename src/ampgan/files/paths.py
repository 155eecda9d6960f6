"""Paths read from a document ampgan wrote: they name something inside that document's folder, or the
document is refused. A document is input (edited, copied, handed over): a path in it set to
`/home/you/private` or `../../x` must never make ampgan read, embed or write outside the folder."""

from __future__ import annotations

from pathlib import Path

from ampgan.errors import AmpganError, one_line
from ampgan.files.schema import is_relative_inside


def inside(
    folder: Path, recorded: object, document: Path, fix: str = "restore the file, or run the command again"
) -> Path:
    """`folder / recorded`, once `recorded` is a relative path that stays inside `folder` (links
    included); else one error line naming the document."""
    folder = Path(folder)
    if is_relative_inside(recorded):
        path = folder / str(recorded)
        try:
            resolved, root = path.resolve(), folder.resolve()
        except (OSError, RuntimeError):
            resolved, root = None, None
        if resolved is not None and (resolved == root or resolved.is_relative_to(root)):
            return path
    raise AmpganError(
        f"{one_line(document)} records the path {one_line(repr(recorded))[:120]}, which is not inside "
        f"{one_line(folder)}: the file was edited or is foreign; {fix}"
    )
