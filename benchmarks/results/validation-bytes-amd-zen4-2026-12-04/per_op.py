"""ResNet-50's traced bytes per op kind against what PyTorch's CUDA kernels move (issue 43, bytes study).

    PYTHONPATH=src python benchmarks/results/validation-bytes-amd-zen4-2026-12-04/per_op.py [--model M] [--batch B]

Traces one training step on the meta device (benchmarks/validation/trace_models.py's trace_step, the same
recorder as bench/ops.py) at the batch asked, keeping each operation's tensors, then counts per op kind
(a) the traced bytes (bench/ops.py's _bytes_of: every distinct tensor read or written, once) and
(b) the bytes the CUDA kernels move in DRAM passes, by the kernels' source (README.md names each): batch norm
reads its large operands twice, the others each tensor once (an in-place op's self read and written).
"""

import argparse
import collections
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "validation"))

from models import workload  # noqa: E402
from trace_models import trace_step  # noqa: E402

import ampgan.bench.ops as ops  # noqa: E402
from ampgan.precisions import FP16, FP32  # noqa: E402


def size(t):
    return t.numel() * t.element_size()


def storage(t):
    """Bytes a kernel touches of `t`: an expanded (stride-0) view reads only its storage."""
    if any(s == 0 for s in t.stride()) and t.numel() > 1:
        return t.untyped_storage().nbytes() if t.device.type != "meta" else _strided_extent(t)
    return size(t)


def _strided_extent(t):
    extent = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 0)
    return extent * t.element_size()


def kernel_bytes(name, args, out):
    """DRAM bytes of the CUDA kernels one eager op launches (see README.md for the sources)."""
    ins = ops._tensors(args)
    outs = ops._tensors(out)
    if name in ("native_batch_norm", "cudnn_batch_norm", "_native_batch_norm_legit", "_batch_norm_with_update"):
        x, y = ins[0], outs[0]
        return 2 * size(x) + size(y)  # statistics pass reads x; the transform pass reads x again and writes y
    if name in ("native_batch_norm_backward", "cudnn_batch_norm_backward", "batch_norm_backward"):
        dy, x, dx = ins[0], ins[1], outs[0]
        return 2 * (size(dy) + size(x)) + size(dx)  # reduce pass reads dy, x; elementwise pass reads both again
    if name == "convolution_backward":  # data gradient reads dy and w, weight gradient dy and x: dy twice
        return ops._bytes_of(ins + outs) + size(ins[0])
    # everything else: each distinct input read once (an expanded view: its storage), each output written once;
    # an in-place op's self is read and written
    seen, total = set(), 0
    for t in ins:
        if id(t) not in seen:
            seen.add(id(t))
            total += storage(t)
    for t in outs:
        total += size(t) if (id(t) not in seen or name.endswith("_")) else 0
        seen.add(id(t))
    return total


class Recorder(ops._OpRecorder):
    def __init__(self):
        super().__init__()
        self.kernel = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        before = len(self.records)
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if len(self.records) > before:
            name = str(func._overloadpacket).rsplit(".", 1)[-1]
            self.kernel.append(kernel_bytes(name, (args, kwargs or {}), out))
        return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=256)
    a = parser.parse_args()
    w = workload(a.model)
    captured = {}
    original = ops._OpRecorder
    for precision in (FP32, FP16):
        with torch.device("meta"):
            model = w.build()
        model.train()
        optimizer = w.optimizer(list(model.parameters()))
        ops._OpRecorder = Recorder
        recorders = []
        real_init = Recorder.__init__

        def init(self):
            real_init(self)
            recorders.append(self)

        Recorder.__init__ = init
        try:
            records = trace_step(w, model, optimizer, a.batch, precision)
        finally:
            ops._OpRecorder = original
            Recorder.__init__ = real_init
        traced_records = recorders[0].records
        kernel = recorders[0].kernel
        table = collections.defaultdict(lambda: [0, 0.0, 0.0])
        for record, k in zip(traced_records, kernel):
            if record.optimizer:
                continue
            matrix = " (matrix: timed by the kernel model)" if record.unit == "matrix" else ""
            key = (record.op + matrix, record.dtype)
            table[key][0] += 1
            table[key][1] += record.bytes
            table[key][2] += k
        for record in records[len(kernel) :]:  # scaler pass and the optimizer loop, counted by passes
            key = (record.op + " (update)", record.dtype)
            table[key][0] += 1
            table[key][1] += record.bytes
            table[key][2] += record.bytes
        captured[precision] = table
        tot_t = sum(v[1] for key, v in table.items() if "matrix" not in key[0])
        tot_k = sum(v[2] for key, v in table.items() if "matrix" not in key[0])
        print(
            f"{a.model} batch {a.batch} {precision}: non-matrix traced {tot_t / 1e9:.2f} GB, "
            f"kernels {tot_k / 1e9:.2f} GB (x{tot_k / tot_t:.3f})"
        )
        print(f"  {'op':48s} {'dtype':9s} {'n':>5s} {'traced GB':>10s} {'kernel GB':>10s} {'kernel/traced':>13s}")
        for (op, dtype), (n, t, k) in sorted(table.items(), key=lambda kv: -kv[1][1]):
            if t < 1e7 and k < 1e7:
                continue
            print(f"  {op:48s} {dtype:9s} {n:5d} {t / 1e9:10.3f} {k / 1e9:10.3f} {k / t if t else float('nan'):13.2f}")


if __name__ == "__main__":
    main()
