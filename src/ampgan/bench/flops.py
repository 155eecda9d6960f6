"""FLOPs of a real training step, counted by PyTorch's own FLOP counter, and what kind of work they are.

`torch.utils.flop_counter.FlopCounterMode` counts the matrix work (convolutions, matmuls, their
backward passes) that dispatches through it: 2 FLOPs per multiply-add. Element-wise work
(activations, batch-norm, Adam) is not counted; for these networks it is a few percent at most.
The split between matrix products and convolutions matters for mixed precision: tensor cores and AMX
reach a larger share of their peak on large matrix products than on small convolutions.
"""

from __future__ import annotations

from collections.abc import Callable

from torch.utils.flop_counter import FlopCounterMode

MATMUL_OPS = ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear")


def kind_of(op_name: str) -> str:
    """'aten.convolution_backward' -> 'convolution'; 'aten.addmm' -> 'matmul'; anything else 'other'."""
    name = op_name.rsplit(".", 1)[-1]
    if "convolution" in name:
        return "convolution"
    if name in MATMUL_OPS:
        return "matmul"
    return "other"


def count_flops_by_kind(run: Callable[[], object]) -> dict[str, int]:
    """{"convolution": n, "matmul": n, "other": n} FLOPs of everything `run` computes (it runs once)."""
    counter = FlopCounterMode(display=False)
    with counter:
        run()
    kinds = {"convolution": 0, "matmul": 0, "other": 0}
    for op, flops in counter.get_flop_counts().get("Global", {}).items():
        kinds[kind_of(str(op))] += int(flops)
    return kinds


def count_flops(run: Callable[[], object]) -> int:
    """Total FLOPs of everything `run` computes (it runs once, for real)."""
    return sum(count_flops_by_kind(run).values())
