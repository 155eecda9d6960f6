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


def _seed_run(seed: int, final: dict) -> dict:
    return {
        "run_dir": f"runs/bf16-seed{seed}",
        "stamp": "s",
        "steps": 100,
        "train_seconds": 40.0,
        "seconds_per_step": 0.4,
        "eval_seconds_total": 2.0,
        "final": final,
    }


def test_intervals_over_seeds_stay_inside_the_values_each_quantity_can_take():
    # Fréchet distances 5, 50, 10: mean 21.7, t-interval 21.7 +- 61.3 reached -39.7. Accuracies 0.99, 0.80, 0.99:
    # 0.927 +- 0.272 reached 1.198. Each interval is cut to its metric's values (the mean's coverage is kept).
    finals = [(5.0, 0.99), (50.0, 0.80), (10.0, 0.99)]
    summary = summarize_seeds(
        {s: _seed_run(s, {"frechet_distance": f, "evaluator_accuracy": a}) for s, (f, a) in enumerate(finals)}
    )
    fid, accuracy = summary["final_interval"]["frechet_distance"], summary["final_interval"]["evaluator_accuracy"]
    assert fid["low"] == 0.0 and fid["high"] == pytest.approx(21.667 + 61.27, abs=0.05)
    assert accuracy["high"] == 1.0 and accuracy["low"] == pytest.approx(0.9267 - 0.2718, abs=1e-3)
    # A paired difference of two shares lies within -1 and 1.
    difference = paired_differences({"0": 0.99, "1": 0.10, "2": 0.99}, {"0": 0.0, "1": 0.05, "2": 0.01}, (0.0, 1.0))
    assert difference["high"] == 1.0 and difference["low"] < 0


def test_two_seeds_give_no_interval_and_the_verdict_shows_the_seeds_and_says_why():
    from ampgan.study.document import CostSection, RunSummary, SeedComparison
    from ampgan.study.verdict import _quality_line, _target_line, with_interval

    # FIDs 12 and 30: t_{0.975,1} = 12.7 gave 21 +- 114.3, a band from -93 to 135.
    assert mean_interval([12.0, 30.0], (0.0, math.inf)) == {"mean": 21.0, "low": None, "high": None, "n": 2}
    runs = {
        name: RunSummary.from_dict(
            summarize_seeds({s: _seed_run(s, {"frechet_distance": v}) for s, v in enumerate(values)})
        )
        for name, values in (("bf16", (12.0, 30.0)), ("fp32", (20.0, 25.0)))
    }
    assert with_interval(runs["bf16"], "frechet_distance", 2) == "21.00 (seeds 12.00 and 30.00)"
    from ampgan.quality.registry import FRECHET_DISTANCE

    line = _quality_line("bf16", runs["bf16"], runs["fp32"], SeedComparison(), 2, {}, FRECHET_DISTANCE)
    assert "Two seeds give no meaningful 95% interval" in line and "--seeds 3 or more" in line and "CI" not in line
    ratio = paired_ratios({"0": 10.0, "1": 20.0}, {"0": 15.0, "1": 10.0})  # 1.5x sooner and 2x later
    assert ratio["low"] is None and ratio["beyond_seed_spread"] is None
    cost = CostSection.from_dict(
        {
            "to_target": {
                "bf16": {"reached": 2, "seeds": 2, "seconds": 15.0, "by_first_evaluation": 0},
                "fp32": {"reached": 2, "seeds": 2, "seconds": 12.5, "by_first_evaluation": 0},
            }
        }
    )
    target = _target_line("bf16", cost, SeedComparison.from_dict({"time_to_target_ratio": ratio}), 0.75, 2)
    assert "In the two seeds where both reached it, bf16 was 1.50x and 0.50x sooner (two seeds give no" in target
    assert "95% CI" not in target


def test_an_interval_read_back_from_before_the_bounds_is_cut_when_shown():
    from ampgan.study.document import Interval
    from ampgan.study.verdict import interval_text

    old = Interval.from_dict({"mean": 21.0, "low": -93.3, "high": 135.3, "n": 2})
    assert interval_text("frechet_distance", old, 2) == "0.00 to 135.30"
    assert interval_text("coverage", Interval.from_dict({"mean": 0.9, "low": 0.7, "high": 1.1, "n": 3})) == (
        "0.700 to 1.000"
    )


def test_a_two_seed_interval_read_back_from_an_older_document_is_never_shown():
    """compare.json written before two seeds lost their interval holds t-intervals (0.01x-95x sooner): `report`
    reads it back without recomputing, and printed '95% CI' for them; a damaged one of 3 seeds without ends
    was a KeyError traceback."""
    from ampgan.study.document import CostSection, RunSummary, SeedComparison
    from ampgan.study.verdict import _target_line, with_interval

    cost = CostSection.from_dict(
        {
            "to_target": {
                "bf16": {"reached": 2, "seeds": 2, "seconds": 15.0, "by_first_evaluation": 0},
                "fp32": {"reached": 2, "seeds": 2, "seconds": 12.5, "by_first_evaluation": 0},
            }
        }
    )
    old = {"mean": 1.2, "low": 0.01, "high": 95.0, "n": 2, "per_seed": {"0": 1.5, "1": 0.96}}
    target = _target_line("bf16", cost, SeedComparison.from_dict({"time_to_target_ratio": old}), 0.75, 2)
    assert "95% CI" not in target and "1.50x and 0.96x sooner" in target
    damaged = old | {"low": None, "high": None, "n": 3, "per_seed": {"0": 1.5, "1": 0.96, "2": 1.1}}
    target = _target_line("bf16", cost, SeedComparison.from_dict({"time_to_target_ratio": damaged}), 0.75, 3)
    assert "In the 3 seeds where both reached it" in target
    summary = summarize_seeds({s: _seed_run(s, {"frechet_distance": v}) for s, v in enumerate((12.0, 30.0))})
    summary["final_interval"]["frechet_distance"] |= {"low": -93.3, "high": 135.3}
    assert with_interval(RunSummary.from_dict(summary), "frechet_distance", 2) == "21.00 (seeds 12.00 and 30.00)"
