"""Each validation model's optimizer update as its script stepped it (models.Workload.loops): weight
tensors, the per-parameter loop's kernels and bytes per step against the fused update's (bench/ops.py), per
precision. Weights built on the meta device; every weight counted as stepped (Transformer-XL's adaptive input
tail is not: the traced step gives it no gradient, so its counts here are a little high).

    PYTHONPATH=src python benchmarks/results/validation-worst-models-amd-zen4-2026-12-04/loops.py
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))
from models import workload  # noqa: E402
from trace_models import load_cache, loop_update  # noqa: E402

from ampgan.bench.ops import FUSED_UPDATES, fused_update  # noqa: E402

print("| model | weights (tensors, M values) | fp32 run's update | mixed run's update |")
print("|---|---|---|---|")
for key in load_cache()["models"]:
    built = workload(key)
    with torch.device("meta"):
        model = built.build()
    parameters = list(model.parameters())
    for p in parameters:
        p.grad = torch.empty_like(p)
    optimizer = built.optimizer(parameters)
    cells = []
    for loop in built.loops:
        if loop is None:
            fused = fused_update(optimizer)
            cells.append(f"fused ({fused.op}): 1 kernel, {fused.bytes / 1e9:.2f} GB")
        else:
            kernels = loop_update(optimizer, loop)
            fused_bytes = sum(p.numel() * 4 for p in parameters) * FUSED_UPDATES[fused_update(optimizer).op]
            cells.append(
                f"per-parameter loop: {len(kernels)} kernels, {sum(k.bytes for k in kernels) / 1e9:.2f} GB "
                f"(fused: {fused_bytes / 1e9:.2f} GB)"
            )
    values = sum(p.numel() for p in parameters) / 1e6
    print(f"| {key} | {len(parameters)}, {values:.1f} | {cells[0]} | {cells[1]} |")
