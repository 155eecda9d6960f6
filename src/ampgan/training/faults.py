"""Numeric faults: when a run must stop rather than loop on NaN or a collapsed loss scale.

Checked at every log point (the only place the step's numbers are read from the device), so before
every checkpoint, sample grid and exported generator:
- every precision: a non-finite weight in G or D. Losses can stay finite while the weights have already
  overflowed (--set optim.lr_g=1e10: losses of 1e22, a thousand inf weights), so the weights are what is checked.
- fp32/tf32/bf16: a non-finite loss anywhere in the window (the window's mean is then NaN/inf);
  there is no loss scaler to skip the step, so the weights are already poisoned.
- fp16: overflowing steps are skipped by the scaler and counted; the run stops when the scale
  falls below `min_loss_scale`, when more than `max_skipped_fraction` of the last `window_steps`
  steps were skipped (the scaler can no longer find a working scale), or, with a static scale,
  when every update of a network was skipped over the first `static_steps` steps (a fixed scale
  that overflows at the start never stops overflowing).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import torch

from ampgan.errors import AmpganError


class NumericFault(AmpganError):
    """The run stopped on a numeric fault; the last checkpoint before it is intact."""

    exit_code = 3


@dataclass(frozen=True)
class FaultRules:
    min_loss_scale: float = 2.0**-14
    max_skipped_fraction: float = 0.5
    window_steps: int = 200
    static_steps: int = 10


def non_finite_weights(networks: dict[str, torch.nn.Module]) -> list[str]:
    """The networks (by name) with a NaN or inf weight or statistic (batch norm's running variance
    overflows first: the samples, drawn in eval mode, are then NaN while every parameter is finite).
    One multi-tensor norm per network: a norm is non-finite exactly when some element is."""
    found = []
    for name, network in networks.items():
        tensors = [p.detach() for p in network.parameters()]
        tensors += [b for b in network.buffers() if b.is_floating_point() and b.numel()]
        if tensors and not bool(torch.stack(torch._foreach_norm(tensors)).isfinite().all()):
            found.append(name)
    return found


@dataclass
class FaultMonitor:
    uses_loss_scaling: bool
    rules: FaultRules = FaultRules()
    static_scale: bool = False
    d_updates_per_step: int = 1
    _windows: deque[tuple[int, int]] = field(default_factory=deque, init=False)  # (steps, skipped steps) per window

    def check_weights(self, networks: dict[str, torch.nn.Module], step: int) -> str | None:
        bad = non_finite_weights(networks)
        return (
            f"{' and '.join(bad)} {'have' if len(bad) > 1 else 'has'} non-finite (NaN or inf) weights or "
            f"statistics by step {step}: the updates "
            "overflowed; lower the learning rate (--set optim.lr_g=... --set optim.lr_d=...), or train in "
            "fp32 if this was a 16-bit precision"
            if bad
            else None
        )

    def check(self, record: dict, steps_in_window: int, skipped_in_window: int) -> str | None:
        """A sentence saying why the run must stop, or None."""
        if not self.uses_loss_scaling:
            bad = [name for name in ("loss_d", "loss_g") if not math.isfinite(record[name])]
            return (
                f"{' and '.join(bad)} became non-finite (NaN or inf) by step {record['step']}: "
                "lower the learning rate (--set optim.lr_g=... --set optim.lr_d=...), or train in fp32 if "
                "this was bf16"
                if bad
                else None
            )
        if self.static_scale and record["step"] >= self.rules.static_steps:
            for network, total, updates in (
                ("D", "skipped_d_total", self.d_updates_per_step),
                ("G", "skipped_g_total", 1),
            ):
                if record.get(total, 0) >= updates * record["step"]:
                    return (
                        f"every fp16 update of {network} was skipped for overflow in the first {record['step']} "
                        f"steps at the static loss scale {record['loss_scale_d']:g}: it overflows at every step; "
                        "give a lower --loss-scale, or 'dynamic'"
                    )
        for name in (key for key in record if key.startswith("loss_scale_")):  # D's, G's and each extra update's
            if record[name] < self.rules.min_loss_scale:
                return (
                    f"the fp16 loss scale collapsed ({name} = {record[name]:.3g} < {self.rules.min_loss_scale:.3g}) "
                    f"by step {record['step']}: its gradients are inf or NaN at any scale, even unscaled, so an "
                    "operation computes in fp16 what fp16 cannot hold (an epsilon under its 6e-8 as in sqrt(var + "
                    "1e-8), a value past 65504; 'ampgan preflight --model ...' names the parameters it reaches): "
                    "use bf16 or fp32, or compute that part in fp32 (.float(), GAN.fp32_modules)"
                )
        self._windows.append((steps_in_window, skipped_in_window))
        while sum(s for s, _ in self._windows) - self._windows[0][0] >= self.rules.window_steps:
            self._windows.popleft()
        steps = sum(s for s, _ in self._windows)
        skipped = sum(k for _, k in self._windows)
        if steps >= self.rules.window_steps and skipped > self.rules.max_skipped_fraction * steps:
            return (
                f"{skipped} of the last {steps} fp16 optimizer updates were skipped for overflow "
                f"(limit {self.rules.max_skipped_fraction:.0%}) by step {record['step']}: use bf16 or fp32, "
                "or lower the learning rate (--set optim.lr_g=... --set optim.lr_d=...)"
            )
        return None
