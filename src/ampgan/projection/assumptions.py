"""What the roofline assumes beyond the datasheets, each with its band and where it comes from.

Nothing here is fitted to anyone's measurements (the study's T4 times included): the attainable
fractions are ranges read from how such kernels are known to behave, the per-kernel cost is measured
on this machine plus an assumed GPU launch gap. The projection is drawn at the band's optimistic end,
its middle and its pessimistic end; the spread is its uncertainty, and it is shown with every number.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from ampgan.projection.roofline import Efficiency


@dataclass(frozen=True)
class Assumption:
    name: str
    low: float  # the pessimistic end for a fraction, the optimistic end for a cost
    mid: float
    high: float
    unit: str
    source: str

    def to_dict(self) -> dict:
        return {"name": self.name, "low": self.low, "mid": self.mid, "high": self.high, "unit": self.unit,
                "source": self.source}


TENSOR_FRACTION = Assumption(
    "tensor-core fraction of peak", 0.30, 0.50, 0.75, "fraction",
    "assumption. NVIDIA, Matrix Multiplication Background User's Guide (DU-09799-001): cuBLAS reaches most of "
    "the tensor peak only on large aligned products, tile and wave quantization cost the rest; a GAN's "
    "convolutions (cuDNN implicit GEMM) at training shapes are taken to reach 30-75%")
FP32_FRACTION = Assumption(
    "FP32-unit fraction of peak", 0.50, 0.70, 0.85, "fraction",
    "assumption. SGEMM and FP32 cuDNN convolutions on CUDA cores are compute-dense kernels that reach well over "
    "half of the FP32 peak on large problems; taken as 50-85%")
BANDWIDTH_FRACTION = Assumption(
    "memory-bandwidth fraction of peak", 0.60, 0.75, 0.90, "fraction",
    "assumption. STREAM-style kernels (McCalpin 1995; BabelStream, Deakin et al. 2016) reach 70-90% of a GPU's "
    "datasheet bandwidth; element-wise, normalisation and reduction kernels reach that or less: 60-90%")
LAUNCH_GAP_S = (2e-6, 6e-6)  # assumed GPU-side cost per dependent kernel, from busy stream to a host-issued one


def measure_dispatch_seconds(repeats: int = 2000, blocks: int = 5) -> float:
    """PyTorch's host time to issue one operation on this machine: the median over `blocks` of a tiny
    add timed `repeats` times (one element, so the arithmetic is nothing; a new output each time, as
    most of a step's ops allocate)."""
    a, b = torch.zeros(1), torch.ones(1)
    per_op = []
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(repeats):
            torch.add(a, b)
        per_op.append((time.perf_counter() - start) / repeats)
    return statistics.median(per_op)


def launch_assumption(dispatch_s: float, where: str) -> Assumption:
    """The per-kernel cost: from an assumed launch gap alone (kernels queued ahead of the GPU) to this
    machine's dispatch time plus the gap (the GPU waits for the host at every kernel)."""
    low, high = LAUNCH_GAP_S[0], dispatch_s + LAUNCH_GAP_S[1]
    return Assumption(
        "cost per kernel", low, (low + high) / 2, high, "seconds",
        f"measured + assumption: PyTorch's dispatch time per operation measured on {where} "
        f"({dispatch_s * 1e6:.1f} us) plus an assumed 2-6 us launch gap per kernel (NVIDIA, 'Getting Started with "
        "CUDA Graphs': launch overheads of microseconds per kernel)")


def efficiency_points(launch: Assumption) -> dict[str, Efficiency]:
    """The three points the projection is drawn at: "fast" (the band's optimistic end), "mid", "slow"."""
    fractions = (TENSOR_FRACTION, FP32_FRACTION, BANDWIDTH_FRACTION)
    return {
        "fast": Efficiency(*(a.high for a in fractions), launch_s=launch.low),
        "mid": Efficiency(*(a.mid for a in fractions), launch_s=launch.mid),
        "slow": Efficiency(*(a.low for a in fractions), launch_s=launch.high),
    }


def all_assumptions(launch: Assumption) -> list[dict]:
    return [a.to_dict() for a in (TENSOR_FRACTION, FP32_FRACTION, BANDWIDTH_FRACTION, launch)]
