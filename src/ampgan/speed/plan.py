"""The decisions a run needs before its first step, made by one function for every command.

    plan_run(Asked(config_for, choose, ...), dataset, device) -> RunPlan
        0. the threads, fitted to the cores other processes leave (speed/threads.py): every decision after
           it, and the run, are measured on them
        1. which precisions: the ones given (a named mode measured as no faster is warned about), or
           chosen by measuring (FASTEST_MIXED: fp32 and the fastest mixed mode that is faster, as
           `compare` races; EVERY_USEFUL: fp32 and every mode not slower, as `bench` charts)
        2. the memory format of each (speed/layout.py), unless given
        3. whether each compiles (speed/compilation.py, after the memory format: the compiled step
           depends on it), unless given

`train`, `bench` and `compare` differ only in what they pass: the precisions they were given, which
choice they make when none was, and the memory format or compile setting the user fixed. Under
torchrun rank 0 measures alone and every rank gets its answer (each decision does that).

A command with a budget of its own (`bench --max-seconds`) gives the decisions a share of it
(`decision_seconds`): a decision whose answer is not cached is measured only when its time cap fits in
what is left of the share, and otherwise takes its default (every mode this device runs; NCHW), said in
one line with how to choose instead. Which decisions fit is settled before any is measured, from their
caps, so every rank agrees.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch

from ampgan.precisions import BASELINE, in_order
from ampgan.speed.compilation import compiled_precisions
from ampgan.speed.decision import (
    DECISION_RULE,
    cached_decisions,
    candidates_for,
    choose_for_comparison,
    decide_for_run,
    warn_about_named_modes,
)
from ampgan.speed.layout import LAYOUT_RULE, cached_layout, channels_last_precisions
from ampgan.speed.threads import fit_threads
from ampgan.training.distributed import rank_zeros, world


@dataclass(frozen=True)
class Choice:
    """How a command chooses its precisions when none is given, and what follows from that choice."""

    name: str
    # (decisions, what cannot run, modes run without a decision) -> (the precisions, what was left out and why);
    # None: the precisions are given.
    pick: Callable[[dict, list, list], tuple[tuple[str, ...], list[dict]]] | None = None
    # A given mode already measured as no faster is warned about: not where the command measures it itself
    # (bench) or warns on its own (train: speed/planned_run.py).
    warn_named: bool = False
    # With no mode faster, fp32 alone still gets its memory format and compile decided (compare: nothing to
    # race, so nothing is decided).
    alone_decides: bool = True


def _every_useful(decisions: dict, cannot_run: list, unmeasured: list) -> tuple[tuple[str, ...], list[dict]]:
    """fp32 and every mode not measured slower (one that only breaks even may gain at larger batches, which is
    what a bench charts), and the modes run without a decision."""
    kept = {name for name, d in decisions.items() if d.verdict != "slower"} | set(unmeasured)
    return (BASELINE, *in_order(kept)), cannot_run + [
        {"precision": name, "reason": d.reason()} for name, d in decisions.items() if d.verdict == "slower"
    ]


GIVEN = Choice("given")  # train: its one precision
# compare: fp32 against the fastest mode that is faster here
FASTEST_MIXED = Choice(
    "fastest mixed",
    lambda decisions, cannot_run, unmeasured: choose_for_comparison(decisions, cannot_run),
    warn_named=True,
    alone_decides=False,
)
EVERY_USEFUL = Choice("every useful", _every_useful)  # bench: fp32 and every mode not measured slower


@dataclass(frozen=True)
class Asked:
    """What a command asks of its plan. `config_for(precision)`: the run's config in that precision (batch
    size, budget: what is measured); `precisions`: the ones given (empty: chosen by `choose`); `channels_last`,
    `compile`: the precisions fixed by the user (None: decided by measuring); `decision_seconds`: the share of
    the command's budget the decisions may take (None: no limit; the compile decision is not bounded by it: a
    command with a budget fixes compiling, bench's --compile)."""

    config_for: Callable[[str], object]
    choose: Choice = GIVEN
    precisions: tuple[str, ...] = ()
    channels_last: tuple[str, ...] | None = None
    compile: tuple[str, ...] | None = None
    decision_seconds: float | None = None


@dataclass(frozen=True)
class RunPlan:
    """The plan, kept as it is (study.json's `decided`) and read back with files/records.py."""

    precisions: tuple[str, ...]
    channels_last: tuple[str, ...] = ()  # the precisions that run NHWC
    compile: tuple[str, ...] = ()  # the precisions whose step is torch.compile'd
    left_out: list[dict] = field(default_factory=list)  # [{precision, reason}] not run
    decisions: dict = field(default_factory=dict)  # name -> the speed decision, as a dict
    layouts: dict = field(default_factory=dict)  # name -> the layout decision, as a dict (when measured)
    compile_decisions: dict = field(default_factory=dict)  # name -> the compile decision (when measured)
    threads: dict | None = None  # the thread count chosen and why (speed/threads.py)


