"""Fit the step composition on every validation row and write the calibration ampgan ships.

    python benchmarks/validation/fit_composition.py [--date YYYY-MM-DD]

Writes src/ampgan/projection/calibration/composition.json: the fitted quantities (composition.py), the band
per GPU generation from the leave-one-model-out errors, the band of a generation without rows (each
generation predicted without its own rows), what they rest on (rows.csv's sources and software, the models
and GPUs), and the leave-one-model-out summary check.py prints. The rows kept aside
(heldout_ada_hopper.csv) are not read. Takes a minute or two on 2 cores (the fit runs once per model left out
and once per generation).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

import numpy as np
import scipy
import torch

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import composition_fit as cf  # noqa: E402

TARGET = HERE.parents[1] / "src" / "ampgan" / "projection" / "calibration" / "composition.json"


def build(date: str) -> dict:
    rows, skipped = cf.load_rows(cf.ROWS)
    params = cf.fit(rows)
    records, bands = cf.validate(rows)
    sources = sorted({(r.source["source"], r.source["software"].split(" (")[0]) for r in rows})
    return {
        "format": "ampgan-composition/1",
        "what": "the step-level quantities kernels do not show, fitted on published end-to-end single-GPU "
        "training throughput (fp32/TF32 against AMP), and the band per GPU generation from leave-one-model-out "
        "errors (src/ampgan/projection/composition.py)",
        "parameters": params,
        "bands": bands["bands"],
        "uncalibrated_band": bands["uncalibrated_band"],
        "validation": cf.report(records, len(rows)),
        "fitted_on": {
            "rows": len(rows),
            "file": "benchmarks/validation/rows.csv",
            "models": sorted({r.model for r in rows}),
            "gpus": sorted({r.gpu.key for r in rows}),
            "sources": [f"{s} ({software})" for s, software in sources],
            "left_out": len(skipped),
            "held_out_never_read": "benchmarks/validation/heldout_ada_hopper.csv",
        },
        "source": "NVIDIA DeepLearningExamples READMEs and lambdal/deeplearning-benchmark (rows.csv's source, "
        "source_path, commit and heading columns name each row's table); models built from their papers "
        "(benchmarks/validation/models)",
        "date": date,
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "numpy": np.__version__,
            "scipy": scipy.__version__,
        },
        "script": "benchmarks/validation/fit_composition.py",
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    parser.add_argument("--out", type=Path, default=TARGET)
    args = parser.parse_args(argv)
    document = build(args.date)
    args.out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(document["validation"]["overall"]))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
