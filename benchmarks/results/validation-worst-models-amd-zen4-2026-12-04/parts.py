"""Each row's two projected steps split into their parts, for the models named: the op tables' matrix
seconds per precision path at datasheet peak, bytes by kind (fp32 element-wise, with any per-parameter
optimizer loop; 16-bit element-wise; autocast's casts; fused optimizer and scaler passes), kernel and operation
counts, and the composed terms (matrix, memory, launch gaps, host) against the measured step; the composition
fitted with the model left out (as check.py). With --cache FILE: another op_tables.json (the before state).

    PYTHONPATH=src python benchmarks/results/validation-worst-models-amd-zen4-2026-12-04/parts.py \
        [--cache FILE] [--gpus "Quadro RTX 8000,V100"] MODEL ...
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))
import composition_fit as cf  # noqa: E402

from ampgan.bench.ops import FUSED_UPDATES  # noqa: E402
from ampgan.projection.composition import CASTS, SCALER, compose  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("models", nargs="+")
parser.add_argument("--cache", type=Path)
parser.add_argument("--gpus", default="Quadro RTX 8000,Titan RTX,RTX 2080 Ti,V100")
args = parser.parse_args()
cache = json.loads(args.cache.read_text()) if args.cache else None
rows, _ = cf.load_rows(cf.ROWS, cache)
gpus = set(args.gpus.split(","))
print(
    f"{'model':<19} {'gpu':<15} {'src':<6} side {'batch':>5} {'meas ms':>8} {'proj ms':>8} {'matrix':>7} {'memory':>7} "
    f"{'launch':>7} {'host':>7} | {'fp32 GB':>7} {'16b GB':>7} {'cast GB':>7} {'fused GB':>8} {'kernels':>7} {'ops':>6}"
)
for model in args.models:
    mine = [r for r in rows if r.model == model and r.gpu.key in gpus]
    if not mine:
        continue
    params = cf.fit([r for r in rows if r.model != model])  # the model left out, as check.py
    for row in mine:
        for side, (table, batch, _), parts, measured in zip(("base", "amp"), row.sides, row.parts, row.measured):
            c = compose(parts, row.gpu, params)
            memory_rows = [r for r in table if r.unit == "memory"]
            fused = sum(r.bytes_at(batch) * r.weight for r in memory_rows if r.op in FUSED_UPDATES or r.op in SCALER)
            casts = sum(r.bytes_at(batch) * r.weight for r in memory_rows if r.op in CASTS)
            print(
                f"{model:<19} {row.gpu.key[:15]:<15} {row.source['source'][:6]:<6} {side:<4} {batch:>5} "
                f"{measured * 1e3:>8.1f} {c['seconds'] * 1e3:>8.1f} {c['matrix_s'] * 1e3:>7.1f} "
                f"{c['memory_s'] * 1e3:>7.1f} {c['launch_s'] * 1e3:>7.1f} {c['host_s'] * 1e3:>7.1f} | "
                f"{parts.other_bytes / 1e9:>7.2f} {parts.other_bytes_16 / 1e9:>7.2f} {casts / 1e9:>7.2f} "
                f"{fused / 1e9:>8.2f} {parts.memory_ops:>7.0f} {parts.operations:>6.0f}"
            )
