"""The one number a study races on: the evaluator's accuracy on the intended class for a conditional
GAN, the Fréchet distance for an unconditional one (its samples have no intended class to check).

Time to quality, the target a study sets itself and the verdict's quality sentence all read it from
here, so a conditional and an unconditional GAN go through the same comparison."""

from __future__ import annotations

from ampgan.quality.registry import EVALUATOR_ACCURACY, FRECHET_DISTANCE, Metric


def headline_for(conditional: bool) -> Metric:
    """The headline is its metric's own record (quality/registry.py): its key in a quality record, how a
    sentence names it, which way is better."""
    return EVALUATOR_ACCURACY if conditional else FRECHET_DISTANCE


def default_target(
    headline: Metric, final_values: list[float], start_values: list[float], num_classes: int
) -> float | None:
    """80% of the way from where training starts to the best mean final value, or None when nothing
    moved clearly: accuracy from chance (1/K; set only when the best is at least twice chance), the
    Fréchet distance from the runs' first evaluations (`start_values`; set only when the best final is
    under half of their mean)."""
    if not final_values:
        return None
    if headline.higher_is_better:
        chance, best = 1.0 / num_classes, max(final_values)
        return round(chance + 0.8 * (best - chance), 3) if best >= 2 * chance else None
    if not start_values:
        return None
    start, best = sum(start_values) / len(start_values), min(final_values)
    return round(start - 0.8 * (start - best), 3) if best <= 0.5 * start else None
