"""The study's network (acgan-2019, CIFAR-10 32x32x3) on a V100 and a T4: which kernels its projected
fp16 gain rests on, and what the one kernel class no calibration measured does to it.

    PYTHONPATH=src python benchmarks/results/validation-bands-amd-zen4-2026-12-03d/study_unmeasured.py

Reads the study's traced step (../projection-composed-acgan2019-cifar32-amd-zen4-2026-12-03/bench/results.json)
and composes it with the shipped composition (projection/composition.py), the 1-4 channel data gradient's
kernel term at the fit's 0 (what the projection's mid uses) and at its measured siblings' value (the
calibration's "unmeasured": the mean of DeepBench's 1-4 channel forward and weight-gradient terms). Nothing is
fitted; no GPU is involved.

Its recorded output is of the commit that wrote it; since 2026-12-04 features() takes pads_channels= (it took
tensor_cores=, the same decision before GPU rows declared it), so a rerun reads today's kernel model.
"""

from __future__ import annotations

import json
from pathlib import Path

from ampgan.precisions import FP16, FP32
from ampgan.precisions import precision as precision_mode
from ampgan.projection.composition import compose, load_composition, step_parts
from ampgan.projection.kernel_model import (
    PATH_PARAMETERS,
    calibration_for,
    features,
    pads_channels,
    peak_tflops,
    predict_seconds,
)
from ampgan.projection.step_model import row_kernels
from ampgan.projection.tables import op_tables_of
from ampgan.system.gpus import gpu_spec

BENCH = Path(__file__).resolve().parents[1] / "projection-composed-acgan2019-cifar32-amd-zen4-2026-12-03" / "bench"
results = BENCH / "results.json"
tables = op_tables_of(json.loads(results.read_text()), results)
steps = {FP32: list(tables[FP32].on_cuda()), FP16: list(tables["bf16"].on_cuda())}  # fp16 as bf16's table
params = load_composition().params

print("## Matrix kernels of one step at batch 2048 on a V100 (kernel model, ms; the 1-4 channel data gradient")
print("## at 0 and at its siblings' value)\n")
print("| kernel (op, c -> k, input, filter/stride; or M x N x K) | runs | fp32 ms | fp16 ms (0) | fp16 ms (siblings) |")
print("|---|---:|---:|---:|---:|")
gpu = gpu_spec("V100")
calibration, _ = calibration_for(gpu)
shaped = row_kernels(steps[FP16], 2048)
kernels, weights = shaped.kernels, shaped.weights
rows = {}
for precision in (FP32, FP16):
    path = calibration.paths[precision].copy()
    seconds = [
        predict_seconds(
            features(kernels, gpu.sms, precision, pads_channels=pads_channels(gpu, precision)),
            path,
            calibration.shared,
            peak_tflops(gpu, precision),
            gpu.bandwidth_gbs,
            precision_mode(precision).element_bytes,
        )[0]
    ]
    if precision == FP16:
        for term, value in calibration.document["unmeasured"][FP16].items():
            path[PATH_PARAMETERS.index(term)] = value
        seconds.append(
            predict_seconds(
                features(kernels, gpu.sms, precision, pads_channels=pads_channels(gpu, precision)),
                path,
                calibration.shared,
                peak_tflops(gpu, precision),
                gpu.bandwidth_gbs,
                2,
            )[0]
        )
    for s_index, s in enumerate(seconds):
        for kernel, weight, sec in zip(kernels, weights, s):
            if kernel.op == "gemm":
                key = f"gemm {kernel.m} x {kernel.n} x {kernel.k}"
            else:
                key = f"{kernel.op} {kernel.c} -> {kernel.out_channels}, {kernel.h}x{kernel.w}, {kernel.r}x{kernel.s}"
                key += f"/{kernel.stride_h}"
            entry = rows.setdefault(key, {"runs": 0.0, "ms": {}})
            column = precision if s_index == 0 else "siblings"
            entry["ms"][column] = entry["ms"].get(column, 0.0) + weight * sec * 1e3
            if precision == FP32:
                entry["runs"] += weight
for key, entry in sorted(rows.items(), key=lambda kv: -kv[1]["ms"][FP32])[:12]:
    ms = entry["ms"]
    print(f"| {key} | {entry['runs']:.0f} | {ms[FP32]:.1f} | {ms[FP16]:.1f} | {ms['siblings']:.1f} |")
total = {c: sum(e["ms"][c] for e in rows.values()) for c in (FP32, FP16, "siblings")}
print(f"| all matrix kernels | | {total[FP32]:.1f} | {total[FP16]:.1f} | {total['siblings']:.1f} |")

print("\n## The composed step (ms) and its fp32 -> fp16 speedup, the term at 0 and at its siblings' value\n")
print("| GPU | batch | fp32 ms | fp16 ms | speedup | fp32 ms (siblings) | fp16 ms (siblings) | speedup (siblings) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for key in ("T4", "V100", "A100", "P100"):
    gpu = gpu_spec(key)
    for batch in (64, 2048):
        out = []
        for terms in (None, calibration_for(gpu)[0].document.get("unmeasured")):  # the term at 0, at its siblings'
            ms = [
                compose(step_parts(steps[p], batch, gpu, p, terms), gpu, params)["seconds"] * 1e3 for p in (FP32, FP16)
            ]
            out += [f"{ms[0]:.1f}", f"{ms[1]:.1f}", f"{ms[0] / ms[1]:.2f}x"]
        print(f"| {key} | {batch} | " + " | ".join(out) + " |")
print("\nthe term's values (log efficiency):", json.dumps(calibration_for(gpu_spec("V100"))[0].document["unmeasured"]))
