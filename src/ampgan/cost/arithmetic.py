"""Cost arithmetic: pure functions of times, counts and an hourly price (no I/O).

The study's Figure 3 is `cost_of_batches(0.70, 1e6, price)` against `cost_of_batches(0.41, ...)`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

SECONDS_PER_HOUR = 3600.0


def cost_of_seconds(seconds: float, price_per_hour: float) -> dict:
    """A wall-clock budget: {'hours', 'cost'}."""
    if not price_per_hour > 0:
        raise ValueError(f"price per hour must be positive, got {price_per_hour}")
    hours = seconds / SECONDS_PER_HOUR
    return {"hours": hours, "cost": hours * price_per_hour}


def cost_of_batches(seconds_per_batch: float, batches: float, price_per_hour: float) -> dict:
    return cost_of_seconds(seconds_per_batch * batches, price_per_hour)


def cost_of_samples(seconds_per_batch: float, batch_size: int, samples: float, price_per_hour: float) -> dict:
    """N samples take ceil-free N / B batches (a fraction of a batch costs its fraction)."""
    return cost_of_batches(seconds_per_batch, samples / batch_size, price_per_hour)


def cost_per_sample(seconds_per_batch: float, batch_size: int, price_per_hour: float) -> float:
    return cost_of_samples(seconds_per_batch, batch_size, 1, price_per_hour)["cost"]


def saving(baseline_cost: float, candidate_cost: float) -> dict:
    """What the candidate saves over the baseline: {'amount', 'percent'} (negative: it costs more)."""
    amount = baseline_cost - candidate_cost
    return {"amount": amount, "percent": 100.0 * amount / baseline_cost if baseline_cost else 0.0}


def cheapest_per_sample(rows: Iterable[dict], price_per_hour: float) -> dict | None:
    """Of rows {'batch_size', 'precision', 'seconds_per_batch'}, the one with the lowest cost per
    sample on this instance (on one instance that is also the fastest per sample)."""
    priced = [
        dict(row, cost_per_sample=cost_per_sample(row["seconds_per_batch"], row["batch_size"], price_per_hour))
        for row in rows
    ]
    return min(priced, key=lambda row: row["cost_per_sample"], default=None)  # the first of equals


def time_to_quality(curve: Sequence[tuple[float, float]], target: float, higher_is_better: bool = True) -> float | None:
    """Training seconds at which a quality curve [(seconds, value), ...] first reaches the target,
    interpolated linearly between the two evaluations around it; None if it never does."""
    previous = None
    for seconds, value in curve:
        if value >= target if higher_is_better else value <= target:
            if previous is None or previous[1] == value:
                return seconds
            fraction = (target - previous[1]) / (value - previous[1])
            return previous[0] + fraction * (seconds - previous[0])
        previous = (seconds, value)
    return None


def cost_to_quality(
    curve: Sequence[tuple[float, float]], target: float, price_per_hour: float, higher_is_better: bool = True
) -> dict | None:
    """{'seconds', 'hours', 'cost'} to first reach the quality target, or None if never reached."""
    seconds = time_to_quality(curve, target, higher_is_better)
    return None if seconds is None else {"seconds": seconds, **cost_of_seconds(seconds, price_per_hour)}
