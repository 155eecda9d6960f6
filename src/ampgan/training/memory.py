"""Will a configuration fit in memory? A lower bound, checked before anything is allocated.

A batch size far beyond the machine (say 10^9) would otherwise be found out by the allocator after
a long wait, or by the kernel's out-of-memory killer, with no message at all. The estimate traces the
GAN on PyTorch's `meta` device (shapes only, no memory, no arithmetic): G's forward pass and D's loss
terms on a batch, counting every leaf layer's output (what autograd keeps for the backward pass), plus
the weights, gradients and Adam's two moments in fp32. It leaves out temporaries, the backward pass's
own buffers and the allocator's slack, so it errs low: a configuration refused here cannot fit; one
accepted may still not. The same trace refuses, in one line, a batch too small for batch norm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ampgan.errors import AmpganError
from ampgan.gan.context import LossContext, draw_inputs
from ampgan.gan.contract import GAN, DataSpec
from ampgan.precisions import FP32
from ampgan.system.memory import available_memory_bytes, size_text
from ampgan.training.precision import LossScaler, PrecisionPolicy

_FP32_BYTES = 4
_COPIES_PER_PARAMETER = 4  # weight, gradient, Adam's first and second moment
_TRACE_BATCH = 2  # batch norm needs two samples in training mode


@dataclass(frozen=True)
class MemoryEstimate:
    parameters_bytes: int
    activations_bytes_per_sample: int
    batch_size: int

    @property
    def activations_bytes(self) -> int:
        return self.activations_bytes_per_sample * self.batch_size

    @property
    def total_bytes(self) -> int:
        return self.parameters_bytes + self.activations_bytes

    def total_bytes_at(self, batch_size: int) -> int:
        return self.parameters_bytes + self.activations_bytes_per_sample * batch_size


def trace_step_elements(gan: GAN, data: DataSpec, batch_size: int) -> int:
    """Elements of every leaf layer's output over G's forward and D's loss terms, for `batch_size`
    images, traced on the meta device (`gan` built there). Raises ValueError/RuntimeError as the real
    step would for shape problems (a batch too small for batch norm, say)."""
    # Kept on the GAN, by (data, batch size), as long as it lives: the meta build is shared by every preparation
    # of the same model (gan/registry.py), and so are its traces.
    traced = vars(gan).setdefault("_ampgan_traced", {})
    if (data, batch_size) not in traced:
        traced[(data, batch_size)] = _trace_step_elements(gan, data, batch_size)
    return traced[(data, batch_size)]


def _trace_step_elements(gan: GAN, data: DataSpec, batch_size: int) -> int:
    total = 0

    def count(_module, _inputs, output):
        nonlocal total
        for tensor in output if isinstance(output, tuple) else (output,):
            if isinstance(tensor, torch.Tensor):
                total += tensor.numel()

    leaves = [m for network in (gan.generator, gan.discriminator) for m in network.modules() if not list(m.children())]
    hooks = [m.register_forward_hook(count) for m in leaves]
    meta = torch.device("meta")
    try:
        real = torch.empty(batch_size, data.channels, data.image_size, data.image_size, device=meta)
        labels = torch.zeros(batch_size, dtype=torch.long, device=meta)
        context = LossContext.for_batch(
            gan,
            gan.generator,
            gan.discriminator,
            real,
            labels,
            step=0,
            rng=None,
            scaler=LossScaler(PrecisionPolicy(FP32, meta)),
            draw=_meta_inputs,
        )
        fake = gan.generate(gan.generator, context.z, context.fake_labels)
        wanted = (batch_size, data.channels, data.image_size, data.image_size)
        if not isinstance(fake, torch.Tensor) or tuple(fake.shape) != wanted:
            got = tuple(fake.shape) if isinstance(fake, torch.Tensor) else type(fake).__name__
            # Audio (B, C, L), table rows (B, F), voxels (B, C, D, H, W): no data, metric or grid of ampgan reads them
            # An image G's slip (a channel axis dropped, an MLP's flat rows) is told to reshape, not that ampgan
            # cannot read its kind of data: its samples hold an image's values or end in the image's (H, W).
            image_like = not isinstance(fake, torch.Tensor) or fake.dim() == 4 or fake.dim() < 2
            image_like = image_like or fake[0].numel() == math.prod(wanted[1:]) or tuple(fake.shape[-2:]) == wanted[2:]
            fix = (
                "make G's output match the data's shape"
                if image_like
                else "ampgan's datasets, quality metrics (an image classifier's features) and sample grids are images "
                "only: a GAN of 1-D signals, tables or voxels cannot be trained, scored or benched by it"
            )
            raise AmpganError(
                f"model {gan.name}: the generator returned {got} for a batch of {batch_size}, not "
                f"(B, C, H, W) = {wanted} as the data is: {fix}"
            )
        context.fake = fake.detach()
        for term in gan.d_loss_terms:
            term(context)
    finally:
        for hook in hooks:
            hook.remove()
    return total


def _meta_inputs(gan: GAN, context: LossContext, batch_size: int):
    """(z, labels) on the meta device: the GAN's own draw when it can draw there, else zeros."""
    try:
        z, labels = draw_inputs(gan, context, batch_size)
        if z.device.type == "meta":
            return z, labels
    except Exception:  # noqa: BLE001 - drawing needs a generator on a real device; shapes suffice here
        pass
    labels = torch.zeros(batch_size, dtype=torch.long, device="meta") if gan.conditional else None
    return torch.empty(batch_size, gan.z_dim, device="meta"), labels


