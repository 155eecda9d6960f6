"""The precision modes, one object each: what a mode computes in, where it runs, how it is drawn.

Everything that differs between fp32, tf32, bf16 and fp16 lives in its `Precision` object (nanoGPT maps
one dtype string to an autocast context and a scaler; this is that mapping, written once). The training
policy (training/precision.py), the speed decisions, the tables and figures all look a mode up here by
name, so adding a mode means adding one entry below (and, for the % of peak column, its peak figures in
system/hardware.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ampgan.errors import AmpganError


@dataclass(frozen=True)
class Precision:
    name: str
    compute_dtype: torch.dtype  # the dtype autocast casts matmul/conv inputs to (fp32 modes: float32)
    autocast: bool  # runs under torch.autocast
    loss_scaling: bool  # gradients need a loss scale (fp16's exponent range underflows)
    tf32_matmul: bool  # CUDA: the process-wide TF32 switch for matmuls and convolutions
    cpu: bool  # has a CPU path (not necessarily a fast one: the speed decision measures that)
    cuda_capability: tuple[int, int] | None  # the oldest NVIDIA compute capability with fast units; None: any
    cuda_requirement: str  # why older GPUs cannot run it, for the error line
    colour: str  # in every figure
    order: int  # in tables and legends
    mixed: bool  # the study's "mixed precision": 16-bit compute, fp32 master weights
    summary: str  # one line for the README's table and --help

    def unavailable_reason(self, device_type: str, capability: tuple[int, int] | None = None) -> str | None:
        """Why this mode cannot run on that device, or None when it can."""
        if device_type == "cuda":
            if self.cuda_capability is not None and capability is not None and capability < self.cuda_capability:
                return self.cuda_requirement
            return None
        if not self.cpu:
            return "a CUDA tensor-core mode"
        return None


_MODES = (
    Precision("fp32", torch.float32, autocast=False, loss_scaling=False, tf32_matmul=False, cpu=True,
              cuda_capability=None, cuda_requirement="", colour="#1f77b4", order=0, mixed=False,
              summary="strict FP32 (TF32 switched off on CUDA)"),
    Precision("tf32", torch.float32, autocast=False, loss_scaling=False, tf32_matmul=True, cpu=False,
              cuda_capability=(8, 0), cuda_requirement="needs an Ampere or newer GPU (compute capability 8.0)",
              colour="#9467bd", order=1, mixed=False, summary="FP32 storage, TF32 tensor-core matmuls"),
    Precision("bf16", torch.bfloat16, autocast=True, loss_scaling=False, tf32_matmul=False, cpu=True,
              cuda_capability=(8, 0), cuda_requirement="needs an Ampere or newer GPU (compute capability 8.0)",
              colour="#2ca02c", order=2, mixed=True, summary="autocast to bfloat16, no loss scaling"),
    # fp16 runs on every NVIDIA GPU (a P100 has fp16 units but no tensor cores: the study measured no gain
    # there); whether it is faster is the speed decision's question.
    Precision("fp16", torch.float16, autocast=True, loss_scaling=True, tf32_matmul=False, cpu=True,
              cuda_capability=None, cuda_requirement="",
              colour="#d62728", order=3, mixed=True, summary="autocast to float16 with loss scaling"),
)

PRECISIONS: dict[str, Precision] = {mode.name: mode for mode in sorted(_MODES, key=lambda m: m.order)}
NAMES: tuple[str, ...] = tuple(PRECISIONS)
BASELINE = "fp32"


def precision(name: str) -> Precision:
    """The mode called `name`; one error line listing the modes otherwise."""
    try:
        return PRECISIONS[name]
    except (KeyError, TypeError):
        raise AmpganError(f"unknown precision {name!r}: choose one of {', '.join(NAMES)}") from None


def colour(name: str) -> str | None:
    mode = PRECISIONS.get(name)
    return mode.colour if mode else None


def in_order(names) -> list[str]:
    """`names` sorted as tables and legends show them (unknown names last, as given)."""
    return sorted(names, key=lambda name: PRECISIONS[name].order if name in PRECISIONS else len(PRECISIONS))
