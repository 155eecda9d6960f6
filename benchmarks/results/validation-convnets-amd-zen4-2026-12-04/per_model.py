"""Median log(projected / measured) speedup per model and generation, leave one model out (negative: the
measured gain is larger than projected).

    PYTHONPATH=src python benchmarks/results/validation-convnets-amd-zen4-2026-12-04/per_model.py
"""

import collections
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))
import composition_fit as cf  # noqa: E402

rows, _ = cf.load_rows(cf.ROWS)
records, _ = cf.validate(rows)
errors = collections.defaultdict(list)
for r in records:
    errors[(r["model"], r["generation"])].append(math.log(r["projected_speedup"] / r["measured_speedup"]))
print("| model | generation | rows | median log error | in band |")
print("|---|---|---:|---:|---:|")
inside = collections.Counter((r["model"], r["generation"]) for r in records if r["in_band"])
for (model, generation), values in sorted(errors.items()):
    n = len(values)
    print(f"| {model} | {generation} | {n} | {statistics.median(values):+.2f} | {inside[(model, generation)]}/{n} |")
