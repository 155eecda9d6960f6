"""Every figure ampgan draws goes through here: the headless backend, one colour per precision, the
footer naming what produced it (hardware, precision, batch, versions), and an atomic save."""

from __future__ import annotations

import textwrap
from pathlib import Path

from ampgan.files.atomic import write_atomically
from ampgan.precisions import colour as precision_colour

__all__ = ["precision_colour", "save_figure", "subplots"]

FOOTER_FONT_SIZE = 5.5
_CHAR_WIDTH_IN_POINTS = 0.55 * FOOTER_FONT_SIZE  # a DejaVu Sans character is about 0.55 em wide


def subplots(rows: int = 1, columns: int = 1, *, figsize=None, dpi=None, **options):
    """A new figure on an Agg canvas of its own (no display needed, same output everywhere) and its axes, as
    pyplot.subplots makes them, without pyplot: choosing pyplot's backend is process-wide, and from Python
    (a notebook) it switched the caller's inline plots off for the cells after; a figure made here is in no
    pyplot registry, so it is freed with its last reference."""
    # Imported on first use: a command that draws no figure does not pay matplotlib's import.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(figure)
    return figure, figure.subplots(rows, columns, **options)


def save_figure(figure, path: Path, footer: str) -> Path:
    """Stamp the footer (wrapped to the figure's width, never cut), lay out, write the PNG atomically."""
    width_in, height_in = figure.get_size_inches()
    lines = textwrap.wrap(footer, width=max(40, int(0.98 * width_in * 72 / _CHAR_WIDTH_IN_POINTS)))
    figure.text(0.01, 0.005, "\n".join(lines), fontsize=FOOTER_FONT_SIZE, color="#555555", va="bottom")
    footer_height = (len(lines) * 1.3 * FOOTER_FONT_SIZE / 72 + 0.05) / height_in  # figure fraction
    figure.tight_layout(rect=(0, footer_height, 1, 1))
    write_atomically(Path(path), lambda stream: figure.savefig(stream, format="png"))
    return Path(path)
