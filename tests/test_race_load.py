"""A race that other work on the machine cannot tilt: the load seen, the threads fitted to it, the race's clock,
each seed's pace against the bench, and decisions taken under load. Loads and timings are injected."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import ampgan.system.cpu_tuning as cpu_tuning
from ampgan.bench.deadline import TooSlowAhead, warm_up
from ampgan.bench.results import ConfigResult
from ampgan.bench.spec import BenchSpec
from ampgan.precisions import BF16, FP32
from ampgan.speed.cache import DecisionCache
from ampgan.speed.decision import decide, measure_with
from ampgan.speed.rounds import UNTIL_DECIDED, StoppingRule, measure_rounds
from ampgan.speed.threads import AS_IS, FEWER, thread_choice
from ampgan.study.document import RaceRecord
from ampgan.study.race import BENCH_CLOCK, WALL_CLOCK, pace_of_seeds, race_clock
from ampgan.study.verdict import _charged_text, _off_pace_lines
from ampgan.system.cpu_tuning import ThreadWatch, _running_threads, fitting_threads, oversubscribed

# --- the load seen ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("running", "own", "others"),
    [(5, ["R", "S", "R"], 3), (2, ["R", "R"], 0), (1, ["R", "R", "S"], 0), (9, [], 9)],
)
def test_other_processes_threads_are_the_runnable_ones_not_ours(running, own, others):
    stat = f"cpu  1 2 3\nprocs_running {running}\nprocs_blocked 0\n"
    assert _running_threads(stat, own) == others


def test_a_proc_stat_without_the_count_is_no_answer():
    with pytest.raises(ValueError):
        _running_threads("cpu 1 2 3\n", ["R"])


@pytest.mark.parametrize(
    ("cores", "others", "most", "fitted"),
    [(2, 0, 2, 2), (2, 1, 2, 1), (2, 6, 2, 1), (8, 3, 8, 5), (8, 3, 4, 4), (2, None, 2, 2)],
)
def test_threads_fitted_leave_the_others_their_cores(cores, others, most, fitted):
    assert fitting_threads(cores, others, most) == fitted


@pytest.mark.parametrize(
    ("threads", "cores", "others", "crowded"),
    [(2, 2, 0, False), (2, 2, 1, True), (1, 2, 1, False), (1, 1, 5, False), (4, 8, 5, True), (2, 2, None, False)],
)
def test_oversubscribed_means_more_runnable_threads_than_cores(threads, cores, others, crowded):
    assert oversubscribed(threads, cores, others) is crowded


# --- the threads while training ---------------------------------------------------------------------------


class _Threads:
    def __init__(self, count: int):
        self.count, self.set_to = count, []

    def get(self) -> int:
        return self.count

    def set(self, count: int) -> None:
        self.count = count
        self.set_to.append(count)


def _watch(threads: _Threads, loads: list[int | None], reference_s=None, active=True):
    said = []
    watch = ThreadWatch(
        reference_s=reference_s,
        active=active,
        say=said.append,
        probe=lambda: loads.pop(0),
        get_threads=threads.get,
        set_threads=threads.set,
        machine_cores=2,
    )
    return watch, said


def _steps(watch, threads: _Threads, seconds_at: dict[int, float], count: int, first: int = 1) -> int:
    """`count` steps on a machine where a step takes `seconds_at[threads]`; the next step's number."""
    for step in range(first, first + count):
        watch.step(seconds_at[threads.count], step)
    return first + count


def test_one_slow_step_does_not_look_at_the_machine():
    threads = _Threads(2)
    watch, said = _watch(threads, loads=[], reference_s=0.072)  # a probe would pop from an empty list
    for step, seconds in enumerate([0.07, 2.7, 0.07, 0.9, 0.07], start=1):
        watch.step(seconds, step)
    assert threads.set_to == [] and said == []


