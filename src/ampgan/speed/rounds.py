"""Interleaved rounds until the answer is settled: the measuring loop behind bench and decision.

Each round times every contender once, in an order shuffled per round (a seeded generator, the
same on every rank), so interference that comes and goes with a period never lands on one
contender only. After each round every candidate's speedup over the baseline gets its 95%
interval (intervals.py); measuring stops when every interval is settled (within +-5%) -- or, for
a yes/no decision, is decided (above 1.02, below 1, or surely below 1.02) -- or when the time cap is
spent, and then the result says it is
unsettled. The time counted is the sum of the measured steps (the same on every rank under DDP,
so all ranks stop at the same round). When the baseline's own step time moved by more than 10%
during the rounds, the machine's load changed: the rounds are measured once more if the cap allows.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ampgan.speed.intervals import (
    BETWEEN_RUN_SD,
    SpeedupInterval,
    answers,
    load_changed,
    reference_drift,
    speedup_interval,
)
from ampgan.system import cpu_tuning

UNTIL_SETTLED = "settled"  # every speedup known to +-5%: what a benchmark table reports
UNTIL_DECIDED = "decided"  # enough to say faster / slower / no clear difference: what a choice needs


@dataclass(frozen=True)
class StoppingRule:
    min_rounds: int = 5
    max_seconds: float = 60.0  # of measured steps, all contenders together
    # Neighbours' load on a shared machine shifts over tens of seconds: an answer drawn from a few
    # seconds would describe one such state, not the machine. Measure at least this long.
    min_seconds: float = 0.0
    until: str = UNTIL_SETTLED
    # A candidate whose fastest step in two rounds or more is this many times the baseline's median is left
    # out: its steps would eat the cap. Never on one round: one step of a bf16 that races fp32 at 1.4x took
    # 6.9x fp32's on a loaded 2-core Zen 4 (41 ms against 6 ms), a neighbour's burst or a first call's cost.
    hopeless_factor: float = 5.0
    # The spread between runs that every interval carries (speed/intervals.py; speed/history.py learns it).
    between_run_sd: float = BETWEEN_RUN_SD


@dataclass
class RoundsResult:
    baseline: str
    samples_s: dict[str, list[float]]
    intervals: dict[str, SpeedupInterval | None] = field(default_factory=dict)
    hopeless: dict[str, str] = field(default_factory=dict)  # candidate -> why it was left out early
    stopped_by: str = ""  # settled | decided | time cap | only a baseline
    drift: float | None = None  # the baseline's change from the first to the last third of the rounds
    remeasured_after_drift: float | None = None  # the first attempt's drift, when it was measured again
    seconds: float = 0.0
    last_round_s: float = 0.0  # what the last round spent: the next one is foreseen to cost as much
    between_run_sd: float = BETWEEN_RUN_SD  # what the intervals carry, and where it came from
    between_run_source: str = "default"
    # Other processes' runnable threads after each round (system/cpu_tuning.py; empty where /proc cannot tell),
    # and our threads and the cores then: whether the rounds ran on an oversubscribed machine.
    others_running: list[int] = field(default_factory=list)
    threads: int = 1
    cores: int = 1

    @property
    def rounds(self) -> int:
        return len(self.samples_s[self.baseline])

    @property
    def settled(self) -> bool:
        return all(
            interval is not None and interval.settled
            for name, interval in self.intervals.items()
            if name not in self.hopeless
        )

    @property
    def load_changed(self) -> bool:
        return load_changed(self.samples_s[self.baseline])

    @property
    def crowded_rounds(self) -> int:
        return sum(cpu_tuning.oversubscribed(self.threads, self.cores, others) for others in self.others_running)

    @property
    def under_load(self) -> bool:
        """A quarter of the rounds or more ran with more runnable threads than cores: their times describe
        the crowding as much as the contenders (ours waited for each other at every parallel region)."""
        return bool(self.others_running) and self.crowded_rounds * CROWDED_SHARE >= len(self.others_running)

    @property
    def machine_answer(self) -> bool:
        """Whether the result may be kept as this machine's answer (cached): not when the load changed during
        the rounds or they ran crowded; then it answers for that moment only."""
        return not (self.load_changed or self.under_load)

    def answered(self, name: str) -> bool:
        """Whether `name`'s outcome is an answer worth keeping: left out as hopeless, or a speedup interval that
        decides or is narrow enough (intervals.answers); not a band that says nothing (0.01x-95x), which kept
        would be read back on every later run that asks, however quiet its machine."""
        interval = self.intervals.get(name)
        return name in self.hopeless or (interval is not None and answers(interval.low, interval.high))

    def worth_keeping(self, name: str) -> bool:
        """Whether `name`'s outcome may be cached as this machine's answer: the machine's (machine_answer) and an
        answer (answered)."""
        return self.machine_answer and self.answered(name)

    def load_note(self) -> str:
        """'measured under load: 3 other threads running beside 2 of ours on 2 cores in 9 of 10 rounds'."""
        if not self.under_load:
            return ""
        typical = sorted(self.others_running)[len(self.others_running) // 2]
        return (
            f"measured under load: {cpu_tuning.load_text(typical, self.threads, self.cores)} in "
            f"{self.crowded_rounds} of {len(self.others_running)} rounds"
        )

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in _SUMMARY} | {
            "load_note": self.load_note(),
            "median_s": {
                name: float(np.median(samples)) if samples else None for name, samples in self.samples_s.items()
            },
            "intervals": {name: i.to_dict() if i else None for name, i in self.intervals.items()},
        }


_SUMMARY = (
    "baseline",
    "rounds",
    "stopped_by",
    "settled",
    "seconds",
    "drift",
    "load_changed",
    "remeasured_after_drift",
    "hopeless",
    "between_run_sd",
    "between_run_source",
    "under_load",
)


# A decision between two ways of running one step (a memory format, compiling) caps its rule at this many
# rounds when they are short: a launch-bound GPU step (a few ms at batch 64) or a compile that changes nothing
# ties, and rounds that never settle a tie would otherwise run to the rule's cap every time.
TIE_MAX_ROUNDS = 60
TIE_MIN_SECONDS = 2.0
HOPELESS_CONFIRMED_BY = 2  # rounds before a candidate may be left out as hopeless: one step is never a verdict
CROWDED_SHARE = 4  # rounds under load, one in this many or more: the result is the moment's, not the machine's


def capped_for(rule: StoppingRule, round_s: float) -> StoppingRule:
    """`rule` with its time cap cut to TIE_MAX_ROUNDS rounds of `round_s` (the contenders' last warm-up
    steps), never below TIE_MIN_SECONDS nor above the rule's own cap."""
    cap = min(rule.max_seconds, max(TIE_MIN_SECONDS, TIE_MAX_ROUNDS * round_s))
    return replace(rule, max_seconds=cap, min_seconds=min(rule.min_seconds, cap))


