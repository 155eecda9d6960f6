"""Will a configuration fit in memory? A lower bound, checked before anything is allocated.

A batch size far beyond the machine (say 10^9) would otherwise be found out by the allocator after
a long wait, or by the kernel's out-of-memory killer, with no message at all. The estimate traces
the networks on PyTorch's `meta` device (shapes only, no memory, no arithmetic) and adds up what a
training step must hold at once: weights, gradients and Adam's two moments in fp32, and the
discriminator's layer outputs kept for its backward pass on a real and a fake batch. It leaves out
the generator's activations, temporaries and the allocator's slack, so it errs low: a configuration
refused here cannot fit; one accepted may still not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from torch import nn

from ampgan.errors import AmpganError
from ampgan.training.models import Discriminator, Generator, ModelShape

_FP32_BYTES = 4
_COPIES_PER_PARAMETER = 4  # weight, gradient, Adam's first and second moment


@dataclass(frozen=True)
class MemoryEstimate:
    parameters_bytes: int
    activations_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.parameters_bytes + self.activations_bytes


def estimate_step_memory(shape: ModelShape, batch_size: int, compute_bytes: int = _FP32_BYTES) -> MemoryEstimate:
    """`compute_bytes`: bytes per activation element (2 under bf16/fp16 autocast)."""
    with torch.device("meta"):
        generator, discriminator = Generator(shape), Discriminator(shape)
    parameters = sum(p.numel() for module in (generator, discriminator) for p in module.parameters())
    per_sample = _layer_output_elements(discriminator, torch.empty(1, shape.channels, shape.image_size,
                                                                    shape.image_size, device="meta"))
    # D's update holds the activations of a real and a fake batch for one backward pass.
    activations = 2 * per_sample * batch_size * compute_bytes
    return MemoryEstimate(parameters_bytes=parameters * _FP32_BYTES * _COPIES_PER_PARAMETER,
                          activations_bytes=activations)


def _layer_output_elements(module: nn.Module, example: torch.Tensor) -> int:
    """Elements of every leaf layer's output for one sample (what autograd keeps for backward)."""
    total = 0

    def count(_module, _inputs, output):
        nonlocal total
        for tensor in output if isinstance(output, tuple) else (output,):
            total += tensor.numel()

    hooks = [m.register_forward_hook(count) for m in module.modules() if not list(m.children())]
    try:
        with torch.no_grad():
            module(example)
    finally:
        for hook in hooks:
            hook.remove()
    return total


def available_memory_bytes(device: torch.device) -> int | None:
    """Memory a new allocation can use now: free GPU memory, or the kernel's MemAvailable (which
    counts reclaimable page cache). None when the platform does not say."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def refuse_what_cannot_fit(shape: ModelShape, batch_size: int, device: torch.device, compute_bytes: int,
                           processes_sharing_memory: int = 1) -> None:
    """One error line with the estimate and the machine's memory when a step cannot fit."""
    available = available_memory_bytes(device)
    if available is None:
        return
    needed = estimate_step_memory(shape, batch_size, compute_bytes).total_bytes * processes_sharing_memory
    if needed > available:
        sharing = f" x {processes_sharing_memory} processes" if processes_sharing_memory > 1 else ""
        raise AmpganError(
            f"--batch-size {batch_size}{sharing} needs at least {_size(needed)} for one training step, "
            f"and {device.type.upper()} memory available now is {_size(available)}: use a batch size of at most "
            f"{_largest_fitting_batch(shape, available, compute_bytes, processes_sharing_memory)}"
        )


def _largest_fitting_batch(shape: ModelShape, available: int, compute_bytes: int, processes: int) -> int:
    fixed = estimate_step_memory(shape, 0, compute_bytes).total_bytes
    per_sample = estimate_step_memory(shape, 1, compute_bytes).total_bytes - fixed
    return max(1, (available // processes - fixed) // per_sample)


def _size(count: int) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count / 2**10:.1f} KiB"