@pytest.mark.parametrize(
    ("seconds_at", "chosen"),
    [
        ({1: 0.12, 2: 2.7}, 1),  # two threads wait for each other beside the busy loop: fewer kept
        ({1: 0.10, 2: 0.1005}, 1),  # a tie goes to fewer
        ({1: 0.12, 2: 0.07}, 2),  # a light neighbour: two threads still faster, kept
    ],
)
def test_a_neighbour_that_slows_two_steps_in_a_row_starts_a_measured_choice_of_threads(seconds_at, chosen):
    threads = _Threads(2)
    watch, said = _watch(threads, loads=[1], reference_s=0.072)
    for step, seconds in enumerate([0.07, 2.7, 2.74], start=1):
        watch.step(seconds, step)
    assert threads.set_to == [1]  # the trial starts at the count that fits
    _steps(watch, threads, seconds_at, 2 * cpu_tuning.TRIAL_STEPS, first=4)
    assert threads.set_to == [1, 2, 1, 2, 1, 2, chosen] and threads.count == chosen  # the two took turns
    (line,) = said
    assert "1 other thread running beside 2 of ours on 2 cores" in line
    assert f"1 thread(s) {seconds_at[1] * 1e3:.0f} ms vs 2 {seconds_at[2] * 1e3:.0f} ms per step" in line
    assert line.endswith(f"threads 2 -> {chosen}")
    assert watch.changes == ([line] if chosen == 1 else [])


def test_the_machine_is_looked_at_every_few_seconds_of_steps_and_threads_come_back_when_faster():
    threads = _Threads(2)
    loads = [2, 0]  # a neighbour seen without any slow step, then the cores free again
    watch, said = _watch(threads, loads=loads, reference_s=0.1)
    per_check = int(cpu_tuning.CHECK_EVERY_S / 0.1) + 1
    step = _steps(watch, threads, {1: 0.1, 2: 0.1}, per_check)  # the first look: a trial, fewer on a tie
    step = _steps(watch, threads, {1: 0.1, 2: 0.1}, 2 * cpu_tuning.TRIAL_STEPS, first=step)
    assert threads.count == 1 and said[-1].endswith("threads 2 -> 1")
    step = _steps(watch, threads, {1: 0.1, 2: 0.06}, per_check + 2 * cpu_tuning.TRIAL_STEPS, first=step)
    assert threads.count == 2 and said[-1].endswith("threads 1 -> 2") and len(watch.changes) == 2
    assert loads == []


def test_a_count_tried_and_not_kept_is_not_tried_again_until_steps_slow_down():
    threads = _Threads(2)
    watch, said = _watch(threads, loads=[1, 1, 1], reference_s=0.1)
    per_check = int(cpu_tuning.CHECK_EVERY_S / 0.1) + 1
    step = _steps(watch, threads, {1: 0.2, 2: 0.1}, per_check + 2 * cpu_tuning.TRIAL_STEPS)
    assert threads.count == 2 and len(said) == 1  # tried, two threads kept
    step = _steps(watch, threads, {1: 0.2, 2: 0.1}, per_check, first=step)  # looked again: no second trial
    assert threads.set_to == [1, 2, 1, 2, 1, 2, 2] and len(said) == 1
    _steps(watch, threads, {1: 0.2, 2: 0.5}, 2 + 2 * cpu_tuning.TRIAL_STEPS, first=step)  # the neighbour grew
    assert threads.count == 1 and said[-1].endswith("threads 2 -> 1")


def test_a_slowdown_with_no_count_left_to_try_is_said_once_in_a_run():
    threads = _Threads(1)
    watch, said = _watch(threads, loads=[3, 3, 3, 3], reference_s=0.072)
    for step, seconds in enumerate([0.3, 0.3, 0.3, 0.3, 0.07, 0.3, 0.3], start=1):
        watch.step(seconds, step)
    assert threads.set_to == [] and len(said) == 1
    assert "300 ms per step against 72 ms (4.2x), with 3 other threads running beside 1 of ours" in said[0]
    assert "already fit" in said[0] and "wall clock carries the slowdown" in said[0]


def test_without_a_reference_the_fastest_step_so_far_is_the_reference():
    threads = _Threads(2)
    watch, said = _watch(threads, loads=[3])
    for step, seconds in enumerate([0.5, 0.1, 0.1, 0.25, 0.25], start=1):  # the first step selects kernels
        watch.step(seconds, step)
    assert threads.set_to == [1]


def test_threads_the_user_fixed_are_never_changed():
    threads = _Threads(2)
    watch, said = _watch(threads, loads=[1, 1, 1], reference_s=0.072, active=False)
    for step in range(1, 100):
        watch.step(2.7, step)
    assert threads.set_to == [] and said == []


# --- the threads before measuring -------------------------------------------------------------------------


