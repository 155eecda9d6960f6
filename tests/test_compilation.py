"""The compile decision (speed/compilation.py): compile when the measured gain repays the compile
time over the run's length; measure only runs long enough to repay a first compile.

Timings are injected (an imagined machine per test); one test compiles the real step with the
eager backend (graph capture, no code generation) to check the measuring plumbing.
"""

import json
import random

import pytest
from conftest import CPU, own_decision_cache, run_cli, run_short_compare, tiny_config

from ampgan.speed.cache import DecisionCache
from ampgan.speed.compilation import (
    CANNOT_COMPILE,
    COMPILED,
    EAGER,
    MEASURE_FROM_RUN_S,
    CompileDecision,
    CompileMeasurement,
    CompileProbe,
    TrainingStepCompileProbe,
    decide_compile,
    expected_run_s,
)
from ampgan.speed.decision import DECISION_RULE
from ampgan.speed.rounds import TIE_MAX_ROUNDS, measure_rounds

TINY = [
    "--dataset",
    "synthetic",
    "--width",
    "8",
    "--set",
    "model.z_dim=16",
    "--batch-size",
    "8",
    "--device",
    "cpu",
    "--no-channels-last",
]


class Machine(CompileProbe):
    """An eager step of `eager_s`, a compiled one of `compiled_s` (+-noise, seeded), `compile_s` to compile."""

    def __init__(self, eager_s=0.100, compiled_s=0.080, compile_s=8.0, noise=0.02, fails=None):
        self.eager_s, self.compiled_s, self.compile_s, self.noise, self.fails = (
            eager_s,
            compiled_s,
            compile_s,
            noise,
            fails,
        )
        self.measured = 0
        self.estimated = 0

    def eager_step_s(self):
        self.estimated += 1
        return self.eager_s

    def measure(self):
        self.measured += 1
        if self.fails:
            raise self.fails
        times = {EAGER: self.eager_s, COMPILED: self.compiled_s}

        def timer(name):
            rng = random.Random(name)
            return lambda: times[name] * rng.uniform(1 - self.noise, 1 + self.noise)

        rounds = measure_rounds({name: timer(name) for name in times}, EAGER, DECISION_RULE)
        return CompileMeasurement(rounds, first_compile_s=60.0, compile_s=self.compile_s)


def decide(machine, steps=None, seconds=None, cache=None, key=None):
    return decide_compile("bf16", 64, key or {"machine": "amx"}, (steps, seconds), machine, cache)


def test_a_long_run_compiles_when_the_gain_repays_the_compile_time():
    machine = Machine(eager_s=0.100, compiled_s=0.080, compile_s=8.0)
    compile_it, decision = decide(machine, seconds=420.0)
    assert compile_it and machine.measured == 1 and decision.verdict == "faster"
    # 8 s / (1 - 1/1.25) = 40 s at the estimate; at the interval's low end a little more.
    assert 40.0 <= decision.break_even_s < 48.0
    assert decision.compile_s == 8.0 and decision.first_compile_s == 60.0


def test_a_gain_that_cannot_repay_the_compile_time_keeps_the_run_eager():
    # 8% faster, 30 s to compile: at the interval's low end (about 1.05, the between-run spread
    # included) 30 / (1 - 1/1.05) = about 630 s, longer than the 7-minute run.
    compile_it, decision = decide(
        Machine(eager_s=0.100, compiled_s=0.100 / 1.08, compile_s=30.0, noise=0.002), seconds=420.0
    )
    assert decision.verdict == "faster" and decision.break_even_s > 420.0 and not compile_it
    assert "pays after" in decision.describe()


def test_a_compiled_step_no_faster_never_pays():
    compile_it, decision = decide(Machine(eager_s=0.100, compiled_s=0.100, noise=0.05), seconds=3600.0)
    assert not compile_it and decision.verdict == "no clear difference" and decision.break_even_s is None
    assert "never pays" in decision.describe()
    compile_it, decision = decide(Machine(eager_s=0.100, compiled_s=0.140), seconds=3600.0)
    assert not compile_it and decision.verdict == "slower"


