"""Trace the validation models' training steps into op tables (bench/ops.py's format), cached in
op_tables.json beside this script so that check.py and its test do not re-trace them.

    python benchmarks/validation/trace_models.py [--models resnet50,ncf] [--check ncf]

Each model (models/__init__.py) is built on the meta device (shapes only: BERT-large's 340M weights take no
memory) and one training step traced at batch 8 and 16 in fp32 and in fp16 mixed precision, written as
intercept + slope x batch per operation as ampgan bench writes a GAN's. fp16: the forward and loss under
CUDA autocast's casts (models/autocast.py: torch.autocast has no meta backend), the loss scaled, the
backward, then the scaler's unscale-and-check pass over the fp32 gradients; a model DLE trains with apex O2
(Workload.amp) runs its whole network in fp16 instead, with the master weights' passes. Both: the optimizer
update the run stepped: the fused one CUDA runs (bench/ops.py FUSED_UPDATES), or where the script steps
torch.optim before PyTorch 2.0 (or BERT's fp32 BertAdam), its per-parameter kernels (Workload.loops).
`--check NAME` re-traces one model and exits 1 when it no longer matches the cache (the test does this for a
small one).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from models import TORCH_OPTIM, Loop, Workload, workload, workload_key  # noqa: E402
from models.autocast import MetaAutocast  # noqa: E402

from ampgan.bench.ops import TRACE_BATCH_SIZES, OpRecord, OpTable, affine_rows, fused_update, record_ops  # noqa: E402
from ampgan.precisions import FP16, FP32  # noqa: E402

CACHE = HERE / "op_tables.json"
FORMAT = "ampgan-validation-op-tables/1"
AMP_UNSCALE = "cuda.amp_unscale"  # GradScaler's fused check-and-unscale: reads and writes every fp32 gradient
LOSS_SCALE = 65536.0


def trace_step(
    workload: Workload, model: torch.nn.Module, optimizer, batch_size: int, precision: str
) -> list[OpRecord]:
    batch = workload.inputs(batch_size)
    for p in model.parameters():
        p.grad = None

    def step():
        if precision == FP16 and workload.amp == "O2":  # the network itself is fp16 (trace_workload)
            # apex O2 casts the floating inputs to fp16 (its patched forward); token ids stay as they are
            half = tuple(t.half() if t.is_floating_point() else t for t in batch)
            (workload.loss(model, half).float() * LOSS_SCALE).backward()
        elif precision == FP16:
            # CPU autocast on as well: no meta tensor goes through it, but nn.LSTM accepts an fp16 input to
            # fp32 weights only while some autocast is on (as CUDA autocast is on a GPU).
            with torch.autocast("cpu", dtype=torch.float16), MetaAutocast():
                loss = workload.loss(model, batch)
            (loss.float() * LOSS_SCALE).backward()
        else:
            workload.loss(model, batch).backward()

    records = record_ops(step)
    if not workload.update:  # the row timed forward and backward only
        return records
    if precision == FP16:
        # autocast: read and write every fp32 gradient; apex O2: fp16 gradients to fp32 master gradients (2 + 4
        # bytes), and after the update the masters back into the fp16 network (4 + 2)
        per_weight = 12 if workload.amp == "O2" else 8
        moved = sum(p.grad.numel() * per_weight for p in model.parameters() if p.grad is not None)
        records.append(OpRecord(AMP_UNSCALE, "memory", "float32", 1, 0.0, float(moved), optimizer=False))
    loop = workload.loops[precision == FP16]
    if loop and workload.foreach and loop in TORCH_OPTIM:
        records.extend(foreach_update(optimizer, loop))
    else:
        records.extend(loop_update(optimizer, loop) if loop else filter(None, [fused_update(optimizer)]))
    return records


# ATen's multi_tensor_apply (MultiTensorApply.cuh): a launch takes at most 48 tensors (depth 3, as an addcmul_'s
# parameter, and two operands; 110 at depth 1, 30 at depth 5) and 320 blocks of 65,536 elements.
FOREACH_TENSORS, FOREACH_ELEMENTS = 48, 320 * 65536


def foreach_update(optimizer, loop: Loop) -> list[OpRecord]:
    """torch.optim's foreach form of a loop (PyTorch >= 2.0 on CUDA): each of the loop's kernels once over all
    the parameters it touches, in as many multi-tensor launches as the tensors and elements need; the same bytes."""
    stepped = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    records = []
    for op, passes, decayed_only in loop:
        touched = [p for p in stepped if not decayed_only or p.dim() >= 2]
        elements = sum(p.numel() for p in touched)
        launches = max(-(-len(touched) // FOREACH_TENSORS), -(-elements // FOREACH_ELEMENTS))
        moved = float(elements * 4 * passes) / launches
        records += [OpRecord(op, "memory", "float32", 1, 0.0, moved, optimizer=False)] * launches
    return records


def loop_update(optimizer, loop: Loop) -> list[OpRecord]:
    """A per-parameter update (models.Loop) as the kernels it launches, parameter by parameter. Recorded as
    ordinary element-wise kernels, not as the optimizer's (OpTable.on_cuda drops those: they are the CPU's
    foreach kernels that the fused update replaces), since on CUDA these are the very kernels that ran."""
    return [
        OpRecord(op, "memory", "float32", 1, 0.0, float(p.numel() * 4 * passes), optimizer=False)
        for group in optimizer.param_groups
        for p in group["params"]
        if p.grad is not None
        for op, passes, decayed_only in loop
        if not decayed_only or p.dim() >= 2
    ]


def trace_workload(workload: Workload, precision: str) -> OpTable:
    with torch.device("meta"):
        model = workload.build()
    model.train()
    optimizer = workload.optimizer(list(model.parameters()))
    if precision == FP16 and workload.amp == "O2":
        model.half()  # the optimizer keeps its (fp32 master) update: bench/ops.fused_update charges 4-byte weights
        for module in model.modules():  # batch norms stay fp32: apex O2's keep_batchnorm_fp32, DLE's network_to_half
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
                module.float()
    small, large = TRACE_BATCH_SIZES
    traces = [trace_step(workload, model, optimizer, size, precision) for size in (small, large)]
    rows = affine_rows(traces[0], traces[1], small, large)
    # per micro-batch: a row's batch and throughput are a micro-batch's
    rows = [replace(r, weight=r.weight / workload.accumulation) for r in rows]
    return OpTable(precision, tuple(rows), (small, large), "meta")


def trace_document(key: str) -> dict:
    """One traced step by its key (models.workload_key: "resnet50", "tacotron2:571")."""
    built = workload(key)
    with torch.device("meta"):
        parameters = sum(p.numel() for p in built.build().parameters())
    return {
        "sample": built.sample,
        "training": built.training,
        "parameters": parameters,
        "op_tables": {p: trace_workload(built, p).to_dict() for p in (FP32, FP16)},
    }


def needed_keys(rows_csv: Path) -> list[str]:
    """The traced steps a rows file needs (its rows without a builder need none)."""
    with open(rows_csv, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    keys = {workload_key(r) for r in rows}
    return sorted(k for k in keys if k)


def load_cache(path: Path = CACHE) -> dict:
    return json.loads(path.read_text())


def tables_of(entry: dict) -> dict[str, OpTable]:
    return {p: OpTable.from_dict(t) for p, t in entry["op_tables"].items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", help="comma-separated keys such as resnet50,tacotron2:571 (default: every one the rows need)"
    )
    parser.add_argument("--rows", type=Path, default=HERE / "rows.csv", help="the rows whose models are traced")
    parser.add_argument("--check", help="re-trace this model and compare with the cache")
    args = parser.parse_args(argv)
    if args.check:
        fresh = trace_document(args.check)
        cached = load_cache()["models"][args.check]
        same = json.loads(json.dumps(fresh)) == cached
        print(f"{args.check}: {'matches' if same else 'DIFFERS FROM'} {CACHE.name}")
        return 0 if same else 1
    cache = load_cache() if CACHE.is_file() else {"format": FORMAT, "models": {}}
    names = args.models.split(",") if args.models else needed_keys(args.rows)
    for name in names:
        started = time.perf_counter()
        cache["models"][name] = trace_document(name)
        rows = {p: len(t["rows"]) for p, t in cache["models"][name]["op_tables"].items()}
        print(f"{name}: {rows} op rows, {time.perf_counter() - started:.1f} s", flush=True)
        save_cache(cache)  # after each model: a long trace (Tacotron 2's 600 decoder steps) keeps the others
    return 0


def save_cache(cache: dict) -> None:
    cache["traced_with"] = {"torch": torch.__version__, "script": "benchmarks/validation/trace_models.py"}
    cache["models"] = dict(sorted(cache["models"].items()))
    CACHE.write_text(json.dumps(cache, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
