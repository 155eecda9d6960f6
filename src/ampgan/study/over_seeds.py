"""Several seeds per precision: means with 95% intervals, and differences paired by seed.

Every seed starts both precisions from the same weights, data order and noise, so the fair
question is per seed: how much better (or sooner) did the mixed-precision run do than its fp32
twin? The differences over seeds get a Student-t interval; when it excludes zero, the difference
between precisions is larger than the seed-to-seed spread. Ratios (times to the target) get it on the log
scale, so it stays above 0. Below three seeds no interval is given: with one nothing can be said, and with two
t_{0.975,1} = 12.7 makes the band 12.7x as wide as the two seeds differ (a FID's went below 0, an "x sooner" spanned
0.01x-95x), which says nothing; the verdict shows the seeds' own values and says so.
"""

from __future__ import annotations

import math

import numpy as np

from ampgan.precisions import FP32
from ampgan.quality.registry import METRICS
from ampgan.speed.intervals import t_quantile_975
from ampgan.study.document import MIN_SEEDS_FOR_INTERVAL, CostSection


def mean_interval(values, bounds: tuple[float, float] = (-math.inf, math.inf)) -> dict:
    """{'mean', 'low', 'high', 'n'}: the mean and its 95% t-interval, cut to `bounds`, the values the quantity
    can take (low/high None below MIN_SEEDS_FOR_INTERVAL values). Cutting keeps the coverage: the true mean lies
    inside the bounds, so whenever the t-interval holds it, the cut one does too; and a band past a bound (an
    accuracy above 1, a Fréchet distance below 0) is one no reader should see."""
    values = [float(v) for v in values]
    n = len(values)
    mean = float(np.mean(values)) if values else None
    if n < MIN_SEEDS_FOR_INTERVAL:
        return {"mean": mean, "low": None, "high": None, "n": n}
    half = t_quantile_975(n - 1) * float(np.std(values, ddof=1)) / math.sqrt(n)
    return {"mean": mean, "low": max(mean - half, bounds[0]), "high": min(mean + half, bounds[1]), "n": n}


def summarize_seeds(per_seed: dict[int, dict]) -> dict:
    """One precision's runs over seeds, in the shape of a single run (means), plus every seed's run
    and each final metric's interval. `run_dir` and `stamp` are the first seed's (Figure 4 shows it)."""
    seeds = sorted(per_seed)
    runs = [per_seed[seed] for seed in seeds]
    # every registered metric (quality/registry.py) gets a mean and an interval
    metrics = [m for m in METRICS if all(isinstance(run["final"].get(m), (int, float)) for run in runs)]
    intervals = {m: mean_interval([run["final"][m] for run in runs], METRICS[m].bounds) for m in metrics}
    return {
        "seeds": seeds,
        "per_seed": {str(seed): per_seed[seed] for seed in seeds},
        "run_dir": runs[0]["run_dir"],
        "stamp": runs[0]["stamp"],
        "steps": int(round(np.mean([run["steps"] for run in runs]))),
        "train_seconds": float(np.mean([run["train_seconds"] for run in runs])),
        "seconds_per_step": float(np.mean([run["seconds_per_step"] for run in runs])),
        "eval_seconds_total": float(sum(run["eval_seconds_total"] for run in runs)),
        "final": {m: intervals[m]["mean"] for m in metrics}
        | {"flags": [f"seed {seed}: {flag}" for seed in seeds for flag in per_seed[seed]["final"].get("flags", [])]},
        "final_interval": intervals,
    }


def paired_differences(
    candidate: dict[str, float], baseline: dict[str, float], bounds: tuple[float, float] = (-math.inf, math.inf)
) -> dict:
    """candidate - baseline per seed (seeds present in both), with the mean's 95% interval and
    whether the interval excludes 0 (None without an interval); `bounds`: the values of the quantity, so a
    difference lies within their width either way (two accuracies differ by at most 1)."""
    seeds = sorted(set(candidate) & set(baseline), key=int)
    width = bounds[1] - bounds[0]
    result = mean_interval([candidate[s] - baseline[s] for s in seeds], (-width, width))
    return result | {
        "per_seed": {s: candidate[s] - baseline[s] for s in seeds},
        "beyond_seed_spread": None if result["low"] is None else (result["low"] > 0 or result["high"] < 0),
    }


def paired_ratios(candidate: dict[str, float | None], baseline: dict[str, float | None]) -> dict:
    """baseline / candidate per seed where both reached a value (e.g. fp32's time to target over
    bf16's: > 1 = sooner), as a geometric mean: the paired differences of the logs, exponentiated."""
    seeds = [s for s in set(candidate) & set(baseline) if candidate[s] and baseline[s]]
    logs = paired_differences({s: math.log(baseline[s]) for s in seeds}, {s: math.log(candidate[s]) for s in seeds})
    return (
        logs
        | {key: math.exp(logs[key]) if logs[key] is not None else None for key in ("mean", "low", "high")}
        | {"per_seed": {s: baseline[s] / candidate[s] for s in sorted(seeds, key=int)}}
    )


def compare_seeds(document) -> dict:
    """For each precision other than fp32: the paired differences of the final metrics and the
    paired ratio of times to the quality target (`document`: a study/document.py CompareDocument)."""
    comparison = {}
    cost = document.cost or CostSection()
    for precision, run in document.runs.items():
        if precision == FP32:
            continue
        entry = {"seeds": len(run.seeds)}
        for metric in (key for key, described in METRICS.items() if described.paired):
            mine = {s: r.final[metric] for s, r in run.per_seed.items() if metric in r.final}
            theirs = {s: r.final[metric] for s, r in document.baseline.per_seed.items() if metric in r.final}
            if mine and theirs:
                entry[metric] = paired_differences(mine, theirs, METRICS[metric].bounds)
        comparison[precision] = entry | {
            "time_to_target_ratio": paired_ratios(
                {s: (r or {}).get("seconds") for s, r in cost.reaching(precision).per_seed.items()},
                {s: (r or {}).get("seconds") for s, r in cost.reaching(FP32).per_seed.items()},
            )
        }
    return comparison
