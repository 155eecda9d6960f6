"""`ampgan bench` end to end on a tiny model, and its failure modes."""

import csv
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from conftest import run_cli, tiny_config

import ampgan
import ampgan.bench.deadline as deadline
import ampgan.bench.harness as bench_module
import ampgan.bench.measure as measure
import ampgan.bench.twin as twin
from ampgan.bench.deadline import TooSlowAhead, warm_up
from ampgan.bench.harness import run_bench
from ampgan.bench.output import stamp_text
from ampgan.bench.results import ConfigResult, speedups
from ampgan.bench.spec import BenchSpec
from ampgan.errors import AmpganError

TINY = [
    "--width",
    "8",
    "--set",
    "model.z_dim=16",
    "--device",
    "cpu",
    "--set",
    "bench.warmup=1",
    "--steps",
    "3",
    "--set",
    "bench.min_seconds=0",
    "--max-seconds",
    "5",
]


@pytest.mark.slow
def test_tiny_bench_writes_results_figures_and_table(tmp_path, capsys):
    out = tmp_path / "bench"
    code, stdout, err = run_cli(
        capsys, "bench", *TINY, "--batch-sizes", "4,8", "--precisions", "fp32,bf16", "--out", str(out)
    )
    assert code == 0, err
    results = json.loads((out / "results.json").read_text())
    assert results["format"] == "ampgan-bench/1"
    assert results["environment"]["versions"]["torch"] == torch.__version__
    assert [(c["batch_size"], c["precision"], c["status"]) for c in results["configs"]] == [
        (4, "fp32", "ok"),
        (4, "bf16", "ok"),
        (8, "fp32", "ok"),
        (8, "bf16", "ok"),
    ]
    row = results["configs"][0]
    # At least --steps rounds, more until settled; every precision timed in every round.
    measured = {m["batch_size"]: m for m in results["measurements"]}
    assert len(row["samples_s"]) == measured[4]["rounds"] >= 3 and len(row["warmup_s"]) == 1
    assert len(results["configs"][1]["samples_s"]) == measured[4]["rounds"]
    assert row["stats"]["median_s"] > 0 and row["images_per_s"] == pytest.approx(4 / row["stats"]["median_s"])
    assert row["flops_per_step"] > 0 and row["achieved_tflops"] > 0
    assert [(s["batch_size"], s["precision"], s["baseline"]) for s in results["speedups"]] == [
        (4, "bf16", "fp32"),
        (8, "bf16", "fp32"),
    ]
    assert all(s["low"] <= s["estimate"] <= s["high"] for s in results["speedups"])
    with open(out / "results.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4 and rows[1]["speedup_vs_baseline"] != "" and rows[1]["speedup_ci_low"] != ""
    assert {row["measured_on"] for row in rows} == {f"measured on {stamp_text(results)}"}  # the CSV read alone
    for figure in ("fig1_time_per_batch.png", "fig2_time_per_1000_samples.png"):
        assert (out / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "speedup" in stdout and "bf16" in stdout and "peaks:" in stdout


def test_from_re_renders_without_measuring(tmp_path, capsys, monkeypatch):
    out = tmp_path / "bench"
    assert run_cli(capsys, "bench", *TINY, "--batch-sizes", "4", "--precisions", "fp32", "--out", str(out))[0] == 0
    (out / "fig1_time_per_batch.png").unlink()
    monkeypatch.setattr(bench_module, "run_bench", lambda *a, **k: pytest.fail("measured again"))
    code, stdout, _ = run_cli(capsys, "bench", "--from", str(out / "results.json"))
    assert code == 0 and (out / "fig1_time_per_batch.png").exists() and "fp32" in stdout
    (out / "fig1_time_per_batch.png").unlink()  # the folder, as project and cost take it
    assert run_cli(capsys, "bench", "--from", str(out))[:2] == (0, stdout)
    assert (out / "fig1_time_per_batch.png").exists()


def test_from_a_bad_file_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "results.json"
    bad.write_text("{not json")
    code, _, err = run_cli(capsys, "bench", "--from", str(bad))
    assert code == 2 and err.startswith(f"error: {bad} is not valid JSON")
    code, _, err = run_cli(capsys, "bench", "--from", str(tmp_path / "missing.json"))
    assert code == 2 and "no bench results at" in err


def test_too_slow_configurations_are_recorded_not_waited_for(tmp_path):
    spec = BenchSpec(base=tiny_config(), batch_sizes=(4,), precisions=("fp32",), warmup=1, steps=3, max_seconds=1e-6)
    results = run_bench(spec, torch.device("cpu"))
    (row,) = results["configs"]
    assert row["status"] == "too_slow" and "--max-seconds" in row["reason"] and row["samples_s"] == []


def test_out_of_memory_is_recorded_and_the_rest_goes_on(monkeypatch):
    real_step = measure.train_step

    def step_that_runs_out_of_memory_at_batch_8(state, next_batch):
        if next_batch()[0].shape[0] == 8:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_step(state, next_batch)

    monkeypatch.setattr(measure, "train_step", step_that_runs_out_of_memory_at_batch_8)
    spec = BenchSpec(base=tiny_config(), batch_sizes=(4, 8, 4), precisions=("fp32",), warmup=1, steps=2, min_seconds=0)
    results = run_bench(spec, torch.device("cpu"))
    assert [c["status"] for c in results["configs"]] == ["ok", "oom", "ok"]
    assert "out of memory" in results["configs"][1]["reason"]


def test_speedups_carry_each_batch_sizes_interval():
    from ampgan.speed.rounds import RoundsResult, StoppingRule, measure_rounds

    times = {"fp32": iter([1.0, 1.0, 1.0]), "bf16": iter([0.5, 0.4, 0.625])}
    rounds = measure_rounds(
        {name: lambda name=name: next(times[name]) for name in times},
        "fp32",
        StoppingRule(min_rounds=3, max_seconds=4.6),  # 3 rounds of 1.4-1.625 s fit, a fourth does not
    )
    (result,) = speedups([{"batch_size": 64, **rounds.to_dict()}])
    # Ratios 2, 2.5, 1.6 (see test_speed.test_speedup_interval_by_hand), with the between-run spread.
    assert (result["batch_size"], result["precision"], result["baseline"]) == (64, "bf16", "fp32")
    assert result["estimate"] == pytest.approx(2.0) and result["low"] == pytest.approx(1.1480, rel=1e-3)
    assert result["rounds"] == 3 and result["settled"] is False and result["stopped_by"] == "time cap"
    assert isinstance(rounds, RoundsResult)


def test_bad_bench_options_are_one_line_errors(tmp_path, capsys):
    for args, message in [
        (["--batch-sizes", "16,x"], "--batch-sizes takes whole numbers"),
        (["--precisions", "fp32,fp9"], "unknown precision 'fp9'"),
        (["--precisions", "tf32"], "tf32 is a CUDA tensor-core mode"),
        (["--steps", "1"], "bench.steps (--steps) must be a whole number of at least 2, got 1"),
        (["--set", "bench.min_seconds=-1"], "bench.min_seconds must be 0 or more (and finite), got -1.0"),
        (["--min-seconds", "1"], "--min-seconds is no option: write --set bench.min_seconds=VALUE"),
    ]:
        code, _, err = run_cli(capsys, "bench", *TINY[:6], *args, "--out", str(tmp_path / "b"))
        assert code == 2 and message in err and err.count("\n") == 1, err
        assert not (tmp_path / "b").exists()


@pytest.mark.slow
def test_sigterm_keeps_the_finished_batch_sizes_marked_incomplete(tmp_path):
    """A real process, a real signal: the batch sizes measured before SIGTERM are written, the one
    being measured is left out, and the exit says so (143)."""
    import signal
    import subprocess
    import sys

    out = tmp_path / "bench"
    command = [
        sys.executable,
        "-m",
        "ampgan",
        "bench",
        *TINY,
        "--set",
        "bench.warmup=3",
        "--batch-sizes",
        "4,8,4096",
        "--precisions",
        "fp32",
        "--max-seconds",
        "600",
        "--no-channels-last",
        "--out",
        str(out),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in process.stderr:  # one line per finished configuration
        if line.strip().startswith("batch     8"):
            break
    process.send_signal(signal.SIGTERM)
    stdout, rest = process.communicate(timeout=120)
    assert process.returncode == 143, rest
    assert "Traceback" not in rest and rest.strip().splitlines()[-1].startswith("stopped: SIGTERM received:"), rest
    assert "finished batch sizes 4, 8; not measured 4096" in rest
    results = json.loads((out / "results.json").read_text())
    assert [c["batch_size"] for c in results["configs"]] == [4, 8]
    assert results["incomplete"]["not_measured"] == [4096] and results["incomplete"]["signal"] == "SIGTERM"
    assert "incomplete: stopped by SIGTERM" in stdout


def test_log_axes_get_plain_number_ticks_a_reader_can_read():
    from ampgan.bench.output import plain_log_ticks, plain_tick_text

    assert plain_log_ticks(45, 720) == [50.0, 100.0, 200.0, 500.0]
    narrow = plain_log_ticks(2090, 3230)
    assert len(narrow) >= 3 and min(narrow) <= 2090 * 1.15 and max(narrow) >= 3230 / 1.15
    assert all(float(f"{t:g}") == t for t in narrow)  # printed as plain numbers
    # a CPU's seconds-long steps per 1000 samples: '3e+06' stood beside '900000' on the axis
    assert [plain_tick_text(t) for t in (0.5, 900.0, 900000.0, 3e6)] == ["0.5", "900", "900,000", "3,000,000"]


def test_the_json_summary_carries_each_configurations_median_and_why_one_has_none():
    from ampgan.cli.bench import bench_summary

    results = {
        "environment": {"hardware_summary": "a CPU"},
        "speedups": [],
        "configs": [
            {"batch_size": 64, "precision": "fp32", "status": "ok", "stats": {"median_s": 0.25}},
            {"batch_size": 64, "precision": "bf16", "status": "too_slow", "reason": "one step took 9 s"},
        ],
    }
    summary = bench_summary(results, Path("out"))
    assert summary["configs"][0]["median_ms"] == 250.0
    assert summary["configs"][1]["median_ms"] is None and summary["configs"][1]["reason"] == "one step took 9 s"


def test_a_signal_during_the_op_trace_stops_it_and_keeps_every_measurement(monkeypatch):
    import os
    import signal

    def trace(spec, dataset, device, log=None, stop_check=None, cycle_s=None):
        os.kill(os.getpid(), signal.SIGINT)  # caught by the bench's guard: recorded, not raised
        assert stop_check()
        return {"op_tables": {}, "op_tables_failed": [{"precision": "fp32", "reason": "not traced: asked to stop"}]}

    monkeypatch.setattr(bench_module, "trace_op_tables", trace)
    spec = BenchSpec(
        base=tiny_config(),
        batch_sizes=(4,),
        precisions=("fp32",),
        warmup=1,
        steps=2,
        min_seconds=0,
        max_seconds=30,  # fp32 alone stops after its 2 rounds; the budget only keeps a loaded machine's warm-up in
        channels_last=(),
    )
    results = run_bench(spec, torch.device("cpu"))
    assert results["incomplete"]["signal"] == "SIGINT" and results["incomplete"]["not_measured"] == []
    assert results["configs"][0]["status"] == "ok" and results["configs"][0]["samples_s"]


def test_a_precision_the_bench_was_not_asked_for_is_no_failure_of_its_trace(tmp_path, capsys, monkeypatch):
    """`ampgan project` of a bench of fp32 alone whose trace failed listed bf16 and fp16 (traced only for the
    projection, left out for time) as failures beside fp32's own: 'fp16: not traced: --precisions left it out'."""
    from ampgan.bench.output import write_results

    left_out = "not traced: --precisions left it out and under half the trace's share of the budget was left for it"

    def trace(spec, dataset, device, log=None, stop_check=None, cycle_s=None):
        failed = [{"precision": "fp32", "reason": "RuntimeError: no kernel"}]
        return {
            "op_tables": {},
            "op_tables_failed": failed + [{"precision": p, "reason": left_out} for p in ("bf16", "fp16")],
        }

    monkeypatch.setattr(bench_module, "trace_op_tables", trace)
    spec = BenchSpec(
        base=tiny_config(), batch_sizes=(4,), precisions=("fp32",), warmup=1, steps=2, min_seconds=0, channels_last=()
    )
    write_results(run_bench(spec, torch.device("cpu")), tmp_path / "bench")
    code, _, err = run_cli(capsys, "project", str(tmp_path / "bench"), "--devices", "T4")
    assert code == 2 and "(tracing failed: fp32: RuntimeError: no kernel)" in err and err.count("\n") == 1, err


def test_decisions_that_do_not_fit_their_share_of_the_budget_take_their_defaults(tmp_path, capsys, monkeypatch):
    from conftest import own_decision_cache

    import ampgan.speed.decision as decision
    import ampgan.speed.layout as layout

    own_decision_cache(monkeypatch, tmp_path)
    monkeypatch.setattr(decision, "measure_on_training_step", lambda *a: pytest.fail("precisions measured"))
    monkeypatch.setattr(layout, "measure_layouts_on_training_step", lambda *a: pytest.fail("memory format measured"))
    out = tmp_path / "bench"
    # 2 s asked: the decisions' share (a quarter) fits neither the precisions' 30 s nor a format's 20 s
    code, stdout, err = run_cli(capsys, "bench", *TINY[:-1], "2", "--batch-sizes", "4", "--out", str(out))
    assert code == 0, err
    assert "decisions: the precisions not measured: measuring takes up to 30 s, more than the 0.5 s left" in err
    assert "bf16, fp16 timed without it (choose with --precisions)" in err
    assert "decisions: the memory format of fp32 not measured" in err and "fp32 runs NCHW" in err
    results = json.loads((out / "results.json").read_text())
    assert results["spec"]["precisions"] == ["fp32", "bf16", "fp16"] and results["spec"]["channels_last"] == []
    assert {c["precision"] for c in results["configs"]} == {"fp32", "bf16", "fp16"}
    (line,) = [line for line in err.splitlines() if line.startswith("bench: ")]
    assert "s in all; --max-seconds 2 x 1 batch size(s) = 2 s of measuring, and shares of it on top" in line
    assert re.search(r"decisions \d+\.\d s of its 0.5 s.*measuring \d+\.\d s of its 2 s.*op trace", line)
    assert "skip: --precisions, --channels-last/--no-channels-last, OMP_NUM_THREADS=N for the thread count" in line
    assert set(results["seconds"]) == {"decisions", "compile_times", "building", "measuring", "trace"}


def test_a_first_warm_up_call_longer_than_the_budget_is_too_slow_at_once(monkeypatch):
    from types import SimpleNamespace

    class Contender:  # one call of a lazy model's cycle: 4 s per step on average, 12 s in all
        result = ConfigResult(batch_size=16, precision="bf16")

        def timed_step(self):
            clock.now += 12.0
            return 4.0

    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(deadline, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    warm_up(BenchSpec(warmup=2, steps=2, max_seconds=10.0), Contender())
    assert Contender.result.status == "too_slow" and Contender.result.warmup_call_s == [12.0]  # no second call
    assert "first warm-up call took 12.00 s, more than --max-seconds 10 alone" in Contender.result.reason


def test_a_first_warm_up_call_running_past_the_budget_is_stopped_there():
    import signal
    import time

    class Contender:  # a call that would take 30 s
        result = ConfigResult(batch_size=16, precision="bf16")

        def timed_step(self):
            time.sleep(30)
            return 30.0

    handler = signal.getsignal(signal.SIGALRM)
    started = time.perf_counter()
    warm_up(BenchSpec(warmup=2, steps=2, max_seconds=0.3), Contender())
    assert time.perf_counter() - started < 5
    assert Contender.result.status == "too_slow" and "ran past the 0.3 s left of --max-seconds 0.3" in (
        Contender.result.reason
    )
    assert Contender.result.warmup_call_s == [0.3]  # at least the budget: larger batches foreseen too slow
    assert signal.getsignal(signal.SIGALRM) == handler


def test_a_batch_sizes_warm_ups_share_its_max_seconds_with_its_rounds():
    import time

    class Contender:
        def __init__(self, call_s):
            self.call_s, self.result = call_s, ConfigResult(batch_size=16, precision="fp32")

        def timed_step(self):
            time.sleep(self.call_s)
            return self.call_s

    spec, allowance = BenchSpec(warmup=2, steps=2, max_seconds=1.0), {"left": 1.0}
    first = Contender(0.1)
    warm_up(spec, first, allowance=allowance)
    assert first.result.status == "ok" and 0.7 < allowance["left"] < 0.8  # two calls spent
    slow, left_before = Contender(30), allowance["left"]
    warm_up(spec, slow, allowance=allowance)  # stopped at what was left, not at --max-seconds
    # Stopped at what the others left (its first call, which selects kernels): the budget ran out, which says
    # nothing of its speed; not too slow, and no larger batch size is foreseen too slow from it.
    assert slow.result.status == "out_of_time" and f"ran past the {left_before:.3g} s left" in slow.result.reason
    assert slow.result.reason.startswith("not timed: its first warm-up call") and "give more" in slow.result.reason
    ahead = TooSlowAhead()
    ahead.learn([slow.result])
    assert ahead.foreseen(spec, "fp32", 1024) is None
    assert allowance["left"] < 0.05
    late, allowance["left"] = Contender(0.1), 0.0
    warm_up(spec, late, allowance=allowance)
    assert late.result.status == "out_of_time" and "the warm-ups before it spent" in late.result.reason
    # One call that ran the whole --max-seconds is a verdict on its speed, with or without others before it.
    whole, allowance["left"] = Contender(30), spec.max_seconds
    warm_up(spec, whole, allowance=allowance)
    assert whole.result.status == "too_slow"


def test_an_op_trace_cycle_slower_than_foreseen_is_stopped_at_the_trace_deadline(monkeypatch):
    import time

    import ampgan.bench.ops as ops
    from ampgan.errors import AmpganError

    monkeypatch.setattr(ops, "trace_cycle", lambda timer, batch: time.sleep(30))
    started = time.perf_counter()
    with pytest.raises(AmpganError, match="a fp32 cycle at batch 8 ran past the trace's share of the bench's budget"):
        ops._settled_trace(None, (torch.zeros(8, 1), None), "fp32", deadline=started + 0.3, first_cycle_s=0.01)
    assert time.perf_counter() - started < 5


def test_a_step_with_random_branches_settles_into_one_trace(monkeypatch):
    """StyleGAN2's style mixing (a second mapping pass with probability 0.9, drawn from torch's global RNG) made
    every traced cycle's operations differ, so its step was never traced (and the line blamed the loss scaler)."""
    import ampgan.bench.ops as ops

    def random_branches(timer, batch):
        op = f"branch {int(torch.randint(2**30, ()))}"
        return [ops.OpRecord(op=op, unit="memory", dtype="float32", alignment=1, flops=0.0, bytes=0.0, optimizer=False)]

    monkeypatch.setattr(ops, "trace_cycle", random_branches)
    before = torch.random.get_rng_state()
    assert ops._settled_trace(None, (torch.zeros(8, 1), None), "fp32")[0].op.startswith("branch ")
    assert torch.equal(torch.random.get_rng_state(), before)  # the run's own random state is left as it was


def test_counting_the_step_s_flops_is_spent_from_the_batch_size_s_budget_and_done_once(monkeypatch):
    """Counting a step's FLOPs runs the whole cycle under a counter: a StyleGAN2-like cycle's counts, once per
    precision, took 8 s of a 10 s bench outside its --max-seconds. They are counted once per batch size (the FLOPs
    follow the shapes) and what counting takes comes out of what the measured rounds may spend."""
    from types import SimpleNamespace

    from ampgan.bench.deadline import TooSlowAhead
    from ampgan.precisions import BF16, FP32

    clock, counted, seen = SimpleNamespace(now=0.0), [], {}
    monkeypatch.setattr(deadline, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    monkeypatch.setattr(measure, "time", SimpleNamespace(perf_counter=lambda: clock.now))

    class Counted(measure.Contender):
        def __init__(self, spec, precision, batch_size, dataset, device):
            self.result, self.timer, self.steps = ConfigResult(batch_size=batch_size, precision=precision), None, 0

        def timed_step(self):
            self.steps += 1
            clock.now += 0.1
            return 0.1

        def peak_memory_bytes(self):
            return 0

        def count_step_flops(self):
            counted.append(self.result.precision)
            clock.now += 3.0
            return {"conv": 10}

        def finish(self):
            return self.result

    monkeypatch.setattr(measure, "Contender", Counted)
    monkeypatch.setattr(measure, "_time_interleaved", lambda spec, contenders, check, seconds: seen.update(s=seconds))
    monkeypatch.setattr(measure, "release_memory", lambda device: None)
    spec = BenchSpec(warmup=2, steps=2, max_seconds=10.0)
    finished, _ = measure.measure_batch_size(
        spec, (FP32, BF16), 16, None, torch.device("cpu"), lambda: None, TooSlowAhead(), {}
    )
    assert counted == [FP32] and [r.flops_by_kind for r in finished] == [{"conv": 10}] * 2
    assert [r.flops_per_step for r in finished] == [10, 10]
    warm_ups = sum(len(r.warmup_s) for r in finished)
    assert seen["s"] == pytest.approx(10.0 - 0.1 * warm_ups - 3.0)

    # When what counting took leaves the rounds one round, the rows say why they carry no speedup interval
    # (results.speedups drops a pair without one): they were 'ok' with 1 sample and no reason.
    def one_round(spec, contenders, check, seconds):
        for contender in contenders:
            contender.result.samples_s = [0.1]

    monkeypatch.setattr(measure, "_time_interleaved", one_round)
    counted.clear()
    finished, _ = measure.measure_batch_size(
        spec, (FP32, BF16), 16, None, torch.device("cpu"), lambda: None, TooSlowAhead(), {}
    )
    assert all(r.status == "ok" and r.reason.startswith("1 measured round(s), no speedup interval") for r in finished)
    assert "the warm-ups and counting the step's FLOPs (3.0 s) spent --max-seconds 10; give more" in finished[0].reason
    # one precision has no speedup pair to lose: its row says nothing of one
    finished, _ = measure.measure_batch_size(
        spec, (FP32,), 16, None, torch.device("cpu"), lambda: None, TooSlowAhead(), {}
    )
    assert finished[0].status == "ok" and not finished[0].reason


def test_a_compiled_precisions_first_call_is_not_stopped_but_nothing_left_starts_no_compile(monkeypatch):
    """A compiled step's first call (its compile) is neither stopped at what is left of --max-seconds nor
    charged to it; a later call is. With nothing left, not even the compile is started."""
    from types import SimpleNamespace

    class Contender:  # the first call compiles for 30 s, then each call takes 0.05 s
        def __init__(self):
            self.result, self.calls = ConfigResult(batch_size=16, precision="bf16"), 0

        def timed_step(self):
            self.calls += 1
            clock.now += 30.0 if self.calls == 1 else 0.05
            return 30.0 if self.calls == 1 else 0.05

    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(deadline, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    spec, allowance = BenchSpec(warmup=2, steps=2, max_seconds=1.0, compile=("bf16",)), {"left": 1.0}
    compiled = Contender()
    warm_up(spec, compiled, allowance=allowance)
    assert compiled.result.status == "ok" and compiled.result.warmup_s == [30.0, 0.05]
    assert allowance["left"] == pytest.approx(0.95)  # the compile not charged, the second call charged
    late, allowance["left"] = Contender(), 0.0
    warm_up(spec, late, allowance=allowance)
    assert late.calls == 0 and late.result.status == "out_of_time" and "spent" in late.result.reason
    # Without a shared allowance (a decision's own timer): the compile is not judged against --max-seconds.
    alone = Contender()
    warm_up(spec, alone)
    assert alone.result.status == "ok" and alone.calls == 2


# Each documented flag of `ampgan bench` (its --help, docs/speed.md) in at least one combination, on a
# width-8 model at batch 4, one precision each (a lone precision stops after its --steps rounds; --max-seconds
# 60 only keeps a loaded machine's warm-ups in): the plumbing of each in seconds. Compiling uses the eager
# backend (dynamo captures the graphs, no code is generated: an inductor compile takes minutes here); the
# compile-time probes (fresh processes) are tests/test_compile_cache.py's and injected here. Elsewhere: two
# precisions and --attainable's rows and a refused --sweep cell (test_where_it_pays.py), the default
# precisions and memory format (test_decisions_that_do_not_fit...), --from, torchrun (test_distributed.py).
_FLAG_COMBINATIONS = {
    "compile-channels-last-json": ["--compile", "--channels-last", "--precisions", "bf16", "--json"],
    "attainable-peak-no-trace": ["--attainable", "--precisions", "fp32", "--set", "bench.peak_tflops=2", "--no-trace"],
    "sweep-json": ["--sweep", "model.width=4,8", "--precisions", "fp32", "--no-channels-last", "--json"],
}


@pytest.mark.parametrize("flags", list(_FLAG_COMBINATIONS.values()), ids=list(_FLAG_COMBINATIONS))
def test_every_documented_flag_of_bench_runs(tmp_path, capsys, monkeypatch, flags):
    monkeypatch.setenv("AMPGAN_COMPILE_BACKEND", "eager")
    monkeypatch.setattr(
        bench_module, "measure_compile_times", lambda config: {"cold_s": 1.0, "warm_s": 0.5, "compiled_step_s": 0.01}
    )
    out = tmp_path / "bench"
    sizes = [] if "--batch-sizes" in flags else ["--batch-sizes", "4"]
    code, stdout, err = run_cli(capsys, "bench", *TINY[:-1], "60", *sizes, *flags, "--out", str(out))
    assert code == 0 and "Traceback" not in err, err[-3000:]
    if "--sweep" in flags:
        cells = json.loads((out / "sweep.json").read_text())["cells"]
        assert [c["status"] for c in cells] == ["ok", "ok"]
        documents = [json.loads((out / c["results"]).read_text()) for c in cells]
        assert json.loads(stdout)["sweep"] == str(out / "sweep.json")
    else:
        documents = [json.loads((out / "results.json").read_text())]
        if "--json" in flags:
            assert json.loads(stdout)["results"] == str(out / "results.json")
    for results in documents:
        assert results["configs"] and all(c["status"] == "ok" and c["samples_s"] for c in results["configs"])
        spec = results["spec"]
        if "--compile" in flags:
            assert set(spec["compile"]) >= set(spec["precisions"]) and set(results["compile_times"]) == set(
                spec["precisions"]
            )
            assert all(c["compile_s"] > 0 for c in results["configs"])
        if "--channels-last" in flags:
            assert set(spec["channels_last"]) >= set(spec["precisions"])
        if "--no-channels-last" in flags:
            assert spec["channels_last"] == []
        if "--attainable" in flags:
            assert all(c["attainable"]["step_s"] > 0 for c in results["configs"])
        if "bench.peak_tflops=2" in flags:
            assert {p["source"] for p in results["peaks"].values()} == {"bench.peak_tflops"}


@pytest.mark.parametrize(
    ("statuses", "failed"),
    [
        (["error", "error"], True),
        (["error", "too_slow"], True),  # nothing measured, and something broke
        (["oom", "error"], True),
        (["ok", "error"], False),  # a measured row: the failed one is a result beside it
        (["too_slow", "too_slow"], False),  # answers about this machine: more time would measure them
        (["oom"], False),
        ([], False),
    ],
)
def test_a_bench_that_measured_nothing_because_it_failed_is_a_failure(statuses, failed):
    from ampgan.bench.to_folder import measured_nothing

    configs = [
        {"batch_size": 4, "precision": "fp32", "status": s, "reason": f"why {i}"} for i, s in enumerate(statuses)
    ]
    found = measured_nothing(configs)
    assert (found is not None) == failed
    if failed:
        assert found.startswith("the bench measured no configuration (fp32@4: ") and "why 0" in found


def _every_step_fails(monkeypatch):
    def broken(self):
        raise RuntimeError("the step broke\nsecond line")

    monkeypatch.setattr(measure.Contender, "timed_step", broken)


_FAILED = "the bench measured no configuration (fp32@4: error (the step broke)"


@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["table", "json"])
def test_a_bench_whose_every_configuration_failed_exits_2_and_keeps_its_results(
    tmp_path, capsys, monkeypatch, json_flag
):
    _every_step_fails(monkeypatch)
    out = tmp_path / "bench"
    code, stdout, err = run_cli(
        capsys, "bench", *TINY, "--batch-sizes", "4,8", "--precisions", "fp32", *json_flag, "--out", str(out)
    )
    assert code == 2 and "Traceback" not in err and stdout == ""
    (line,) = [line for line in err.splitlines() if line.startswith("error")]
    assert line.startswith(f"error: {_FAILED}; fp32@8: error (the step broke)): its results are in {out}")
    assert [c["status"] for c in json.loads((out / "results.json").read_text())["configs"]] == ["error", "error"]
    with pytest.raises(AmpganError, match="^" + re.escape(_FAILED)):
        ampgan.bench(
            "acgan",
            tmp_path / "api",
            settings={"model.width": 8, "model.z_dim": 16, "compute.device": "cpu"},
            batch_sizes=[4],
            precisions=["fp32"],
            warmup=1,
            min_seconds=0,
            max_seconds=5,
        )
    assert (tmp_path / "api" / "results.json").is_file()


def test_a_sweep_whose_every_cell_failed_exits_2_and_keeps_its_cells(tmp_path, capsys, monkeypatch):
    _every_step_fails(monkeypatch)
    out = tmp_path / "sweep"
    command = ("bench", *TINY, "--batch-sizes", "4", "--precisions", "fp32", "--out", str(out))
    code, _, err = run_cli(capsys, *command, "--sweep", "model.width=4,0")  # the second cell: refused
    assert code == 2 and "Traceback" not in err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(
            "error: the bench measured no configuration (model.width=4 fp32@4: error (the step broke); "
            "model.width=0: error ("
        )
    )
    assert [c["status"] for c in json.loads((out / "sweep.json").read_text())["cells"]] == ["ok", "error"]
    # A sweep with a measured cell beside a refused one exits 0 (test_where_it_pays.py).


def test_a_study_whose_bench_failed_everywhere_stops_before_training_and_benches_again(tmp_path, monkeypatch):
    """The study's race stage (study/race.py), without the stages before it: a bench that failed on every
    configuration is one line and not recorded as done, so the same command benches again."""
    from ampgan.data import load_dataset
    from ampgan.study.progress import open_progress
    from ampgan.study.race import bench_once
    from ampgan.study.spec import COMPARE_BENCH, CompareSpec

    spec = CompareSpec(
        base=tiny_config(),
        bench=replace(COMPARE_BENCH, batch_sizes=(8,), steps=2, min_seconds=1.0, max_seconds=3.0),
        channels_last=(),
    )
    dataset = load_dataset(spec.base.data, seed=spec.seed)
    out = tmp_path / "study"
    progress = open_progress(out, spec.to_document(("fp32",)))
    _every_step_fails(monkeypatch)
    with pytest.raises(AmpganError) as failed:
        bench_once(spec, dataset, ("fp32",), torch.device("cpu"), lambda line: None, out, progress)
    assert str(failed.value) == (
        f"the bench measured no configuration (fp32@8: error (the step broke)): the study stopped before training; "
        f"see {out / 'bench'}"
    )
    assert (out / "bench" / "results.json").is_file() and not progress.bench_done
    monkeypatch.undo()
    results = bench_once(spec, dataset, ("fp32",), torch.device("cpu"), lambda line: None, out, progress)
    # Measured again (too_slow on a loaded machine is an answer too: the study would train on).
    assert results["configs"][0]["status"] in ("ok", "too_slow") and progress.bench_done
    # Read back on resume; deleted since (or its folder), one line: the runs race on its step times. A resume
    # said 'is not written yet: ampgan process <its own pid> is writing', then 'run ampgan bench first'.
    read_back = bench_once(spec, dataset, ("fp32",), torch.device("cpu"), lambda line: None, out, progress)
    assert read_back == json.loads((out / "bench" / "results.json").read_text())
    for gone in (out / "bench" / "results.json", out / "bench"):
        shutil.rmtree(gone) if gone.is_dir() else gone.unlink()
        with pytest.raises(AmpganError, match="results.json is gone since the study measured it.*--overwrite"):
            bench_once(spec, dataset, ("fp32",), torch.device("cpu"), lambda line: None, out, progress)


@pytest.mark.parametrize("failing_rank", [0, 1])
def test_a_single_process_twin_out_of_memory_is_an_oom_row_on_every_rank(monkeypatch, failing_rank):
    """Under DDP each configuration is also timed without it (its twin, a second state beside the data-parallel
    one): a twin that runs out of memory on this rank, or on another (its answer injected), makes an oom row,
    agreed before any round; the other precision is measured as before. Two ranks are simulated in one process."""
    from ampgan.training.distributed import World

    real_timer = measure.StepTimer

    def timer(config, dataset, device, data_parallel=True, batch=None, across_ranks=True):
        if batch is not None and config.precision.name == "fp32" and failing_rank == 0:  # the twin alone
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_timer(config, dataset, device, data_parallel, batch, across_ranks)

    # Rank 1's answers, in the order the twins ask: its fp32 twin (out of memory when it is the failing rank), its
    # bf16 twin. (What the rounds take from rank 0, rank_zeros, is this process's own value here.)
    answers = iter([("oom", "CUDA out of memory. Tried to allocate 3.00 GiB") if failing_rank == 1 else None])
    gathered = []

    def gather(value):
        gathered.append(value)
        return [value, next(answers, None)]

    for module in (measure, twin):
        monkeypatch.setattr(module, "StepTimer", timer)
    monkeypatch.setattr(twin, "gather_objects", gather)
    for module in (bench_module, measure, twin):
        monkeypatch.setattr(module, "world", lambda: World(rank=0, size=2, local_rank=0, local_size=2))
    monkeypatch.setattr(measure, "agreed_local_trial", lambda *args: None)  # the trial step: its own test
    spec = BenchSpec(
        base=tiny_config(),
        batch_sizes=(4,),
        precisions=("fp32", "bf16"),
        warmup=1,
        steps=2,
        min_seconds=0,
        max_seconds=60,
        channels_last=(),
    )
    results = run_bench(spec, torch.device("cpu"))
    fp32, bf16 = results["configs"]
    assert (
        fp32["status"] == "oom"
        and fp32["samples_s"] == []
        and fp32["reason"].startswith(f"rank {failing_rank}: its single-process twin")
    )
    assert "out of memory" in fp32["reason"]
    assert gathered[:2] == [
        ("oom", "CUDA out of memory. Tried to allocate 2.00 GiB") if failing_rank == 0 else None,
        None,
    ]
    assert bf16["status"] == "ok" and len(bf16["local_samples_s"]) == len(bf16["samples_s"]) >= 2


@pytest.mark.real_op_trace  # the real trace_op_tables, its tracing stood in for below
def test_a_precision_left_out_of_the_op_trace_for_time_names_the_max_seconds_that_would_fit_it(monkeypatch):
    """A user's GAN at its real size foresees minutes per trace cycle: the line says which --max-seconds
    holds its six small-batch cycles in the trace's half of the budget, not only 'give a larger' one."""
    import ampgan.bench.op_tables as op_tables
    from ampgan.bench.ops import OverBudget

    spec = BenchSpec(base=tiny_config(), batch_sizes=(4, 8), precisions=("fp32",), max_seconds=10)
    # asked for, nothing traced before it: 6 cycles of 100 s in a share of max_seconds x 2 sizes x 0.5
    assert op_tables._what_fits(spec, op_tables.TRACE_SHARE, 0.0, 100.0, True).startswith(
        "--max-seconds 600 would fit its trace"
    )
    # not asked for: it also needs half the share left when it starts (400 s spent -> a share of 800 s)
    assert op_tables._what_fits(spec, op_tables.TRACE_SHARE, 400.0, 10.0, False).startswith("--max-seconds 800 ")
    assert op_tables._what_fits(spec, op_tables.TRACE_SHARE, 400.0, 100.0, False).startswith("--max-seconds 1000 ")
    assert op_tables._what_fits(spec, op_tables.TRACE_SHARE, 0.0, None, True) == "give a larger --max-seconds"

    def stopped(spec, name, dataset, device, deadline, foreseen):
        raise OverBudget(f"not traced: another {name} cycle at batch 8 (100.0 s) would run past", more_s=100.0)

    monkeypatch.setattr(op_tables, "_traced", stopped)
    monkeypatch.setattr(op_tables, "step_memory", lambda spec, dataset: None)
    result = op_tables.trace_op_tables(spec, None, torch.device("cpu"), cycle_s={"fp32": 1e-3})
    reasons = {failed["precision"]: failed["reason"] for failed in result["op_tables_failed"]}
    # measured, not foreseen: the time spent and the cycle still needed, in a share of 0.5 x 2 sizes per second
    assert re.search(r"would run past; --max-seconds 10[01] at the least$", reasons["fp32"]), reasons["fp32"]
    result = op_tables.trace_op_tables(spec, None, torch.device("cpu"), cycle_s={"fp32": 100.0})
    reasons = {failed["precision"]: failed["reason"] for failed in result["op_tables_failed"]}
    assert "foresees 100.0 s per trace cycle" in reasons["fp32"]
    assert re.search(r"; --max-seconds 60[01] would fit", reasons["fp32"])  # 600 after the microseconds spent
    assert all("--max-seconds" in reason for reason in reasons.values()), reasons


def test_each_results_csv_row_says_where_and_with_what_it_was_measured(tmp_path):
    """results.csv read without its results.json named no machine, model or versions: each row says them now
    (a committed bench's results, rendered again)."""
    from ampgan.bench.output import load_results, render

    committed = Path(__file__).resolve().parents[1] / "benchmarks/results/bench-intel-amx-2core-2026-11-30"
    render(load_results(committed / "results.json"), tmp_path)
    with open(tmp_path / "results.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) > 1 and {row["measured_on"] for row in rows} == {
        f"measured on {stamp_text(load_results(committed / 'results.json'))}"
    }
    assert (
        "Intel" in rows[0]["measured_on"]
        and "model acgan" in rows[0]["measured_on"]
        and "torch " in rows[0]["measured_on"]
    )


def test_a_figure_s_line_for_untimed_batches_gives_one_time_or_a_range():
    """The report's Figure 1 said 'fp32 not timed at batch 256: too slow, one step took 7.56-7.56 s'."""
    from ampgan.bench.output import _not_plotted

    def results(*warmups):
        configs = [
            {"precision": "fp32", "batch_size": 256 * 2**i, "status": "too_slow", "warmup_s": [w]}
            for i, w in enumerate(warmups)
        ]
        return {"spec": {"precisions": ["fp32"]}, "configs": configs}

    assert _not_plotted(results(7.561)) == ["fp32 not timed at batch 256: too slow, one step took 7.56 s"]
    assert _not_plotted(results(31.2, 7.561, 7.5612)) == [
        "fp32 not timed at batch 256, 512, 1024: too slow, one step took 7.56-31.2 s"
    ]
    # A configuration the budget ran out on has no step time to show (the README's answer read 'bf16 not timed
    # at batch 256: too slow, one step took 15.5 s' of a first call, kernel selection, stopped on a loaded machine)
    stopped = {"precision": "fp32", "batch_size": 256, "status": "out_of_time", "warmup_s": [15.5]}
    assert _not_plotted({"spec": {"precisions": ["fp32"]}, "configs": [stopped]}) == [
        "fp32 not timed at batch 256: out of time (give more --max-seconds)"
    ]


def test_a_batch_size_batch_norm_cannot_train_at_is_its_own_row_not_the_whole_bench(tmp_path, capsys):
    """The check that a G draws the data's shape, made before anything is measured, also raises batch norm's
    'cannot train at --batch-size 1': at the first batch size it stopped a bench whose batch 4 measures. It
    is made at the largest; batch 1 is its own error row."""
    out = tmp_path / "bench"
    code, _, err = run_cli(
        capsys, "bench", *TINY, "--batch-sizes", "1,4", "--precisions", "fp32", "--no-trace", "--out", str(out)
    )
    assert "Traceback" not in err and (out / "results.json").exists(), err  # measured, not stopped before
    rows = {c["batch_size"]: c for c in json.loads((out / "results.json").read_text())["configs"]}
    assert rows[1]["status"] == "error" and "needs at least 2 images per process" in rows[1]["reason"]
    # batch 4 was run (on a crowded machine its steps may be foreseen past --max-seconds: too_slow, not error)
    assert rows[4]["status"] in ("ok", "too_slow") and code == (0 if rows[4]["status"] == "ok" else 2), err


def _cycle_contenders(monkeypatch, call_s: dict, clock):
    """Fake contenders whose call runs a 3-step cycle (call_s[precision] of wall time on `clock`) and returns one
    step's mean, as StepTimer does for a lazily regularised GAN; the speedup history kept in memory."""
    from types import SimpleNamespace

    class Cycle(measure.Contender):
        def __init__(self, spec, precision, batch_size, dataset, device):
            self.result = ConfigResult(batch_size=batch_size, precision=precision)
            self.timer = SimpleNamespace(last_call_s=0.0, data_parallel=False, config=None, skipped_steps=lambda: 0)
            self.device, self.spent_s = device, 0.0

        def timed_step(self):
            clock.now += call_s[self.result.precision]
            self.timer.last_call_s = call_s[self.result.precision]
            return call_s[self.result.precision] / 3

        def peak_memory_bytes(self):
            return 0

        def count_step_flops(self):
            return {"conv": 10}

    class History:
        def between_run_sd(self, key):
            return (0.015, "default")

        def record(self, key, estimate):
            pass

    for module in (deadline, measure):
        monkeypatch.setattr(module, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    monkeypatch.setattr(measure, "Contender", Cycle)
    monkeypatch.setattr(measure, "SpeedupHistory", History)
    monkeypatch.setattr(measure, "machine_key", lambda device, config: {})
    monkeypatch.setattr(measure, "release_memory", lambda device: None)


def test_a_batch_sizes_rounds_keep_to_its_max_seconds_counting_whole_cycles(monkeypatch):
    """t-gan3: a StyleGAN2-like bench measured 69.2 s for --max-seconds 60. Each call runs the cycle's 3 kinds of
    step and returns one step's mean; the rounds counted the means (a third of what they spent) and started a
    round whenever the cap was not yet reached. Now the warm-ups and rounds together stay within --max-seconds."""
    from types import SimpleNamespace

    from ampgan.bench.deadline import TooSlowAhead
    from ampgan.precisions import BF16, FP32

    clock, lines = SimpleNamespace(now=0.0), []
    _cycle_contenders(monkeypatch, {FP32: 0.9, BF16: 0.6}, clock)
    spec = BenchSpec(warmup=2, steps=2, max_seconds=10.0, min_seconds=100.0)
    finished, rounds = measure.measure_batch_size(
        spec, (FP32, BF16), 16, None, torch.device("cpu"), lambda: None, TooSlowAhead(), {}, lines.append
    )
    assert clock.now <= 10.0 and clock.now > 10.0 - 1.5  # within the cap, less than a round short of it
    assert rounds.rounds == 4 and rounds.seconds == pytest.approx(6.0)  # 4 rounds of 1.5 s after 3 s of warm-ups
    assert finished[0].samples_s == [pytest.approx(0.3)] * 4  # each sample stays one step's mean
    assert lines == []  # the two rounds fitted: nothing to say


def test_a_speedup_that_is_no_answer_is_not_learned_as_the_spread_between_runs(monkeypatch):
    """Every bench adds its speedups to the between-run history (speed/history.py), whose spread widens later
    intervals: an estimate from rounds that settled nothing (a band wider than 2x) is that run's own noise."""
    from types import SimpleNamespace

    from ampgan.bench.deadline import TooSlowAhead
    from ampgan.precisions import BF16, FP32
    from ampgan.speed.intervals import answers
    from ampgan.system import cpu_tuning

    clock, recorded = SimpleNamespace(now=0.0), []
    _cycle_contenders(monkeypatch, {FP32: 0.9, BF16: 0.6}, clock)
    plain, swing = measure.Contender.timed_step, iter([4.0, 0.25] * 20)
    monkeypatch.setattr(
        measure.Contender,
        "timed_step",
        lambda self: plain(self) * (next(swing) if self.result.precision == BF16 else 1),
    )
    monkeypatch.setattr(cpu_tuning, "others_running", lambda: 0)  # a quiet machine: the answer would be kept
    history = SimpleNamespace(
        between_run_sd=lambda key: (0.015, "default"), record=lambda *entry: recorded.append(entry)
    )
    monkeypatch.setattr(measure, "SpeedupHistory", lambda: history)
    spec = BenchSpec(warmup=2, steps=2, max_seconds=10.0)
    _, rounds = measure.measure_batch_size(
        spec, (FP32, BF16), 16, None, torch.device("cpu"), lambda: None, TooSlowAhead(), {}, lambda line: None
    )
    interval = rounds.intervals[BF16]
    assert rounds.machine_answer and not answers(interval.low, interval.high)
    assert recorded == []


def test_a_bench_says_before_its_rounds_that_the_two_they_need_run_past_max_seconds(monkeypatch):
    from types import SimpleNamespace

    from ampgan.bench.deadline import TooSlowAhead
    from ampgan.precisions import BF16, FP32

    clock, lines = SimpleNamespace(now=0.0), []
    _cycle_contenders(monkeypatch, {FP32: 2.0, BF16: 1.5}, clock)
    spec = BenchSpec(warmup=2, steps=2, max_seconds=10.0)
    finished, rounds = measure.measure_batch_size(
        spec, (FP32, BF16), 16, None, torch.device("cpu"), lambda: None, TooSlowAhead(), {}, lines.append
    )
    # Warm-ups spent 7 s of 10; two rounds of 3.5 s need 7 s: said before, then run (a speedup needs two).
    assert lines == [
        "batch 16: the 2 measured rounds a speedup needs take about 7.0 s (one call of each precision, 3.5 s, from "
        "the warm-ups), more than the 3.0 s that warm-ups and counting (7.0 s) left of --max-seconds 10: measuring "
        "will run about 4 s past it (--max-seconds 14 would keep it)"
    ]
    assert rounds.rounds == 2 and clock.now == pytest.approx(14.0)


def test_a_too_slow_verdicts_crowding_is_rank_zeros_on_every_rank(monkeypatch):
    """Under torchrun each rank's threads, cores and load may differ, and whether a precision is later foreseen too
    slow (a branch with a collective in it) must be alike everywhere: the verdict's crowding is rank 0's, whatever
    this rank sees."""
    from ampgan.bench import deadline

    seen = []

    def rank_zeros(value):  # rank 0 saw 2 threads on 2 cores with 3 others running; this rank, an idle machine
        seen.append(value)
        return (2, 2, 3)

    monkeypatch.setattr(deadline, "rank_zeros", rank_zeros)
    monkeypatch.setattr(deadline.cpu_tuning, "others_running", lambda: 0)
    result = ConfigResult(batch_size=64, precision="bf16", reason="2 steps in a row took 9 s")
    deadline._mark_if_crowded(result)
    assert seen and len(seen[0]) == 3  # this rank's (threads, cores, others) were handed to rank_zeros
    assert result.under_load == "3 other threads running beside 2 of ours on 2 cores"
    assert "measured under load" in result.reason
    monkeypatch.setattr(deadline, "rank_zeros", lambda value: (2, 2, 0))  # rank 0's cores were free
    calm = ConfigResult(batch_size=64, precision="bf16", reason="2 steps in a row took 9 s")
    deadline._mark_if_crowded(calm)
    assert calm.under_load == "" and calm.reason == "2 steps in a row took 9 s"
