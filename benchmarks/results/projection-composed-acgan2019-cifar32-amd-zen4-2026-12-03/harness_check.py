"""Is the study's own harness the outlier? Its step's matrix FLOPs (the 32x32x3 trace) over its measured time,
as a share of the T4's datasheet peak, against the same share in every published validation row.

    python benchmarks/results/projection-composed-acgan2019-cifar32-amd-zen4-2026-12-03/harness_check.py

Nothing is fitted: FLOPs come from the traced steps (bench/results.json here, benchmarks/validation/op_tables.json),
times from the study (T4, batch 2048: ~700 ms fp32, ~410 ms fp16) and from rows.csv.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
VALIDATION = HERE.parents[1] / "validation"
sys.path.insert(0, str(VALIDATION))

import composition_fit as cf  # noqa: E402
from trace_models import load_cache, tables_of  # noqa: E402

from ampgan.precisions import FP16, FP32  # noqa: E402
from ampgan.projection.kernel_model import peak_tflops  # noqa: E402
from ampgan.projection.tables import op_tables_of  # noqa: E402
from ampgan.system.gpus import gpu_spec  # noqa: E402

STUDY = {FP32: 0.700, FP16: 0.410}  # seconds per step, T4, batch 2048 (the study's Figures 1-3)


def shares() -> dict:
    path = HERE / "bench" / "results.json"
    tables = op_tables_of(json.loads(path.read_text()), path)
    t4 = gpu_spec("T4")
    study = {}
    for precision, seconds in STUDY.items():
        flops = tables[FP16 if precision == FP16 and FP16 in tables else "bf16" if precision == FP16 else FP32]
        achieved = flops.flops_at(2048, "matrix") / seconds / 1e12
        study[precision] = {"tflops": achieved, "share_of_peak": achieved / peak_tflops(t4, precision)}
    rows, _ = cf.load_rows(cf.ROWS)
    cache = load_cache()["models"]
    traced = {}
    published = {FP32: [], FP16: []}
    for row in rows:
        traced.setdefault(row.key, tables_of(cache[row.key]))
        for side, precision in enumerate((row.baseline, FP16)):
            table = traced[row.key][FP32 if side == 0 else FP16]
            achieved = table.flops_at(row.batch[side], "matrix") / row.measured[side] / 1e12
            published[FP32 if side == 0 else FP16].append(
                (achieved / peak_tflops(row.gpu, precision), row.model, row.gpu.key, row.generation)
            )
    return {"study_t4_2048": study, "published": published}


def main() -> int:
    found = shares()
    print("| | study, T4 at 2048 | published rows: median [10th-90th percentile] of peak | rows below the study |")
    print("|---|---|---|---|")
    summary = {}
    for precision in (FP32, FP16):
        s = found["study_t4_2048"][precision]
        values = np.array([v for v, *_ in found["published"][precision]])
        medians = {
            g: float(np.median([v for v, _, _, of in found["published"][precision] if of == g]))
            for g in sorted({g for *_, g in found["published"][precision]})
        }
        below = float(np.mean(values < s["share_of_peak"]))
        summary[precision] = {
            **s,
            "published_median": float(np.median(values)),
            "published_p10_p90": [float(np.percentile(values, 10)), float(np.percentile(values, 90))],
            "median_by_generation": medians,
            "rows": len(values),
            "rows_below_study": below,
        }
        print(
            f"| {precision} | {s['tflops']:.2f} TFLOP/s = {s['share_of_peak']:.0%} of peak | "
            f"{np.median(values):.0%} [{np.percentile(values, 10):.0%}-{np.percentile(values, 90):.0%}] "
            f"(Turing {medians['turing']:.0%}, Volta {medians['volta']:.0%}) | {below:.0%} of {len(values)} |"
        )
    (HERE / "harness_check.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
