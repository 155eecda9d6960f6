"""The memory-format decision (speed/layout.py): NCHW unless channels-last is measured faster.

Timings are injected (an imagined machine per test), except in the one test that runs the real
step in both formats to check the plumbing.
"""

import json
import random

import pytest
import torch
from conftest import own_decision_cache, run_cli, run_short_compare

from ampgan.speed.cache import DecisionCache
from ampgan.speed.layout import (
    CHANNELS_LAST,
    NCHW,
    decide_layout,
    layout_from_rounds,
    measure_layouts_on_training_step,
    measure_layouts_with,
)
from ampgan.speed.rounds import UNTIL_DECIDED, StoppingRule, measure_rounds

TINY = ["--dataset", "synthetic", "--width", "8", "--set", "model.z_dim=16", "--batch-size", "8", "--device", "cpu"]


def formats(nchw_s: float, channels_last_s: float, noise: float = 0.02):
    """make_timer for measure_layouts_with(): each format's step time within +-noise (seeded)."""
    times = {NCHW: nchw_s, CHANNELS_LAST: channels_last_s}

    def make_timer(name):
        rng = random.Random(name)
        return lambda: times[name] * rng.uniform(1 - noise, 1 + noise)

    return make_timer


def decide_on(nchw_s, channels_last_s, cache=None, noise=0.02, key=None):
    return decide_layout(
        "bf16", 64, key or {"machine": "amx"}, measure_layouts_with(formats(nchw_s, channels_last_s, noise)), cache
    )


def test_an_amx_cpu_where_channels_last_is_faster_chooses_it():
    decision = decide_on(0.080, 0.070)
    assert decision.channels_last and decision.chosen == "channels-last" and decision.verdict == "faster"
    assert decision.interval["estimate"] == pytest.approx(80 / 70, rel=0.03) and decision.interval["low"] > 1


def test_a_tie_keeps_nchw_and_says_no_clear_difference():
    # Zen 4: the two formats within noise of each other.
    decision = decide_on(0.100, 0.100, noise=0.05)
    assert not decision.channels_last and decision.chosen == "nchw"
    assert decision.verdict == "no clear difference"


def test_channels_last_slower_keeps_nchw():
    decision = decide_on(0.100, 0.130)
    assert decision.verdict == "slower" and not decision.channels_last


def test_the_decision_line_names_both_times_and_the_choice():
    line = decide_on(0.080, 0.064, noise=0.0).describe()
    assert line == (
        "bf16 at batch 64: channels-last 64.0 ms vs NCHW 80.0 ms per step, 1.25x (95% CI 1.21-1.29, "
        "3 rounds): channels-last"
    )


def test_decisions_are_cached_per_question_and_a_load_change_is_not(tmp_path):
    cache = DecisionCache(tmp_path)
    first = decide_on(0.080, 0.070, cache=cache)

    def must_not_measure():
        raise AssertionError("measured again")

    again = decide_layout("bf16", 64, {"machine": "amx"}, must_not_measure, cache)
    assert again.cached and again.channels_last and "[cached, measured" in again.describe()
    assert again.interval == first.interval
    # The precision decision and the layout decision share the file, not their keys.
    keys = list(json.loads((tmp_path / "precision-decisions.json").read_text())["decisions"])
    assert len(keys) == 1 and '"question": "memory format"' in keys[0]
    assert not decide_on(0.08, 0.07, cache=cache, key={"machine": "zen4"}).cached

    def growing_load():  # both formats slow alike by 3x over the rounds: the load changed
        calls = [0]

        def make_timer(name):
            def timed():
                calls[0] += 1
                return {NCHW: 0.08, CHANNELS_LAST: 0.07}[name] * (1 + 3.0 * calls[0] / 20)

            return timed

        timers = {name: make_timer(name) for name in (NCHW, CHANNELS_LAST)}
        return measure_rounds(timers, NCHW, StoppingRule(min_rounds=9, max_seconds=100, until=UNTIL_DECIDED))

    other = DecisionCache(tmp_path / "other")
    changed = decide_layout("bf16", 64, {"machine": "amx"}, growing_load, other)
    assert "load changed" in changed.note and not (tmp_path / "other" / "precision-decisions.json").exists()


