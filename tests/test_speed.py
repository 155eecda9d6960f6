"""The speed decision: interval arithmetic, the stopping rule, drift, and the choice per machine.

No test here times anything: every timing is injected, so the rules are checked exactly.
"""

import math
import random
import statistics

import pytest

from ampgan.speed.cache import DecisionCache
from ampgan.speed.decision import (
    candidate_modes,
    choose_for_comparison,
    decide,
    decisions_from_rounds,
    fastest_useful_mixed,
    measure_with,
)
from ampgan.speed.intervals import (
    answers,
    block_means,
    load_changed,
    reference_drift,
    speedup_band,
    speedup_interval,
    t_quantile_975,
)
from ampgan.speed.rounds import UNTIL_DECIDED, RoundsResult, StoppingRule, measure_rounds

# ---------------------------------------------------------------- interval arithmetic


def test_speedup_interval_by_hand():
    # Ratios 2, 2.5, 1.6: their logs have mean ln 2 (2 x 2.5 x 1.6 = 8) and sample sd 0.22314;
    # t(0.975, 2) = 4.303, so the half width is 4.303 x 0.22314 / sqrt(3) = 0.55436 in logs.
    interval = speedup_interval([1.0, 1.0, 1.0], [0.5, 0.4, 0.625], between_run_sd=0.0)
    assert interval.estimate == pytest.approx(2.0)
    assert interval.low == pytest.approx(2 * math.exp(-0.55436), rel=1e-4)
    assert interval.high == pytest.approx(2 * math.exp(0.55436), rel=1e-4)
    assert interval.rounds == 3 and interval.verdict == "faster" and not interval.settled
    # With the between-run spread (sd 0.015 in logs): half widths in quadrature, 1.96 x 0.015 = 0.0294
    widened = speedup_interval([1.0, 1.0, 1.0], [0.5, 0.4, 0.625])
    assert widened.low == pytest.approx(2 * math.exp(-math.hypot(0.55436, 0.0294)), rel=1e-4)


def test_a_band_that_decides_nothing_and_spans_more_than_twice_is_said_to_be_unsettled():
    # Two rounds under load (t_{0.975,1} = 12.7): a 0.5x and a 2x round give a band of about 0.01x-95x.
    wide = speedup_interval([1.0, 1.0], [2.0, 0.5])
    assert wide.low < 0.02 and wide.high > 50 and not answers(wide.low, wide.high)
    assert wide.describe() == (
        "speedup unsettled after 2 rounds (95% CI wider than 2x: more time measuring, or fewer other processes "
        "running, would settle it)"
    )
    assert speedup_band(wide.estimate, wide.low, wide.high) == "unsettled"
    # A wide band that decides (slower; faster), or one within 2x, is an answer and is shown.
    assert answers(0.26, 0.70) and answers(1.1, 5.0) and answers(0.8, 1.5)
    assert not answers(0.6, 1.3) and speedup_band(0.8, 0.6, 1.3) == "unsettled"
    assert speedup_band(0.42, 0.26, 0.70) == "0.42x [0.26-0.70]"


def test_a_decision_whose_band_is_no_answer_says_so_once():
    result = RoundsResult("fp32", {"fp32": [1.0, 1.0], "bf16": [2.0, 0.5]}, stopped_by="time cap", seconds=36.0)
    result.intervals["bf16"] = speedup_interval([1.0, 1.0], [2.0, 0.5])
    line = decisions_from_rounds(result, 8, {})["bf16"].describe()
    assert line == (
        "bf16: 1.25 s per step vs fp32 1.00 s at batch 8, speedup unsettled after 2 rounds (95% CI wider than 2x: "
        "more time measuring, or fewer other processes running, would settle it): no clear difference"
    )


