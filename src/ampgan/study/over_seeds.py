"""Several seeds per precision: means with 95% intervals, and differences paired by seed.

Every seed starts both precisions from the same weights, data order and noise, so the fair
question is per seed: how much better (or sooner) did the mixed-precision run do than its fp32
twin? The differences over seeds get a Student-t interval; when it excludes zero, the difference
between precisions is larger than the seed-to-seed spread. With one seed nothing can be said,
and the verdict says so.
"""

from __future__ import annotations

import math

import numpy as np

from ampgan.precisions import FP32
from ampgan.quality.registry import METRICS
from ampgan.speed.intervals import t_quantile_975
from ampgan.study.document import CostSection


def mean_interval(values) -> dict:
    """{'mean', 'low', 'high', 'n'}: the mean and its 95% t-interval (low/high None below two values)."""
    values = [float(v) for v in values]
    n = len(values)
    if n == 0:
        return {"mean": None, "low": None, "high": None, "n": 0}
    mean = float(np.mean(values))
    if n < 2:
        return {"mean": mean, "low": None, "high": None, "n": 1}
    half = t_quantile_975(n - 1) * float(np.std(values, ddof=1)) / math.sqrt(n)
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": n}


def summarize_seeds(per_seed: dict[int, dict]) -> dict:
    """One precision's runs over seeds, in the shape of a single run (means), plus every seed's run
    and each final metric's interval. `run_dir` and `stamp` are the first seed's (Figure 4 shows it)."""
    seeds = sorted(per_seed)
    runs = [per_seed[seed] for seed in seeds]
    # every registered metric (quality/registry.py) gets a mean and an interval
    metrics = [m for m in METRICS if all(isinstance(run["final"].get(m), (int, float)) for run in runs)]
    intervals = {m: mean_interval([run["final"][m] for run in runs]) for m in metrics}
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


def paired_differences(candidate: dict[str, float], baseline: dict[str, float]) -> dict:
    """candidate - baseline per seed (seeds present in both), with the mean's 95% interval and
    whether the interval excludes 0 (None with fewer than two seeds)."""
    seeds = sorted(set(candidate) & set(baseline), key=int)
    result = mean_interval([candidate[s] - baseline[s] for s in seeds])
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
                entry[metric] = paired_differences(mine, theirs)
        comparison[precision] = entry | {
            "time_to_target_ratio": paired_ratios(
                {s: (r or {}).get("seconds") for s, r in cost.reaching(precision).per_seed.items()},
                {s: (r or {}).get("seconds") for s, r in cost.reaching(FP32).per_seed.items()},
            )
        }
    return comparison
