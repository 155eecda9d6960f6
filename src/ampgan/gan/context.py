"""What a loss function receives: the batch, the networks as this step runs them, and the one helper a
gradient penalty needs to stay right under loss scaling.

Gradient penalties (WGAN-GP, R1) differentiate D's output with respect to its *input*, inside the loss.
Under fp16 that backward pass underflows unless it starts from the scaled output, and the gradients it
returns must then be unscaled before they are squared (PyTorch's AMP examples, "gradient penalty").
`LossContext.input_gradients` does both, in fp32, for every precision: a loss function never sees a
loss scaler.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ampgan.errors import AmpganError


@dataclass(kw_only=True)
class LossContext:
    """Fields a loss may read. In D's update `fake` is detached; in G's update it carries G's graph (D is
    frozen); in an extra update it is None unless the update draws its own with `generate`."""

    G: Callable  # the generator as the step runs it (DDP and/or compiled); call through `generate`
    D: Callable  # the discriminator as this update runs it
    real: torch.Tensor | None  # (B, C, H, W) in the GAN's image_range
    labels: torch.Tensor | None  # (B,) the real images' classes
    z: torch.Tensor | None = None  # (B, z_dim) the fakes' noise
    fake_labels: torch.Tensor | None = None  # (B,) the fakes' classes (conditional GANs), else None
    fake: torch.Tensor | None = None
    step: int  # G updates finished before this one
    rng: torch.Generator  # the step's noise generator, on the training device
    gan: object  # the GAN (gan/contract.py)
    scaler: object  # the loss scaler of the network this update steps (training/precision.py)
    device: torch.device
    # What the loss did that preflight must know to name the fix: "read the scale" (it scales something
    # itself), "summed outputs" (input_gradients got an already-summed scalar). Appending costs nothing.
    notes: list[str] = field(default_factory=list)

    @classmethod
    def for_batch(cls, gan, G, D, real, labels, *, step: int, rng, scaler, draw=None) -> LossContext:
        """The context of a D update on (real, labels): its noise and fake labels drawn (by `draw`, by
        default as training draws them), its fakes not made yet."""
        context = cls(
            G=G, D=D, real=real, labels=labels, step=step, rng=rng, gan=gan, scaler=scaler, device=real.device
        )
        context.z, context.fake_labels = (draw or draw_inputs)(gan, context, real.shape[0])
        return context

    @property
    def batch_size(self) -> int:
        return self.real.shape[0] if self.real is not None else self.z.shape[0]

    @property
    def scale(self) -> torch.Tensor:
        """0-dim fp32: the loss scale of the network this update steps (1 without scaling), on the device."""
        self.notes.append("read the scale")
        return self.scaler.scale_tensor()

    def input_gradients(self, outputs: torch.Tensor, inputs, create_graph: bool = True):
        """d(sum of `outputs`)/d(`inputs`) in fp32, as fp32 would compute it: the backward pass starts
        from the loss-scaled sum (so fp16 gradients do not flush to zero) and the result is unscaled.
        `inputs`: a tensor that requires grad, or a tuple of them (the result has the same form).
        `create_graph`: keep the graph so the penalty built from them can be backpropagated.

        Pass the *unreduced* outputs (`D(x)`, or StyleGAN2's path-length `img * y`), never their `.sum()`:
        each element's backward pass starts from scale / N; a pre-summed scalar starts every element from
        the whole scale, which overflows fp16 (a NaN penalty and a skipped update at every application)."""
        single = isinstance(inputs, torch.Tensor)
        wanted = (inputs,) if single else tuple(inputs)
        # The backward pass starts from the scaled *mean* of the outputs, as a mean loss's would: each
        # output's seed is scale / N. Seeded with the scale itself (the scaled sum), it overflows fp16 at
        # the scale ampgan starts from (65536 > fp16's 65504) and the penalty is NaN until the scaler
        # has skipped enough steps to come down.
        count = outputs.numel()
        if count == 1 and type(outputs.grad_fn).__name__.startswith("Sum"):
            self.notes.append("summed outputs")
        seed = self.scaler.scale_tensor() / count
        gradients = torch.autograd.grad(outputs.float().sum() * seed, wanted, create_graph=create_graph)
        unscaled = tuple(gradient.float() / seed for gradient in gradients)
        return unscaled[0] if single else unscaled

    def generate(self, z: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        """G's images for (z, labels), through the generator the step runs."""
        return self.gan.generate(self.G, z, labels)

    def draw(self, batch_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """A fresh (z, labels) for `batch_size` fakes, drawn the way training draws them."""
        return draw_inputs(self.gan, self, batch_size or self.batch_size)


def draw_inputs(gan, context: LossContext, batch_size: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The GAN's own draw_inputs when it has one, else z from its distribution and uniform labels."""
    if gan.draw_inputs is not None:
        z, labels = gan.draw_inputs(context)
        if gan.conditional and labels is not None and labels.is_floating_point():  # samples would draw 0..N-1
            raise AmpganError(
                f"model {gan.name}: draw_inputs returned {labels.dtype} labels, but a conditional GAN's labels are "
                "class indices (samples, generate and the study draw 0..num_classes-1): pass a continuous condition "
                "in z (return (torch.cat([z, c[:, None]], 1), None)) with conditional=False"
            )
        return z, labels
    z = gan.draw_z(batch_size, context.rng, context.device)
    labels = (
        torch.randint(gan.num_classes, (batch_size,), device=context.device, generator=context.rng)
        if gan.conditional
        else None
    )
    return z, labels
