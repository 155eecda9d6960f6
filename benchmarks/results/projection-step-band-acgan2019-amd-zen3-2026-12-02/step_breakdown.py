"""Where the projected step's time goes (the study's network, acgan-2019, traced on the CPU), per GPU, batch
and precision: matrix kernels, and the bandwidth-bound rest by kind (the optimizer's fused fp32 Adam over
every parameter, autocast's casts, the loss scaler's unscale and inf checks, batch norm, the other
element-wise work), each at the mid bandwidth fraction with its launch gap; and the host's dispatch.
Then what the fp32 -> fp16 speedup would be if that rest cost twice as much (every non-matrix kernel at
half the assumed bandwidth), to see whether bandwidth-bound work could explain a gain half the projected;
and the matrix kernels at batch 2048 by pass, the 3-channel layers (D's first, G's last) apart: their
time, the TFLOP/s the model has them reach, and their gain.

    python benchmarks/results/projection-step-band-acgan2019-amd-zen3-2026-12-02/step_breakdown.py
"""

import json
from collections import Counter
from pathlib import Path

import numpy as np

from ampgan.bench.ops import OpTable
from ampgan.projection.assumptions import BANDWIDTH_FRACTION, LAUNCH_GAP_S
from ampgan.projection.kernel_model import calibration_for
from ampgan.projection.step_model import kernel_times, row_kernels, step_estimate
from ampgan.system.gpus import gpu_spec

HERE = Path(__file__).resolve().parent
DISPATCH_S = 10.8e-6  # measured by `ampgan project` for projection/ (projection.json's assumptions)
KINDS = {
    "cuda.fused_adam": "optimizer (fused fp32 Adam)",
    "aten._to_copy": "autocast's casts",
    "aten._amp_foreach_non_finite_check_and_unscale_": "loss scaler",
    "aten._amp_update_scale_": "loss scaler",
    "aten.native_batch_norm": "batch norm",
    "aten.native_batch_norm_backward": "batch norm",
}


def breakdown(table: OpTable, batch: int, device: str, precision: str) -> tuple[Counter, object]:
    gpu = gpu_spec(device)
    estimate = step_estimate(table.on_cuda(), batch, gpu, precision, DISPATCH_S)
    parts = Counter({"matrix kernels": estimate.gpu_s - estimate.other_s})
    for row in table.on_cuda():
        if row.unit == "matrix":
            continue
        seconds = row.bytes_at(batch) * row.weight / (gpu.bandwidth_gbs * 1e9 * BANDWIDTH_FRACTION.mid)
        parts[KINDS.get(row.op, "other element-wise")] += seconds + row.weight * sum(LAUNCH_GAP_S) / 2
    return parts, estimate


def group(kernel) -> str:
    if kernel.op != "gemm" and min(kernel.c, kernel.out_channels) <= 3:
        return "3-channel convolutions"
    return kernel.op


def matrix_by_group(table: OpTable, batch: int, device: str, precision: str) -> dict[str, tuple[float, float]]:
    """{group: (seconds, TFLOP/s)} of the step's matrix kernels."""
    gpu = gpu_spec(device)
    calibration, _ = calibration_for(gpu)
    shaped = row_kernels(table.on_cuda(), batch)
    kernels, weights = shaped.kernels, shaped.weights
    seconds = kernel_times(kernels, gpu, precision, calibration, 1.0).seconds * np.asarray(weights)
    flops = np.array([k.flops() for k in kernels]) * np.asarray(weights)
    out = {}
    for name in dict.fromkeys(map(group, kernels)):
        picked = np.array([group(k) == name for k in kernels])
        out[name] = (float(seconds[picked].sum()), float(flops[picked].sum() / seconds[picked].sum() / 1e12))
    return out


def main() -> None:
    results = json.loads((HERE / "bench" / "results.json").read_text(encoding="utf-8"))
    tables = {name: OpTable.from_dict(table) for name, table in results["op_tables"].items()}
    for device in ("T4", "V100"):
        for batch in (64, 2048):
            print(f"{device} batch {batch} (ms, mid)")
            shown = {p: breakdown(tables[p], batch, device, p) for p in ("fp32", "fp16")}
            for kind in dict.fromkeys(k for parts, _ in shown.values() for k in parts):
                print(f"  {kind:30} " + "  ".join(f"{p} {shown[p][0][kind] * 1e3:7.2f}" for p in shown))
            print(
                "  "
                + "  ".join(f"{p}: GPU {e.gpu_s * 1e3:.1f}, host {e.host_s * 1e3:.1f}" for p, (_, e) in shown.items())
            )
            fp32, fp16 = (shown[p][1] for p in ("fp32", "fp16"))
            doubled = (fp32.gpu_s + fp32.other_s) / (fp16.gpu_s + fp16.other_s)
            print(
                f"  speedup {fp32.seconds / fp16.seconds:.2f}x; with the non-matrix work twice as slow {doubled:.2f}x"
            )
        print(f"{device} batch 2048, matrix kernels: ms (TFLOP/s) fp32 -> fp16, gain")
        split = {p: matrix_by_group(tables[p], 2048, device, p) for p in ("fp32", "fp16")}
        for name, (slow, slow_rate) in split["fp32"].items():
            fast, fast_rate = split["fp16"][name]
            print(
                f"  {name:24} {slow * 1e3:7.1f} ({slow_rate:5.2f}) -> {fast * 1e3:6.1f} ({fast_rate:5.1f})"
                f"  {slow / fast:.1f}x"
            )


if __name__ == "__main__":
    main()
