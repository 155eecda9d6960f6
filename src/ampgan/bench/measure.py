"""Measuring one batch size: each precision's contender built (its own state, same seed, same initial weights,
one resident batch on the device: speed/step_timer.py), warmed up within the batch size's --max-seconds
(bench/deadline.py), its FLOPs counted; then the contenders that fit timed in interleaved rounds, in random
order within each round, until every speedup over fp32 is known to +-5% at 95% confidence or the time cap is
spent (speed/rounds.py). The clock is read only after the device has finished."""

from __future__ import annotations

import functools
import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from ampgan.bench.attainable import ops_alone, summarise
from ampgan.bench.deadline import TooSlowAhead, warm_up
from ampgan.bench.ops import count_flops_by_kind
from ampgan.bench.results import ConfigResult, failure
from ampgan.bench.spec import BenchSpec
from ampgan.bench.twin import agreed_local_trial, local_twins
from ampgan.precisions import FP32
from ampgan.speed.cache import decision_key
from ampgan.speed.decision import machine_key
from ampgan.speed.history import SpeedupHistory
from ampgan.speed.intervals import BETWEEN_RUN_SD
from ampgan.speed.rounds import UNTIL_SETTLED, RoundsResult, StoppingRule, measure_rounds
from ampgan.speed.step_timer import StepTimer
from ampgan.system.cpu_tuning import others_running
from ampgan.system.memory import is_out_of_memory
from ampgan.training.distributed import any_rank, leave_without_peers, rank_zeros, world
from ampgan.training.out_of_memory import out_of_memory_error, release_memory
from ampgan.training.step import train_step


@contextmanager
def stage(spent: dict, name: str) -> Iterator[None]:
    """`spent[name]` grows by the seconds the block took (a stage of the bench, or one that recurs per
    configuration: building, counting, --attainable's operations alone); a block that raises adds nothing."""
    started = time.perf_counter()
    yield
    spent[name] = spent.get(name, 0.0) + time.perf_counter() - started


class StopRequested(BaseException):
    """One of the STOP_SIGNALS arrived: stop measuring, keep the batch sizes already finished. A BaseException, as
    KeyboardInterrupt is: no `except Exception` on its way (a configuration's failure) takes it for an error."""


def stop_check(request) -> Callable[[], None]:
    """Asked between steps: StopRequested once `request` is set; every rank stops at the same point (the answer
    is OR-ed over ranks)."""

    def check() -> None:
        if any_rank([bool(request)])[0]:
            raise StopRequested

    return check


