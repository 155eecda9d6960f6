"""Candidate step-level quantities for the residuals left by the composition, each fitted and checked
leave-one-model-out exactly as composition_fit.validate does, without changing the shipped code.

    python benchmarks/results/validation-residuals-amd-zen4-2026-12-03c/residuals.py VARIANT

VARIANT: `none` (the shipped composition), `cuda10_16` (a fitted log factor on the mixed-precision step's
16-bit products for rows run on CUDA 10.2 / PyTorch 1.4 / apex, NGC 20.01: Lambda v0's Pascal, Turing and
Volta systems), `cuda10_amp` (the same factor on the whole mixed-precision GPU time), `host_per_sample` (a
host floor per sample per step added to the per-operation host time). The software factors are 0 for
current software, so they would change no projection a user gets; they only take that era's spread out of
the residuals. Prints the whole-data fitted value, the summary per generation and the per-model median of
log(measured / projected speedup); nothing reads heldout_ada_hopper.csv.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

VALIDATION = Path(__file__).resolve().parents[2] / "validation"
sys.path.insert(0, str(VALIDATION))

import composition_fit as cf  # noqa: E402

from ampgan.precisions import FP32  # noqa: E402

VARIANT = sys.argv[1] if len(sys.argv) > 1 else "none"
PRIORS = {"cuda10_16": (0.0, 0.5), "cuda10_amp": (0.0, 0.5), "host_per_sample": (math.log(20e-6), 2.0)}
if VARIANT != "none":
    cf.GLOBAL = (*cf.GLOBAL, "extra")
    cf.PRIOR["extra"] = PRIORS[VARIANT]
    shipped_of = cf.Design.of.__func__

    def of(cls, rows):
        design = shipped_of(cls, rows)
        object.__setattr__(design, "cuda10", np.array([float("CUDA 10." in r.source["software"]) for r in rows]))
        object.__setattr__(design, "samples", np.array([r.batch for r in rows], dtype=float))
        return design

    def seconds(self, params):  # Design.seconds with the candidate quantity
        g = params["global"]
        names = sorted(set(self.generation))
        offsets = np.array([[params["generations"].get(n, {}).get(k, 0.0) for k in cf.PER_GENERATION] for n in names])
        index = np.array([names.index(n) for n in self.generation])
        columns = [0 if path == FP32 else 1 for path in cf.PATHS]
        base = np.array([g[f"matrix_{path}"] for path in cf.PATHS])
        scale = np.exp(base[None, :] + offsets[index][:, columns])
        clock = np.minimum(1.0, self.power / math.exp(g["watts_per_sm"])) ** (1 / 3)
        matrix = self.matrix * scale[:, None, :] / clock[:, None, None]
        era = np.exp(g["extra"] * self.cuda10)
        if VARIANT == "cuda10_16":
            matrix[:, 1, cf.PATHS.index("fp16")] *= era
        kinds = ("memory_fraction", "memory_fraction_16", "cast_fraction", "update_fraction")
        fractions = np.exp([g[k] for k in kinds])
        gpu = matrix.sum(2) + (self.memory / fractions).sum(2) + self.memory_ops * math.exp(g["launch_gap_s"])
        if VARIANT == "cuda10_amp":
            gpu[:, 1] *= era
        host = self.operations * math.exp(g["host_per_op_s"])
        if VARIANT == "host_per_sample":
            host = host + self.samples * math.exp(g["extra"])
        return (gpu**4 + host**4) ** 0.25

    cf.Design.of = classmethod(of)
    cf.Design.seconds = seconds

rows, _ = cf.load_rows(cf.ROWS)
if VARIANT != "none":
    print(f"{VARIANT}: fitted on every row, log value {cf.fit(rows)['global']['extra']:.3f}")
records, _ = cf.validate(rows)
report = cf.report(records, len(rows))
for name in [*report["generations"], "overall"]:
    print(name, report[name])
errors: dict[str, list[float]] = {}
for row, rec in zip(rows, records):
    era = "cuda10" if "CUDA 10." in row.source["software"] else "later"
    errors.setdefault(f"{rec['model']} {era}", []).append(math.log(rec["measured_speedup"] / rec["projected_speedup"]))
for key, values in sorted(errors.items()):
    print(f"{key:<26} rows {len(values):>3}  median log(measured/projected speedup) {np.median(values):+.3f}")