def test_a_short_run_without_a_cached_answer_is_not_measured():
    machine = Machine()
    lines = []
    compile_it, decision = decide_compile("bf16", 64, {"machine": "amx"}, (None, 40.0), machine, None, lines.append)
    assert (compile_it, decision, machine.measured, machine.estimated) == (False, None, 0, 0)
    assert "not measured for a run of about 40 s" in lines[0] and "--compile" in lines[0]
    # A step budget is turned into seconds by timing a few eager steps: 1000 x 0.1 s is short too.
    compile_it, decision = decide(machine, steps=1000)
    assert decision is None and machine.estimated == 1 and machine.measured == 0
    compile_it, decision = decide(machine, steps=10_000)  # 1000 s: measured
    assert compile_it and machine.measured == 1


def test_a_cached_answer_decides_short_runs_too(tmp_path):
    cache = DecisionCache(tmp_path)
    decide(Machine(eager_s=0.100, compiled_s=0.080, compile_s=8.0), seconds=MEASURE_FROM_RUN_S, cache=cache)
    machine = Machine(fails=AssertionError("measured again"))
    compile_it, decision = decide(machine, seconds=120.0, cache=cache)
    assert decision.cached and compile_it and machine.measured == 0 and "[cached, measured" in decision.describe()
    compile_it, _ = decide(machine, seconds=30.0, cache=cache)  # shorter than the break-even
    assert not compile_it
    # A step budget uses the cached eager step: 200 x 0.1 s = 20 s, too short; 2000 steps: 200 s.
    assert decide(machine, steps=200, cache=cache)[0] is False
    assert decide(machine, steps=2000, cache=cache)[0] is True
    assert machine.estimated == 0
    keys = list(json.loads((tmp_path / "precision-decisions.json").read_text())["decisions"])
    assert len(keys) == 1 and '"question": "compile"' in keys[0]
    # Another machine (another key) measures for itself.
    assert not decide(Machine(), seconds=30.0, cache=cache, key={"machine": "zen4"})[1]


def test_a_compiler_failure_trains_eager_with_the_reason_and_is_not_cached(tmp_path):
    cache = DecisionCache(tmp_path)
    compile_it, decision = decide(
        Machine(fails=RuntimeError("CppCompileError: no C++ compiler (g++) found\nmore")), seconds=600.0, cache=cache
    )
    assert not compile_it and decision.verdict == CANNOT_COMPILE
    assert decision.describe() == (
        "bf16 at batch 64: cannot compile here (RuntimeError: CppCompileError: no C++ compiler (g++) found)"
    )
    assert not (tmp_path / "precision-decisions.json").exists()


def test_a_load_change_during_the_measurement_is_used_but_not_cached(tmp_path):
    cache = DecisionCache(tmp_path)

    class Loaded(Machine):
        def measure(self):
            found = super().measure()
            # The eager step slowing by 2x over the rounds: a neighbour's load.
            found.rounds.samples_s[EAGER] = [0.1] * 3 + [0.15] * 3 + [0.2] * 3
            found.rounds.drift = 1.0
            return found

    compile_it, decision = decide(Loaded(), seconds=600.0, cache=cache)
    assert compile_it and decision.verdict == "faster" and "load changed" in decision.note
    assert not (tmp_path / "precision-decisions.json").exists()


def test_run_length_is_the_budget_that_ends_the_run_first():
    assert expected_run_s(1000, None, 0.1) == pytest.approx(100.0)
    assert expected_run_s(1000, 60.0, 0.1) == 60.0
    assert expected_run_s(None, 420.0, 0.1) == 420.0
    assert expected_run_s(None, None, 0.1) is None
    assert CompileDecision(
        "bf16", 64, "faster", 0.1, 0.08, {"estimate": 1.25, "low": 1.25, "high": 1.25, "rounds": 3}, 3, 8.0
    ).pays_for(None)