def warmed_up_rounds(
    timers: dict[str, Callable[[], float]],
    baseline: str,
    rule: StoppingRule,
    warmup: int,
    seed: int,
    tie_capped: bool = False,
    within_cap: bool = False,
    **measuring,
) -> RoundsResult | None:
    """`warmup` rounds of every timer, discarded, then measure_rounds (`measuring`: its other arguments);
    `tie_capped`: a decision between two ways of running one step, whose rule is capped_for the last warm-up
    round. `within_cap`: None, not measured, when the last warm-up round (kernels made) already took half the
    rule's cap: its measured rounds would run several times past it (a user's GAN with multi-second steps spent
    60-116 s choosing its threads so, to overturn only the tie rule's choice); also None as soon as the warm-up
    steps have spent the whole cap (a heavy GAN's first steps alone ran 41 s past a 10 s cap)."""
    spent_s = 0.0
    for _ in range(warmup):
        round_s = 0.0
        for timer in timers.values():
            round_s += timer()
            if within_cap and spent_s + round_s > rule.max_seconds:
                return None
        spent_s += round_s
    if within_cap:
        # The warm-up spent part of the cap: the measured rounds get what is left of it, not all of it again, and
        # are not started unless two of them fit there (one round gives no interval: a 'measured' line that buys
        # nothing).
        left = rule.max_seconds - spent_s
        if 2 * round_s > left:
            return None
        rule = replace(rule, max_seconds=left, min_seconds=min(rule.min_seconds, left))
    return measure_rounds(timers, baseline, capped_for(rule, round_s) if tie_capped else rule, seed=seed, **measuring)