def test_identical_rounds_still_carry_the_between_run_spread():
    # A run whose every round says 1.5x: a rerun would still find 1.5 x exp(+-1.96 x 0.015)
    interval = speedup_interval([1.5] * 6, [1.0] * 6)
    assert (interval.low, interval.high) == pytest.approx((1.5 * math.exp(-0.0294), 1.5 * math.exp(0.0294)), rel=1e-3)
    assert interval.settled and interval.verdict == "faster"


def test_a_gain_below_the_minimum_effect_is_not_faster():
    # 1.5% faster in every round: the interval (1.5% +- 2.9%) does not clear 1.02, and more rounds
    # cannot make it: decided, no clear difference
    interval = speedup_interval([1.015] * 8, [1.0] * 8, between_run_sd=0.0)
    assert interval.low > 1.0 and interval.verdict == "no clear difference" and interval.decided
    assert speedup_interval([1.05] * 8, [1.0] * 8).verdict == "no clear difference"  # a rerun may find 1.019
    assert speedup_interval([1.06] * 8, [1.0] * 8).verdict == "faster"


def test_identical_ratios_give_a_point_and_slower_is_symmetric():
    faster = speedup_interval([2.0] * 4, [1.0] * 4, between_run_sd=0.0)
    assert (faster.low, faster.estimate, faster.high) == pytest.approx((2.0, 2.0, 2.0)) and faster.settled
    slower = speedup_interval([1.0, 1.0, 1.0], [2.0, 2.5, 1.6])
    assert slower.estimate == pytest.approx(0.5) and slower.verdict == "slower"
    assert slower.relative_half_width == pytest.approx(
        speedup_interval([1.0] * 3, [0.5, 0.4, 0.625]).relative_half_width
    )


def test_an_interval_across_one_is_no_clear_difference():
    assert speedup_interval([1.0, 1.0, 1.0, 1.0], [0.9, 1.1, 0.95, 1.05]).verdict == "no clear difference"
    with pytest.raises(ValueError):
        speedup_interval([1.0], [1.0])


def test_t_quantiles_match_the_tables():
    assert t_quantile_975(1) == 12.706 and t_quantile_975(9) == 2.262
    for df, table in ((40, 2.021), (60, 2.000), (120, 1.980), (1000, 1.962)):
        assert t_quantile_975(df) == pytest.approx(table, abs=1e-3)


def test_block_means_group_consecutive_rounds():
    assert list(block_means([1, 2, 3, 4], 10)) == [1, 2, 3, 4]
    assert list(block_means(list(range(20)), 10)) == [0.5, 2.5, 4.5, 6.5, 8.5, 10.5, 12.5, 14.5, 16.5, 18.5]


def test_a_load_change_between_blocks_widens_the_interval():
    """Ten rounds at ratio 2.0, then ten at 1.5 (a neighbour's load arrives): rounds taken one by
    one look precise within each state; block means see the change."""
    rng = random.Random(0)
    ratios = [2.0 * rng.uniform(0.99, 1.01) for _ in range(10)] + [1.5 * rng.uniform(0.99, 1.01) for _ in range(10)]
    interval = speedup_interval([1.0] * 20, [1 / r for r in ratios])
    assert interval.low < 1.6 and interval.high > 1.85 and not interval.settled


def test_drift_compares_the_first_and_last_third():
    assert reference_drift([1.0] * 5) is None
    assert reference_drift([1.0] * 9) == pytest.approx(0.0)
    assert reference_drift([1.0, 1.0, 1.0, 1.1, 1.1, 1.1, 1.2, 1.2, 1.2]) == pytest.approx(0.2)
    assert load_changed([1.0, 1.0, 1.0, 1.1, 1.1, 1.1, 1.2, 1.2, 1.2])
    assert not load_changed([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.09, 1.09, 1.09])


# ---------------------------------------------------------------- the stopping rule


def steady(seconds: float, noise: float = 0.02, seed: int = 0):
    """A timer that returns `seconds` within +-noise (seeded)."""
    rng = random.Random(seed)
    return lambda: seconds * rng.uniform(1 - noise, 1 + noise)


