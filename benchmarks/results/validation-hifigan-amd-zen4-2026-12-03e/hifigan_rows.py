"""HiFi-GAN's two DLE rows projected every way this note compares: the 1-4 channel data-gradient term (Volta
calibration, 16-bit path) at the kernel fit's 0, at its measured siblings' value and at the value that would
alone close the V100 row's gap; and, at 0, MSD's grouped convolutions (which the kernel model does not
describe: each is timed as the aligned product of its FLOPs) held at the fp32/TF32 path in the AMP step.

    PYTHONPATH=src python benchmarks/results/validation-hifigan-amd-zen4-2026-12-03e/hifigan_rows.py

The composition is the one fitted without HiFi-GAN (as check.py predicts its rows). CPU only, no timing.
"""

import sys
from dataclasses import fields
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "validation"))

import composition_fit as cf  # noqa: E402

from ampgan.precisions import FP16, FP32, TF32  # noqa: E402
from ampgan.projection.composition import StepParts, compose, step_parts  # noqa: E402

TERMS = (0.0, -3.04, -4.45)


def added(a: StepParts, b: StepParts) -> StepParts:
    """Two parts of one step as one (their matrix seconds per path and their bytes and counts summed)."""
    values = {f.name: getattr(a, f.name) for f in fields(StepParts)}
    for f in fields(StepParts):
        other = getattr(b, f.name)
        values[f.name] = (
            {k: v + other[k] for k, v in values[f.name].items()} if f.name == "matrix_s" else values[f.name] + other
        )
    return StepParts(**values)


def grouped(row) -> bool:
    """A matrix op the kernel model has no shape for (MSD's grouped convolutions: groups 4 and 16)."""
    return row.unit == "matrix" and row.flops[1] > 0 and not row.kernels


def main() -> int:
    rows, _ = cf.load_rows(cf.ROWS)
    params = cf.fit([r for r in rows if r.model != "hifigan"])
    tables = {}
    for r in (r for r in rows if r.model == "hifigan"):
        tables[r.key] = tables.get(r.key) or cf.tables_of(cf.load_cache()["models"][r.key])
        print(f"{r.gpu.key} ({r.key}): measured {r.measured[0]:.3f} s / {r.measured[1]:.3f} s, {r.speedup:.2f}x")
        for term in TERMS:
            base, amp = (compose(p, r.gpu, params)["seconds"] for p in r.parts_at(term))
            print(f"  term {term:6.2f}: projected {base:.3f} s / {amp:.3f} s, {base / amp:.2f}x")
        on_cuda = tables[r.key][FP16].on_cuda()
        slow = TF32 if r.gpu.generation == "ampere" else FP32
        held = step_parts([o for o in on_cuda if grouped(o)], r.batch[1], r.gpu, slow)
        share = compose(step_parts([o for o in on_cuda if grouped(o)], r.batch[1], r.gpu, FP16), r.gpu, params)
        for term in TERMS[:2]:
            terms = {FP16: {cf.TERM[2]: term}}
            plain = step_parts([o for o in on_cuda if not grouped(o)], r.batch[1], r.gpu, FP16, terms)
            base = compose(r.parts_at(term)[0], r.gpu, params)["seconds"]
            amp = compose(added(plain, held), r.gpu, params)["seconds"]
            print(
                f"  term {term:6.2f}, grouped convolutions on the {slow} path in the AMP step: {base:.3f} s / "
                f"{amp:.3f} s, {base / amp:.2f}x (their 16-bit matrix time as projected: "
                f"{share['matrix_s'] * 1e3:.0f} ms)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