@pytest.mark.real_compile_measurement
def test_the_real_probe_compiles_the_step_and_times_a_new_run(monkeypatch, tmp_path):
    # The eager backend captures graphs without generating code: the plumbing in seconds.
    monkeypatch.setenv("AMPGAN_COMPILE_BACKEND", "eager")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    from ampgan.data.synthetic import make_synthetic

    dataset = make_synthetic(count=32, num_classes=4, channels=3, image_size=32, seed=0)
    probe = TrainingStepCompileProbe(tiny_config(), dataset, CPU)
    assert probe.eager_step_s() > 0
    from torch._dynamo.utils import counters

    graphs_before = counters["stats"]["unique_graphs"]
    found = probe.measure()
    assert set(found.rounds.samples_s) == {EAGER, COMPILED} and len(found.rounds.samples_s[COMPILED]) >= 3
    assert counters["stats"]["unique_graphs"] > graphs_before  # the compiled timer really captured graphs
    # Graphs run eagerly tie with the eager step: the rounds stop after about TIE_MAX_ROUNDS of them
    # (speed/rounds.py capped_for), not at the decision rule's 30-s cap (some 1,500 rounds of a 20 ms step).
    # Counted in rounds, not seconds: a loaded machine stretches the seconds, not the count.
    rounds = len(found.rounds.samples_s[COMPILED])
    assert found.rounds.stopped_by != "time cap" or rounds <= 3 * TIE_MAX_ROUNDS, (rounds, found.rounds.seconds)
    # Capturing G's and D's graphs takes far longer than a 10 ms step, here and in the fresh process.
    assert found.first_compile_s > 0 and found.compile_s > 0


def test_train_records_the_decision_in_its_config_and_resume_keeps_it(capsys, tmp_path, monkeypatch):
    import ampgan.speed.compilation as compilation

    # An imagined machine where an eager step takes 20 s and a compiled one 16 s: a few real steps stand
    # for runs long enough to be measured.
    monkeypatch.setattr(
        compilation, "compile_probe_for", lambda config, dataset, device: Machine(eager_s=20.0, compiled_s=16.0)
    )
    monkeypatch.setenv("AMPGAN_COMPILE_BACKEND", "eager")
    own_decision_cache(monkeypatch, tmp_path)
    out = tmp_path / "run"
    # 2 steps: a 40-s run there, not measured; eager.
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "2", "--out", str(out), "--quiet")
    assert code == 0 and json.loads((out / "config.json").read_text())["config"]["compute"]["compile"] is False
    # 16 steps there: 320 s, measured (1.25x, 8 s to compile: pays after about 40 s), compiled; the decision printed.
    out2 = tmp_path / "run2"
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "16", "--out", str(out2))
    assert code == 0, err
    assert json.loads((out2 / "config.json").read_text())["config"]["compute"]["compile"] is True
    assert "fp32 at batch 8: compiled " in err and "8.0 s to compile in a new run: pays after" in err
    assert "s of training: compiled" in err
    code, _, err = run_cli(capsys, "train", "--resume", str(out2), "--steps", "18", "--quiet")
    assert code == 0, err
    assert json.loads((out2 / "config.json").read_text())["config"]["compute"]["compile"] is True
    # --no-compile is obeyed without asking.
    monkeypatch.setattr(compilation, "compile_probe_for", lambda *a: Machine(fails=AssertionError("asked")))
    code, _, err = run_cli(
        capsys, "train", *TINY, "--steps", "16", "--no-compile", "--out", str(tmp_path / "run3"), "--quiet"
    )
    assert code == 0, err
    assert json.loads((tmp_path / "run3" / "config.json").read_text())["config"]["compute"]["compile"] is False