def test_steady_timings_settle_at_the_fewest_rounds():
    result = measure_rounds({"fp32": steady(0.2), "bf16": steady(0.1, seed=1)}, "fp32", StoppingRule(min_rounds=5))
    assert result.stopped_by == "settled" and result.rounds == 5 and result.settled
    assert result.intervals["bf16"].estimate == pytest.approx(2.0, rel=0.03)


def test_noisy_timings_run_into_the_cap_and_say_unsettled():
    result = measure_rounds(
        {"fp32": steady(0.2, 0.5), "bf16": steady(0.15, 0.5, seed=1)},
        "fp32",
        StoppingRule(min_rounds=3, max_seconds=4.0),
    )
    assert result.stopped_by == "time cap" and not result.settled
    # A round foreseen (from the last) not to fit is not started: within the cap, less than a round short of it.
    assert 4.0 - 2 * 0.3 * 1.5 < result.seconds <= 4.0


def test_the_cap_bounds_what_the_calls_spent_not_the_step_times_they_return():
    """A lazily regularised GAN's call runs every kind of step in its cycle (3 steps) and returns one step's mean:
    counted by the returned times, a 6 s cap let 18 s of calls run (t-gan3: measuring 69.2 s for 60)."""
    clock = [0.0]

    def cycle(mean_s):
        def call():
            clock[0] += 3 * mean_s  # three steps run, their mean returned
            return mean_s

        return call

    result = measure_rounds(
        {"fp32": cycle(0.2), "bf16": cycle(0.1)},
        "fp32",
        StoppingRule(min_rounds=2, min_seconds=100, max_seconds=6.0),
        spent=lambda: clock[0],
    )
    # Settled, kept measuring toward min_seconds until no 0.9 s round fit: a seventh would have ended at 6.3 s.
    assert result.stopped_by == "settled" and result.rounds == 6
    assert clock[0] == pytest.approx(5.4) and result.seconds == pytest.approx(5.4)
    assert result.samples_s["bf16"] == [0.1] * 6  # the samples stay one step's time


def test_a_round_that_would_not_fit_is_not_started_but_two_rounds_always_run():
    calls = {"fp32": 0, "bf16": 0}

    def timer(name, seconds):
        def call():
            calls[name] += 1
            return seconds

        return call

    # 1 s rounds under a 2.5 s cap: 2 rounds, not the third that would end at 3 s.
    measure_rounds({"fp32": timer("fp32", 0.6), "bf16": timer("bf16", 0.4)}, "fp32", StoppingRule(3, 2.5, 20))
    assert calls == {"fp32": 2, "bf16": 2}
    # A cap smaller than one round (but not half) still runs the two a speedup needs (the bench says so before).
    calls.update(fp32=0, bf16=0)
    result = measure_rounds({"fp32": timer("fp32", 0.6), "bf16": timer("bf16", 0.4)}, "fp32", StoppingRule(3, 0.6))
    assert calls == {"fp32": 2, "bf16": 2} and result.stopped_by == "time cap"
    # Settled rounds that reach the cap before min_seconds stop as settled, not as capped.
    steady_result = measure_rounds(
        {"fp32": steady(0.2, 0.0), "bf16": steady(0.1, 0.0)}, "fp32", StoppingRule(3, 1.0, min_seconds=20)
    )
    assert steady_result.stopped_by == "settled" and steady_result.seconds <= 1.0


def test_a_decision_stops_as_soon_as_the_interval_excludes_one():
    timers = {"fp32": steady(0.2, 0.15), "bf16": steady(0.1, 0.15, seed=1)}
    decided = measure_rounds(timers, "fp32", StoppingRule(min_rounds=3, max_seconds=100, until=UNTIL_DECIDED))
    timers = {"fp32": steady(0.2, 0.15), "bf16": steady(0.1, 0.15, seed=1)}
    settled = measure_rounds(timers, "fp32", StoppingRule(min_rounds=3, max_seconds=100))
    assert decided.stopped_by == "decided" and decided.intervals["bf16"].verdict == "faster"
    assert decided.rounds < settled.rounds and settled.settled


