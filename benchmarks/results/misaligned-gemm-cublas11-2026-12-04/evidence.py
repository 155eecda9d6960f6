"""The misaligned 16-bit GEMM's efficiency under cuBLAS 11+, from published times: what is left of each
measured slowdown once the kernel model's own tile and wave terms are taken out.

    PYTHONPATH=src python benchmarks/results/misaligned-gemm-cublas11-2026-12-04/evidence.py

evidence.csv: each misaligned GEMM and its aligned neighbour as their sources timed them (TFLOPS of each
shape's own FLOPs). The kernel model (Volta's 16-bit path, the calibration these GPUs borrow, at each GPU's
multiprocessors) gives both shapes' log efficiency without the misaligned term; the term is the measured log
ratio less that difference.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import numpy as np

from ampgan.projection.kernel_model import features, load_calibration, log_efficiency
from ampgan.projection.kernels import Kernel, cublas_call
from ampgan.system.gpus import gpu_spec

HERE = Path(__file__).resolve().parent


def kernel(shape: str, name: str) -> Kernel:
    """'384 x (1024x1024 @ 1024x140)' (a batched row-major product) or '2055^3' (square) as cuBLAS's call."""
    if shape.endswith("^3"):
        n = int(shape[:-2])
        dims = (n, n, n, 0, 0)
    else:
        b, m, k, _, n = map(int, re.findall(r"\d+", shape))
        dims = (b * m, n, k, 0, 0)  # a bmm is one product with its batches' rows stacked (bench/ops.kernel_shapes)
    return Kernel(name, "gemm", **cublas_call(*dims))


def main() -> list[dict]:
    path = load_calibration("volta").paths["fp16"]
    out = []
    for row in csv.DictReader((HERE / "evidence.csv").open(encoding="utf-8")):
        gpu = gpu_spec(row["gpu"])
        pair = [kernel(row["misaligned_shape"], "misaligned"), kernel(row["aligned_shape"], "aligned")]
        f = features(pair, gpu.sms, row["dtype"], pads_channels=False)
        f = type(f)(**{**f.__dict__, "misaligned_gemm": np.zeros(2)})  # the model without the term
        modelled = float(np.diff(log_efficiency(f, path)[::-1])[0])  # log eff(misaligned) - log eff(aligned)
        measured = math.log(float(row["misaligned_tflops"]) / float(row["aligned_tflops"]))
        out.append(
            {
                "gpu": row["gpu"],
                "cuda": row["cuda"],
                "dtype": row["dtype"],
                "shape": row["misaligned_shape"],
                "measured_log_ratio": round(measured, 3),
                "tiles_log_ratio": round(modelled, 3),
                "misaligned_gemm": round(measured - modelled, 3),
            }
        )
    return out


if __name__ == "__main__":
    for r in main():
        print(json.dumps(r))
