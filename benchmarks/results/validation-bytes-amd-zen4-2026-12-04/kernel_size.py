"""How large the validation models' memory-bound kernels are (issue 43, bytes study).

    PYTHONPATH=src python benchmarks/results/validation-bytes-amd-zen4-2026-12-04/kernel_size.py

For each model, at the baseline batch of its first row in rows.csv, from the cached fp32 op tables (the rows a
CUDA step runs): memory-bound bytes, kernels, the share of bytes in kernels of 64 MB or more, and the mean bytes a
kernel moves. Compare with the leave-one-model-out baseline residual in none.txt.
"""

import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "validation"))

from models import workload_key  # noqa: E402
from trace_models import load_cache, tables_of  # noqa: E402

with open(ROOT / "benchmarks" / "validation" / "rows.csv", newline="", encoding="utf-8") as handle:
    rows = list(csv.DictReader(handle))
cache = load_cache()["models"]
first = {}
for row in rows:
    key = workload_key(row)
    if key in cache and row["model"] not in first and row["batch_baseline"]:
        first[row["model"]] = (key, float(row["batch_baseline"]))
results = []
for model, (key, batch) in first.items():
    memory = [(r.bytes_at(batch), r.weight) for r in tables_of(cache[key])["fp32"].on_cuda() if r.unit == "memory"]
    total = sum(b * w for b, w in memory)
    kernels = sum(w for _, w in memory)
    large = sum(b * w for b, w in memory if b >= 64e6)
    results.append((total / kernels, model, key, batch, total, kernels, large / total))
print(f"{'model':22s} {'trace':24s} {'batch':>8s} {'GB':>7s} {'kernels':>8s} {'>=64MB':>7s} {'MB/kernel':>10s}")
for per_kernel, model, key, batch, total, kernels, share in sorted(results, reverse=True):
    print(f"{model:22s} {key:24s} {batch:8g} {total / 1e9:7.1f} {kernels:8.0f} {share:7.2f} {per_kernel / 1e6:10.1f}")
