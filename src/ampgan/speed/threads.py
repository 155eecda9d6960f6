"""How many threads the step runs on: fitted to the cores other processes leave, measured before any speed is.

A step measured with two threads on a 2-core machine while another process runs is mostly two threads waiting
for each other (system/cpu_tuning.py): every speed decision taken then describes the crowding, not the
precision. So before the decisions, when the machine is oversubscribed (our threads plus the other processes'
runnable threads exceed the cores), the run's real fp32 step is timed at its thread count and at the count that
fits, in interleaved rounds until decided (speed/rounds.py), and the fitted count is kept unless it is measured
slower (a tie goes to fewer threads: they leave the neighbour its core and never wait on a descheduled partner).
With free cores nothing is measured. The answer describes this moment, so it is never cached; a user's
OMP_NUM_THREADS is obeyed and only reported; under torchrun each rank keeps its share (training/distributed.py).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import torch

from ampgan.precisions import BASELINE
from ampgan.speed.ab import outcome_of
from ampgan.speed.decision import UNTIL_DECIDED, WARMUP_STEPS, duration_text, interval_text
from ampgan.speed.rounds import StoppingRule, warmed_up_rounds
from ampgan.speed.step_timer import StepTimer
from ampgan.system import cpu_tuning
from ampgan.training.distributed import world

THREADS_RULE = StoppingRule(min_rounds=3, max_seconds=10.0, until=UNTIL_DECIDED)
AS_IS, FEWER = "as is", "fewer"


def thread_choice(
    current: int,
    machine_cores: int,
    others: int | None,
    given_by: str | None,
    distributed: bool,
    measure: Callable[[int, int], object] | None,
) -> dict:
    """The thread count to run with and why, as a dict: {threads, before, others_running, cores, reason,
    measured}. `measure(current, fewer)` -> a RoundsResult of AS_IS (baseline) against FEWER, None when a
    step is too long to measure within the cap, or why it was not measured (a string); called only when the
    machine is oversubscribed (pure given it: testable with injected rounds)."""
    found = {"threads": current, "before": current, "others_running": others, "cores": machine_cores, "measured": None}
    load = cpu_tuning.load_text(others, current, machine_cores)
    if given_by:
        return found | {"reason": f"{current} thread(s), fixed by {given_by}"}
    if distributed:
        return found | {"reason": f"{current} thread(s): each process's share of the cores"}
    if not cpu_tuning.oversubscribed(current, machine_cores, others) or measure is None:
        return found | {"reason": f"{current} thread(s): {load}, the cores are free"}
    fewer = cpu_tuning.fitting_threads(machine_cores, others, current)
    rounds = measure(current, fewer)
    if rounds is None or isinstance(rounds, str):  # a string: why it was not measured
        why = rounds or f"a step on each count is too long for the measurement's {THREADS_RULE.max_seconds:g} s cap"
        return found | {
            "threads": fewer,
            "reason": f"{fewer} thread(s): {load}; not measured: {why}, and fewer threads leave the other "
            "processes their cores (fix the count with OMP_NUM_THREADS)",
        }
    outcome = outcome_of(rounds, FEWER)
    chosen = current if outcome.verdict == "slower" else fewer
    said = (
        f"{fewer} thread(s) {duration_text(outcome.candidate_step_s)} vs {current} "
        f"{duration_text(outcome.baseline_step_s)} per fp32 step{interval_text(outcome.interval)}"
    )
    return found | {
        "threads": chosen,
        "measured": said,
        "reason": f"{chosen} thread(s): {load}; measured {said}"
        + ("" if chosen == fewer else f": {fewer} was slower, kept {current}"),
    }


def fit_threads(config, dataset, device: torch.device, log=lambda line: None, budget=None) -> dict:
    """Before the speed decisions: the threads that fit the machine now (thread_choice), applied to this
    process and said in one line. Not a CPU run: nothing to fit. `budget`: the decisions' share of a command's
    budget (speed/plan.py), from which this measurement takes its cap, or is not made."""
    if device.type != "cpu":
        return {"threads": None, "reason": "not a CPU run"}
    current = torch.get_num_threads()

    def measure(current: int, fewer: int):
        if budget is not None and not budget.take(THREADS_RULE.max_seconds, cached=False):
            return budget.too_long(THREADS_RULE.max_seconds)
        started = time.perf_counter()  # building the step is spent from the share too
        timer = StepTimer(
            config.with_fields({"precision.name": BASELINE, "precision.loss_scale": None}),
            dataset,
            device,
            data_parallel=False,
            across_ranks=False,
        )
        try:
            return warmed_up_rounds(
                {AS_IS: functools.partial(_step_at, current, timer), FEWER: functools.partial(_step_at, fewer, timer)},
                AS_IS,
                THREADS_RULE,
                WARMUP_STEPS,
                config.seed,
                within_cap=True,
                load_probe=lambda: None,
            )
        finally:
            torch.set_num_threads(current)
            if budget is not None:
                budget.refund(THREADS_RULE.max_seconds - (time.perf_counter() - started))

    choice = thread_choice(
        current,
        cpu_tuning.cores(),
        cpu_tuning.others_running(),
        cpu_tuning.threads_given(),
        world().distributed,
        measure,
    )
    torch.set_num_threads(choice["threads"])
    log(f"threads: {choice['reason']}")
    return choice


# One timed step on `threads` threads: the two counts take turns in one process.
def _step_at(threads: int, timer) -> float:
    torch.set_num_threads(threads)
    return timer()


def apply_threads(choice: dict | None) -> None:
    """A resumed study runs on the threads it decided at its start (its bench and runs were measured so)."""
    if choice and choice.get("threads") and not cpu_tuning.threads_given():
        torch.set_num_threads(int(choice["threads"]))