def plan_run(asked: Asked, dataset, device: torch.device, log: Callable[[str], None] = lambda line: None) -> RunPlan:
    """The plan for what a command `asked`: each decision made by measuring is timed and said, with how to
    skip it."""
    budget = _DecisionBudget(asked.decision_seconds, log)
    threads = fit_threads(asked.config_for(BASELINE), dataset, device, log, budget)
    started = time.perf_counter()
    chosen, left_out, measured = _precisions(asked, dataset, device, log, budget)
    if not asked.precisions and asked.choose != GIVEN:
        log(f"decisions: the precisions chosen in {time.perf_counter() - started:.1f} s (skip: give --precisions)")
    plan = RunPlan(
        chosen, tuple(asked.channels_last or ()), tuple(asked.compile or ()), left_out, measured, threads=threads
    )
    if chosen == (BASELINE,) and not asked.precisions and not asked.choose.alone_decides:
        return plan
    if asked.channels_last is None:
        started = time.perf_counter()
        fitting = budget.layouts_that_fit(asked.config_for, chosen, device)  # the others run NCHW
        channels_last, layouts = channels_last_precisions(asked.config_for, fitting, dataset, device, log)
        plan = replace(plan, channels_last=channels_last, layouts=layouts)
        log(
            f"decisions: the memory format decided in {time.perf_counter() - started:.1f} s "
            "(skip: give --channels-last or --no-channels-last)"
        )
    if asked.compile is None:
        started = time.perf_counter()
        compiled, decisions = compiled_precisions(
            lambda name: asked.config_for(name).with_fields({"compute.channels_last": name in plan.channels_last}),
            chosen,
            dataset,
            device,
            log,
        )
        plan = replace(plan, compile=compiled, compile_decisions=decisions)
        log(
            f"decisions: compiling decided in {time.perf_counter() - started:.1f} s (skip: give --compile or "
            "--no-compile)"
        )
    return plan


class _DecisionBudget:
    """What the decisions may spend (None: no limit), handed out in foreseen time caps: a decision whose
    answer is cached costs nothing; one that must be measured fits when its cap fits in what is left."""

    def __init__(self, seconds: float | None, log):
        self.seconds, self.left, self.log = seconds, seconds, log

    def take(self, cap_s: float, cached: bool) -> bool:
        """Whether a decision with this time cap runs (and, when measured, its cap is spent)."""
        if self.left is None or cached:
            return True
        if cap_s > self.left:
            return False
        self.left -= cap_s
        return True

    def refund(self, unspent_s: float) -> None:
        """A measurement that ended before its cap gives back what it did not spend (the thread count's,
        taken first, would otherwise keep the precision decision from fitting in a share it fits)."""
        if self.left is not None:
            self.left += max(unspent_s, 0.0)

    def why_not(self, what: str, cap_s: float) -> str:
        return f"decisions: {what} not measured: {self.too_long(cap_s)}"

    def too_long(self, cap_s: float) -> str:
        return (
            f"measuring takes up to {cap_s:.0f} s, more than the {max(self.left, 0):.3g} s left of the decisions' "
            f"share of the budget ({self.seconds:.3g} s)"
        )

    def layouts_that_fit(self, config_for, precisions, device) -> tuple[str, ...]:
        """The precisions whose memory format is decided (cached, or measured within the share), in order;
        the others run NCHW. Rank 0's answer for every rank."""
        if self.left is None:
            return tuple(precisions)
        fitting = []
        if world().is_main:
            for name in precisions:
                if self.take(LAYOUT_RULE.max_seconds, cached_layout(config_for(name), device) is not None):
                    fitting.append(name)
                else:
                    self.log(
                        self.why_not(f"the memory format of {name}", LAYOUT_RULE.max_seconds)
                        + f"; {name} runs NCHW (choose with --channels-last)"
                    )
        return tuple(rank_zeros(fitting))


def _precisions(asked: Asked, dataset, device, log, budget: _DecisionBudget):
    """(the precisions to run, what was left out and why, the decisions measured as dicts)."""
    baseline_config, choose = asked.config_for(BASELINE), asked.choose
    if asked.precisions or choose == GIVEN:
        if asked.precisions and choose.warn_named:
            warn_about_named_modes(baseline_config, device, list(asked.precisions))
        return tuple(asked.precisions), [], {}
    if world().is_main and budget.left is not None:
        candidates, cannot_run = candidates_for(device)
        cached = cached_decisions(baseline_config, device, candidates)
        if not budget.take(DECISION_RULE.max_seconds, len(cached) == len(candidates)):
            # Not measured: the cached answers stand, every other mode this device runs is timed by the command.
            skipped = [name for name in candidates if name not in cached]
            log(
                budget.why_not("the precisions", DECISION_RULE.max_seconds)
                + f"; {', '.join(skipped)} timed without it (choose with --precisions)"
            )
            return _chosen(choose, cached, cannot_run, skipped, log)
    decisions, cannot_run = decide_for_run(baseline_config, dataset, device, log=log) if world().is_main else ({}, [])
    return _chosen(choose, decisions, cannot_run, [], log)


def _chosen(choose: Choice, decisions: dict, cannot_run: list, unmeasured: list[str], log):
    """(the precisions to run, what was left out and why, the decisions as dicts) from rank 0's decisions;
    `unmeasured`: modes that run without a decision (its share of the budget did not fit one)."""
    decisions, cannot_run, unmeasured = rank_zeros((decisions, cannot_run, unmeasured))  # rank 0's answer
    for decision in decisions.values():
        log(f"  {decision.describe()}")
    chosen, left_out = choose.pick(decisions, cannot_run, unmeasured)
    return chosen, left_out, {name: decision.to_dict() for name, decision in decisions.items()}
