"""Rewrite op_tables.json's optimizer rows as trace_models.py now records them (Workload.loops), without
re-tracing the steps (Tacotron 2's takes ten minutes): each model is built on the meta device, its fused
update row replaced by its per-parameter kernels, merged as bench/ops.affine_rows merges a trace's records
(same key: weights added; new keys after the others, in order). `trace_models.py --check KEY` then re-traces
a model and compares: the patch is what a fresh trace writes.

    PYTHONPATH=src python benchmarks/results/validation-worst-models-amd-zen4-2026-12-04/patch_updates.py
"""

import sys
from dataclasses import astuple
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))
import trace_models as tm  # noqa: E402
from models import workload  # noqa: E402

from ampgan.bench.ops import FUSED_UPDATES, OpRow, OpTable  # noqa: E402
from ampgan.precisions import FP16, FP32  # noqa: E402


def key_of(row: OpRow) -> tuple:
    return astuple(row)[:7] + (row.kernels,)


cache = tm.load_cache()
for key, entry in cache["models"].items():
    built = workload(key)
    entry["training"] = built.training
    with torch.device("meta"):
        model = built.build()
    parameters = list(model.parameters())
    optimizer = built.optimizer(parameters)
    # the weights the step gives a gradient (Transformer-XL's adaptive input tail gets none), by one backward
    # on the meta device as trace_step runs it; checked against the fused row's bytes below
    built.loss(model, built.inputs(tm.TRACE_BATCH_SIZES[0])).backward()
    for precision in (FP32, FP16):
        table = OpTable.from_dict(entry["op_tables"][precision])
        fused = [r for r in table.rows if r.op in FUSED_UPDATES]
        assert len(fused) == 1 and fused[0].bytes == (
            sum(p.numel() * 4 for p in parameters if p.grad is not None) * FUSED_UPDATES[fused[0].op],
            0.0,
        ), (key, precision, "the stepped weights differ from the trace's: re-trace this model instead")
        loop = built.loops[precision == FP16]
        if loop is None:
            continue
        merged = {key_of(r): r for r in table.rows if r.op not in FUSED_UPDATES}
        for record in tm.loop_update(optimizer, loop):
            row = OpRow(
                record.op, "memory", "float32", 1, (0.0, 0.0), (record.bytes, 0.0), False, 1 / built.accumulation
            )
            old = merged.get(key_of(row))
            merged[key_of(row)] = row if old is None else OpRow(*astuple(old)[:7], old.weight + row.weight, old.kernels)
        entry["op_tables"][precision] = OpTable(
            precision, tuple(merged.values()), table.traced_at, table.device
        ).to_dict()
    print(f"{key}: {[len(entry['op_tables'][p]['rows']) for p in (FP32, FP16)]} op rows")
tm.save_cache(cache)