def test_a_hopeless_candidate_is_left_out_after_two_rounds_not_one():
    calls = {"fp16": 0}

    def fp16():
        calls["fp16"] += 1
        return 18.0

    result = measure_rounds({"fp32": steady(0.2), "fp16": fp16}, "fp32", StoppingRule(min_rounds=5))
    assert calls["fp16"] == 2 and "fastest of 2 steps took 18 s" in result.hopeless["fp16"]
    assert "more than 5x slower" in result.hopeless["fp16"] and result.stopped_by == "only a baseline"


def test_a_first_round_slowed_7x_does_not_leave_a_faster_candidate_out():
    """The tester's bench (a loaded 2-core Zen 4): bf16's first round 41.2 ms against fp32's 5.95 ms, then bf16
    1.4x faster. Left out after one round before; now its interval says faster."""
    bf16 = steady(0.00425, seed=1)
    calls = [0]

    def bf16_first_slow():
        calls[0] += 1
        return 0.0412 if calls[0] == 1 else bf16()

    result = measure_rounds({"fp32": steady(0.00595), "bf16": bf16_first_slow}, "fp32", StoppingRule(min_rounds=8))
    assert not result.hopeless and result.intervals["bf16"].verdict == "faster"


def test_one_step_slowed_by_a_burst_does_not_leave_a_candidate_out():
    bf16 = steady(0.1, seed=1)
    calls = [0]

    def bf16_with_a_burst():
        calls[0] += 1
        return 1.7 if calls[0] == 8 else bf16()  # one step 8x fp32's, in the eighth round

    result = measure_rounds({"fp32": steady(0.2), "bf16": bf16_with_a_burst}, "fp32", StoppingRule(min_rounds=12))
    assert not result.hopeless and result.rounds >= 12 and result.intervals["bf16"].estimate > 1.5


def test_min_seconds_keeps_measuring_past_a_quick_settle():
    result = measure_rounds(
        {"fp32": steady(0.2), "bf16": steady(0.1, seed=1)},
        "fp32",
        StoppingRule(min_rounds=3, min_seconds=6.0, max_seconds=60),
    )
    assert result.seconds >= 6.0 and result.rounds > 3


def slowing(seconds: float, growth: float, steps: int, until: int | None = None):
    """A timer slowed by a neighbour's load that grows by `growth` every `steps` calls (up to call
    `until`, then stays)."""
    calls = [0]

    def timed():
        calls[0] += 1
        return seconds * (1 + growth * min(calls[0], until or calls[0]) / steps)

    return timed


def test_a_load_change_is_flagged_and_measured_again_when_the_cap_allows():
    def slowing_60(seconds):  # slows every step by up to 60% over 12 steps, then stays
        return slowing(seconds, 0.6, 12, until=12)

    # Both precisions slow alike: the paired ratio stays 2.0 and settles, but the load changed.
    result = measure_rounds(
        {"fp32": slowing_60(0.2), "bf16": slowing_60(0.1)}, "fp32", StoppingRule(min_rounds=12, max_seconds=100)
    )
    # First third of the rounds at 1.125x the unloaded time on average, last third at 1.525x: +35.6%.
    assert result.remeasured_after_drift == pytest.approx(1.525 / 1.125 - 1)
    assert not result.load_changed and result.rounds == 12  # the second attempt ran at a steady load
    assert result.intervals["bf16"].estimate == pytest.approx(2.0)
    capped = measure_rounds(
        {"fp32": slowing_60(0.2), "bf16": slowing_60(0.1)}, "fp32", StoppingRule(min_rounds=12, max_seconds=5)
    )
    assert capped.remeasured_after_drift is None and capped.load_changed  # no room to measure again: flagged


