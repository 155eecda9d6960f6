"""The roofline arithmetic: one operation's time on one GPU in one precision, and a step's sum.

    time(op) = max(FLOPs / (peak of its unit x attainable fraction),
                   bytes / (bandwidth x attainable fraction)) + launch cost per kernel

A matrix op runs on tensor cores when the precision and the GPU have them for its dtype and its
dimensions are aligned (multiples of 8 in fp16/bf16, of 4 in tf32; NVIDIA's "Tensor Core
Requirements"); otherwise on the FP32 units (a 16-bit product without tensor cores still
accumulates in fp32 under autocast, at the FP32 rate). Every other op is memory traffic. Pure
functions on plain numbers: tests/test_projection.py checks them against hand-computed cases.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ampgan.bench.ops import OpRow
from ampgan.system.gpus import GpuSpec

TENSOR_ALIGNMENT = {"tf32": 4, "bf16": 8, "fp16": 8}
_SIXTEEN_BIT = {"bf16": "bfloat16", "fp16": "float16"}


@dataclass(frozen=True)
class Efficiency:
    """One point of the attainable fractions (and the launch cost) the projection assumes."""

    tensor: float  # of the tensor-core peak
    fp32: float  # of the FP32 (CUDA-core) peak
    bandwidth: float  # of the datasheet memory bandwidth
    launch_s: float  # per kernel


@dataclass(frozen=True)
class OpTime:
    seconds: float
    compute_s: float
    memory_s: float
    launch_s: float
    unit: str  # "tensor" | "fp32" | "memory"

    @property
    def bound(self) -> str:
        """What limits this op: "compute", "memory" or "launch" (whichever part is largest)."""
        parts = {"compute": self.compute_s, "memory": self.memory_s, "launch": self.launch_s}
        return max(parts, key=parts.get)


def matrix_unit(row: OpRow, gpu: GpuSpec, precision: str) -> tuple[str, float]:
    """(unit, peak TFLOP/s) a matrix op runs at on this GPU in this precision."""
    fp32 = gpu.peak_tflops["fp32"] or 0.0
    if precision == "tf32":
        peak = gpu.peak_tflops.get("tf32")
        if peak and row.dtype == "float32" and row.alignment % TENSOR_ALIGNMENT["tf32"] == 0:
            return "tensor", peak
        return "fp32", fp32
    # Either 16-bit dtype: one precision's table stands in for the other's (the same bytes).
    if precision in _SIXTEEN_BIT and row.dtype in _SIXTEEN_BIT.values():
        peak = gpu.peak_tflops.get(precision)
        if gpu.tensor_cores and peak and row.alignment % TENSOR_ALIGNMENT[precision] == 0:
            return "tensor", peak
    return "fp32", fp32


def op_time(row: OpRow, batch_size: float, gpu: GpuSpec, precision: str, efficiency: Efficiency) -> OpTime:
    """One execution of `row` at `batch_size` (not multiplied by its weight)."""
    memory_s = row.bytes_at(batch_size) / (gpu.bandwidth_gbs * 1e9 * efficiency.bandwidth)
    if row.unit != "matrix":
        return OpTime(memory_s + efficiency.launch_s, 0.0, memory_s, efficiency.launch_s, "memory")
    unit, peak = matrix_unit(row, gpu, precision)
    fraction = efficiency.tensor if unit == "tensor" else efficiency.fp32
    compute_s = row.flops_at(batch_size) / (peak * 1e12 * fraction) if peak else float("inf")
    return OpTime(max(compute_s, memory_s) + efficiency.launch_s, compute_s, memory_s, efficiency.launch_s, unit)


@dataclass(frozen=True)
class StepTime:
    seconds: float
    by_bound: dict[str, float]  # seconds spent in ops limited by compute / memory, and in launching
    tensor_flops_share: float  # of the step's matrix FLOPs, the share that runs on tensor cores
    kernels: float

    @property
    def bound(self) -> str:
        return max(self.by_bound, key=self.by_bound.get)


def step_time(rows: Iterable[OpRow], batch_size: float, gpu: GpuSpec, precision: str,
              efficiency: Efficiency) -> StepTime:
    """The sum over the step's ops, each weighted by how often a step runs it."""
    total, kernels, tensor_flops, matrix_flops = 0.0, 0.0, 0.0, 0.0
    by_bound = {"compute": 0.0, "memory": 0.0, "launch": 0.0}
    for row in rows:
        timed = op_time(row, batch_size, gpu, precision, efficiency)
        total += timed.seconds * row.weight
        kernels += row.weight
        by_bound["launch"] += timed.launch_s * row.weight
        limited = "compute" if timed.compute_s > timed.memory_s else "memory"
        by_bound[limited] += max(timed.compute_s, timed.memory_s) * row.weight
        if row.unit == "matrix":
            flops = row.flops_at(batch_size) * row.weight
            matrix_flops += flops
            tensor_flops += flops if timed.unit == "tensor" else 0.0
    return StepTime(total, by_bound, tensor_flops / matrix_flops if matrix_flops else 0.0, kernels)
