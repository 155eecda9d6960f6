"""The bench's budget: --max-seconds per batch size, and what each part of the bench may spend of it.

A batch size's --max-seconds is shared by its configurations' warm-ups and its measured rounds (an
allowance, spent call by call); the decisions before measuring and the op tables after it take fixed
shares of the whole. A configuration that cannot fit is recorded as too slow, by three rules: its warm-up
foresees its steps beyond --max-seconds (confirmed on two steps after the first, which selects kernels),
one warm-up call runs the whole --max-seconds, or a smaller batch size of the same precision was already too
slow by far. One whose call runs past what the others left of the allowance, or finds nothing left, is
recorded as out of time: the budget ran out before it was judged, which says nothing of its speed.

A call is stopped by an alarm (SIGALRM) that raises between Python operations, so a call is stopped
within one ATen operation of its deadline: bf16 on a CPU without bf16 units can be 20x slower than fp32,
and one call of a lazily regularised GAN runs every kind of step in its cycle. Each `with` block the step
is inside (autocast, no_grad, frozen parameters) restores its state on the way out; the configuration is
dropped afterwards, so nothing it half-changed is used again. Only in the main thread of a single
process: a rank abandoning a step inside a collective would leave the others waiting, so under torchrun
(and off the main thread) the call runs to its end.
"""

from __future__ import annotations

import time

import torch

from ampgan.bench.results import ConfigResult
from ampgan.bench.spec import BenchSpec
from ampgan.speed.step_timer import CallTooLong, abandoned_after
from ampgan.system import cpu_tuning
from ampgan.training.distributed import any_rank, rank_zeros, world

# The decisions before measuring (precisions, memory format) may take this share of the budget: one whose
# answer is not cached and whose time cap does not fit takes its default and says so (speed/plan.py).
DECISION_SHARE = 0.25
# The op tables (for `ampgan project`) may take this share of it, never more: a precision whose trace would
# not fit is left out and says so.
TRACE_SHARE = 0.5
# Steps after the first that must each foresee the budget exceeded, in a row, before a configuration is too slow.
TOO_SLOW_CONFIRMED_BY = 2
# A precision too slow at a smaller batch size is not run at a larger one when even twice its per-image
# speed there (larger batches use the machine better) would not fit --max-seconds: a bf16 step that
# took 10 s at batch 64 on a CPU without bf16 instructions would take minutes at batch 1024, to no end.
BETTER_AT_LARGER_BATCHES = 2.0


def budget_s(spec: BenchSpec) -> float:
    """What the bench was asked to spend measuring: --max-seconds per batch size."""
    return spec.max_seconds * len(spec.batch_sizes)


def warm_up(spec: BenchSpec, contender, stop_check=lambda: None, after_first=lambda: None, allowance=None) -> None:
    """Discarded steps (kernel selection, compilation, allocator growth) of `contender` (its `timed_step()`
    and its `result`). Whether the configuration fits in --max-seconds at all is judged on a step after the
    first: the first one also autotunes cuDNN's (or creates oneDNN's) kernels for each shape, several times a
    step's own time, and judged on it the large batches where mixed precision pays would be dropped. One more
    step is run when needed to judge. `allowance` ({"left": seconds}, shared by a batch size's configurations):
    a call is stopped when it runs past what is left, and spends it; None: only a first call is stopped, at
    --max-seconds."""
    result = contender.result
    judged = result.precision in spec.compile  # compilation dominates its first step: never judged
    over_after_first: list[float] = []  # steps after the first that foresaw the budget exceeded, in a row
    index = 0
    while index < max(1, spec.warmup) or not judged:
        if index:
            stop_check()
        compiling = index == 0 and result.precision in spec.compile  # compile time is said apart
        if allowance is None:  # the first call of a configuration not yet judged may take the whole budget
            limit = spec.max_seconds if index == 0 and not judged else None
        else:
            # Nothing left: not even a compiling call is started (its compile would be spent on an untimed row).
            if allowance["left"] <= 0:
                _abandoned(spec, contender, None)
                return
            limit = None if compiling else allowance["left"]  # a compile is not stopped: its time is said apart
        started = time.perf_counter()
        try:
            with abandoned_after(limit):
                elapsed = contender.timed_step()  # per step, averaged over the cycle's kinds of step
        except BaseException as error:
            if allowance is not None and not compiling:  # this rank's own clock: a failed call agrees nothing
                allowance["left"] -= time.perf_counter() - started
            if not isinstance(error, CallTooLong):  # (an alarm's: never under torchrun)
                raise
            _abandoned(spec, contender, limit)  # an alarm was set: limit is a number
            return
        # What one measurement really costs: a call runs one step of each kind in the cycle (a lazy penalty's
        # too), so a model with lazy updates spends several steps' time per call, not one.
        call_s = time.perf_counter() - started
        if allowance is not None and not compiling:
            # Rank 0's clock on every rank: a rank whose allowance ran out alone would stop warming up while the
            # others stepped on into DDP's collective, waiting there for ever. (Not on a failed call: its rank
            # leaves the job alone, bench/measure.py.)
            allowance["left"] -= rank_zeros(call_s)
        result.warmup_s.append(elapsed)
        result.warmup_call_s.append(call_s)
        if index == 0:
            after_first()
        if not judged:
            judged = _fits(spec, result, index, elapsed, call_s, over_after_first)
            if result.status != "ok":
                return
        index += 1