def test_the_round_order_is_shuffled_and_seeded():
    def recorder(name, log):
        def timed():
            log.append(name)
            return 0.1

        return timed

    orders = []
    for _ in range(2):
        log = []
        measure_rounds(
            {n: recorder(n, log) for n in ("fp32", "bf16", "fp16")}, "fp32", StoppingRule(min_rounds=6), seed=3
        )
        orders.append(log)
    rounds = [tuple(orders[0][i : i + 3]) for i in range(0, len(orders[0]), 3)]
    assert orders[0] == orders[1] and len(set(rounds)) > 1  # same seed, same orders; orders vary by round


# ---------------------------------------------------------------- the choice, per machine


def machine(times: dict[str, float], noise: float = 0.03):
    """make_timer for decide(): each precision's step time on an imagined machine."""
    return lambda name: steady(times[name], noise, seed=hash(name) % 1000)


def decide_on(times: dict[str, float], device_type: str, capability=None, cache=None, noise=0.03):
    candidates, cannot_run = candidate_modes(device_type, capability)
    decisions = decide(candidates, 64, {"machine": device_type}, measure_with(machine(times, noise)), cache)
    return decisions, cannot_run


def test_an_amx_cpu_whose_fp16_step_is_slow_chooses_bf16():
    decisions, cannot_run = decide_on({"fp32": 0.21, "bf16": 0.115, "fp16": 18.2}, "cpu")
    assert decisions["bf16"].useful and decisions["fp16"].verdict == "slower"
    # Left out at its two warm-up steps (one is never a verdict), not after more 18-second steps in the rounds:
    assert decisions["fp16"].note.endswith(": each more than 20x fp32's") and decisions["fp16"].rounds == 0
    assert choose_for_comparison(decisions, cannot_run)[0] == ("fp32", "bf16")
    assert [item["precision"] for item in cannot_run] == ["tf32"]


def test_a_zen4_cpu_chooses_bf16_at_one_and_a_half():
    # fp16 15x slower: under the 20x first-step cut, so the rounds leave it out (more than 5x in one).
    decisions, cannot_run = decide_on({"fp32": 0.20, "bf16": 0.133, "fp16": 3.0}, "cpu")
    assert decisions["bf16"].useful and decisions["bf16"].interval["estimate"] == pytest.approx(1.5, rel=0.05)
    assert decisions["fp16"].verdict == "slower" and "more than 5x slower" in decisions["fp16"].note
    assert fastest_useful_mixed(decisions) == "bf16"


def test_a_cpu_without_bf16_support_leaves_fp32_alone_with_every_mode_and_its_reason():
    decisions, cannot_run = decide_on({"fp32": 0.20, "bf16": 0.6, "fp16": 5.0}, "cpu")
    assert not any(d.useful for d in decisions.values())
    chosen, left = choose_for_comparison(decisions, cannot_run)
    assert chosen == ("fp32",) and [item["precision"] for item in left] == ["tf32", "bf16", "fp16"]
    assert "slower" in left[1]["reason"]


@pytest.mark.parametrize("capability", [(7, 0), (7, 5)])
def test_volta_and_turing_measure_fp16_only(capability):
    decisions, cannot_run = decide_on({"fp32": 0.70, "fp16": 0.41}, "cuda", capability)
    assert list(decisions) == ["fp16"] and decisions["fp16"].useful
    assert {item["precision"] for item in cannot_run} == {"tf32", "bf16"}
    assert choose_for_comparison(decisions, cannot_run)[0] == ("fp32", "fp16")


def test_ampere_and_newer_measure_tf32_bf16_and_fp16():
    decisions, cannot_run = decide_on({"fp32": 0.30, "tf32": 0.18, "bf16": 0.10, "fp16": 0.12}, "cuda", (8, 0))
    assert list(decisions) == ["tf32", "bf16", "fp16"] and not cannot_run
    assert all(d.useful for d in decisions.values())
    assert choose_for_comparison(decisions, cannot_run)[0] == ("fp32", "bf16")  # tf32 is not mixed precision


