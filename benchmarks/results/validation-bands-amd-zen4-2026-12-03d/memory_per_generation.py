"""A per-generation memory-bound efficiency as a candidate composition quantity, fitted and checked
leave-one-model-out exactly as composition_fit.validate does, without changing the shipped code.

    PYTHONPATH=src python benchmarks/results/validation-bands-amd-zen4-2026-12-03d/memory_per_generation.py VARIANT

VARIANT: `memory` (a generation's log offset on every memory-bound pass, both precisions) or `memory16` (on
the mixed-precision step's only). Prints the offsets fitted on every row, then the summary per generation.
Nothing reads heldout_ada_hopper.csv.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))
import composition_fit as cf

from ampgan.precisions import FP32

VARIANT = sys.argv[1]
cf.PER_GENERATION = (*cf.PER_GENERATION, "memory")


def seconds(self, params):
    g = params["global"]
    names = sorted(set(self.generation))
    offsets = np.array([[params["generations"].get(n, {}).get(k, 0.0) for k in cf.PER_GENERATION] for n in names])
    index = np.array([names.index(n) for n in self.generation])
    columns = [0 if path == FP32 else 1 for path in cf.PATHS]
    base = np.array([g[f"matrix_{path}"] for path in cf.PATHS])
    scale = np.exp(base[None, :] + offsets[index][:, columns])
    clock = np.minimum(1.0, self.power / math.exp(g["watts_per_sm"])) ** (1 / 3)
    matrix = (self.matrix * scale[:, None, :]).sum(2) / clock[:, None]
    kinds = ("memory_fraction", "memory_fraction_16", "cast_fraction", "update_fraction")
    fractions = np.exp([g[k] for k in kinds])
    mem = (self.memory / fractions).sum(2)
    if VARIANT == "memory":
        mem = mem * np.exp(-offsets[index][:, 2])[:, None]
    elif VARIANT == "memory16":
        mem[:, 1] = mem[:, 1] * np.exp(-offsets[index][:, 2])
    gpu = matrix + mem + self.memory_ops * math.exp(g["launch_gap_s"])
    host = self.operations * math.exp(g["host_per_op_s"])
    return (gpu**4 + host**4) ** 0.25


cf.Design.seconds = seconds
rows, _ = cf.load_rows(cf.ROWS)
print(VARIANT, {k: {kk: round(vv, 3) for kk, vv in v.items()} for k, v in cf.fit(rows)["generations"].items()})
records, _ = cf.validate(rows)
rep = cf.report(records, len(rows))
for n in [*rep["generations"], "overall"]:
    print(n, rep[n])
