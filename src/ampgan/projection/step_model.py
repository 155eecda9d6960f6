"""A training step's time on a GPU: its matrix kernels through the calibrated kernel model, its other
operations through the bandwidth roofline, and the host's cost per operation that no precision shrinks.

    GPU time  = sum over matrix kernels of the kernel model's time (kernel_model.py, fitted on measured kernels)
              + sum over the other operations of bytes / (bandwidth x fraction) + a launch gap each
    host time = operations x PyTorch's dispatch time per operation (measured on the tracing machine)
    step      = max(GPU, host) when the host runs ahead of the GPU (the usual case), GPU + host when it
                cannot: the band takes both

The band: each matrix kernel's time varies by its class's cross-validated residuals (11th-89th
percentile of log measured/predicted, calibration/<architecture>.json), the bandwidth fraction by its
assumed range. A speedup's band varies each 16-bit kernel against its fp32 counterpart by the
residuals of the measured fp32 -> 16-bit speedups of its class (a kernel's errors in the two precisions
move together: the same shape costs both), scaled by how many unrelated kernels share the step's time
(step_band.py: kernels of different layers err nearly independently, as measured on DeepBench), the
other operations and the host being the same in both. A GPU whose architecture has no calibration of
its own borrows Volta's (tensor cores) or Pascal's and its band is widened by UNCALIBRATED_WIDENING
each way, undivided.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ampgan.bench.ops import OpRow, kind_of
from ampgan.precisions import FP16, FP32, TF32
from ampgan.precisions import precision as precision_mode
from ampgan.projection.assumptions import BANDWIDTH_FRACTION, LAUNCH_GAP_S
from ampgan.projection.kernel_model import (
    Calibration,
    calibration_for,
    class_candidates,
    features,
    kernel_class,
    on_tensor_cores,
    pads_channels,
    path_of,
    peak_tflops,
    predict_seconds,
)
from ampgan.projection.kernels import GEMM, GEMM_FLAGS, Kernel, cublas_call
from ampgan.projection.step_band import band_class, composition_factor
from ampgan.system.gpus import GpuSpec

# Moving a calibration across architectures (benchmarks/calibration/fit.py's transfer check: Volta's fp32
# parameters on P100 kernels, Pascal's on V100's) biased its times by up to 1.27x in the median, beyond
# the cross-validated error: a GPU without its own calibration gets its band widened by that, each way.
UNCALIBRATED_WIDENING = 1.27
DEFAULT = "default"  # PyTorch's default on TF32 GPUs: convolutions in TF32 (cudnn.allow_tf32), products in fp32


def kernel_precision(precision: str, convolution: bool, computes: str = "", fp32_ops: str = FP32) -> str:
    """The precision one matrix kernel runs in. `convolution`: its op is one (PyTorch's default runs those in
    TF32, products in fp32). `computes`: the dtype its traced op computed in; an op that stayed fp32 under a
    16-bit mode (autocast's fp32 list, a layer the model keeps in fp32) runs as the mode's fp32 operations do,
    `fp32_ops`: strict fp32 under ampgan's 16-bit modes, which switch TF32 off (precisions.py); what the
    harness's fp32 side ran for a published measurement."""
    if computes == "float32" and precision not in (DEFAULT, FP32, TF32):
        precision = fp32_ops
    if precision == DEFAULT:
        return TF32 if convolution else FP32
    return precision


def kernel_of(kind: str, dims: tuple[int, ...], name: str) -> Kernel:
    if kind == GEMM:
        call = cublas_call(*dims)  # the trace's product is row-major; a GEMM row is cuBLAS's call
        return Kernel(name, kind, **{f: bool(v) if f in GEMM_FLAGS else v for f, v in call.items()})
    fields = ("batch", "c", "h", "w", "out_channels", "r", "s", "pad_h", "pad_w", "stride_h", "stride_w")
    return Kernel(name, kind, **dict(zip(fields, dims)))


def equivalent_gemm(row: OpRow, batch_size: float, name: str) -> Kernel:
    """A matrix op traced before kernels were recorded: the square product of its FLOPs, aligned as it was."""
    side = max(1, round((row.flops_at(batch_size) / 2) ** (1 / 3)))
    side = side - side % 8 if row.alignment == 8 and side >= 8 else side | 1 if row.alignment == 1 else side
    return Kernel(name, GEMM, m=side, n=side, k=side)


@dataclass(frozen=True)
class RowKernels:
    """A step's matrix kernels at a batch size: each kernel's weight, the dtype its op computed in and whether
    its op is a convolution (a grouped one's stand-in product too), and how many kernels came from FLOPs alone."""

    kernels: list[Kernel]
    weights: list[float]
    computes: list[str]
    convolution: list[bool]
    guessed: int

    def precisions(self, precision: str, fp32_ops: str = FP32) -> list[str]:
        """The precision each kernel runs in under `precision` (kernel_precision)."""
        return [kernel_precision(precision, *both, fp32_ops) for both in zip(self.convolution, self.computes)]


def row_kernels(rows: Iterable[OpRow], batch_size: float) -> RowKernels:
    kernels, weights, computes, convolution, guessed = [], [], [], [], 0
    for index, row in enumerate(rows):
        if row.unit != "matrix" or row.flops_at(batch_size) <= 0:
            continue
        name, shaped = f"{row.op}#{index}", row.kernels_at(batch_size)
        made = [kernel_of(kind, dims, name) for kind, dims in shaped if min(dims[:4] if kind != GEMM else dims[:3]) > 0]
        if not shaped:
            guessed += 1
            made = [equivalent_gemm(row, batch_size, name)]
        kernels += made
        weights += [row.weight] * len(made)
        computes += [row.dtype] * len(made)
        convolution += [kind_of(row.op) == "convolution"] * len(made)
    return RowKernels(kernels, weights, computes, convolution, guessed)


@dataclass(frozen=True)
class KernelTimes:
    """The matrix kernels of a step on one GPU in one precision: seconds each (mid) and band factors."""

    seconds: np.ndarray
    compute: np.ndarray
    memory: np.ndarray
    time_low: np.ndarray  # factors on seconds
    time_high: np.ndarray
    speedup_low: np.ndarray  # log factors on the kernel's speedup over fp32 (its class's, no widening)
    speedup_high: np.ndarray
    tensor: np.ndarray  # on tensor cores
    varied: np.ndarray  # off the fp32 path: its speedup varies (and an uncalibrated GPU's widening applies)


def kernel_times(
    kernels: list[Kernel],
    gpu: GpuSpec,
    precision: str,
    calibration: Calibration,
    widening: float,
    runs_in: list[str] | None = None,
) -> KernelTimes:
    """`runs_in`: the precision each kernel runs in (RowKernels.precisions), else `precision`'s for each (PyTorch's
    default: TF32 convolutions, fp32 products)."""
    n = len(kernels)
    out = {
        name: np.zeros(n)
        for name in (
            "seconds",
            "compute",
            "memory",
            "time_low",
            "time_high",
            "speedup_low",
            "speedup_high",
            "tensor",
            "varied",
        )
    }
    by_precision: dict[str, list[int]] = {}
    runs_in = runs_in or [kernel_precision(precision, kernel.op != GEMM) for kernel in kernels]
    for i, used in enumerate(runs_in):
        by_precision.setdefault(used, []).append(i)
    for used, indices in by_precision.items():
        picked = [kernels[i] for i in indices]
        path = calibration.paths[path_of(used)]
        seconds, compute, memory = predict_seconds(
            features(picked, gpu.sms, used, pads_channels=pads_channels(gpu, used)),
            path,
            calibration.shared,
            peak_tflops(gpu, used),
            gpu.bandwidth_gbs,
            precision_mode(used).element_bytes,
        )
        out["seconds"][indices], out["compute"][indices], out["memory"][indices] = seconds, compute, memory
        # cuDNN pads a convolution onto tensor cores; cuBLAS 11 on runs a misaligned GEMM there (an align1 kernel)
        out["tensor"][indices] = float(on_tensor_cores(gpu, used))
        for i, kernel in zip(indices, picked):
            entry = _class_entry(calibration, kernel_class(kernel, FP16))
            band = entry[path_of(used)]
            out["time_low"][i] = math.exp(band["low"]) / widening
            out["time_high"][i] = math.exp(band["high"]) * widening
            if path_of(used) != FP32:
                out["speedup_low"][i] = entry["speedup"]["low"]
                out["speedup_high"][i] = entry["speedup"]["high"]
                out["varied"][i] = 1.0
    return KernelTimes(**out)


def _class_entry(calibration: Calibration, name: str) -> dict:
    classes = calibration.residuals["classes"]  # the broadest candidate, the op's own class, is always there
    return next(classes[c] for c in class_candidates(name) if "speedup" in classes.get(c, {}))


@dataclass(frozen=True)
class StepEstimate:
    """One step's projected time: mid and band, where it goes, and what made it."""

    seconds: float
    low: float
    high: float
    gpu_s: float
    host_s: float
    by_bound: dict[str, float]
    tensor_flops_share: float
    kernels: float
    matrix_seconds: np.ndarray  # per matrix kernel, weighted: for the speedup band
    matrix_log_speedup_band: tuple[np.ndarray, np.ndarray]  # the step's: composed (step_band.py), widened
    other_s: float
    guessed_kernels: int

    @property
    def bound(self) -> str:
        return max(self.by_bound, key=self.by_bound.get)


def step_estimate(
    rows: Iterable[OpRow], batch_size: float, gpu: GpuSpec, precision: str, dispatch_s: float
) -> StepEstimate:
    rows = list(rows)
    calibration, own = calibration_for(gpu)
    widening = 1.0 if own else UNCALIBRATED_WIDENING
    shaped = row_kernels(rows, batch_size)
    kernels, w = shaped.kernels, np.asarray(shaped.weights, dtype=float)
    timed = kernel_times(kernels, gpu, precision, calibration, widening, shaped.precisions(precision))
    matrix = timed.seconds * w
    # The step's speedup band: each kernel's class band scaled by how its errors add up over this step's kernels
    # (step_band.py: measured correlations, then the multiple that holds DeepBench's pseudo-steps, at least 1),
    # an uncalibrated architecture's shift added whole, since it moves every kernel at once.
    cross_validation = calibration.residuals
    spreads = (timed.speedup_high - timed.speedup_low) / 2
    filters = frozenset(tuple(f) for f in cross_validation["filters"])
    scale = cross_validation["pseudo_steps"]["step_scale"] * composition_factor(
        kernels, matrix, spreads, cross_validation["correlation"], band_class, filters
    )
    shift = math.log(widening) * timed.varied
    step_speedup_band = (scale * timed.speedup_low - shift, scale * timed.speedup_high + shift)
    flops = np.array([k.flops() for k in kernels]) * w
    # The other operations: memory traffic at the assumed bandwidth fraction, a launch gap each.
    memory_rows = [r for r in rows if r.unit != "matrix"]
    data = sum(r.bytes_at(batch_size) * r.weight for r in memory_rows) / (gpu.bandwidth_gbs * 1e9)
    launches = sum(r.weight for r in memory_rows)
    other = {
        "mid": data / BANDWIDTH_FRACTION.mid + launches * sum(LAUNCH_GAP_S) / 2,
        "low": data / BANDWIDTH_FRACTION.high + launches * LAUNCH_GAP_S[0],
        "high": data / BANDWIDTH_FRACTION.low + launches * LAUNCH_GAP_S[1],
    }
    operations = sum(r.weight for r in rows)
    host = operations * dispatch_s
    gpu_mid = float(matrix.sum()) + other["mid"]
    gpu_low = float((matrix * timed.time_low).sum()) + other["low"]
    gpu_high = float((matrix * timed.time_high).sum()) + other["high"]
    launch_part = launches * sum(LAUNCH_GAP_S) / 2
    memory_bound = w * np.where(timed.compute < timed.memory, timed.seconds, 0)
    by_bound = {
        "compute": float((matrix - memory_bound).sum()),
        "memory": float(memory_bound.sum()) + other["mid"] - launch_part,
        "launch": launch_part,
        "host": host if host > gpu_mid else 0.0,
    }
    return StepEstimate(
        seconds=max(gpu_mid, host),
        low=max(gpu_low, host),
        high=gpu_high + host,
        gpu_s=gpu_mid,
        host_s=host,
        by_bound=by_bound,
        tensor_flops_share=float((flops * timed.tensor).sum() / flops.sum()) if flops.sum() else 0.0,
        kernels=operations,
        matrix_seconds=matrix,
        matrix_log_speedup_band=step_speedup_band,
        other_s=other["mid"],
        guessed_kernels=shaped.guessed,
    )


def _gpu_range(estimate: StepEstimate) -> tuple[float, float]:
    """(fast, slow) GPU seconds of a step with each matrix kernel at the ends of the step's speedup band
    relative to fp32 (its class's band composed over the step, step_band.py; an fp32 step has none:
    both ends are its mid)."""
    low_log, high_log = estimate.matrix_log_speedup_band
    fast = float((estimate.matrix_seconds * np.exp(-high_log)).sum()) + estimate.other_s
    slow = float((estimate.matrix_seconds * np.exp(-low_log)).sum()) + estimate.other_s
    return fast, slow


def speedup_band(baseline: StepEstimate, faster: StepEstimate) -> tuple[float, float, float]:
    """(mid, low, high) speedup of `faster` over `baseline`: each matrix kernel off fp32 varied by its
    class's measured-speedup residuals as composed over the step (step_band.py: the errors of unrelated
    kernels partly average) (an fp32 baseline's kernels held at mid, since the residuals are
    measured against fp32; a TF32 default varies by its own), the other operations and the host cost the
    same in both, the host either overlapping the GPU or not."""
    mid = baseline.seconds / faster.seconds
    scenarios = [mid]
    for base in _gpu_range(baseline):
        for this in _gpu_range(faster):
            scenarios.append(max(base, baseline.host_s) / max(this, faster.host_s))
            scenarios.append((base + baseline.host_s) / (this + faster.host_s))
    return mid, min(scenarios), max(scenarios)