def test_decisions_are_cached_and_say_so(tmp_path):
    cache = DecisionCache(tmp_path)
    first, _ = decide_on({"fp32": 0.21, "bf16": 0.115, "fp16": 18.2}, "cpu", cache=cache)

    def must_not_measure(names):
        raise AssertionError(f"measured {names} again")

    again = decide(["bf16", "fp16"], 64, {"machine": "cpu"}, must_not_measure, cache)
    assert all(d.cached for d in again.values()) and "[cached, measured" in again["bf16"].describe()
    assert again["bf16"].interval == first["bf16"].interval and again["fp16"].verdict == "slower"
    other_batch = decide(["bf16"], 256, {"machine": "cpu"}, measure_with(machine({"fp32": 0.8, "bf16": 0.4})), cache)
    assert not other_batch["bf16"].cached  # another batch size is another question
    (tmp_path / "precision-decisions.json").write_text("{ damaged")
    assert decide(["bf16"], 64, {"machine": "cpu"}, measure_with(machine({"fp32": 0.2, "bf16": 0.1})), cache)[
        "bf16"
    ].useful


def test_the_decision_line_carries_the_numbers():
    decisions, _ = decide_on({"fp32": 0.21, "bf16": 0.105, "fp16": 18.2}, "cpu", noise=0.0)
    line = decisions["bf16"].describe()
    assert line.startswith("bf16: 105.0 ms per step vs fp32 210.0 ms at batch 64, 2.00x (95% CI 1.94-2.06, 3 rounds)")
    assert line.endswith(": faster")
    assert decisions["fp16"].describe() == (
        "fp16: 18.20 s per step vs fp32 210.0 ms at batch 64 (warm-up steps 18.2 s and 18.2 s: each more "
        "than 20x fp32's): slower"
    )


# ---------------------------------------------------------------- the commands that use it

TINY = ["--dataset", "synthetic", "--width", "8", "--set", "model.z_dim=16", "--batch-size", "8", "--device", "cpu"]


def _machine_for_commands(monkeypatch, times):
    import ampgan.speed.decision as decision

    monkeypatch.setattr(
        decision, "measure_on_training_step", lambda config, dataset, device: measure_with(machine(times))
    )


def test_train_warns_when_its_precision_is_not_faster_here(tmp_path, capsys, monkeypatch):
    from conftest import run_cli

    monkeypatch.setenv("AMPGAN_CACHE_DIR", str(tmp_path / "cache"))
    _machine_for_commands(monkeypatch, {"fp32": 0.2, "bf16": 0.6, "fp16": 5.0})
    code, _, err = run_cli(
        capsys, "train", *TINY, "--precision", "bf16", "--steps", "1", "--out", str(tmp_path / "r"), "--quiet"
    )
    assert code == 0, err
    (warning,) = [line for line in err.splitlines() if line.startswith("warning: bf16:")]
    assert "ms per step vs fp32" in warning and "at batch 8" in warning and "95% CI" in warning
    assert warning.endswith(": slower: fp32 would train at least as fast on this machine")
    # The second run reads the cached decision and says so.
    code, _, err = run_cli(
        capsys, "train", *TINY, "--precision", "bf16", "--steps", "1", "--out", str(tmp_path / "r2"), "--quiet"
    )
    assert code == 0 and "[cached, measured" in err, err


def test_a_decision_measured_while_the_load_changed_is_used_but_not_cached(tmp_path):
    cache = DecisionCache(tmp_path)

    def measure(names):  # a neighbour's job arrives and keeps growing
        timers = {"fp32": slowing(0.2, 3.0, 10), **{n: slowing(0.1, 3.0, 10) for n in names}}
        return measure_rounds(timers, "fp32", StoppingRule(min_rounds=9, max_seconds=100, until=UNTIL_DECIDED)), {}

    lines = []
    first = decide(["bf16"], 64, {"machine": "cpu"}, measure, cache, log=lines.append)
    assert "load changed" in first["bf16"].note and any("not cached" in line for line in lines)
    assert cache.get('{"batch_size": 64, "machine": "cpu", "precision": "bf16"}') is None
    assert not (tmp_path / "precision-decisions.json").exists()


