"""Every quality metric a study reports, described once: its key in a quality record, how tables and
sentences name it, which way is better, how many digits it shows, and what it applies to. The seed
summary, the paired comparison between precisions, the report's metrics table and `ampgan evaluate`
iterate over this list; none of them names a metric of its own.

Adding a metric: compute it in quality/evaluator.py's quality_of_images (and reference_floor, for the
real images' value), then describe it here with @register; docs/layout.md has the checklist.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    key: str  # in a quality record (quality.json, compare.json's "final")
    label: str  # a table's column
    name: str  # how a sentence names it
    higher_is_better: bool
    digits: int = 3
    conditional_only: bool = False  # needs an intended class per sample (a conditional GAN)
    in_table: bool = True  # a column of the report's metrics table and of `ampgan evaluate`
    paired: bool = False  # compared between precisions seed by seed (study/over_seeds.py)


METRICS: dict[str, Metric] = {}


def register(metric: Metric) -> Metric:
    if metric.key in METRICS:
        raise ValueError(f"metric {metric.key!r} is registered twice")
    METRICS[metric.key] = metric
    return metric


EVALUATOR_ACCURACY = register(
    Metric("evaluator_accuracy", "evaluator acc.", "evaluator accuracy", True, conditional_only=True, paired=True)
)
RECALL = register(Metric("recall", "recall", "recall", True, paired=True))
COVERAGE = register(Metric("coverage", "coverage", "coverage", True, paired=True))
FRECHET_DISTANCE = register(
    Metric("frechet_distance", "Fréchet distance", "Fréchet distance", False, digits=2, paired=True)
)
KID = register(Metric("kid", "KID", "KID", False, digits=4))
PRECISION = register(Metric("precision", "precision", "precision", True, in_table=False))
DENSITY = register(Metric("density", "density", "density", True, in_table=False))
# A single number for an unconditional GAN only (a conditional one has one per class).
DIVERSITY = register(Metric("diversity", "diversity", "diversity", True, in_table=False))


def table_metrics(conditional: bool = True) -> list[Metric]:
    """The metrics a table shows, in order; a conditional-only metric only for a conditional GAN (when
    `conditional` is False its column would say '-' on every row)."""
    return [m for m in METRICS.values() if m.in_table and (conditional or not m.conditional_only)]


def format_value(metric: Metric, value) -> str:
    return "-" if value is None else f"{value:.{metric.digits}f}"
