"""The study's network (acgan-2019, CIFAR-10 32x32x3) on the T4, V100 and P100 at batch 64 and 2048: the mid
fp32 -> fp16 speedup composed with a fit on rows.csv, NCHW and channels-last (bf16's table stands in for fp16,
as in `project`). With term_bytes.patch applied the two differ by the transposes; without it (the composition
as it ships) they are the same. Nothing is fitted to the study.

    PYTHONPATH=src python benchmarks/results/validation-layout-amd-zen4-2026-12-04/study_mid.py
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "validation"))
import composition_fit as cf  # noqa: E402

from ampgan.precisions import FP16, FP32  # noqa: E402
from ampgan.projection.composition import compose, step_parts  # noqa: E402
from ampgan.projection.document import table_for  # noqa: E402
from ampgan.projection.tables import op_tables_of  # noqa: E402
from ampgan.system.gpus import gpu_spec  # noqa: E402

BENCH = ROOT / "benchmarks/results/projection-composed-acgan2019-cifar32-amd-zen4-2026-12-03/bench/results.json"
tables = op_tables_of(json.loads(BENCH.read_text()), BENCH)
params = cf.fit(cf.load_rows(cf.ROWS)[0])
term = "transpose_fraction" in params["global"]
for name in ("T4", "V100", "P100"):
    gpu = gpu_spec(name)
    for batch in (64, 2048):
        base = compose(step_parts(table_for(FP32, tables)[0].on_cuda(), batch, gpu, FP32), gpu, params)["seconds"]
        out = []
        for nhwc in (False, True):
            extra = {"channels_last": nhwc} if term else {}
            half = compose(step_parts(table_for(FP16, tables)[0].on_cuda(), batch, gpu, FP16, **extra), gpu, params)[
                "seconds"
            ]
            out.append(f"{'channels-last' if nhwc else 'NCHW'} {base / half:.2f}x ({half * 1e3:.0f} ms)")
        print(f"{name} batch {batch}: fp32 {base * 1e3:.0f} ms; fp16 " + ", ".join(out))