def test_the_between_run_spread_is_learned_from_this_machines_earlier_runs(tmp_path):
    from ampgan.speed.history import SpeedupHistory
    from ampgan.speed.intervals import BETWEEN_RUN_SD

    history = SpeedupHistory(tmp_path)
    assert history.between_run_sd("k")[0] == BETWEEN_RUN_SD  # nothing yet: the default
    for estimate in (1.50, 1.60):
        history.record("k", estimate)
    assert history.between_run_sd("k")[0] == BETWEEN_RUN_SD  # two runs are not enough to trust
    history.record("k", 1.70)
    sd, source = history.between_run_sd("k")
    assert sd == pytest.approx(statistics.stdev(math.log(v) for v in (1.5, 1.6, 1.7))) and "learned" in source
    for estimate in (1.500, 1.501, 1.502):  # runs that agree keep the default floor
        history.record("steady", estimate)
    assert history.between_run_sd("steady")[0] == BETWEEN_RUN_SD
    (tmp_path / "speedup-history.json").write_text("{damaged")
    assert history.between_run_sd("k")[0] == BETWEEN_RUN_SD
    history.record("k", 1.6)  # a damaged file is rebuilt, not an error
    assert history.estimates("k") == [1.6]


# ---------------------------------------------------------------- the decision's warm-up: one step is never a verdict


def scripted(steps: dict[str, list[float]], calls: dict[str, int]):
    """make_timer for measure_with: each precision returns its listed times in turn, then its last one for ever."""

    def make(name):
        def timed():
            calls[name] = calls.get(name, 0) + 1
            return steps[name][min(calls[name], len(steps[name])) - 1]

        return timed

    return make


def test_one_slow_warm_up_step_does_not_leave_a_faster_mode_out(tmp_path):
    """bf16's first step 30x fp32's warm step (kernels made under a neighbour's burst), then 1.4x faster: left
    out "at once" as 20x slower before; now it is measured, and faster."""
    calls = {}
    make = scripted({"fp32": [0.1], "bf16": [3.0, 0.07]}, calls)
    found = decide(["bf16"], 64, {"machine": "x"}, measure_with(make), DecisionCache(tmp_path))
    assert found["bf16"].verdict == "faster" and found["bf16"].rounds >= 3


def test_a_mode_slow_on_every_warm_up_step_is_left_out_after_two(tmp_path, monkeypatch):
    import ampgan.speed.decision as decision

    monkeypatch.setattr(decision, "_quiet", lambda: True)
    calls = {}
    found = decide(
        ["fp16"], 64, {"machine": "x"}, measure_with(scripted({"fp32": [0.1], "fp16": [3.0, 2.5]}, calls)), None
    )
    assert calls["fp16"] == 2 and found["fp16"].verdict == "slower"
    assert found["fp16"].note == "warm-up steps 3 s and 2.5 s: each more than 20x fp32's"


def test_a_step_foreseen_past_the_cap_is_not_started_where_it_cannot_be_stopped(tmp_path, monkeypatch):
    """Under torchrun no alarm stops a call: fp16 on a CPU without fp16 units, from fp32's 4 s warm step, would
    take 40 s or more, past the decision's 30 s cap (one fp16 step ran 146 s before it was left out)."""
    import ampgan.speed.decision as decision

    monkeypatch.setattr(decision, "stoppable", lambda: False)
    calls, lines, cache = {}, [], DecisionCache(tmp_path)
    make = scripted({"fp32": [4.0], "fp16": [1.0]}, calls)
    measure = measure_with(make, slowdown=lambda name: 10.0 if name == "fp16" else 1.0)
    found = decide(["fp16"], 64, {"machine": "x"}, measure, cache, lines.append)
    assert "fp16" not in calls and found["fp16"].verdict == "slower"
    assert found["fp16"].note == (
        "not run: fp32's step took 4 s and fp16 runs at least 10x slower on this CPU, so a step would pass the "
        "30 s cap and cannot be stopped here"
    )
    assert not cache._read() and "not cached" in lines[-1]  # a foresight, not the machine's measured answer


