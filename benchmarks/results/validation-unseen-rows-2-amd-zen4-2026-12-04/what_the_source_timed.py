"""ryujaehun's rows time model.half() forward + backward with no optimizer step. Before 2b9d252 check.py projected
them with the builder's training step (autocast's casts, the scaler's pass, SGD's per-parameter loop); since, with
MODEL:O2:noupdate (their notes say so). This projects each row three ways, op by op, with the shipped composition:
nothing is fitted.

    PYTHONPATH=src python benchmarks/results/validation-unseen-rows-2-amd-zen4-2026-12-04/what_the_source_timed.py FILE.csv

Variants: "training step" (the builder's trace, check.py before 2b9d252); "no update" (SGD's loop kernels and GradScaler's unscale pass
dropped: memory rows whose bytes do not grow with the batch, of SGD's kernels, in fp32, and cuda.amp_unscale);
"half network, no update" (the fp16 side from MODEL:O2, apex O2's fp16 network with its batch norms fp32: no
per-step weight casts; what check.py projects since 2b9d252, from MODEL:O2:noupdate).
"""

import csv
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))
import composition_fit as cf  # noqa: E402
from trace_models import AMP_UNSCALE, load_cache, tables_of, trace_document  # noqa: E402

from ampgan.precisions import FP16, FP32  # noqa: E402
from ampgan.projection.composition import load_composition  # noqa: E402

SGD_KERNELS = {"aten.add", "aten.add_", "aten.mul_"}


def no_update(table):
    def update(r):
        sgd = r.unit == "memory" and r.op in SGD_KERNELS and r.dtype == "float32" and r.bytes[1] == 0
        return sgd or r.op == AMP_UNSCALE

    return replace(table, rows=tuple(r for r in table.rows if not update(r)))


def rows_of(path: Path) -> list:
    with open(path, newline="") as handle:
        raw = [r for r in csv.DictReader(handle) if "model.half()" in r["notes"]]
    with tempfile.NamedTemporaryFile("w", suffix=".csv", newline="", delete=False) as handle:
        writer = csv.DictWriter(handle, raw[0].keys())
        writer.writeheader()
        writer.writerows(raw)
    return cf.load_rows(Path(handle.name))[0]


def traced(key: str) -> dict:
    cached = load_cache()["models"]
    return tables_of(cached[key] if key in cached else trace_document(key))  # MODEL:O2 where not cached


def variant(row, fp16_key: str, drop: bool):
    base, half = traced(row.model)[FP32], traced(fp16_key)[FP16]
    if drop:
        base, half = no_update(base), no_update(half)
    sides = ((base.on_cuda(), row.batch[0], row.baseline), (half.on_cuda(), row.batch[1], FP16))
    parts = tuple(cf.step_parts(t, b, row.gpu, p) for t, b, p in sides)
    return replace(row, parts=parts, sides=sides)


def main() -> int:
    shipped = load_composition()
    bands = {"bands": shipped.bands, "uncalibrated_band": shipped.uncalibrated}
    print(
        f"{'model':<9} {'gpu':<12} {'variant':<24} {'measured':>8} {'projected':>9} {'band':>11} {'t32 err':>7} {'amp err':>7}"
    )
    for row in rows_of(Path(sys.argv[1])):
        for name, key, drop in (
            ("training step", row.model, False),
            ("no update", row.model, True),
            ("half network, no update", f"{row.model}:O2", True),
            ("check.py (" + row.key.partition(":")[2] + ")", None, None),
        ):
            r = cf.held_out([row if key is None else variant(row, key, drop)], shipped.params, bands)[0]
            t32, t16 = r["time_errors"]
            print(
                f"{r['model']:<9} {r['gpu']:<12} {name:<24} {r['measured_speedup']:>7.2f}x {r['projected_speedup']:>8.2f}x "
                f"{r['band'][0]:>5.2f}-{r['band'][1]:<5.2f} {t32:>6.2f}x {t16:>6.2f}x"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
