"""Every quality metric a study reports, described once: its key in a quality record, how tables and
sentences name it, which way is better, how many digits it shows, what it applies to, and how it is
computed. The evaluator (generated samples and the real images' floor), the seed summary, the paired
comparison between precisions, the report's metrics table and `ampgan evaluate` iterate over this list;
none of them names a metric of its own.

Adding a metric: one `register(Metric(...))` with its `compute`; docs/layout.md has the checklist.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ampgan.errors import registered_once
from ampgan.files.schema import OneOf
from ampgan.quality.metrics import frechet_distance


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
    bounds: tuple[float, float] = (0.0, math.inf)  # the values it can take: its intervals stay inside them
    # (images (N, C, H, W) in [-1, 1], their evaluator features, the held-out real images' features) -> its
    # value, for generated samples and for real training images (the floor). None: quality/evaluator.py
    # computes it with the figures it shares work with (the k-NN radii, the class predictions).
    compute: Callable | None = None

    def reached(self, value: float, target: float) -> bool:
        """Whether `value` is at `target` or better."""
        return value >= target if self.higher_is_better else value <= target


SHARE = (0.0, 1.0)  # a fraction of samples or of the real images
METRICS: dict[str, Metric] = {}
# A metric's key in a document read back (compare.json's headline): a registered one.
METRIC_NAME = OneOf("a metric", METRICS)


def register(metric: Metric) -> Metric:
    return registered_once(METRICS, metric.key, metric, "metric")


EVALUATOR_ACCURACY = register(
    Metric(
        "evaluator_accuracy",
        "evaluator acc.",
        "evaluator accuracy",
        True,
        conditional_only=True,
        paired=True,
        bounds=SHARE,
    )
)
RECALL = register(Metric("recall", "recall", "recall", True, paired=True, bounds=SHARE))
COVERAGE = register(Metric("coverage", "coverage", "coverage", True, paired=True, bounds=SHARE))
FRECHET_DISTANCE = register(
    Metric(
        "frechet_distance",
        "Fréchet distance",
        "Fréchet distance",
        False,
        digits=2,
        paired=True,
        compute=lambda images, features, real_features: frechet_distance(features, real_features),
    )
)
# KID's unbiased estimate goes below 0 when the two sets match (quality/metrics.py): its values, and intervals, may.
KID = register(Metric("kid", "KID", "KID", False, digits=4, bounds=(-math.inf, math.inf)))
PRECISION = register(Metric("precision", "precision", "precision", True, in_table=False, bounds=SHARE))
DENSITY = register(Metric("density", "density", "density", True, in_table=False))
# A single number for an unconditional GAN only (a conditional one has one per class).
DIVERSITY = register(Metric("diversity", "diversity", "diversity", True, in_table=False))


def computed(images, features, real_features) -> dict:
    """Each metric its record computes, of these images (see Metric.compute)."""
    return {m.key: m.compute(images, features, real_features) for m in METRICS.values() if m.compute}


def table_metrics(conditional: bool = True) -> list[Metric]:
    """The metrics a table shows, in order; a conditional-only metric only for a conditional GAN (when
    `conditional` is False its column would say '-' on every row)."""
    return [m for m in METRICS.values() if m.in_table and (conditional or not m.conditional_only)]


def format_value(metric: Metric, value) -> str:
    return "-" if value is None else f"{value:.{metric.digits}f}"
