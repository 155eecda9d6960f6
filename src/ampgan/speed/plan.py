"""The decisions a run needs before its first step, made by one function for every command.

    plan_run(config_for, dataset, device, ...) -> RunPlan
        1. which precisions: the ones given (a named mode measured as no faster is warned about), or
           chosen by measuring (FASTEST_MIXED: fp32 and the fastest mixed mode that is faster, as
           `compare` races; EVERY_USEFUL: fp32 and every mode not slower, as `bench` charts)
        2. the memory format of each (speed/layout.py), unless given
        3. whether each compiles (speed/compilation.py, after the memory format: the compiled step
           depends on it), unless given

`train`, `bench` and `compare` differ only in what they pass: the precisions they were given, which
choice they make when none was, and the memory format or compile setting the user fixed. Under
torchrun rank 0 measures alone and every rank gets its answer (each decision does that).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ampgan.precisions import BASELINE

GIVEN = "given"
FASTEST_MIXED = "fastest mixed"  # compare: fp32 against the fastest mode that is faster here
EVERY_USEFUL = "every useful"  # bench: fp32 and every mode not measured slower


@dataclass(frozen=True)
class RunPlan:
    precisions: tuple[str, ...]
    channels_last: tuple[str, ...]  # the precisions that run NHWC
    compile: tuple[str, ...]  # the precisions whose step is torch.compile'd
    left_out: list[dict] = field(default_factory=list)  # [{precision, reason}] not run
    precision_decisions: dict = field(default_factory=dict)  # name -> the speed decision, as a dict
    layouts: dict = field(default_factory=dict)  # name -> the layout decision, as a dict (when measured)
    compile_decisions: dict = field(default_factory=dict)  # name -> the compile decision (when measured)

    def config_for(self, config_for: Callable[[str], object], precision: str):
        """The run's config in `precision` with this plan's memory format and compile setting."""
        return config_for(precision).with_fields(
            {"compute.channels_last": precision in self.channels_last, "compute.compile": precision in self.compile}
        )


def plan_run(
    config_for: Callable[[str], object],
    dataset,
    device: torch.device,
    *,
    precisions: tuple[str, ...] = (),
    choose: str = GIVEN,
    channels_last: tuple[str, ...] | None = None,
    compile: tuple[str, ...] | None = None,
    decide_layout_and_compile_alone: bool = True,
    warn_named: bool = True,
    log: Callable[[str], None] = lambda line: None,
) -> RunPlan:
    """`config_for(precision)`: the run's config in that precision (batch size, budget: what is measured).
    `precisions`: the ones given (empty: chosen by `choose`); `channels_last`, `compile`: the precisions
    fixed by the user (None: decided by measuring). `decide_layout_and_compile_alone`: False skips those
    decisions when only fp32 would run because no mode was faster (nothing to race). `warn_named`: warn
    about a given mode already measured as no faster (a command that measures it itself says False)."""
    from ampgan.speed.compilation import compiled_precisions
    from ampgan.speed.layout import channels_last_precisions

    # Each decision made by measuring is timed and said, with how to skip it.
    started = time.perf_counter()
    chosen, left_out, measured = _precisions(config_for, dataset, device, tuple(precisions), choose, warn_named, log)
    if not precisions and choose != GIVEN:
        log(f"decisions: the precisions chosen in {time.perf_counter() - started:.1f} s (skip: give --precisions)")
    plan = RunPlan(
        precisions=chosen,
        channels_last=tuple(channels_last or ()),
        compile=tuple(compile or ()),
        left_out=left_out,
        precision_decisions=measured,
    )
    if chosen == (BASELINE,) and not precisions and not decide_layout_and_compile_alone:
        return plan
    layouts, compile_decisions = {}, {}
    if channels_last is None:
        started = time.perf_counter()
        channels_last, layouts = channels_last_precisions(config_for, chosen, dataset, device, log)
        log(
            f"decisions: the memory format measured in {time.perf_counter() - started:.1f} s "
            "(skip: give --channels-last or --no-channels-last)"
        )
    if compile is None:
        started = time.perf_counter()
        compile, compile_decisions = compiled_precisions(
            lambda name: config_for(name).with_fields({"compute.channels_last": name in channels_last}),
            chosen,
            dataset,
            device,
            log,
        )
        log(
            f"decisions: compiling decided in {time.perf_counter() - started:.1f} s (skip: give --compile or "
            "--no-compile)"
        )
    return RunPlan(
        precisions=chosen,
        channels_last=tuple(channels_last),
        compile=tuple(compile),
        left_out=left_out,
        precision_decisions=measured,
        layouts=layouts,
        compile_decisions=compile_decisions,
    )


def _precisions(config_for, dataset, device, given: tuple[str, ...], choose: str, warn_named: bool, log):
    """(the precisions to run, what was left out and why, the decisions measured as dicts)."""
    from ampgan.speed.decision import choose_for_comparison, decide_for_run, warn_about_named_modes
    from ampgan.training.distributed import gather_objects, world

    baseline_config = config_for(BASELINE)
    if given or choose == GIVEN:
        if given and warn_named:
            warn_about_named_modes(baseline_config, device, list(given))
        return tuple(given), [], {}
    decisions, cannot_run = decide_for_run(baseline_config, dataset, device, log=log) if world().is_main else ({}, [])
    decisions, cannot_run = gather_objects((decisions, cannot_run))[0]  # rank 0's answer for every rank
    for decision in decisions.values():
        log(f"  {decision.describe()}")
    measured = {name: decision.to_dict() for name, decision in decisions.items()}
    if choose == FASTEST_MIXED:
        chosen, left_out = choose_for_comparison(decisions, cannot_run)
        return chosen, left_out, measured
    if choose == EVERY_USEFUL:
        chosen = (BASELINE, *(name for name, d in decisions.items() if d.verdict != "slower"))
        left_out = cannot_run + [
            {"precision": name, "reason": d.reason()} for name, d in decisions.items() if d.verdict == "slower"
        ]
        return chosen, left_out, measured
    raise ValueError(f"unknown precision choice {choose!r}")