class Contender:
    """One precision at one batch size: its step timer, its results, and the memory it holds."""

    def __init__(self, spec: BenchSpec, precision: str, batch_size: int, dataset, device):
        # This contender's own peak: the contenders before it stay allocated while it warms up.
        self.rss_before = _peak_rss_bytes()
        self.held_before = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        self.timer = StepTimer(spec.train_config(precision, batch_size), dataset, device)
        self.result = ConfigResult(batch_size=batch_size, precision=precision, processes=world().size)
        self.device = device
        self.spent_s = 0.0  # the measured rounds' calls, whole cycles (the timer returns one step's mean)

    def timed_step(self) -> float:
        return self.timer()

    def sample(self, twin: StepTimer | None = None) -> float:
        """One measured round's call: its time recorded (every rank's too under DDP, and then its twin's)."""
        elapsed = self.timed_step()
        self.spent_s += self.timer.last_call_s
        self.result.samples_s.append(elapsed)
        if self.timer.data_parallel:
            self.result.per_rank_samples_s.append(self.timer.last_per_rank)
        if twin is not None:
            self.result.local_samples_s.append(twin())
        return elapsed

    def peak_memory_bytes(self) -> int:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) - self.held_before
        return max(0, _peak_rss_bytes() - self.rss_before)

    def count_step_flops(self) -> dict[str, int]:
        """FLOPs per step by kind (a cycle's over its steps). Counted on the eager modules: the FLOPs are
        the same, and the counter's global module hooks would otherwise make compiled modules recompile."""
        timer = self.timer
        total: dict[str, int] = {}
        with timer.state.eager() as state:
            for before, count in timer.step_kinds:
                state.step = before
                for kind, flops in count_flops_by_kind(lambda: train_step(state, timer.resident_batch)).items():
                    total[kind] = total.get(kind, 0) + flops * count
        return {kind: flops // timer.cycle_steps for kind, flops in total.items()}

    def finish(self) -> ConfigResult:
        self.result.skipped_steps = self.timer.skipped_steps()
        return self.result


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def measure_batch_size(
    spec: BenchSpec,
    precisions,
    batch_size: int,
    dataset,
    device,
    stop_check,
    ahead: TooSlowAhead,
    spent: dict,
    log=lambda line: None,
) -> tuple[list[ConfigResult], RoundsResult | None]:
    """Every precision at `batch_size`, in the order given: a result each, and the rounds of those timed.
    The batch size's --max-seconds is shared by its warm-ups and its measured rounds (building each
    configuration and a compiled step's compilation are not counted: both are said apart); `spent["building"]`
    gains the seconds spent building each configuration (its networks, optimizers and resident batch: model
    building, which no measuring budget bounds). `ahead`: the precisions foreseen too slow, not run; `log`: the
    line that says, before the rounds, that the two they need will not fit."""
    allowance = {"left": spec.max_seconds, "flops": None, "counting": 0.0}
    contenders, finished = [], []  # warmed up and timed in the rounds; results already final
    for precision in precisions:
        stop_check()
        refused = ahead.foreseen(spec, precision, batch_size)
        if refused is None and world().distributed:
            # A configuration that fails on one rank only (out of memory on the fullest GPU, say) must fail
            # on every rank before any of them enters a collective the failed one would never join.
            refused = agreed_local_trial(spec, precision, batch_size, dataset, device)
        if refused is None:
            ready = _warmed_up(spec, precision, batch_size, dataset, device, stop_check, allowance, spent)
            (contenders if isinstance(ready, Contender) else finished).append(ready)
        else:
            finished.append(refused)
    # Rank 0's clock for every rank (they must time the same rounds): counting's seconds are each rank's own.
    left = rank_zeros(allowance["left"] - allowance["counting"])
    _say_when_two_rounds_cannot_fit(spec, batch_size, contenders, left, log)
    rounds = _time_interleaved(spec, contenders, stop_check, seconds=left)
    finished += [c.finish() for c in contenders]
    counted = f" and counting the step's FLOPs ({allowance['counting']:.1f} s)" if allowance["counting"] > 0 else ""
    for result in finished:  # a speedup needs 2 rounds: say why a row has none rather than drop its pair silently
        if len(precisions) > 1 and result.status == "ok" and len(result.samples_s) < 2 and not result.reason:
            result.reason = (
                f"{len(result.samples_s)} measured round(s), no speedup interval: the warm-ups{counted} spent "
                f"--max-seconds {spec.max_seconds:g}; give more"
            )
    contenders.clear()
    release_memory(device)
    finished.sort(key=lambda r: precisions.index(r.precision))
    return finished, rounds


def _say_when_two_rounds_cannot_fit(spec: BenchSpec, batch_size: int, contenders: list, left: float, log) -> None:
    """Said before the rounds start: the two a speedup needs run even past --max-seconds, and how far, foreseen
    from each contender's fastest warm-up call (a whole cycle, as a round's call is; the first also makes kernels)."""
    calls = [min(c.result.warmup_call_s) for c in contenders if c.result.status == "ok" and c.result.warmup_call_s]
    needed = 2 * sum(calls) * (2 if world().distributed else 1)  # under DDP each call has its local twin
    if len(calls) >= 2 and needed > left:
        log(
            f"batch {batch_size}: the 2 measured rounds a speedup needs take about {needed:.1f} s (one call of each "
            f"precision, {sum(calls):.1f} s, from the warm-ups), more than the {max(left, 0):.1f} s that warm-ups "
            f"and counting ({spec.max_seconds - left:.1f} s) left of --max-seconds {spec.max_seconds:g}: measuring "
            f"will run about {needed - max(left, 0):.0f} s past it (--max-seconds "
            f"{spec.max_seconds - left + needed:.0f} would keep it)"
        )


def _warmed_up(
    spec: BenchSpec, precision: str, batch_size: int, dataset, device, stop_check, allowance: dict, spent: dict
) -> Contender | ConfigResult:
    """The contender warmed up and counted, ready for the rounds; or the result of one that is not (too
    slow, out of memory, failed)."""
    contender = None
    try:
        with stage(spent, "building"):
            contender = Contender(spec, precision, batch_size, dataset, device)
        warm_up(
            spec,
            contender,
            stop_check,
            after_first=functools.partial(_forget_autotuning_peak, spec, device),
            allowance=allowance,
        )
        if contender.result.status != "ok":
            return contender.finish()
        contender.result.peak_memory_bytes = contender.peak_memory_bytes()
        # Counting is spent from the batch size's --max-seconds, out of its measured rounds' share (not the
        # warm-ups' of the precisions after it: a StyleGAN2-like cycle's counts took 8 s of a 10 s bench outside
        # it), and once: the FLOPs follow the shapes, alike in every precision.
        with stage(allowance, "counting"):
            allowance["flops"] = allowance["flops"] or contender.count_step_flops()
            contender.result.flops_by_kind = dict(allowance["flops"])
            contender.result.flops_per_step = sum(contender.result.flops_by_kind.values())
        if spec.attainable:  # what --attainable asks on top: each operation timed alone, outside the rounds' share
            with stage(spent, "attainable"):
                contender.result.attainable = summarise(ops_alone(contender.timer))
        return contender
    except Exception as error:  # noqa: BLE001 - a failed configuration is a result, not a crash
        if world().distributed:
            # Past the agreed trial, a failure may be this rank's alone, inside a collective: it ends the
            # job in one line (torchrun stops the other ranks) rather than leave them waiting.
            if is_out_of_memory(error):
                leave_without_peers()
                raise out_of_memory_error(error, batch_size, device, f"the {precision} bench step") from None
            raise
        result = contender.result if contender else ConfigResult(batch_size=batch_size, precision=precision)
        result.status, result.reason = failure(error)
        contender = None
        release_memory(device)
        return result


def _forget_autotuning_peak(spec: BenchSpec, device: torch.device) -> None:
    """After the first step: the peak memory from here on is the step's own, without the workspaces
    cuDNN's autotuner tried in the first one. With a single warm-up step there is no later one to
    measure, and the peak keeps them (a bench's --warmup is at least 2 by default)."""
    if device.type == "cuda" and spec.warmup >= 2:
        torch.cuda.reset_peak_memory_stats(device)


def _time_interleaved(
    spec: BenchSpec, contenders: list[Contender], stop_check=lambda: None, seconds: float | None = None
) -> RoundsResult | None:
    """Rounds in random order until every speedup over fp32 is settled (speed.rounds), at least
    --steps of them (and 2), at most `seconds` of measured steps: what the warm-ups left of the batch
    size's --max-seconds (all of it when None)."""
    seconds = spec.max_seconds if seconds is None else seconds
    twins = local_twins(spec, contenders) if world().distributed else {}
    contenders = [c for c in contenders if c.result.status == "ok"]  # a failed twin's: an oom row, not measured
    if not contenders:
        return None
    names = [c.result.precision for c in contenders]
    baseline = FP32 if FP32 in names else names[0]
    history = SpeedupHistory()
    # The speedup history's key (speed/history.py): the decisions' machine and model key, the batch size, the
    # precision, the number of processes.
    keys = {
        c.result.precision: decision_key(
            **machine_key(c.device, c.timer.config),
            batch_size=c.result.batch_size,
            precision=c.result.precision,
            processes=world().size,
        )
        for c in contenders
        if c.result.precision != baseline
    }
    learned = max((history.between_run_sd(key) for key in keys.values()), default=(BETWEEN_RUN_SD, "default"))
    learned = rank_zeros(learned)  # rank 0's history for every rank: the ranks must stop at the same round
    # Under DDP each sample is two steps: the data-parallel one the rounds count, then the same step alone
    # on every rank (its local twin, for the scaling efficiency). The measured steps get half the seconds,
    # so that the two together keep to --max-seconds.
    seconds = max(seconds, 0.0) / (2 if twins else 1)
    rule = StoppingRule(
        min_rounds=max(2, spec.steps),
        max_seconds=seconds,
        until=UNTIL_SETTLED,
        min_seconds=min(spec.min_seconds, seconds),
        between_run_sd=learned[0],
    )
    samplers = {c.result.precision: functools.partial(c.sample, twins.get(id(c))) for c in contenders}
    # The cap bounds the calls' whole cycles; the samples are one step's mean (speed/step_timer.py).
    spent = lambda: sum(c.spent_s for c in contenders)  # noqa: E731
    load_probe = None  # measure_rounds reads the machine's load itself
    if world().distributed:
        # Every rank must stop at the same round and re-measure alike (a rank that stopped while another went on
        # left it waiting in DDP's collective: 'Application timeout caused pair closure' under load): the cap's
        # clock and the load the rounds judge are rank 0's, on every rank. The samples already agree (each is
        # the slowest rank's step).
        own_spent = spent
        spent = lambda: rank_zeros(own_spent())  # noqa: E731
        load_probe = lambda: rank_zeros(others_running() if world().is_main else None)  # noqa: E731
    rounds = measure_rounds(
        samplers, baseline, rule, seed=spec.seed, stop_check=stop_check, spent=spent, load_probe=load_probe
    )
    rounds.between_run_source = learned[1]
    if world().is_main and rounds.machine_answer:  # a crowded moment's spread is not this machine's
        for name, key in keys.items():
            interval = rounds.intervals.get(name)
            # an estimate whose interval is no answer (two rounds spanning 0.01x-95x) is the run's own noise: kept,
            # it would widen every later interval as if it were the spread between runs
            if name not in rounds.hopeless and rounds.answered(name):  # answered: it has an interval
                history.record(key, interval.estimate)
    for contender in contenders:
        _keep_the_last_attempt(contender.result, rounds)
    return rounds


def _keep_the_last_attempt(result: ConfigResult, rounds: RoundsResult) -> None:
    """After a re-measurement only the last attempt's rounds count."""
    kept = len(rounds.samples_s[result.precision])
    result.samples_s = result.samples_s[len(result.samples_s) - kept :]
    result.per_rank_samples_s = result.per_rank_samples_s[len(result.per_rank_samples_s) - kept :]
    result.local_samples_s = result.local_samples_s[len(result.local_samples_s) - kept :]
    if result.precision in rounds.hopeless:
        result.reason = f"left out after {kept} round(s): {rounds.hopeless[result.precision]}"