def _rounds(as_is_s: float, fewer_s: float):
    rule = StoppingRule(min_rounds=3, max_seconds=5.0, until=UNTIL_DECIDED)
    return measure_rounds({AS_IS: lambda: as_is_s, FEWER: lambda: fewer_s}, AS_IS, rule, load_probe=lambda: None)


def test_free_cores_are_not_measured():
    called = []
    choice = thread_choice(2, 2, 0, None, False, lambda current, fewer: called.append(1))
    assert called == [] and choice["threads"] == 2 and "the cores are free" in choice["reason"]


@pytest.mark.parametrize(
    ("as_is_s", "fewer_s", "chosen"),
    [(2.7, 0.12, 1), (0.1, 0.1, 1), (0.07, 0.2, 2)],  # crowded: fewer wins; a tie: fewer; fewer slower: kept
)
def test_a_crowded_machine_is_measured_and_fewer_threads_kept_unless_slower(as_is_s, fewer_s, chosen):
    asked = []

    def measure(current, fewer):
        asked.append((current, fewer))
        return _rounds(as_is_s, fewer_s)

    choice = thread_choice(2, 2, 3, None, False, measure)
    assert asked == [(2, 1)]
    assert choice["threads"] == chosen and choice["others_running"] == 3
    assert "3 other threads running beside 2 of ours on 2 cores" in choice["reason"]


@pytest.mark.parametrize(("as_is_s", "fewer_s", "measured"), [(4.0, 1.5, False), (2.0, 0.5, True), (0.1, 0.1, True)])
def test_steps_too_long_for_the_cap_keep_fewer_threads_unmeasured_after_the_warm_up(as_is_s, fewer_s, measured):
    """THREADS_RULE's cap is 10 s: a warmed-up round over 5 s is not measured further (it would run far past
    the cap); its warm-ups are the only steps spent."""
    from ampgan.speed.decision import WARMUP_STEPS
    from ampgan.speed.rounds import warmed_up_rounds
    from ampgan.speed.threads import THREADS_RULE

    steps = []

    def timer(name, seconds):
        return lambda: steps.append(name) or seconds

    timers = {AS_IS: timer(AS_IS, as_is_s), FEWER: timer(FEWER, fewer_s)}
    rounds = warmed_up_rounds(timers, AS_IS, THREADS_RULE, WARMUP_STEPS, 0, within_cap=True, load_probe=lambda: None)
    assert (rounds is not None) is measured
    if not measured:
        assert sorted(steps) == [AS_IS, AS_IS, FEWER, FEWER]  # the two warm-up rounds only
        choice = thread_choice(2, 2, 3, None, False, lambda current, fewer: rounds)
        assert choice["threads"] == 1 and choice["measured"] is None
        assert "not measured: a step on each count is too long for the measurement's 10 s cap" in choice["reason"]
    else:
        assert len(steps) > 4 and rounds.rounds >= 2


@pytest.mark.parametrize(("as_is_s", "fewer_s", "steps_run"), [(12.0, 1.0, 1), (6.0, 6.0, 2), (3.0, 4.0, 4)])
def test_warm_up_steps_stop_once_they_have_spent_the_whole_cap(as_is_s, fewer_s, steps_run):
    """A heavy GAN's warm-up steps (a StyleGAN2-like step with its lazy penalties, on a crowded 2-core machine) spent
    41 s choosing the threads under a 10 s cap before the cap was looked at: the warm-up stops at the step that
    spends it."""
    from ampgan.speed.decision import WARMUP_STEPS
    from ampgan.speed.rounds import warmed_up_rounds
    from ampgan.speed.threads import THREADS_RULE

    steps = []
    timers = {AS_IS: lambda: steps.append(AS_IS) or as_is_s, FEWER: lambda: steps.append(FEWER) or fewer_s}
    rounds = warmed_up_rounds(timers, AS_IS, THREADS_RULE, WARMUP_STEPS, 0, within_cap=True, load_probe=lambda: None)
    assert rounds is None and len(steps) == steps_run


