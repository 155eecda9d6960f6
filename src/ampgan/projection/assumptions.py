"""What the step model assumes beyond the calibrated kernel model, each with its band and source.

The matrix kernels (convolutions, products) are calibrated on measured kernels (kernel_model.py,
calibration/*.json). What no calibration table measures is assumed here and said so: the bandwidth
fraction of element-wise, normalisation and reduction kernels, their launch gap, and the host's
dispatch cost per operation (measured on the machine that traced the step). Nothing here is fitted
to anyone's step times (the study's included).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Assumption:
    name: str
    low: float  # the pessimistic end for a fraction, the optimistic end for a cost
    mid: float
    high: float
    unit: str
    source: str


BANDWIDTH_FRACTION = Assumption(
    name="memory-bandwidth fraction of peak",
    low=0.60,
    mid=0.75,
    high=0.90,
    unit="fraction",
    source="assumption. STREAM-style kernels (McCalpin 1995; BabelStream, Deakin et al. 2016) reach 70-90% of a GPU's "
    "datasheet bandwidth; element-wise, normalisation and reduction kernels reach that or less: 60-90%",
)
LAUNCH_GAP_S = (2e-6, 6e-6)  # assumed GPU-side cost per dependent kernel, from busy stream to a host-issued one


def measure_dispatch_seconds(repeats: int = 2000, blocks: int = 5) -> float:
    """PyTorch's host time to issue one operation of a training step on this machine: the median over
    `blocks` of a tiny add timed `repeats` times (one element, so the arithmetic is nothing; a new output
    each time, as most of a step's ops allocate), its input requiring grad: a step's forward operations
    record their backward node as they run (on this machine about twice a bare add's time), and its
    backward operations are issued by autograd's engine."""
    a, b = torch.zeros(1, requires_grad=True), torch.ones(1)
    per_op = []
    with torch.enable_grad():
        for _ in range(blocks):
            start = time.perf_counter()
            for _ in range(repeats):
                torch.add(a, b)
            per_op.append((time.perf_counter() - start) / repeats)
    return statistics.median(per_op)


def launch_assumption(dispatch_s: float, where: str) -> Assumption:
    """The host's cost per operation: PyTorch's dispatch time measured here. No precision shrinks it
    (a mixed step runs more operations: autocast's casts, the scaler's checks)."""
    return Assumption(
        "host dispatch per operation",
        dispatch_s,
        dispatch_s,
        dispatch_s,
        "seconds",
        f"measured: PyTorch's dispatch time per operation on {where} ({dispatch_s * 1e6:.1f} us); the step takes "
        "max(GPU, host) when the host runs ahead of the GPU and GPU + host when it cannot, the band both",
    )


LAUNCH_GAP = Assumption(
    name="launch gap per non-matrix kernel",
    low=LAUNCH_GAP_S[0],
    mid=sum(LAUNCH_GAP_S) / 2,
    high=LAUNCH_GAP_S[1],
    unit="seconds",
    source="assumption. NVIDIA, 'Getting Started with CUDA Graphs': launch overheads of microseconds per kernel; a "
    "matrix kernel's own cost is in its calibration (fitted on isolated kernels)",
)
