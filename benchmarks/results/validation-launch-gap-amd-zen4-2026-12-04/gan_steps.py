"""acgan-2019 at 32x32x3 (the committed bench of projection-composed-acgan2019-cifar32-amd-zen4-2026-12-03)
composed on the T4, V100 and P100 at batch 64 and 2048 with a given composition.json (default: the shipped
one): each precision's step (ms), its launch-gap share, the step with the unmeasured kernel terms at their
measured siblings' value, and the fp32 -> fp16 speedup at both. Nothing is fitted here.

    PYTHONPATH=src python benchmarks/results/validation-launch-gap-amd-zen4-2026-12-04/gan_steps.py [composition.json]
"""

import json
import sys
from pathlib import Path

import ampgan.projection.composition as comp
from ampgan.precisions import FP16, FP32
from ampgan.projection.document import table_for
from ampgan.projection.tables import op_tables_of
from ampgan.system.gpus import gpu_spec

BENCH = Path(__file__).resolve().parents[1] / "projection-composed-acgan2019-cifar32-amd-zen4-2026-12-03" / "bench"

if len(sys.argv) > 1:
    document = json.loads(Path(sys.argv[1]).read_text())
    shipped = comp.Composition(document["parameters"], document["bands"], document["uncalibrated_band"], document)
    comp.load_composition = lambda: shipped
results = json.loads((BENCH / "results.json").read_text())
tables = op_tables_of(results, BENCH / "results.json")
print(f"launch gap {comp.math.exp(comp.load_composition().params['global']['launch_gap_s']) * 1e6:.1f} us")
print("| GPU | batch | fp32 ms (launch) | fp16 ms (launch) | speedup | fp32 / fp16 ms, siblings | speedup, siblings |")
print("|---|---:|---|---|---:|---|---:|")
for name in ("T4", "V100", "P100"):
    gpu = gpu_spec(name)
    for batch in (64, 2048):
        steps = {p: comp.composed_step(table_for(p, tables)[0].on_cuda(), batch, gpu, p) for p in (FP32, FP16)}
        a, b = steps[FP32], steps[FP16]
        print(
            f"| {name} | {batch} | {a.seconds * 1e3:.1f} ({a.parts['launch_s'] * 1e3:.1f}) "
            f"| {b.seconds * 1e3:.1f} ({b.parts['launch_s'] * 1e3:.1f}) | {a.seconds / b.seconds:.2f}x "
            f"| {a.unmeasured_s * 1e3:.1f} / {b.unmeasured_s * 1e3:.1f} | {a.unmeasured_s / b.unmeasured_s:.2f}x |"
        )
