"""Which cuDNN algorithms DeepBench's fp32 convolutions ran, read from their own times, and how the kernel model
fits them (issue 43).

    PYTHONPATH=src python benchmarks/results/validation-fp32conv-amd-zen4-2026-12-04/kernel_residuals.py

A direct-GEMM algorithm (IMPLICIT_PRECOMP_GEMM forward, ALGO_1 gradients: what conv_bench.cu forces when built
with USE_TENSOR_CORES) cannot run faster than the GPU's fp32 peak; Winograd and FFT do fewer multiplications than
the direct FLOPs count, so a kernel "above peak" ran one of them, i.e. its algorithm was picked by
cudnnFind, as PyTorch's cudnn.benchmark picks one. Counts such kernels per pass in the calibration tables
(deepbench_v100.csv, heldout_deepbench_t4.csv), then gives the kernel model's 5-fold cross-validated
log(measured / predicted) of the V100's fp32 and 16-bit convolutions, split by pass and by above/below peak.
A few seconds on 2 cores.
"""

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "calibration"))
from kernel_fit import cross_validated_log_residuals, paired, read_calibration  # noqa: E402

from ampgan.precisions import FP16, FP32  # noqa: E402
from ampgan.projection.kernels import GEMM  # noqa: E402
from ampgan.system.gpus import gpu_spec  # noqa: E402


def flops(kernel) -> float:
    """Direct-convolution FLOPs of one pass (2 x N P Q x K x C R S; the same count for each pass)."""
    p, q = kernel.output_hw
    return 2.0 * kernel.batch * p * q * kernel.out_channels * kernel.c * kernel.r * kernel.s


def main() -> None:
    for name, key in (("deepbench_v100.csv", "V100"), ("heldout_deepbench_t4.csv", "T4")):
        gpu = gpu_spec(key)
        measured = [m for m in read_calibration(ROOT / "benchmarks" / "calibration" / name) if m.kernel.op != GEMM]
        print(f"{name} ({key}): convolutions faster than their precision's peak (direct FLOPs), per pass")
        for precision in (FP32, FP16):
            peak = gpu.peak_tflops[precision]
            for op in ("conv_fwd", "conv_bwd_data", "conv_bwd_weight"):
                sel = [m for m in measured if m.precision == precision and m.kernel.op == op]
                rates = [flops(m.kernel) / (m.ms * 1e-3) / 1e12 for m in sel]
                above = sum(r > peak for r in rates)
                print(
                    f"  {precision} {op:16s} {len(sel):3d} kernels, {above:3d} above the {peak} TFLOP/s peak, "
                    f"fastest {max(rates):5.1f}"
                )
    gpu = gpu_spec("V100")
    tables = paired(read_calibration(ROOT / "benchmarks" / "calibration" / "deepbench_v100.csv"), gpu)
    residuals = cross_validated_log_residuals(tables, gpu)
    print("\nV100 kernel model, 5-fold cross-validated log(measured / predicted), convolutions (median, n)")
    fast = {
        n
        for n, k, t in zip(tables[FP32].names, tables[FP32].kernels, tables[FP32].log_ms)
        if k.op != GEMM and flops(k) / (np.exp(t) * 1e-3) / 1e12 > gpu.peak_tflops[FP32]
    }
    for precision in (FP32, FP16):
        data = tables[precision]
        for op in ("conv_fwd", "conv_bwd_data", "conv_bwd_weight", "all"):
            for group in ("above fp32 peak in fp32", "below", "all"):
                keep = [
                    i
                    for i, (n, k) in enumerate(zip(data.names, data.kernels))
                    if k.op != GEMM and op in ("all", k.op) and (group == "all" or (n in fast) == (group != "below"))
                ]
                if keep:
                    values = residuals[precision][keep]
                    print(f"  {precision} {op:16s} {group:24s} {np.median(values):+.3f} ({len(keep)})")
    # The model's one 3x3 (Winograd) term per path against size: the fp32 3x3 stride-1 convolutions with >= 64
    # channels (ResNet's and VGG's), in terciles of their direct FLOPs.
    data = tables[FP32]
    picked = sorted(  # by size alone (a stable sort: kernels of one size keep the table's order)
        (
            (flops(k) / 1e9, residuals[FP32][i], k.op, n in fast)
            for i, (n, k) in enumerate(zip(data.names, data.kernels))
            if k.op != GEMM and (k.r, k.s, k.stride_h, k.stride_w) == (3, 3, 1, 1) and k.c >= 64
        ),
        key=lambda p: p[0],
    )
    print("\nV100 fp32 3x3 stride-1 convolutions, >= 64 channels, by size: median log(measured / predicted)")
    third = len(picked) // 3
    for part in (picked[:third], picked[third : 2 * third], picked[2 * third :]):
        above = sum(p[3] for p in part)
        print(
            f"  {part[0][0]:6.2f}-{part[-1][0]:6.2f} GFLOP: {np.median([p[1] for p in part]):+.3f} "
            f"({len(part)} kernels, {above} above the fp32 peak)"
        )
    for op in ("conv_fwd", "conv_bwd_data", "conv_bwd_weight"):
        mine = [p for p in picked if p[2] == op]
        middle = np.median([p[0] for p in mine])  # split at the median size (kernels of equal size stay together)
        small, large = [p[1] for p in mine if p[0] < middle], [p[1] for p in mine if p[0] >= middle]
        print(
            f"  {op:16s} below {middle:5.2f} GFLOP {np.median(small):+.3f} ({len(small)}), "
            f"above {np.median(large):+.3f} ({len(large)})"
        )


if __name__ == "__main__":
    main()