@pytest.mark.parametrize(("step_s", "measured"), [(2.4, False), (1.5, False), (1.2, True), (0.5, True)])
def test_measured_rounds_after_the_warm_up_get_what_is_left_of_the_cap(step_s, measured):
    """Two 2.4 s steps a round: the warm-up spent 9.6 s of the 10 s cap and the measured rounds then had the
    whole cap again (24 s in all). They now have what is left, and are not started unless two rounds fit there
    (one round gives no interval): the whole runs at most one round past the cap."""
    from ampgan.speed.decision import WARMUP_STEPS
    from ampgan.speed.rounds import warmed_up_rounds
    from ampgan.speed.threads import THREADS_RULE

    spent = []
    timers = {AS_IS: lambda: spent.append(step_s) or step_s, FEWER: lambda: spent.append(step_s) or step_s}
    rounds = warmed_up_rounds(timers, AS_IS, THREADS_RULE, WARMUP_STEPS, 0, within_cap=True, load_probe=lambda: None)
    assert (rounds is not None) is measured and sum(spent) <= THREADS_RULE.max_seconds + 2 * step_s + 1e-9
    if measured:
        assert rounds.rounds >= 2
    else:
        assert len(spent) == 2 * WARMUP_STEPS  # the warm-up only


def test_the_thread_measurement_gives_back_what_it_did_not_spend_of_its_cap(monkeypatch):
    """The thread count, measured first, reserved its whole 10 s cap: a 35 s share then had 25 s left, under the
    precision decision's 30 s cap, which was skipped where it fitted before. What it did not spend is given back."""
    from ampgan.speed.plan import _DecisionBudget

    budget = _DecisionBudget(35.0, lambda line: None)
    assert budget.take(10.0, cached=False) and budget.left == pytest.approx(25.0)
    budget.refund(10.0 - 1.5)  # the measurement took 1.5 s
    assert budget.left == pytest.approx(33.5) and budget.take(30.0, cached=False)
    budget.refund(-2.0)  # one that ran past its cap takes nothing more back
    assert budget.left == pytest.approx(3.5)
    unlimited = _DecisionBudget(None, lambda line: None)
    unlimited.refund(5.0)
    assert unlimited.left is None


def test_a_bench_budget_too_small_for_the_thread_measurement_leaves_it_unmeasured(monkeypatch):
    """The thread count is one of the decisions before measuring: it takes its cap from their share of a bench's
    --max-seconds like the others, or is not measured, said with the share (it ran outside it: 41 s of a 10 s
    bench's 2.5 s share)."""
    import torch
    from conftest import tiny_config

    import ampgan.speed.threads as threads
    from ampgan.speed.plan import GIVEN, Asked, plan_run

    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setattr(cpu_tuning, "others_running", lambda samples=5: 3)
    monkeypatch.setattr(cpu_tuning, "cores", lambda: 2)
    monkeypatch.setattr(threads, "StepTimer", lambda *args, **kwargs: pytest.fail("measured outside its budget"))
    config, lines = tiny_config(), []
    before = torch.get_num_threads()
    try:
        for seconds in (2.5, 9.9):
            torch.set_num_threads(2)
            asked = Asked(lambda precision: config, GIVEN, (FP32,), (), (), decision_seconds=seconds)
            found = plan_run(asked, None, torch.device("cpu"), lines.append)
            assert found.threads["threads"] == 1 and found.threads["measured"] is None
            assert f"more than the {seconds:.3g} s left of the decisions' share of the budget" in lines[-1]
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize(("given", "distributed"), [("OMP_NUM_THREADS", False), (None, True)])
def test_threads_given_or_shared_by_ranks_are_kept_and_reported(given, distributed):
    choice = thread_choice(2, 2, 5, given, distributed, lambda current, fewer: pytest.fail("measured"))
    assert choice["threads"] == 2
    assert ("fixed by OMP_NUM_THREADS" in choice["reason"]) if given else ("share" in choice["reason"])


# --- decisions and too_slow verdicts under load -----------------------------------------------------------


@pytest.mark.parametrize(("others", "cached"), [(0, True), (1, False), (4, False)])
def test_a_speed_decision_taken_under_load_is_not_kept_as_the_machines_answer(tmp_path, monkeypatch, others, cached):
    monkeypatch.setattr(cpu_tuning, "others_running", lambda samples=5: others)
    monkeypatch.setattr(cpu_tuning, "cores", lambda: 2)
    monkeypatch.setattr("torch.get_num_threads", lambda: 2)
    cache = DecisionCache(tmp_path)
    times = {FP32: 0.1, BF16: 0.06}
    lines = []
    found = decide([BF16], 64, {"machine": "x"}, measure_with(lambda name: lambda: times[name]), cache, lines.append)
    assert found[BF16].verdict == "faster"
    assert bool(cache._read()) is cached
    if not cached:
        assert "measured under load" in found[BF16].note and "not cached" in lines[-1]
        again = decide([BF16], 64, {"machine": "x"}, measure_with(lambda name: lambda: times[name]), cache)
        assert not again[BF16].cached  # measured again, never read back


