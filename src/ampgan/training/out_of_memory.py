"""What to say when a step runs out of memory: one line, with a batch size that would fit.

A CUDA step that fails for memory has, by then, asked for at least what it held at its peak plus the
allocation that failed; the step's memory grows with the batch (activations; the weights and Adam's
moments are a fixed part, so scaling all of it with the batch errs on the small side). The batch that
would fit is the largest power of two whose share of that lower bound stays within the device's memory;
it may still not fit (the step could have asked for more after the failure), so the line says "try".
Elsewhere (a CPU, or no numbers), half the batch.
"""

from __future__ import annotations

import gc
import re

import torch

from ampgan.errors import AmpganError

_TRIED = re.compile(r"Tried to allocate ([0-9.]+) (B|KiB|MiB|GiB|TiB)")
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
USABLE_SHARE = 0.9  # of the device's memory: the allocator's fragmentation and the CUDA context take the rest


def release_memory(device: torch.device) -> None:
    """What a failed or finished step held, freed before the next is built: Python's cycles, then CUDA's cache."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def batch_that_fits(batch_size: int, needed_bytes: int, total_bytes: int) -> int:
    """The largest power of two below `batch_size` whose share of `needed_bytes` (a lower bound on what
    the step at `batch_size` needs) fits in USABLE_SHARE of `total_bytes`; at least 1."""
    ceiling = batch_size * USABLE_SHARE * total_bytes / needed_bytes if needed_bytes > 0 else batch_size / 2
    fits = 1
    while fits * 2 <= min(ceiling, batch_size - 1):
        fits *= 2
    return fits


def _gib(count: float) -> str:
    return f"{count / 2**30:.1f} GiB"


def out_of_memory_error(
    error: BaseException, batch_size: int, device: torch.device, what: str = "the step"
) -> AmpganError:
    """One line for an out-of-memory failure of `what` at `batch_size` on `device`, naming a batch size to try."""
    if device.type == "cuda":
        # Its peak, and the allocation that failed as the CUDA caching allocator's message gives it (if it does).
        tried = _TRIED.search(str(error))
        needed = torch.cuda.max_memory_allocated(device) + (int(float(tried[1]) * _UNITS[tried[2]]) if tried else 0)
        total = torch.cuda.get_device_properties(device).total_memory
        fits = batch_that_fits(batch_size, needed, total)
        return AmpganError(
            f"{what} at batch {batch_size} ran out of memory on {torch.cuda.get_device_name(device)} "
            f"({_gib(total)}): it had asked for "
            f"at least {_gib(needed)} when it failed; try --batch-size {fits} (or fewer images per "
            "process)"
        )
    fits = max(1, batch_size // 2)
    return AmpganError(f"{what} at batch {batch_size} ran out of memory on the {device.type}: try --batch-size {fits}")
