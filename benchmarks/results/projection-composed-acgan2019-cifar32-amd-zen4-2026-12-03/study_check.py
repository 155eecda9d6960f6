"""The study's network at its own timing shape (CIFAR-10, 32x32x3) projected with the step composition
fitted end to end, held against the study's figures. Nothing here is fitted to them.

    python benchmarks/results/projection-composed-acgan2019-cifar32-amd-zen4-2026-12-03/study_check.py

Reads bench/results.json beside this script (its op tables), projects fp32 and fp16 onto the T4, P100 and
V100 at batch 64 and 2048 (`ampgan project`'s own function), and prints each against the study's figure:
T4 at 2048 ~700 ms fp32, ~410 ms fp16 (1.71x); V100 at 2048 1.15-1.40x; batch 64 0.9-1.15x on the T4 and
V100; P100 0.9-1.1x ("no gain").
"""

from __future__ import annotations

import json
from pathlib import Path

from ampgan.precisions import FP16, FP32
from ampgan.projection.assumptions import launch_assumption
from ampgan.projection.composition import composed_step
from ampgan.projection.document import as_written, projected_rows, table_for
from ampgan.projection.tables import op_tables_of
from ampgan.system.gpus import gpu_spec

HERE = Path(__file__).resolve().parent
STUDY = {  # (GPU, batch): (low, high) of the study's fp32 -> fp16 speedup
    ("T4", 2048): (1.71, 1.71),
    ("V100", 2048): (1.15, 1.40),
    ("T4", 64): (0.90, 1.15),
    ("V100", 64): (0.90, 1.15),
    ("P100", 64): (0.90, 1.10),
    ("P100", 2048): (0.90, 1.10),
}
STUDY_MS = {("T4", 2048, FP32): 700.0, ("T4", 2048, FP16): 410.0}


def tables() -> dict:
    return op_tables_of(json.loads((HERE / "bench" / "results.json").read_text()), HERE / "bench" / "results.json")


def at_other_value(gpu: str, batch: int) -> dict:
    """fp32 and fp16 step ms with the kernel terms no calibration measured at their other value, and their
    speedup: the column docs/projection.md's study table shows beside the mid (printed, not hand-copied)."""
    found = tables()  # the table `project` uses for each precision (bf16's stands in for fp16)
    ms = {
        p: composed_step(table_for(p, found)[0].on_cuda(), batch, gpu_spec(gpu), p).unmeasured_s * 1e3
        for p in (FP32, FP16)
    }
    return {"fp32_ms": ms[FP32], "fp16_ms": ms[FP16], "speedup": ms[FP32] / ms[FP16]}


def rows() -> list[dict]:
    # The host's dispatch time only enters the kernel view (bound, tensor share); the composed time uses the
    # fitted host cost, so a fixed 10 us keeps this script's numbers the same on any machine.
    launch = launch_assumption(10e-6, "a fixed 10 us (study_check.py)")
    gpus = [gpu_spec(k) for k in ("T4", "P100", "V100")]
    return [as_written(r) for r in projected_rows(tables(), gpus, [64, 2048], launch, (FP32, FP16))]


def check() -> list[dict]:
    found = {(r["device"], r["batch_size"], r["precision"]): r for r in rows() if r["status"] == "ok"}
    out = []
    for (gpu, batch), (low, high) in STUDY.items():
        r16, r32 = found[(gpu, batch, FP16)], found[(gpu, batch, FP32)]
        out.append(
            {
                "gpu": gpu,
                "batch": batch,
                "fp32_ms": [r32["ms_low"], r32["ms_per_step"], r32["ms_high"]],
                "fp16_ms": [r16["ms_low"], r16["ms_per_step"], r16["ms_high"]],
                "speedup": [r16["speedup_low"], r16["speedup"], r16["speedup_high"]],
                "calibrated": r16["calibrated"],
                "study_speedup": [low, high],
                "band_meets_study": r16["speedup_low"] <= high and low <= r16["speedup_high"],
                "study_fp32_ms": STUDY_MS.get((gpu, batch, FP32)),
                "study_fp16_ms": STUDY_MS.get((gpu, batch, FP16)),
                "at_other_value": at_other_value(gpu, batch),
            }
        )
    return out


def meets(speedup: list[float], study: list[float]) -> str:
    """yes when the band holds the study's whole range, the overlap when it holds part of it, else NO."""
    low, high = max(speedup[0], study[0]), min(speedup[2], study[1])
    if low > high:
        return "NO"
    return "yes" if (low, high) == (study[0], study[1]) else f"overlap {low:.2f}-{high:.2f} only"


def main() -> int:
    print(
        "| GPU | batch | fp32 ms [band] | fp16 ms [band] | speedup [band] | band high/low "
        "| at the unmeasured terms' other value | study | band meets it |"
    )
    print("|---|---:|---|---|---|---:|---|---|---|")
    checked = check()
    for c in checked:

        def band(v):
            return f"{v[1]:.0f} [{v[0]:.0f}-{v[2]:.0f}]"

        study = f"{c['study_speedup'][0]:.2f}x" + (
            f"-{c['study_speedup'][1]:.2f}x" if c["study_speedup"][1] != c["study_speedup"][0] else ""
        )
        if c["study_fp32_ms"]:
            study += f" ({c['study_fp32_ms']:.0f} / {c['study_fp16_ms']:.0f} ms)"
        s, o = c["speedup"], c["at_other_value"]
        other = f"{o['fp32_ms']:.0f} ms, {o['fp16_ms']:.0f} ms, {o['speedup']:.2f}x"
        print(
            f"| {c['gpu']} | {c['batch']} | {band(c['fp32_ms'])} | {band(c['fp16_ms'])} | {s[1]:.2f}x "
            f"[{s[0]:.2f}-{s[2]:.2f}]{'' if c['calibrated'] else ' (NOT calibrated)'} | {s[2] / s[0]:.2f} "
            f"| {other} | {study} | {meets(s, c['study_speedup'])} |"
        )
    (HERE / "study_check.json").write_text(json.dumps(checked, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
