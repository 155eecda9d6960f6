"""What makes Turing's and Volta's bands wide: each row's leave-one-model-out speedup error, by model and by GPU,
the band each level of the rule would give a generation (and how many of its rows it holds), and what the
unmeasured kernel term would add to each row's band in `ampgan project`.

    PYTHONPATH=src python benchmarks/results/validation-facts-amd-zen4-2026-12-03f/bands.py

No timing: the composition is fitted on benchmarks/validation/rows.csv as check.py fits it (about 40 s).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "validation"))

import composition_fit as cf  # noqa: E402

from ampgan.projection.composition import load_composition  # noqa: E402

GENERATIONS = ("turing", "volta", "ampere")
SHOWN_LEVELS = (0.20, 0.15, 0.12, 0.10, 0.09)


def main() -> int:
    rows, _ = cf.load_rows(cf.ROWS)
    lomo = cf.leave_one_out(rows, lambda r: r.model, cf.fit(rows))
    speed, _ = cf.log_errors(rows, lomo)
    whole = load_composition().params
    design = cf.Design.of(rows)
    architecture, path, name = cf.TERM
    tried = {**whole, "kernel_terms": {architecture: {path: {name: -3.04}}}}
    at_zero, at_siblings = design.seconds(whole), design.seconds(tried)
    for generation in GENERATIONS:
        members = [i for i, r in enumerate(rows) if r.generation == generation]
        errors = np.array([speed[i] for i in members])
        print(f"== {generation}: {len(members)} rows, log(measured / projected speedup), each model left out")
        print(
            f"   own errors: 10th {np.percentile(errors, 10):+.3f}, median {np.median(errors):+.3f}, "
            f"90th {np.percentile(errors, 90):+.3f}; "
            f"10th-90th width x{math.exp(np.ptp(np.percentile(errors, [10, 90]))):.2f}"
        )
        for label, key in (("model", lambda r: r.model), ("gpu", lambda r: r.gpu.key)):
            for value in sorted({key(rows[i]) for i in members}):
                own = [speed[i] for i in members if key(rows[i]) == value]
                print(
                    f"   {label} {value:<22} rows {len(own):>2}  median {np.median(own):+.3f}  "
                    f"min {min(own):+.3f}  max {max(own):+.3f}"
                )
        for level in SHOWN_LEVELS:
            widths, inside = [], []
            for i in members:
                others = [speed[j] for j in members if rows[j].model != rows[i].model]
                low, high = cf.band_of(others, level)
                widths.append(math.exp(high - low))
                inside.append(low <= speed[i] <= high)
            print(
                f"   level {level:.2f}: median band high/low {np.median(widths):.2f}, holds {np.mean(inside):.1%} "
                f"({sum(inside)}/{len(inside)})"
            )
        spans = [
            cf.per_sample_ratio(tuple(at_zero[i]), rows[i].batch)
            / cf.per_sample_ratio(tuple(at_siblings[i]), rows[i].batch)
            for i in members
        ]
        moved = [(rows[i].model, rows[i].gpu.key, s) for i, s in zip(members, spans) if abs(math.log(s)) > 0.01]
        print(
            f"   the unmeasured 1-4 channel data gradient at its siblings' value moves {len(moved)} rows' speedup "
            f"(ampgan project's band spans it; check.py's does not): "
            + ", ".join(f"{m} {g} x{s:.2f}" for m, g, s in moved)
        )
    print("== GeForce (fp32 accumulation at half the tensor rate) against Titan RTX (full rate), the same software")
    by = {
        (r.model, r.gpu.key): i
        for i, r in enumerate(rows)
        if r.generation == "turing" and "CUDA 10" in r.source["software"]
    }
    for model in sorted({m for m, _ in by}):
        if (model, "Titan RTX") not in by:
            continue
        titan = by[(model, "Titan RTX")]
        for gpu in ("RTX 2080 Ti", "RTX 2080 Max-Q"):
            if (model, gpu) in by:
                i = by[(model, gpu)]
                projected = [cf.per_sample_ratio(lomo[j], rows[j].batch) for j in (i, titan)]
                print(
                    f"   {model:<20} {gpu:<15} speedup over Titan RTX's: "
                    f"measured {rows[i].speedup / rows[titan].speedup:.2f}, "
                    f"projected {projected[0] / projected[1]:.2f} (batches {rows[i].batch} / {rows[titan].batch})"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
