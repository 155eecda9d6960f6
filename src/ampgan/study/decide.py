"""The study's decide stage: the precisions to race and how each runs (memory format, compile), with the
measurements behind them (speed/plan.py), kept in study.json so a resumed study races what it began with."""

from __future__ import annotations

import torch

from ampgan.speed.plan import FASTEST_MIXED, plan_run
from ampgan.study.spec import CompareSpec


def decide(spec: CompareSpec, dataset, device: torch.device, log) -> dict:
    """With no mode faster than fp32 there is nothing to race, and no format or compile is decided."""
    plan = plan_run(
        spec.train_config,
        dataset,
        device,
        precisions=spec.precisions,
        choose=FASTEST_MIXED,
        channels_last=spec.channels_last,
        compile=spec.compile,
        decide_layout_and_compile_alone=False,
        log=log,
    )
    return {
        "precisions": list(plan.precisions),
        "left_out": plan.left_out,
        "decisions": plan.precision_decisions,
        "channels_last": list(plan.channels_last),
        "compile": list(plan.compile),
        "layouts": plan.layouts,
        "compile_decisions": plan.compile_decisions,
        "threads": plan.threads,  # a resumed study runs on them too (speed/threads.py apply_threads)
    }