def _crowded(monkeypatch, others: int) -> None:
    monkeypatch.setattr(cpu_tuning, "others_running", lambda samples=5: others)
    monkeypatch.setattr(cpu_tuning, "cores", lambda: 2)
    monkeypatch.setattr("torch.get_num_threads", lambda: 2)


@pytest.mark.parametrize("others", [0, 3])
def test_layout_and_compile_decisions_taken_under_load_are_used_but_not_cached(tmp_path, monkeypatch, others):
    from ampgan.speed.compilation import COMPILED, EAGER, CompileMeasurement, CompileProbe, decide_compile
    from ampgan.speed.decision import DECISION_RULE
    from ampgan.speed.layout import CHANNELS_LAST, NCHW, decide_layout, measure_layouts_with

    _crowded(monkeypatch, others)
    times = {NCHW: 0.08, CHANNELS_LAST: 0.06, EAGER: 0.1, COMPILED: 0.07}

    class Probe(CompileProbe):
        def measure(self):
            rounds = measure_rounds(
                {name: lambda name=name: times[name] for name in (EAGER, COMPILED)}, EAGER, DECISION_RULE
            )
            return CompileMeasurement(rounds, first_compile_s=1.0, compile_s=1.0)

    layout_cache, compile_cache = DecisionCache(tmp_path / "layout"), DecisionCache(tmp_path / "compile")
    layout = decide_layout(
        BF16, 64, {"machine": "x"}, measure_layouts_with(lambda name: lambda: times[name]), layout_cache
    )
    compile_it, decision = decide_compile(BF16, 64, {"machine": "x"}, (None, 3600.0), Probe(), compile_cache)
    assert layout.channels_last and compile_it  # the moment's answer is used ...
    assert bool(layout_cache._read()) is bool(compile_cache._read()) is (others == 0)  # ... and kept only if calm
    for note in (layout.note, decision.note):
        assert ("measured under load: 3 other threads running beside 2 of ours on 2 cores" in note) is (others > 0)