def test_a_warm_up_step_past_the_cap_is_stopped_there(monkeypatch):
    import time

    import ampgan.speed.decision as decision

    monkeypatch.setattr(decision, "_quiet", lambda: False)  # a crowded machine: the verdict is the moment's
    calls = {}

    def make(name):
        def timed():
            calls[name] = calls.get(name, 0) + 1
            if name == "fp16":
                time.sleep(20)  # stopped by the alarm at the rule's 0.3 s cap
            return 0.01

        return timed

    rule = StoppingRule(min_rounds=3, max_seconds=0.3, until=UNTIL_DECIDED)
    result, left_out = measure_with(make, rule)(["fp16"])
    assert calls["fp16"] == 1 and left_out["fp16"] == (
        0.3,
        0.01,
        "a warm-up step ran past the 0.3 s cap and was stopped",
        False,
    )
    assert "fp16" not in result.samples_s


def test_the_callers_own_alarm_is_left_pending_and_the_step_not_stopped_by_it():
    """A program with its own alarm pending (signal.alarm, setitimer) lost it: the cap's alarm replaced it and was
    cancelled after the step. Where the caller's alarm is pending, no cap's alarm is set."""
    import signal
    import time

    from ampgan.speed.step_timer import abandoned_after, stoppable

    rang = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: rang.append(signum))
    signal.setitimer(signal.ITIMER_REAL, 600)
    try:
        assert not stoppable()
        with abandoned_after(0.001):
            time.sleep(0.05)  # ran to its end: no CallTooLong
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0 and rang == []
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_no_fp32_rounds_when_every_candidate_is_left_out_at_its_warm_up():
    # fp16 and bf16 both hopeless at their warm-up steps (over 20x fp32's): the rounds that follow would time fp32
    # alone (three of them, the decision's minimum) and decide nothing.
    calls = []

    def make_timer(name):
        def timed():
            calls.append(name)
            return {"fp32": 0.2, "bf16": 6.0, "fp16": 18.0}[name]

        return timed

    decisions = decide(["bf16", "fp16"], 64, {"machine": "cpu"}, measure_with(make_timer), None)
    assert all(d.verdict == "slower" and d.rounds == 0 for d in decisions.values())
    assert calls.count("fp32") == 2  # its warm-up steps only


def test_a_speedup_that_decides_nothing_is_not_cached_and_is_measured_again(tmp_path):
    """A band of 0.3x-3x from a quiet machine (no load seen, the baseline steady) answers nothing: kept, it was read
    back on every later run, so doctor's 'run again' advice printed the same 'unsettled' for ever."""
    fp32, bf16 = [0.2, 0.2, 0.2], [0.05, 0.8, 0.2]
    interval = speedup_interval(fp32, bf16, 0.02)
    assert not answers(interval.low, interval.high)
    calls, lines = [], []

    def measure(names):
        calls.append(names)
        rounds = RoundsResult("fp32", {"fp32": fp32, "bf16": bf16}, {"bf16": interval}, stopped_by="time cap")
        return rounds, {}

    cache = DecisionCache(tmp_path)
    for _ in range(2):
        decision = decide(["bf16"], 64, {"machine": "cpu"}, measure, cache, log=lines.append)["bf16"]
        assert not decision.cached
    assert calls == [["bf16"], ["bf16"]]
    assert "  (bf16: its speedup is unsettled: not cached; measured again next time)" in lines
    # One that answers is kept as before.
    decide(["bf16"], 64, {"machine": "cpu"}, measure_with(machine({"fp32": 0.2, "bf16": 0.1})), cache)
    assert decide(["bf16"], 64, {"machine": "cpu"}, measure, cache)["bf16"].cached and len(calls) == 2
