"""Tried and not shipped: GeForce 16-bit products with fp32 accumulation timed at the Volta calibration's
efficiency of the tensor core's full (fp16-accumulate) rate, capped by the half-rate fp32-accumulate pipe at
its whitepaper figure (published cuBLAS runs reach 94-99% of it on an RTX 2080 Ti: README section 2), instead
of the calibration's efficiency of the half rate. The composition is refitted and checked leave one model out
as check.py does; the kernel model is patched in this process only (nothing in src changes).

    PYTHONPATH=src python benchmarks/results/validation-facts-amd-zen4-2026-12-03f/geforce_pipe.py
"""

from __future__ import annotations

import collections
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))

import composition_fit as cf  # noqa: E402

import ampgan.projection.composition as composition  # noqa: E402

ORIGINAL_PREDICT = composition.predict_seconds
ORIGINAL_PARTS = composition.step_parts
CURRENT = {}  # the GPU step_parts is timing, for the patched predict_seconds


def parts(rows, batch_size, gpu, precision, terms=None):
    CURRENT["gpu"] = gpu
    return ORIGINAL_PARTS(rows, batch_size, gpu, precision, terms)


def predict(features, path, shared, peak, bandwidth, element_bytes):
    gpu = CURRENT.get("gpu")
    if gpu is None or "GeForce" not in gpu.name or not gpu.tensor_cores or element_bytes != 2:
        return ORIGINAL_PREDICT(features, path, shared, peak, bandwidth, element_bytes)
    _, compute, memory = ORIGINAL_PREDICT(features, path, shared, 2 * peak, bandwidth, element_bytes)
    compute = np.maximum(compute, features.flops / (peak * 1e12))  # the fp32-accumulate pipe at its datasheet rate
    return np.exp(shared[0]) + (compute**4 + memory**4) ** 0.25, compute, memory


def main() -> int:
    composition.predict_seconds = predict
    composition.step_parts = cf.step_parts = parts
    rows, _ = cf.load_rows(cf.ROWS)
    records, _ = cf.validate(rows)
    summary = cf.report(records, len(rows))
    for name in ["overall", *summary["generations"]]:
        print(name, summary[name])
    by_gpu = collections.defaultdict(list)
    for r in records:
        by_gpu[(r["generation"], r["gpu"])].append(math.log(r["measured_speedup"] / r["projected_speedup"]))
    for key, errors in sorted(by_gpu.items()):
        if key[0] in ("turing", "ampere"):
            print(key, len(errors), round(float(np.median(errors)), 3))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
