"""The study's decide stage: the precisions to race and how each runs (memory format, compile), with the
measurements behind them (speed/plan.py), kept in study.json so a resumed study races what it began with."""

from __future__ import annotations

import torch

from ampgan.speed.plan import FASTEST_MIXED, Asked, RunPlan, plan_run
from ampgan.study.spec import CompareSpec


def decide(spec: CompareSpec, dataset, device: torch.device, log) -> RunPlan:
    """With no mode faster than fp32 there is nothing to race, and no format or compile is decided."""
    asked = Asked(spec.train_config, FASTEST_MIXED, spec.precisions, spec.channels_last, spec.compile)
    return plan_run(asked, dataset, device, log)
