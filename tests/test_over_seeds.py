"""Seeds: means with intervals, and differences paired by seed (hand-computed cases)."""

import math

import pytest

from ampgan.study.over_seeds import mean_interval, paired_differences, paired_ratios, summarize_seeds


def test_mean_interval_by_hand():
    # 0.6, 0.7, 0.8: mean 0.7, sd 0.1, t(0.975, 2) = 4.303 -> half width 4.303 x 0.1 / sqrt(3) = 0.24844.
    result = mean_interval([0.6, 0.7, 0.8])
    assert result["mean"] == pytest.approx(0.7) and result["n"] == 3
    assert result["low"] == pytest.approx(0.7 - 0.24844, abs=1e-5) and result["high"] == pytest.approx(
        0.7 + 0.24844, abs=1e-5
    )
    assert mean_interval([0.5]) == {"mean": 0.5, "low": None, "high": None, "n": 1}


def test_pairing_by_seed_sees_a_difference_that_unpaired_spread_hides():
    # Seeds differ a lot from each other, but bf16 is 0.05 better than fp32 on every seed.
    fp32 = {"0": 0.40, "1": 0.60, "2": 0.80}
    bf16 = {"0": 0.45, "1": 0.66, "2": 0.84}
    difference = paired_differences(bf16, fp32)
    assert difference["mean"] == pytest.approx(0.05) and difference["beyond_seed_spread"] is True
    unpaired_fp32, unpaired_bf16 = mean_interval(fp32.values()), mean_interval(bf16.values())
    assert unpaired_bf16["low"] < unpaired_fp32["high"]  # the unpaired intervals overlap
    noisy = paired_differences({"0": 0.5, "1": 0.4, "2": 0.7}, fp32)  # +0.1, -0.2, -0.1
    assert noisy["beyond_seed_spread"] is False
    assert paired_differences({"0": 0.5}, {"0": 0.4})["beyond_seed_spread"] is None  # one seed: cannot tell


def test_time_to_target_ratio_is_geometric_and_skips_seeds_that_never_reached():
    fp32 = {"0": 40.0, "1": 30.0, "2": None}
    bf16 = {"0": 20.0, "1": 20.0, "2": 25.0}
    ratio = paired_ratios(bf16, fp32)
    assert ratio["n"] == 2 and ratio["per_seed"] == {"0": 2.0, "1": 1.5}
    assert ratio["mean"] == pytest.approx(math.sqrt(3.0))


def test_summarize_seeds_keeps_each_run_and_means_the_metrics():
    def run(seed, accuracy, steps):
        return {
            "run_dir": f"runs/bf16-seed{seed}",
            "stamp": "s",
            "steps": steps,
            "train_seconds": 40.0,
            "seconds_per_step": 40.0 / steps,
            "eval_seconds_total": 2.0,
            "final": {
                "evaluator_accuracy": accuracy,
                "frechet_distance": 1.0,
                "kid": 0.1,
                "flags": ["class 3: drawn as 5 in 60% of its samples"] if seed == 1 else [],
            },
        }

    summary = summarize_seeds({1: run(1, 0.8, 400), 0: run(0, 0.6, 380)})
    assert summary["seeds"] == [0, 1] and summary["run_dir"] == "runs/bf16-seed0"
    assert summary["final"]["evaluator_accuracy"] == pytest.approx(0.7) and summary["steps"] == 390
    assert summary["final"]["flags"] == ["seed 1: class 3: drawn as 5 in 60% of its samples"]
    assert summary["final_interval"]["evaluator_accuracy"]["n"] == 2 and summary["eval_seconds_total"] == 4.0


def test_the_verdict_says_when_every_run_was_above_the_target_at_its_first_evaluation():
    from ampgan.study.document import CostSection, SeedComparison
    from ampgan.study.verdict import _target_line

    comparison = SeedComparison.from_dict(
        {"time_to_target_ratio": {"n": 3, "mean": 0.98, "low": 0.85, "high": 1.14, "beyond_seed_spread": False}}
    )

    def cost(by_first_bf16: int) -> CostSection:
        return CostSection.from_dict(
            {
                "to_target": {
                    "bf16": {"reached": 3, "seeds": 3, "seconds": 54.0, "by_first_evaluation": by_first_bf16},
                    "fp32": {"reached": 3, "seeds": 3, "seconds": 53.0, "by_first_evaluation": 3},
                }
            }
        )

    coarse = _target_line("bf16", cost(3), comparison, 0.79, 3)
    assert "Every run was already past the target at its first evaluation" in coarse and "compare.eval_points" in coarse
    assert "Every run was already" not in _target_line("bf16", cost(2), comparison, 0.79, 3)


def test_the_speed_line_says_slower_when_the_bench_measured_slower():
    # A mode named with --precisions may be slower than fp32 here (bf16 at batch 8 on a tiny model).
    from ampgan.study.verdict import _speed_relation

    assert _speed_relation({"estimate": 1.57, "low": 1.49, "high": 1.64}) == "faster than fp32's"
    assert _speed_relation({"estimate": 0.90, "low": 0.89, "high": 0.91}) == "slower than fp32's"
    assert _speed_relation({"estimate": 1.02, "low": 0.97, "high": 1.08}) == "not clearly different from fp32's"
    assert _speed_relation({"median": 1.3}) == "faster than fp32's"  # results from before intervals