def test_a_bench_measured_under_load_adds_nothing_to_the_speedup_history(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import torch
    from conftest import tiny_config

    from ampgan.bench.measure import _time_interleaved
    from ampgan.speed.history import FILE_NAME

    monkeypatch.setenv("AMPGAN_CACHE_DIR", str(tmp_path))
    spec = BenchSpec(batch_sizes=(8,), precisions=(FP32, BF16), steps=4, max_seconds=5.0)

    def contender(precision, seconds):
        result = ConfigResult(batch_size=8, precision=precision)
        timer = SimpleNamespace(config=tiny_config(), data_parallel=False)
        return SimpleNamespace(
            result=result,
            timer=timer,
            device=torch.device("cpu"),
            sample=lambda twin: result.samples_s.append(seconds) or seconds,
            spent_s=0.0,  # no whole-cycle meter: the rounds' cap counts the returned times
        )

    for others, kept in ((3, False), (0, True)):
        _crowded(monkeypatch, others)
        rounds = _time_interleaved(spec, [contender(FP32, 0.1), contender(BF16, 0.06)])
        assert rounds.under_load is not kept and (tmp_path / FILE_NAME).exists() is kept


def test_a_few_crowded_rounds_in_many_do_not_mark_the_answer():
    loads = iter([1] + [0] * 20)
    rule = StoppingRule(min_rounds=12, max_seconds=100.0)
    result = measure_rounds({"a": lambda: 0.1, "b": lambda: 0.05}, "a", rule, load_probe=lambda: next(loads))
    result.threads, result.cores = 2, 2
    assert result.crowded_rounds == 1 and not result.under_load and result.machine_answer


class _FakeContender:
    """A configuration whose warm-up steps take the given seconds."""

    def __init__(self, seconds: list[float]):
        self.seconds = list(seconds)
        self.result = ConfigResult(batch_size=32, precision=FP32)
        self.timer = type("Timer", (), {"step_kinds": [(0, 1)]})()

    def timed_step(self) -> float:
        return self.seconds.pop(0)


# 8 steps (2 warm-ups, 5 rounds, 1 counting FLOPs) in 30 s: a first step of 5 s does not settle it (40 s foreseen).
SPEC = BenchSpec(batch_sizes=(32,), precisions=(FP32,), warmup=2, steps=5, max_seconds=30.0)


@pytest.mark.parametrize(
    "seconds",
    [
        [5.0, 3.83, 0.065],  # one slow step after the first (the batch 32): a hiccup
        [5.0, 3.83, 0.07, 3.9, 0.07],  # a slow step after the first fits: judged; later ones are not judged
        [8.0, 0.07, 0.07],  # the first step (kernel selection) is never judged alone
    ],
)
def test_one_slow_step_never_disqualifies_a_batch_size(seconds):
    contender = _FakeContender(seconds)
    warm_up(SPEC, contender, allowance={"left": 100.0})
    assert contender.result.status == "ok"


@pytest.mark.parametrize(("others", "marked"), [(0, False), (2, True)])
def test_two_slow_steps_in_a_row_make_it_too_slow_and_a_crowded_verdict_says_so(monkeypatch, others, marked):
    monkeypatch.setattr(cpu_tuning, "others_running", lambda samples=5: others)
    monkeypatch.setattr(cpu_tuning, "cores", lambda: 2)
    monkeypatch.setattr("torch.get_num_threads", lambda: 2)
    contender = _FakeContender([5.0, 3.83, 4.1])
    warm_up(SPEC, contender, allowance={"left": 100.0})
    result = contender.result
    assert result.status == "too_slow" and "2 steps in a row" in result.reason and "3.83 s and 4.10 s" in result.reason
    assert bool(result.under_load) is marked
    assert ("measured under load" in result.reason) is marked
    ahead = TooSlowAhead()
    ahead.learn([result])
    foreseen = ahead.foreseen(SPEC, FP32, 1024)  # 32x the images: too slow, unless the verdict was the moment's
    assert (foreseen is None) is marked


# --- the race's clock and each seed's pace ----------------------------------------------------------------


def _bench(fp32_status="ok"):
    return {
        "configs": [
            {"precision": FP32, "batch_size": 64, "status": fp32_status, "stats": {"median_s": 0.113}, "reason": "x"},
            {"precision": BF16, "batch_size": 64, "status": "ok", "stats": {"median_s": 0.066}},
        ],
        "speedups": [{"batch_size": 64, "precision": BF16, "estimate": 1.71, "low": 1.65, "high": 1.76}],
    }


def test_the_race_charges_each_precision_its_bench_step():
    clock = race_clock(_bench(), (FP32, BF16), 64)
    assert clock["clock"] == BENCH_CLOCK and clock["step_s"] == {FP32: 0.113, BF16: 0.066}


@pytest.mark.parametrize(("status", "batch"), [("too_slow", 64), ("ok", 128)])
def test_without_a_settled_bench_step_for_every_precision_the_race_runs_on_the_wall_clock(status, batch):
    clock = race_clock(_bench(status), (FP32, BF16), batch)
    assert clock["clock"] == WALL_CLOCK and clock["step_s"] is None and "wall clock" in clock["reason"]


def _run(steps, wall_s, charge_s):
    return {"steps": steps, "wall_seconds": wall_s, "bench_steps_per_s": 1 / charge_s, "thread_changes": []}


def _curve(step_s, wall_step_s, accuracies, every=10):
    return [
        {"step": every * i, "train_seconds": every * i * step_s, "wall_seconds": every * i * wall_step_s, "acc": a}
        for i, a in enumerate(accuracies, start=1)
    ]


def test_each_seeds_wall_pace_is_held_against_the_benchs_interval():
    runs = {
        FP32: {0: _run(177, 20.0, 0.113), 1: _run(177, 177 * 0.889, 0.113)},  # seed 1: a neighbour, 7.9x
        BF16: {0: _run(303, 20.0, 0.066), 1: _run(303, 303 * 0.844, 0.066)},
    }
    curves = {
        FP32: {0: _curve(0.113, 0.113, [0.2, 0.5, 0.9]), 1: _curve(0.113, 0.889, [0.2, 0.5, 0.9])},
        BF16: {0: _curve(0.066, 0.066, [0.2, 0.5, 0.9]), 1: _curve(0.066, 0.844, [0.2, 0.5, 0.9])},
    }
    pace = pace_of_seeds(runs, curves, _bench()["speedups"], FP32, 64, 0.5, "acc")
    calm, crowded = pace[BF16]["0"], pace[BF16]["1"]
    assert calm["within"] is True and calm["wall_speedup"] == pytest.approx(303 / 177)
    assert crowded["within"] is False and crowded["wall_speedup"] == pytest.approx(0.889 / 0.844)
    assert crowded["wall_over_bench"] == pytest.approx(0.844 / 0.066)
    assert crowded["baseline_wall_over_bench"] == pytest.approx(0.889 / 0.113)
    assert crowded["time_to_target_ratio"] == pytest.approx(0.113 / 0.066)  # the race's clock: the bench's
    assert crowded["wall_time_to_target_ratio"] == pytest.approx(0.889 / 0.844)
    record = RaceRecord.from_dict({"clock": BENCH_CLOCK, "step_s": {FP32: 0.113, BF16: 0.066}, "pace": pace})
    assert list(record.off_pace(BF16)) == ["1"]
    assert record.to_dict()["pace"] == pace  # written back as read
    lines = _off_pace_lines(BF16, record)
    assert len(lines) == 1 and lines[0].startswith("Seed 1 ran off the bench's pace")
    assert "1.05x fp32 per step, outside the bench's 1.71x (95% CI 1.65-1.76)" in lines[0]
    assert "fp32 7.87x its bench step, bf16 12.79x its bench step" in lines[0]
    assert "moved nothing in the answer" in lines[0] and "1.05x as soon as fp32 instead of 1.71x" in lines[0]


def test_on_the_wall_clock_an_off_pace_seed_is_said_to_carry_the_tilt():
    pace = {BF16: {"0": {"wall_speedup": 1.05, "bench_estimate": 1.71, "bench_low": 1.65, "bench_high": 1.76,
                         "within": False}}}  # fmt: skip
    record = RaceRecord.from_dict({"clock": WALL_CLOCK, "reason": "no bf16 step", "step_s": None, "pace": pace})
    (line,) = _off_pace_lines(BF16, record)
    assert "timed on the wall clock (no bf16 step)" in line and "carries the tilt" in line


# --- the training loop on a charged clock -----------------------------------------------------------------


@pytest.mark.parametrize(("budget", "steps"), [({"steps": 4}, 4), ({"steps": None, "time_budget": 1.2}, 3)])
def test_a_charged_run_counts_its_steps_at_the_bench_time_and_keeps_its_wall_clock(tmp_path, budget, steps):
    import json

    from conftest import tiny_config

    from ampgan.runs.checkpoint import list_checkpoints, load_checkpoint
    from ampgan.training.loop import prepare_run, run_training

    config = tiny_config(sets=["logging.log_every=2"], **budget)
    result = run_training(prepare_run(config), tmp_path / "run", show_progress=False, step_charge_s=0.4)
    assert result.steps == steps  # 1.2 s of training at 0.4 s a step: three steps, whatever the wall clock said
    assert result.train_seconds == pytest.approx(0.4 * steps)
    assert 0 < result.wall_seconds and result.wall_seconds != result.train_seconds
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["train_seconds"] == pytest.approx(0.4 * steps) and records[-1]["wall_seconds"] > 0
    saved = load_checkpoint(list_checkpoints(tmp_path / "run")[-1], map_location="cpu")
    assert saved["progress"]["wall_seconds"] == pytest.approx(result.state.wall_seconds)


@pytest.mark.parametrize("under_load", [False, True])
def test_a_bench_measured_under_load_is_said_in_the_speed_line(under_load):
    from ampgan.study.document import RunSummary
    from ampgan.study.verdict import _speed_line

    run = RunSummary.from_dict({"run_dir": "runs/x", "steps": 10, "train_seconds": 1.0, "final": {}})
    pair = {"batch_size": 64, "precision": BF16, "estimate": 1.7, "low": 1.6, "high": 1.8, "rounds": 9}
    line = _speed_line(BF16, run, run, pair | {"under_load": under_load}, 64, "AMD EPYC")
    assert ("measured while other processes crowded the cores" in line) is under_load


@pytest.mark.parametrize(
    ("note", "said"),
    [
        (None, "the bench has no bf16 speedup at batch 64."),
        ("too_slow", "the bench has no bf16 speedup at batch 64 (it measured bf16: too_slow)."),
    ],
)
def test_a_bench_without_the_speedup_says_why_in_the_speed_line(note, said):
    from ampgan.study.document import RunSummary
    from ampgan.study.verdict import _speed_line

    run = RunSummary.from_dict({"run_dir": "runs/x", "steps": 10, "train_seconds": 1.0, "final": {}})
    assert _speed_line(BF16, run, run, None, 64, "AMD EPYC", note) == f"On this AMD EPYC, {said}"


def test_the_reports_speed_table_shows_the_runs_wall_clock_per_step():
    from ampgan.study.document import RunSummary
    from ampgan.study.report import _wall_step

    per_seed = {
        "0": {"run_dir": "runs/a", "steps": 10, "train_seconds": 1.0, "wall_seconds": 3.0, "final": {}},
        "1": {"run_dir": "runs/b", "steps": 20, "train_seconds": 2.0, "wall_seconds": 2.0, "final": {}},
    }
    run = RunSummary.from_dict(
        {"run_dir": "runs/a", "steps": 15, "train_seconds": 1.5, "seconds_per_step": 0.1, "final": {}}
        | {"seeds": [0, 1], "per_seed": per_seed}
    )
    assert _wall_step(run) == pytest.approx((0.3 + 0.1) / 2)
    older = RunSummary.from_dict({"run_dir": "runs/a", "steps": 10, "train_seconds": 2.0, "final": {}})
    assert _wall_step(older) == pytest.approx(0.2)  # before the race's clock: the training clock was the wall's


def test_a_crowded_machine_fits_the_threads_on_the_real_step(monkeypatch):
    import torch
    from conftest import tiny_config

    import ampgan.speed.threads as threads
    from ampgan.data import load_dataset

    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)  # (set beside it under pytest-xdist: conftest.py)
    monkeypatch.setattr(cpu_tuning, "others_running", lambda samples=5: 3)
    monkeypatch.setattr(cpu_tuning, "cores", lambda: 2)  # speed/threads.py reads it through the module
    # A cap whose half a warm-up round of the tiny step stays under even when two threads spin beside the
    # suite's other worker (~1.5 s a round): the rounds are measured, not skipped as too long.
    monkeypatch.setattr(threads, "THREADS_RULE", StoppingRule(min_rounds=2, max_seconds=6.0, until=UNTIL_DECIDED))
    config = tiny_config()
    lines = []
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        choice = threads.fit_threads(config, load_dataset(config.data), torch.device("cpu"), lines.append)
        assert choice["threads"] == torch.get_num_threads() and choice["before"] == 2
        assert choice["measured"].startswith("1 thread(s) ") and "per fp32 step" in choice["measured"]
        assert lines == [f"threads: {choice['reason']}"]
        assert "3 other threads running beside 2 of ours on 2 cores" in lines[0]
    finally:
        torch.set_num_threads(before)


