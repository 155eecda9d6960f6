"""Every figure ampgan draws goes through here: the headless backend, one colour per precision, the
footer naming what produced it (hardware, precision, batch, versions), and an atomic save."""

from __future__ import annotations

from pathlib import Path

from ampgan.files.atomic import write_atomically

PRECISION_COLOURS = {"fp32": "#1f77b4", "tf32": "#9467bd", "bf16": "#2ca02c", "fp16": "#d62728"}
FOOTER_CHARS = 200  # longer footers are cut: one line at the figure's foot


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed, same output everywhere)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(figure, path: Path, footer: str) -> Path:
    """Stamp the footer, lay out, write the PNG atomically, free the figure."""
    figure.text(0.01, 0.005, footer[:FOOTER_CHARS], fontsize=5.5, color="#555555")
    figure.tight_layout(rect=(0, 0.03, 1, 1))
    write_atomically(Path(path), lambda stream: figure.savefig(stream, format="png"))
    pyplot().close(figure)
    return Path(path)