def _fits(spec: BenchSpec, result: ConfigResult, index: int, elapsed: float, call_s: float, over_after_first) -> bool:
    """After warm-up call `index` of a configuration not judged yet: True when its steps fit --max-seconds;
    False while that is not known, or when it is too slow (its result then says so, and why)."""
    steps = spec.warmup + spec.steps + 1  # +1: the FLOP-counting step
    # The first step is the slowest: when even it fits, every later one does. A call of a model with
    # lazy updates runs one step of each kind, and costs that (call_s), not one step.
    if not any_rank([max(elapsed, call_s) * steps > spec.max_seconds])[0]:
        return True
    if index == 0 and any_rank([call_s > spec.max_seconds])[0]:
        # One warm-up call spent the whole of this batch size's --max-seconds: however much faster
        # the next were (kernel selection is done), a second would be spent past the budget.
        result.status = "too_slow"
        result.reason = (
            f"its first warm-up call took {call_s:.2f} s, more than --max-seconds {spec.max_seconds:g} alone"
        )
    elif index > 0:
        over_after_first.append(elapsed)
        if len(over_after_first) < TOO_SLOW_CONFIRMED_BY:
            return False  # one slow step is a hiccup (a neighbour's burst) until another confirms it
        per_call = f" (one of each kind of step in its cycle: {call_s:.2f} s)" if call_s > 1.5 * elapsed else ""
        seen = " and ".join(f"{value:.2f} s" for value in over_after_first)
        result.status = "too_slow"
        result.reason = (
            f"{len(over_after_first)} steps in a row after the first (which selects kernels) took {seen}"
            f"{per_call}; {steps} steps would exceed --max-seconds {spec.max_seconds:g}"
        )
        _mark_if_crowded(result)
    return False


def _mark_if_crowded(result: ConfigResult) -> None:
    """A too_slow verdict taken while other processes crowd the cores says so, and is the moment's answer only
    (no larger batch size is foreseen too slow from it)."""
    # Rank 0's threads, cores and load on every rank (each rank's may differ): whether a precision is
    # foreseen too slow later, a branch with a collective inside, must be alike on every rank.
    threads, machine_cores, others = rank_zeros(
        (torch.get_num_threads(), cpu_tuning.cores(), cpu_tuning.others_running() if world().is_main else None)
    )
    if cpu_tuning.oversubscribed(threads, machine_cores, others):
        result.under_load = cpu_tuning.load_text(others, threads, machine_cores)
        result.reason += f" (measured under load: {result.under_load}; a rerun on free cores may fit)"


def _abandoned(spec: BenchSpec, contender, limit: float | None) -> None:
    """A warm-up call stopped when it ran past what was left of the batch size's --max-seconds (`limit`
    seconds), or not started because nothing was left (`limit` None). Too slow only where one call ran the
    whole --max-seconds (as _fits judges a first call): its time is known to be at least that, and a larger
    batch size of this precision is foreseen too slow without running. Else out of time: the batch size's
    budget ran out before the configuration was judged (a stopped call is one step, or a first call's kernel
    selection; one slow step is no verdict), and nothing is foreseen from it."""
    result = contender.result
    result.status = "out_of_time"
    if limit is None:
        result.reason = (
            f"not timed: the warm-ups before it spent this batch size's --max-seconds {spec.max_seconds:g} "
            "(warm-ups and measured rounds share it); give more --max-seconds"
        )
        return
    first = not result.warmup_s
    kinds = len(getattr(getattr(contender, "timer", None), "step_kinds", None) or [None])
    if first:  # what is known of a step here: at least this
        result.warmup_call_s.append(limit)
        result.warmup_s.append(limit / kinds)
    call = "its first warm-up call (which selects its kernels)" if first else "a warm-up call"
    result.reason = (
        f"{call} ran past the {limit:.3g} s left of --max-seconds {spec.max_seconds:g} for this batch size "
        "(warm-ups and measured rounds share it) and was stopped there"
    )
    if limit >= spec.max_seconds:
        result.status = "too_slow"
    else:
        result.reason = f"not timed: {result.reason}; give more --max-seconds"
    _mark_if_crowded(result)


class TooSlowAhead:
    """The precisions too slow at a smaller batch size (not under load), with their seconds per image there:
    a larger batch size of one is foreseen too slow, and not run, when even BETTER_AT_LARGER_BATCHES times
    that speed would not fit --max-seconds."""

    def __init__(self):
        self.per_image: dict[str, tuple[int, float]] = {}  # precision -> (batch size, seconds per image)

    def learn(self, results: list[ConfigResult]) -> None:
        for result in results:
            if result.status == "too_slow" and result.warmup_s and not result.under_load:
                self.per_image.setdefault(
                    result.precision, (result.batch_size, result.warmup_s[-1] / result.batch_size)
                )

    def foreseen(self, spec: BenchSpec, precision: str, batch_size: int) -> ConfigResult | None:
        """The too_slow row of a configuration not worth running, else None."""
        if precision not in self.per_image or precision in spec.compile:
            return None
        measured_batch, per_image = self.per_image[precision]
        projected = per_image * batch_size / BETTER_AT_LARGER_BATCHES
        steps = spec.warmup + spec.steps + 1
        if not any_rank([projected * steps > spec.max_seconds])[0]:
            return None
        return ConfigResult(
            batch_size=batch_size,
            precision=precision,
            status="too_slow",
            reason=f"not run: a step took {per_image * measured_batch:.2f} s at batch {measured_batch}, so "
            f"one here would take at least {projected:.1f} s; {steps} steps would exceed "
            f"--max-seconds {spec.max_seconds:g}",
        )