def estimate_step_memory(gan: GAN, data: DataSpec, batch_size: int, compute_bytes: int = _FP32_BYTES) -> MemoryEstimate:
    """`gan`: built on the meta device; `compute_bytes`: bytes per activation element (2 under bf16/fp16)."""
    parameters = sum(p.numel() for network in (gan.generator, gan.discriminator) for p in network.parameters())
    per_sample = trace_step_elements(gan, data, _TRACE_BATCH) // _TRACE_BATCH
    # The EMA of G (GAN.ema) is one more fp32 copy of G's parameters, with no gradient and no moments.
    averaged = sum(p.numel() for p in gan.generator.parameters()) if gan.ema is not None else 0
    return MemoryEstimate(
        parameters_bytes=parameters * _FP32_BYTES * _COPIES_PER_PARAMETER + averaged * _FP32_BYTES,
        activations_bytes_per_sample=per_sample * compute_bytes,
        batch_size=batch_size,
    )


def check_batch_shapes(gan: GAN, data: DataSpec, batch_size: int) -> None:
    """One error line when the step cannot run at this batch size (traced on meta, costs nothing)."""
    try:
        trace_step_elements(gan, data, batch_size)
    except AmpganError:
        raise
    except ValueError as error:
        if "Expected more than 1 value per channel" in str(error):
            raise AmpganError(
                f"model {gan.name} cannot train at --batch-size {batch_size}: batch normalisation "
                "needs at least 2 images per process in training mode; use --batch-size 2 or more"
            ) from None
    except Exception:  # noqa: BLE001 - an op without a meta kernel: the real step will tell
        pass


def refuse_what_cannot_fit(
    gan: GAN | None,
    data: DataSpec,
    batch_size: int,
    device: torch.device,
    compute_bytes: int,
    processes_sharing_memory: int = 1,
) -> None:
    """One error line with the estimate and the machine's memory when a step cannot fit. `gan`: built
    on the meta device (None: the model cannot be traced there, and nothing is checked)."""
    available = available_memory_bytes(device)
    if available is None or gan is None:
        return
    try:
        estimate = estimate_step_memory(gan, data, batch_size, compute_bytes)
    except Exception:  # noqa: BLE001 - a model the meta trace cannot follow is not refused for it
        return
    needed = estimate.total_bytes * processes_sharing_memory
    if needed > available:
        sharing = f" x {processes_sharing_memory} processes" if processes_sharing_memory > 1 else ""
        largest = (available // processes_sharing_memory - estimate.parameters_bytes) // max(
            1, estimate.activations_bytes_per_sample
        )
        # Batch norm needs 2 images per step: below that no batch size fits, only a smaller model does.
        if largest < 2:
            raise AmpganError(
                f"model {gan.name} needs at least "
                f"{size_text(estimate.parameters_bytes * processes_sharing_memory)} for "
                f"its weights, gradients and Adam's moments{sharing} before any image, and "
                f"{size_text(estimate.total_bytes_at(2) * processes_sharing_memory)} at batch size 2, while "
                f"{device.type.upper()} memory available now is {size_text(available)}: no batch size fits; make the "
                "model smaller (a lower --width or model option) or use a machine with more memory"
            )
        raise AmpganError(
            f"--batch-size {batch_size}{sharing} needs at least {size_text(needed)} for one training step, "
            f"and {device.type.upper()} memory available now is {size_text(available)}: use a batch size of at most "
            f"{largest}"
        )
