"""The 1-4 channel 16-bit kernels DeepBench's V100 sheet measured (the unmeasured data gradient's siblings),
against the shipped Volta calibration with their tiny-channel term at 0: each kernel's own log efficiency
(log predicted-at-0 / measured), per unpadded FLOP as the sheet lists the layer, and per FLOP of the problem
DeepBench actually timed: its conv_bench pads a half-precision training kernel's channels to a multiple of 8
(`pad_dim(padded_c, 8)`, `pad_dim(padded_k, 8)` when `USE_TENSOR_CORES`, code/nvidia/conv_bench.cu) and prints
the unpadded c. Then the study's step (acgan-2019 at 32x32x3, batch 2048) on T4 and V100 with the unmeasured
1-4 channel data-gradient term at 0, at the shipped siblings' value, and at the value the siblings give for
a 3-channel layer once their padding is accounted for.

    PYTHONPATH=src python benchmarks/results/validation-worst-models-amd-zen4-2026-12-04/tiny_channels.py
"""

import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "calibration"))
from kernel_fit import path_data, predict_ms, read_calibration  # noqa: E402

from ampgan.precisions import FP16  # noqa: E402
from ampgan.projection.kernel_model import PATH_PARAMETERS, TINY_CHANNELS, load_calibration  # noqa: E402
from ampgan.system.gpus import gpu_spec  # noqa: E402

v100 = gpu_spec("V100")
calibration = load_calibration("volta")
path = calibration.paths[FP16].copy()
for term in ("tiny_c_fwd", "tiny_c_bwd_data", "tiny_c_bwd_weight"):
    path[PATH_PARAMETERS.index(term)] = 0.0
paths = {**calibration.paths, FP16: path}
sheet = read_calibration(ROOT / "benchmarks" / "calibration" / "deepbench_v100.csv")
tiny = [m for m in sheet if m.precision == FP16 and m.kernel.op != "gemm" and m.kernel.c <= TINY_CHANNELS]


def pad(x: int) -> int:
    return math.ceil(x / 8) * 8


print("| kernel | c -> k | measured ms | own term (unpadded FLOPs) | own term (padded problem) |")
print("|---|---|---:|---:|---:|")
by_c: dict[int, list[tuple[float, float]]] = {}
for m in tiny:
    padded = replace(m.kernel, c=pad(m.kernel.c), out_channels=pad(m.kernel.out_channels))
    at_zero = [
        predict_ms(path_data([k], np.log([m.ms]), FP16, v100), paths, calibration.shared, v100)[0]
        for k in (m.kernel, padded)
    ]
    own = [math.log(m.ms / z) * -1 for z in at_zero]
    by_c.setdefault(m.kernel.c, []).append(tuple(own))
    print(f"| {m.kernel.name} | {m.kernel.c} -> {m.kernel.out_channels} | {m.ms:.3f} | {own[0]:+.2f} | {own[1]:+.2f} |")
for c, values in sorted(by_c.items()):
    a = np.array(values)
    print(f"C={c}: {len(a)} kernels, mean own term {a[:, 0].mean():+.2f} unpadded, {a[:, 1].mean():+.2f} padded")
allv = np.array([v for vs in by_c.values() for v in vs])
print(
    f"all: mean {allv[:, 0].mean():+.2f} unpadded (the shipped siblings' value is the fitted terms' mean), "
    f"{allv[:, 1].mean():+.2f} per padded FLOP; for a 3-channel layer padded as DeepBench pads: "
    f"{allv[:, 1].mean() + math.log(3 / 8):+.2f}"
)

# The study's step with the unmeasured term at each candidate value (the shipped composition; nothing fitted).
import json  # noqa: E402

from ampgan.precisions import FP32  # noqa: E402
from ampgan.projection.composition import compose, load_composition, step_parts  # noqa: E402
from ampgan.projection.tables import op_tables_of  # noqa: E402

c3 = np.array(by_c[3])[:, 0]
candidates = {
    "0 (the fit's; the mid)": 0.0,
    "shipped siblings (all 1-4 channel kernels)": calibration.document["unmeasured"][FP16]["tiny_c_bwd_data"],
    "3-channel siblings, mean": float(c3.mean()),
    "3-channel siblings, worst": float(c3.min()),
}
bench = ROOT / "benchmarks" / "results" / "projection-composed-acgan2019-cifar32-amd-zen4-2026-12-03" / "bench"
tables = op_tables_of(json.loads((bench / "results.json").read_text()), bench / "results.json")
steps = {FP32: list(tables[FP32].on_cuda()), FP16: list(tables["bf16"].on_cuda())}
composition = load_composition()
print("\n| GPU, batch 2048 | term | fp32 ms | fp16 ms | speedup | band spanning 0 and this value | high/low |")
print("|---|---|---:|---:|---:|---|---:|")
for key in ("T4", "V100"):
    gpu = gpu_spec(key)
    band = composition.band(gpu)[0]["speedup"]
    mid = None
    for label, value in candidates.items():
        terms = {FP16: {"tiny_c_bwd_data": value}}
        ms = [
            compose(step_parts(steps[p], 2048, gpu, p, terms), gpu, composition.params)["seconds"] * 1e3
            for p in (FP32, FP16)
        ]
        speedup = ms[0] / ms[1]
        mid = speedup if mid is None else mid
        low, high = min(mid, speedup) * math.exp(band[0]), max(mid, speedup) * math.exp(band[1])
        print(
            f"| {key} | {label}: {value:+.2f} | {ms[0]:.0f} | {ms[1]:.0f} | {speedup:.2f}x "
            f"| {low:.2f}-{high:.2f}x | {high / low:.2f} |"
        )
floor = 2048 * (64 * 16 * 16 + 3 * 32 * 32) * 2 / 1e9  # GB: fp16 dy read, dx written, per data gradient
print(
    f"\nfloor of one 3 -> 64, 32x32, 4x4/2 data gradient at batch 2048 in fp16: {floor * 1e3:.1f} MB moved, "
    f"{floor / gpu_spec('T4').bandwidth_gbs * 1e3:.3f} ms on a T4, "
    f"{floor / gpu_spec('V100').bandwidth_gbs * 1e3:.3f} ms on a V100"
)
