"""The launch gap's two basins and the choice between ways out of them, on rows.csv's leave-one-model-out
errors only (nothing here reads the held-out Ada/Hopper rows, the unseen rows or the study).

    PYTHONPATH=src python benchmarks/results/validation-launch-gap-amd-zen4-2026-12-04/variants.py

Variants: A as shipped before (unbounded, every fold started from the whole fit), B unbounded with each fold
started as the whole fit starts (the priors' centres), C bounded to assumptions.LAUNCH_GAP_S (2-6 us), folds
from the priors. Prints each variant's whole-fit launch gap, each fold's, and check.py's summary.
"""

import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[2] / "validation"
sys.path.insert(0, str(HERE))

import composition_fit as cf  # noqa: E402

BOUNDS = dict(cf.BOUNDS)
plain = cf.leave_one_out


def run(label: str, bounded: bool, from_whole: bool) -> None:
    cf.BOUNDS = BOUNDS if bounded else {}
    rows, _ = cf.load_rows(cf.ROWS)
    whole = cf.fit(rows)
    gaps = {}

    def folds(rows_, by, start=None, term_prior=None):
        start = whole if from_whole else start
        if by(rows_[0]) == rows_[0].model:  # the model folds: say each one's launch gap
            for m in sorted({r.model for r in rows_}):
                gaps[m] = math.exp(cf.fit([r for r in rows_ if r.model != m], start)["global"]["launch_gap_s"]) * 1e6
        return plain(rows_, by, start, term_prior)

    cf.leave_one_out = folds
    records, _ = cf.validate(rows)
    cf.leave_one_out = plain
    report = cf.report(records, len(rows))
    print(f"== {label}: whole fit launch gap {math.exp(whole['global']['launch_gap_s']) * 1e6:.1f} us")
    print("   folds (model left out: us):", json.dumps({m: round(v, 1) for m, v in gaps.items()}))
    for g in ["overall", *report["generations"]]:
        print(f"   {g:8s}", json.dumps(report[g]))


run("A unbounded, folds from the whole fit (before)", False, True)
run("B unbounded, folds from the priors", False, False)
run("C bounded 2-6 us, folds from the priors", True, False)
