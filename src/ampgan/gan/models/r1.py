"""`r1`: residual networks, the non-saturating loss and an R1 penalty on real images (Mescheder et al.
2018), applied lazily every 16 steps with its weight multiplied by 16, as StyleGAN2 schedules it.

Its precision risks: the penalty is a double backward under autocast (D's input gradient on real images,
squared, backpropagated), and it runs on one step in 16, so a speed measurement must time whole cycles
(ampgan's bench and decisions do: GAN.cycle_steps). Residual sums of fp16/bf16 activations are scaled by
1/sqrt(2) to keep their range.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ampgan.gan.contract import GAN, DataSpec, Update, built_in
from ampgan.gan.layers import NON_SATURATING, unused_but_reduced
from ampgan.gan.models.acgan import BASE_SIZE, upsamplings
from ampgan.gan.options import require_image_size, require_non_negative, require_whole

SKIP_SCALE = 1 / math.sqrt(2)


class Residual(nn.Module):
    """(body(x) + skip(x)) / sqrt(2): a residual block of either network."""

    def __init__(self, body: nn.Module, skip: nn.Module):
        super().__init__()
        self.body, self.skip = body, skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.body(x) + self.skip(x)) * SKIP_SCALE


def up_block(c_in: int, c_out: int) -> Residual:
    """(B, c_in, s, s) -> (B, c_out, 2s, 2s): nearest upsampling, two 3x3 convolutions, a 1x1 skip."""
    return Residual(
        nn.Sequential(
            nn.BatchNorm2d(c_in),
            nn.ReLU(),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(c_in, c_out, 3, padding=1),
            nn.BatchNorm2d(c_out),
            nn.ReLU(),
            nn.Conv2d(c_out, c_out, 3, padding=1),
        ),
        nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(c_in, c_out, 1)),
    )


def down_block(c_in: int, c_out: int) -> Residual:
    """(B, c_in, s, s) -> (B, c_out, s/2, s/2): two 3x3 convolutions with leaky ReLU, average pooling,
    a 1x1 skip. No batch norm: the R1 penalty takes D's gradient per image."""
    return Residual(
        nn.Sequential(
            nn.LeakyReLU(0.2),
            nn.Conv2d(c_in, c_out, 3, padding=1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(c_out, c_out, 3, padding=1),
            nn.AvgPool2d(2),
        ),
        nn.Sequential(nn.AvgPool2d(2), nn.Conv2d(c_in, c_out, 1)),
    )


class Generator(nn.Module):
    """z -> image in [-1, 1]: linear to (B, 4w, base, base), residual up-blocks halving the channels."""

    def __init__(self, data: DataSpec, z_dim: int, width: int):
        super().__init__()
        n_up, base = upsamplings(data.image_size), BASE_SIZE[data.image_size]
        channels = width * 2**n_up  # 28 px, width w: 4w at 7 x 7, 2w at 14 x 14, w at 28 x 28
        self._start = (channels, base, base)
        self.project = nn.Linear(z_dim, channels * base**2)
        self.blocks = nn.Sequential(*(up_block(channels // 2**i, channels // 2 ** (i + 1)) for i in range(n_up)))
        self.to_image = nn.Sequential(
            nn.BatchNorm2d(width), nn.ReLU(), nn.Conv2d(width, data.channels, 3, padding=1), nn.Tanh()
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.to_image(self.blocks(self.project(z).view(-1, *self._start)))


class Discriminator(nn.Module):
    """image -> one logit (B,): a 3x3 stem, residual down-blocks doubling the channels, a linear head."""

    def __init__(self, data: DataSpec, width: int):
        super().__init__()
        n_down = upsamplings(data.image_size)
        self.stem = nn.Conv2d(data.channels, width, 3, padding=1)
        self.blocks = nn.Sequential(*(down_block(width * 2**i, width * 2 ** (i + 1)) for i in range(n_down)))
        self.head = nn.Linear(width * 2**n_down * BASE_SIZE[data.image_size] ** 2, 1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = F.leaky_relu(self.blocks(self.stem(images)), 0.2)
        return self.head(features.flatten(1)).squeeze(1)


def r1_penalty(context) -> torch.Tensor:
    """gamma/2 E[||d D(x) / dx||^2] on real images, in fp32 (the weight is applied by the caller). D's last bias
    moves no input gradient: the scores' exact zero gives it one, or DDP stops at the first R1 step (NVlabs'
    StyleGAN2 adds `real_logits * 0` for the same reason; Adam then steps it on its momentum, as there)."""
    real = context.real.detach().float().requires_grad_(True)
    scores = context.D(real)
    gradients = context.input_gradients(scores, real)  # fp32, unscaled
    return gradients.flatten(1).pow(2).sum(1).mean() + unused_but_reduced(scores)


@built_in("r1")
def r1(data: DataSpec, *, width: int = 16, z_dim: int = 128, gamma: float = 1.0, r1_every: int = 16) -> GAN:
    """Residual GAN with lazy R1: width w, noise size z_dim, penalty weight gamma every r1_every steps."""
    require_image_size("r1", data, tuple(BASE_SIZE))
    require_whole(width=width, z_dim=z_dim, r1_every=r1_every)
    require_non_negative(gamma=gamma)

    def lazy_r1(context):
        penalty = r1_penalty(context)
        return gamma / 2 * penalty, {"r1_penalty": penalty.detach()}

    return GAN(
        generator=Generator(data, z_dim, width),
        discriminator=Discriminator(data, width),
        z_dim=z_dim,
        **NON_SATURATING,
        extra_updates=(Update("r1", lazy_r1, networks=("discriminator",), every=r1_every, scale_by_interval=True),),
        description=f"residual GAN, R1 {gamma:g} every {r1_every} steps, width {width}, z {z_dim}",
    )
