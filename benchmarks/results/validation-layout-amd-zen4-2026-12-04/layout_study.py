"""The layout term tried on the validation rows (issue 43): leave-one-model-out summary, the speedup residuals of
the ConvNets-family rows split by the layout their AMP side ran (rows.csv's `layout:` notes), the same model on
the same GPU run both ways (ResNet-50, SSD300), and, with --heldout, the kept-aside Ada/Hopper rows.

    PYTHONPATH=src python benchmarks/results/validation-layout-amd-zen4-2026-12-04/layout_study.py \
        [--prior C S] [--heldout]

Without a patch applied it measures the composition as it ships (no term). With term_bytes.patch or
term_share.patch applied (`git apply`), --prior C S is the term's prior (log transpose_fraction: centre, spread);
`20 0.01` holds the term off. Each run takes 30-60 s on 2 cores.
"""

import argparse
import math
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))
import composition_fit as cf  # noqa: E402

KEYS = ("median_speedup_error", "p90_speedup_error", "coverage", "median_band_width", "median_time_error")
CONVNETS = {"resnet50", "resnext101_32x4d", "se_resnext101_32x4d", "efficientnet_b0", "efficientnet_b4", "ssd300"}


def amp_layout(row) -> str:
    said = re.search(r"\blayout: (\w+)/(\w+)", row.source["notes"])
    return said.group(2) if said else "none"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prior", nargs=2, type=float)
    parser.add_argument("--heldout", action="store_true")
    args = parser.parse_args()
    term = "transpose_fraction" in cf.PRIOR
    if term and args.prior:
        cf.PRIOR["transpose_fraction"] = tuple(args.prior)
    rows, _ = cf.load_rows(cf.ROWS)
    records, bands = cf.validate(rows)
    report = cf.report(records, len(rows))
    params = cf.fit(rows)
    fitted = params["global"].get("transpose_fraction")
    print(f"term: {'prior ' + str(cf.PRIOR['transpose_fraction']) if term else 'none'}; fitted {fitted}")
    print(f"matrix_fp16 {params['global']['matrix_fp16']:.3f}")
    print("leave one model out: generation rows " + " ".join(KEYS))
    for g in ["overall", *report["generations"]]:
        print(f"  {g} {report[g]['rows']} " + " ".join(str(report[g][k]) for k in KEYS))
    lomo = cf.leave_one_out(rows, lambda r: r.model)
    print("ConvNets-family rows by the AMP side's layout: median log(measured / projected)")
    for gen in ("volta", "turing", "ampere", "all"):
        for layout in ("nhwc", "nchw"):
            sel = [
                i
                for i, r in enumerate(rows)
                if r.model in CONVNETS and amp_layout(r) == layout and gen in ("all", r.generation)
            ]
            if not sel:
                continue
            base = np.median([math.log(rows[i].measured[0] / lomo[i][0]) for i in sel])
            amp = np.median([math.log(rows[i].measured[1] / lomo[i][1]) for i in sel])
            speed = np.median([math.log(rows[i].speedup / cf.per_sample_ratio(lomo[i], rows[i].batch)) for i in sel])
            models = len({rows[i].model for i in sel})
            print(
                f"  {gen:7s} amp {layout} rows {len(sel):3d} models {models}: "
                f"base {base:+.3f} amp {amp:+.3f} speedup {speed:+.3f}"
            )
    print("the same model and GPU both ways (Volta, Ampere): measured and projected speedup")
    for i, r in sorted(enumerate(rows), key=lambda x: (x[1].model, x[1].gpu.key, x[1].source["source"])):
        if r.model in ("resnet50", "ssd300") and r.generation in ("volta", "ampere"):
            said = re.search(r"\blayout: (\w+/\w+)", r.source["notes"]).group(1)
            mid = cf.per_sample_ratio(lomo[i], r.batch)
            print(
                f"  {r.model:9s} {r.gpu.key:15s} {r.source['source']:6s} {r.source['software'][:24]:24s} {said:9s} "
                f"measured {r.speedup:5.2f} projected {mid:5.2f} log {math.log(r.speedup / mid):+.3f}"
            )
    if args.heldout:
        held, _ = cf.load_rows(cf.HELD_OUT)
        summary = cf.report(cf.held_out(held, params, bands), len(held))
        print("kept aside (Ada, Hopper), fitted on nothing: generation rows " + " ".join(KEYS))
        for g in ["overall", *summary["generations"]]:
            print(f"  {g} {summary[g]['rows']} " + " ".join(str(summary[g][k]) for k in KEYS))


if __name__ == "__main__":
    main()