def test_a_resumed_study_runs_on_the_threads_it_decided(monkeypatch):
    import torch

    from ampgan.speed.threads import apply_threads

    before = torch.get_num_threads()
    try:
        apply_threads({"threads": 1})  # the suite fixes OMP_NUM_THREADS: the user's choice wins
        assert torch.get_num_threads() == before
        monkeypatch.delenv("OMP_NUM_THREADS")
        monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
        apply_threads({"threads": 1})
        assert torch.get_num_threads() == 1
        apply_threads(None)  # a study from before the threads were decided
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize(
    ("steps", "on_steps", "said"),
    [
        # a race on time: more steps in the same training time
        ((30, 48), False, " In the race it made 48 steps to fp32's 30 in the same training time, each step charged"),
        # equal steps in a race on time are still the same training time
        ((30, 30), False, " In the race it made 30 steps to fp32's 30 in the same training time"),
        # a race on steps (compare --steps 30): the same steps, bf16 in less training time, not 'the same time'
        ((30, 30), True, " In the race both made 30 steps, bf16 in 690 ms of training to fp32's 750 ms, each step"),
        # a race on steps where a run stopped early: still not 'the same training time'
        ((30, 20), True, " In the race bf16 made 20 steps and fp32 30 (a budget of steps: a run stopped before it)"),
    ],
)
def test_the_race_line_says_the_same_steps_took_less_time_when_the_budget_was_steps(steps, on_steps, said):
    record = RaceRecord.from_dict({"clock": BENCH_CLOCK, "step_s": {FP32: 0.025, BF16: 0.023}, "pace": {}})
    fp32_run, bf16_run = (SimpleNamespace(steps=n) for n in steps)
    assert _charged_text(BF16, bf16_run, fp32_run, record, on_steps).startswith(said)
