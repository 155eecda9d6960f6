"""FLOPs of a real training step, counted with PyTorch's own FLOP formulas, and what kind of work they are.

The formulas of `torch.utils.flop_counter` count the matrix work (convolutions, matmuls, their
backward passes) that dispatches through them: 2 FLOPs per multiply-add. They are applied by a
dispatch mode of ours rather than by FlopCounterMode, whose module tracker hooks every module's
backward and fails inside `torch.autograd.grad` on a leaf input (a gradient penalty's interpolated
images: "A leaf node was passed to _will_engine_execute_node"). Element-wise work
(activations, batch-norm, Adam) is not counted; for these networks it is a few percent at most.
The split between matrix products and convolutions matters for mixed precision: tensor cores and AMX
reach a larger share of their peak on large matrix products than on small convolutions.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

MATMUL_OPS = ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear")


def kind_of(op_name: str) -> str:
    """'aten.convolution_backward' -> 'convolution'; 'aten.addmm' -> 'matmul'; anything else 'other'."""
    name = op_name.rsplit(".", 1)[-1]
    if "convolution" in name:
        return "convolution"
    if name in MATMUL_OPS:
        return "matmul"
    return "other"


def flops_of(packet, args, kwargs, out) -> int:
    """FLOPs of one dispatched operation by PyTorch's formula, with one correction: the weight gradient of
    a grouped convolution. torch's formula computes it as a convolution of every input channel with every
    output channel, `groups` times the work each group's channels do (torch 2.13, flop_counter.py). A
    StyleGAN2 modulated convolution (groups = batch) then counts batch² FLOPs, which no affine op table
    can hold (its intercept went negative: a projection at large batch made the step's cost grow as the
    square of the batch). Each group's weight gradient is counted once, as its forward is."""
    formula = flop_registry[packet]
    if packet is not torch.ops.aten.convolution_backward or len(args) < 11 or args[9] == 1:
        return int(formula(*args, **kwargs, out_val=out))
    groups, mask = args[9], args[10]
    data_part = formula(*args[:10], [mask[0], False, False], **kwargs, out_val=out) if mask[0] else 0
    weight_part = formula(*args[:10], [False, mask[1], False], **kwargs, out_val=out) if mask[1] else 0
    return int(data_part + weight_part // groups)


def count_flops_by_kind(run: Callable[[], object]) -> dict[str, int]:
    """{"convolution": n, "matmul": n, "other": n} FLOPs of everything `run` computes (it runs once)."""
    counter = _FlopCounter()
    with counter:
        run()
    return counter.kinds


class _FlopCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.kinds = {"convolution": 0, "matmul": 0, "other": 0}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func._overloadpacket
        if packet in flop_registry:
            self.kinds[kind_of(str(packet))] += flops_of(packet, args, kwargs, out)
        return out


def count_flops(run: Callable[[], object]) -> int:
    """Total FLOPs of everything `run` computes (it runs once, for real)."""
    return sum(count_flops_by_kind(run).values())