def test_a_step_that_fails_channels_last_runs_nchw_and_says_why_uncached(tmp_path):
    """User code that NHWC weights break (BigGAN's orthogonal regulariser: weight.view(out, -1) on a conv
    weight) stopped train, bench and compare while they only measured which format is faster."""
    from ampgan.errors import AmpganError

    def timer(name):
        def step():
            if name == CHANNELS_LAST:
                raise AmpganError(
                    "model m.py:gan: G's update, g_loss failed: RuntimeError: view size is not compatible"
                )
            return 0.01

        return step

    cache = DecisionCache(tmp_path)
    decision = decide_layout("fp32", 16, {"machine": "zen4"}, measure_layouts_with(timer), cache)
    assert decision.chosen == NCHW and not decision.channels_last and decision.verdict == "failed"
    assert decision.describe().endswith("(the step failed channels-last: model m.py:gan: G's update, g_loss failed: "
                                        "RuntimeError: view size is not compatible): nchw")  # fmt: skip
    assert not (tmp_path / "precision-decisions.json").exists()  # fixed code is measured again next time


def test_a_step_that_fails_in_both_formats_is_the_users_error_not_a_layout_decision(tmp_path):
    """An NCHW failure (a bug in the user's loss, a config error) fails the run in either format: it reaches
    the user as it is, not as "the step failed channels-last" followed by a run that fails again later."""
    from ampgan.errors import AmpganError

    def timer(name):
        def step():
            raise AmpganError(f"model m.py:gan: g_loss failed: NameError ({name})")

        return step

    with pytest.raises(AmpganError, match=r"NameError \(nchw\)$"):
        decide_layout("fp32", 16, {"machine": "zen4"}, measure_layouts_with(timer), DecisionCache(tmp_path))


def test_a_format_that_is_hopeless_in_a_round_is_slower():
    result = measure_rounds({NCHW: lambda: 0.1, CHANNELS_LAST: lambda: 0.9}, NCHW, StoppingRule(min_rounds=3))
    decision = layout_from_rounds(result, "fp32", 64)
    assert decision.verdict == "slower" and "more than 5x slower" in decision.note


def _faster_channels_last(monkeypatch, tmp_path):
    """A machine where bf16 runs faster channels-last; a cache of its own (the session's cache holds the
    injected ties that other tests measured)."""
    import ampgan.speed.layout as layout

    own_decision_cache(monkeypatch, tmp_path)

    monkeypatch.setattr(
        layout,
        "measure_layouts_on_training_step",
        lambda config, dataset, device: measure_layouts_with(
            formats(0.080, 0.070 if config.precision.name == "bf16" else 0.081, noise=0.0)
        ),
    )


def test_train_runs_channels_last_where_measured_faster_and_keeps_it_on_resume(tmp_path, capsys, monkeypatch):
    _faster_channels_last(monkeypatch, tmp_path)
    run = tmp_path / "r"
    code, _, err = run_cli(capsys, "train", *TINY, "--precision", "bf16", "--steps", "2", "--out", str(run))
    assert code == 0, err
    assert (
        "bf16 at batch 8: channels-last 70.0 ms vs NCHW 80.0 ms per step" in err and err.count(": channels-last") >= 1
    )
    assert json.loads((run / "config.json").read_text())["config"]["compute"]["channels_last"] is True

    def must_not_measure(config, dataset, device):
        raise AssertionError("a resumed run measured its layout again")

    import ampgan.speed.layout as layout

    monkeypatch.setattr(layout, "measure_layouts_on_training_step", must_not_measure)
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "3", "--quiet")
    assert code == 0, err
    assert json.loads((run / "config.json").read_text())["config"]["compute"]["channels_last"] is True
    # An explicit choice is obeyed without measuring.
    code, _, err = run_cli(
        capsys,
        "train",
        *TINY,
        "--precision",
        "bf16",
        "--steps",
        "1",
        "--no-channels-last",
        "--out",
        str(tmp_path / "explicit"),
        "--quiet",
    )
    assert code == 0, err
    assert (
        json.loads((tmp_path / "explicit" / "config.json").read_text())["config"]["compute"]["channels_last"] is False
    )


