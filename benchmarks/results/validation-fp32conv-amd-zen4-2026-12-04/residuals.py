"""Is the fp32/TF32 side of convolutional networks projected too slow? (issue 43)

    PYTHONPATH=src python benchmarks/results/validation-fp32conv-amd-zen4-2026-12-04/residuals.py [--heldout]

Every validation row predicted leave-one-model-out by the composition as the code in this checkout fits it, its
error split by how much of the projected baseline (fp32/TF32) step is convolutions: log(measured / projected)
of the baseline and AMP step times and of the speedup, per model and per group (conv-dominated: convolutions
>= 50% of the projected baseline step's GPU time; the others), per generation and baseline precision. A
negative time error means the projection is too slow. Prints the leave-one-model-out summary first (the numbers
check.py prints) and, with --heldout, the kept-aside Ada/Hopper rows projected by the whole fit (read only when
asked: nothing is chosen on them). About 40 s on 2 cores.
"""

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))
import composition_fit as cf  # noqa: E402

from ampgan.projection.composition import compose, step_parts  # noqa: E402

KEYS = ("median_speedup_error", "p90_speedup_error", "coverage", "median_band_width", "median_time_error")


def conv_share(row, params, winograd: bool = False) -> float:
    """The share of the baseline step's composed GPU time spent in convolution kernels (their op rows alone); with
    `winograd`, only in 3x3 stride-1 ones (the shapes cuDNN can run as Winograd; the kernel model's winograd_3x3)."""
    table, batch, precision = row.sides[0]

    def picked(r) -> bool:
        shaped = [d for k, d in r.kernels_at(batch) if k.startswith("conv")]
        # dims: batch, c, h, w, out_channels, r, s, pad_h, pad_w, stride_h, stride_w (step_model.kernel_of)
        return bool(shaped) and (not winograd or (shaped[0][5:7] == (3, 3) and shaped[0][9:11] == (1, 1)))

    convs = [r for r in table if r.unit == "matrix" and picked(r)]
    whole = compose(row.parts[0], row.gpu, params)
    if not convs:
        return 0.0
    part = compose(step_parts(convs, batch, row.gpu, precision), row.gpu, params)
    return part["matrix_s"] / whole["gpu_s"]


FAMILIES = {  # by the convolutions a network runs
    "2-D convnets": {
        "resnet50",
        "resnext101_32x4d",
        "se_resnext101_32x4d",
        "efficientnet_b0",
        "efficientnet_b4",
        "ssd300",
    },
    "1-D convnets": {"waveglow", "hifigan"},
}


def family(model: str) -> str:
    return next((name for name, models in FAMILIES.items() if model in models), "no convolutions*")


def med(values) -> str:
    return f"{np.median(values):+.3f}" if values else "   -  "


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--heldout", action="store_true")
    args = parser.parse_args()
    rows, _ = cf.load_rows(cf.ROWS)
    records, bands = cf.validate(rows)
    report = cf.report(records, len(rows))
    params = cf.fit(rows)
    print("whole fit:", {k: round(v, 3) for k, v in params["global"].items()})
    print("leave one model out: generation rows " + " ".join(KEYS))
    for g in ["overall", *report["generations"]]:
        print(f"  {g} {report[g]['rows']} " + " ".join(str(report[g][k]) for k in KEYS))
        print(f"    bands {g}: {bands['bands'].get(g, {}).get('speedup')}") if g != "overall" else None
    lomo = cf.leave_one_out(rows, lambda r: r.model)
    share = [conv_share(r, params) for r in rows]
    share3 = [conv_share(r, params, winograd=True) for r in rows]
    base = [math.log(r.measured[0] / lomo[i][0]) for i, r in enumerate(rows)]
    amp = [math.log(r.measured[1] / lomo[i][1]) for i, r in enumerate(rows)]
    speed = [math.log(r.speedup / cf.per_sample_ratio(lomo[i], r.batch)) for i, r in enumerate(rows)]
    print("\nper model (leave one model out): median log(measured / projected); conv share of the baseline GPU time")
    print(f"  {'model':22s} {'rows':>4s} {'conv':>5s} {'3x3s1':>5s} {'base':>7s} {'amp':>7s} {'speedup':>7s}")
    for model in sorted(
        {r.model for r in rows}, key=lambda m: -np.median([s for s, r in zip(share, rows) if r.model == m])
    ):
        sel = [i for i, r in enumerate(rows) if r.model == model]
        print(
            f"  {model:22s} {len(sel):4d} {np.median([share[i] for i in sel]):5.2f} "
            f"{np.median([share3[i] for i in sel]):5.2f} {med([base[i] for i in sel]):>7s} "
            f"{med([amp[i] for i in sel]):>7s} {med([speed[i] for i in sel]):>7s}"
        )
    print("\nby family, generation and baseline precision: rows (models) and median log(measured / projected)")
    print("  (* Tacotron 2's few convolutions, under 10% of its step, are counted with the networks without any)")
    print(f"  {'family':16s} {'generation':8s} {'base':5s} {'rows':>9s} {'base':>7s} {'amp':>7s} {'speedup':>7s}")
    for name in (*FAMILIES, "no convolutions*"):
        for gen in ("all", "volta", "turing", "pascal", "ampere"):
            for prec in ("any", "fp32", "tf32"):
                sel = [
                    i
                    for i, r in enumerate(rows)
                    if family(r.model) == name and gen in ("all", r.generation) and prec in ("any", r.baseline)
                ]
                if not sel or (prec != "any" and gen != "all"):
                    continue
                models = len({rows[i].model for i in sel})
                print(
                    f"  {name:16s} {gen:8s} {prec:5s} {len(sel):4d} ({models:2d}) {med([base[i] for i in sel]):>7s} "
                    f"{med([amp[i] for i in sel]):>7s} {med([speed[i] for i in sel]):>7s}"
                )
    # A model-level view (each model one vote): each family's model medians of the baseline error.
    for name in (*FAMILIES, "no convolutions*"):
        meds = {
            m: np.median([base[i] for i, r in enumerate(rows) if r.model == m]) for m in sorted({r.model for r in rows})
        }
        mine = [v for m, v in meds.items() if family(m) == name]
        print(f"model medians of the baseline error, {name}: median {np.median(mine):+.3f}, mean {np.mean(mine):+.3f}")
    if args.heldout:
        held, _ = cf.load_rows(cf.HELD_OUT)
        summary = cf.report(cf.held_out(held, params, bands), len(held))
        print("\nkept aside (Ada, Hopper), fitted on nothing: generation rows " + " ".join(KEYS))
        for g in ["overall", *summary["generations"]]:
            print(f"  {g} {summary[g]['rows']} " + " ".join(str(summary[g][k]) for k in KEYS))


if __name__ == "__main__":
    main()