def test_compare_compiles_the_precisions_where_it_pays_and_says_so(tmp_path, capsys, monkeypatch):
    import ampgan.speed.compilation as compilation

    # An imagined machine where compiling gains 1.25x in bf16 for 0.1 s of compiling, and nothing in fp32;
    # a 2-s comparison is long enough to be measured here.
    monkeypatch.setattr(compilation, "MEASURE_FROM_RUN_S", 1.0)
    monkeypatch.setattr(
        compilation,
        "compile_probe_for",
        lambda config, dataset, device: (
            Machine(compile_s=0.1) if config.precision.name == "bf16" else Machine(compiled_s=0.100, noise=0.05)
        ),
    )
    monkeypatch.setenv("AMPGAN_COMPILE_BACKEND", "eager")
    own_decision_cache(monkeypatch, tmp_path)
    out = tmp_path / "c"
    code, _, err = run_short_compare(capsys, TINY, out)
    assert code == 0, err
    document = json.loads((out / "compare.json").read_text())
    assert document["spec"]["compile"] == ["bf16"]
    assert document["compile_decisions"]["bf16"]["verdict"] == "faster"
    assert document["compile_decisions"]["fp32"]["break_even_s"] is None
    assert json.loads((out / "runs" / "bf16-seed0" / "config.json").read_text())["config"]["compute"]["compile"] is True
    assert (
        json.loads((out / "runs" / "fp32-seed0" / "config.json").read_text())["config"]["compute"]["compile"] is False
    )
    bench = json.loads((out / "bench" / "results.json").read_text())
    # The bench compiles what the runs compile; their compile times are the decisions' (not measured again).
    assert bench["spec"]["compile"] == ["bf16"] and bench["compile_times"] == {}
    report = (out / "report.md").read_text()
    assert "torch.compile: fp32 eager, bf16 compiled" in report
    assert "compile measured: bf16 at batch 8: compiled" in report and "fp32 at batch 8" in report


def test_the_bench_footer_names_the_compiled_precisions():
    from ampgan.bench.output import compile_text

    spec = {"precisions": ["fp32", "bf16"]}
    assert compile_text(spec | {"compile": ["bf16"]}) == ", compiled: bf16"
    assert compile_text(spec | {"compile": ["fp32", "bf16", "fp16", "tf32"]}) == ", compiled"
    assert compile_text(spec | {"compile": True}) == ", compiled"  # results written before per-precision compiling
    assert compile_text(spec | {"compile": False}) == compile_text(spec | {"compile": []}) == ""


def test_compiling_allows_every_variant_of_the_step(monkeypatch):
    # D runs three ways per step and per precision; torch's default of 8 graphs made dynamo fall back to
    # eager after two precisions at two batch sizes in one process.
    import torch
    from conftest import tiny_state

    from ampgan.training.state import RECOMPILE_LIMIT, wrap_modules

    monkeypatch.setenv("AMPGAN_COMPILE_BACKEND", "eager")
    # config.patch, not monkeypatch: undoing a setattr on dynamo's config module hides the option for
    # every later test in the process.
    with torch._dynamo.config.patch(recompile_limit=8):
        wrap_modules(tiny_state(), compile=True, data_parallel=False)
        assert torch._dynamo.config.recompile_limit == RECOMPILE_LIMIT >= 24


def test_compare_figures_say_how_each_precision_ran():
    from ampgan.study.document import StudySpecRecord
    from ampgan.study.report import _setup_text

    spec = {"precisions": ["fp32", "bf16"], "channels_last": ["bf16"], "compile": ["fp32"]}
    assert _setup_text(StudySpecRecord.from_dict(spec)) == "fp32 NCHW compiled, bf16 channels-last"
    before_both = StudySpecRecord.from_dict({"precisions": ["fp32", "bf16"]})  # comparisons from before both
    assert _setup_text(before_both) == "fp32 NCHW, bf16 NCHW"