def measure_rounds(
    timers: dict[str, Callable[[], float]],
    baseline: str,
    rule: StoppingRule,
    seed: int = 0,
    stop_check: Callable[[], None] = lambda: None,
    load_probe: Callable[[], int | None] | None = None,
    spent: Callable[[], float] | None = None,
) -> RoundsResult:
    """`timers`: contender -> a callable that runs one step and returns its seconds (warmed up
    already). `stop_check()` is called after every round (it raises to abandon the measurement);
    `load_probe()` after every round: other processes' runnable threads (None: unknown; default: read from
    the machine, system/cpu_tuning.py). `spent()`: the seconds the timers have spent so far, what the cap bounds,
    where a call costs more than the time it returns (a cycle of lazy updates returns one step's mean); default:
    the sum of the returned times."""
    load_probe = load_probe or (lambda: cpu_tuning.others_running())
    result = _attempt(timers, baseline, rule, seed, stop_check, rule.max_seconds, load_probe, spent)
    first_s = result.seconds
    if result.load_changed and result.stopped_by != "only a baseline" and first_s <= rule.max_seconds / 2:
        first_drift = result.drift
        result = _attempt(timers, baseline, rule, seed + 1, stop_check, rule.max_seconds - first_s, load_probe, spent)
        result.remeasured_after_drift = first_drift
        result.seconds += first_s
    return result


def _attempt(timers, baseline, rule, seed, stop_check, budget, load_probe, spent) -> RoundsResult:
    order_source = random.Random(seed)
    result = RoundsResult(
        baseline=baseline,
        samples_s={name: [] for name in timers},
        between_run_sd=rule.between_run_sd,
        threads=torch.get_num_threads(),
        cores=cpu_tuning.cores(),
    )
    active = list(timers)
    meter = spent or (lambda: 0.0)
    after = meter()  # read once per round: under torchrun each reading is a collective
    while True:
        order = list(active)
        order_source.shuffle(order)
        before = after
        for name in order:
            result.samples_s[name].append(timers[name]())
        # At least the times returned: a meter that does not move (a fake, a timer that keeps none) still ends.
        returned = sum(result.samples_s[name][-1] for name in order)
        after = meter()
        result.last_round_s = max(after - before, returned)
        result.seconds += result.last_round_s
        seen = load_probe()
        if seen is not None:
            result.others_running.append(seen)
        stop_check()
        baseline_s = np.median(result.samples_s[baseline])
        for name in [name for name in active if name != baseline]:
            # Its fastest step, two at least: load slows a step, never speeds one, so one step that a neighbour's
            # burst slowed 5x (seen: 1.69 s against 0.26 s after 46 good rounds) never leaves a candidate out.
            samples = result.samples_s[name]
            if len(samples) >= HOPELESS_CONFIRMED_BY and min(samples) > rule.hopeless_factor * baseline_s:
                result.hopeless[name] = (
                    f"its fastest of {len(samples)} steps took {min(samples):.3g} s against {baseline}'s median "
                    f"{baseline_s:.3g} s: more than {rule.hopeless_factor:g}x slower"
                )
                active.remove(name)
        _update_intervals(result, rule.between_run_sd)
        stop = _why_stop(result, active, rule, budget)
        if stop:
            result.stopped_by = stop
            result.drift = reference_drift(result.samples_s[baseline])
            return result


def _update_intervals(result: RoundsResult, between_run_sd: float) -> None:
    for name, samples in result.samples_s.items():
        paired = min(len(samples), result.rounds)
        if name != result.baseline:
            result.intervals[name] = (
                speedup_interval(result.samples_s[result.baseline][:paired], samples[:paired], between_run_sd)
                if paired >= 2
                else None
            )


def _why_stop(result: RoundsResult, active: list[str], rule: StoppingRule, budget: float) -> str:
    rounds = result.rounds
    candidates = [name for name in active if name != result.baseline]
    # The next round is foreseen to cost what the last one did: one that would not fit the cap is not started.
    full = result.seconds + result.last_round_s > budget
    if rounds >= max(2, rule.min_rounds) and (result.seconds >= min(rule.min_seconds, budget) or full):
        if not candidates:
            return "only a baseline"
        if all(_answered(result.intervals[name], rule) for name in candidates):
            return rule.until
    # With two rounds (or nothing to compare) and no room for another, or past twice the cap: even two rounds do
    # not fit, stop with what there is (the bench says so before its rounds start: bench/measure.py).
    at_cap = full and (rounds >= 2 or not candidates)
    return "time cap" if at_cap or result.seconds >= 2 * budget else ""


def _answered(interval: SpeedupInterval | None, rule: StoppingRule) -> bool:
    return interval is not None and (interval.settled or (rule.until == UNTIL_DECIDED and interval.decided))
