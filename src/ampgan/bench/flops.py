"""FLOPs of a real training step, counted by PyTorch's own FLOP counter.

`torch.utils.flop_counter.FlopCounterMode` counts the matrix work (convolutions, matmuls, their
backward passes) that dispatches through it: 2 FLOPs per multiply-add. Element-wise work
(activations, batch-norm, Adam) is not counted; for these networks it is a few percent at most.
"""

from __future__ import annotations

from collections.abc import Callable

from torch.utils.flop_counter import FlopCounterMode


def count_flops(run: Callable[[], object]) -> int:
    """Total FLOPs of everything `run` computes (it runs once, for real)."""
    counter = FlopCounterMode(display=False)
    with counter:
        run()
    return int(counter.get_total_flops())