def test_compare_and_its_bench_use_each_precisions_measured_format(tmp_path, capsys, monkeypatch):
    _faster_channels_last(monkeypatch, tmp_path)
    out = tmp_path / "c"
    code, _, err = run_short_compare(capsys, TINY, out)
    assert code == 0, err
    document = json.loads((out / "compare.json").read_text())
    assert document["spec"]["channels_last"] == ["bf16"]
    assert (
        document["layouts"]["fp32"]["channels_last"] is False and document["layouts"]["bf16"]["channels_last"] is True
    )
    assert (
        json.loads((out / "runs" / "bf16-seed0" / "config.json").read_text())["config"]["compute"]["channels_last"]
        is True
    )
    assert (
        json.loads((out / "runs" / "fp32-seed0" / "config.json").read_text())["config"]["compute"]["channels_last"]
        is False
    )
    bench = json.loads((out / "bench" / "results.json").read_text())
    assert bench["spec"]["channels_last"] == ["bf16"] and bench["layouts"] == {}  # given by the comparison
    report = (out / "report.md").read_text()
    assert "memory format: fp32 NCHW, bf16 channels-last" in report
    assert "memory format measured: bf16 at batch 8: channels-last 70.0 ms vs NCHW 80.0 ms" in report


def test_bench_decides_per_precision_and_stamps_its_figures(tmp_path, capsys, monkeypatch):
    import ampgan.bench.harness as harness
    from ampgan.bench.output import load_results, stamp_text

    _faster_channels_last(monkeypatch, tmp_path)
    # A budget whose decisions' share fits both formats' caps (a quarter of 60 s would fit neither: tested in
    # tests/test_bench.py); the measurement here is injected and costs nothing.
    monkeypatch.setattr(harness, "DECISION_SHARE", 1.0)
    out = tmp_path / "b"
    code, _, err = run_cli(
        capsys,
        "bench",
        *TINY[:-4],
        "--width",
        "8",
        "--set",
        "model.z_dim=16",
        "--device",
        "cpu",
        "--batch-sizes",
        "4",
        "--precisions",
        "fp32,bf16",
        "--steps",
        "2",
        "--set",
        "bench.min_seconds=0",
        "--out",
        str(out),
    )
    assert code == 0, err
    results = load_results(out / "results.json")
    assert results["spec"]["channels_last"] == ["bf16"] and set(results["layouts"]) == {"fp32", "bf16"}
    assert ", channels-last: bf16 |" in stamp_text(results)


@pytest.mark.real_layout_measurement
def test_the_real_step_is_timed_in_both_formats():
    from conftest import tiny_config

    from ampgan.data import load_dataset

    config = tiny_config(precision="bf16")
    dataset = load_dataset(config.data)
    result = measure_layouts_on_training_step(config, dataset, torch.device("cpu"))()
    assert set(result.samples_s) == {NCHW, CHANNELS_LAST} and result.rounds >= 3
    assert all(seconds > 0 for samples in result.samples_s.values() for seconds in samples)


def test_a_decision_times_the_step_with_the_runs_malloc_setting(monkeypatch):
    import platform

    from conftest import tiny_config

    import ampgan.system.cpu_tuning as cpu_tuning
    from ampgan.data import load_dataset
    from ampgan.speed.step_timer import StepTimer

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("the setting is glibc's")
    monkeypatch.setattr(cpu_tuning, "_applied", None)  # as in a fresh process
    config = tiny_config()
    StepTimer(config, load_dataset(config.data), torch.device("cpu"), across_ranks=False)
    assert cpu_tuning.tuning_state()["glibc_malloc_keeps_freed_memory"] is True
