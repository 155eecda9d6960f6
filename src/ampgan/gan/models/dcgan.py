"""`dcgan`: the unconditional DCGAN of Radford et al. (2016), as pytorch/examples trains it.

G: z (N(0, 1)) -> linear -> (B, 4w, 4, 4) -> transposed convolutions, batch norm, ReLU -> tanh;
D: strided convolutions, batch norm (not on the first), leaky ReLU -> one logit. BCE-with-logits,
non-saturating G loss, Adam 2e-4, beta1 0.5. Its precision risk is the common one: batch norm in both
networks (the policy keeps its statistics in fp32) and a sigmoid loss that must stay on logits.
"""

from __future__ import annotations

import torch
from torch import nn

from ampgan.gan.contract import GAN, DataSpec, built_in
from ampgan.gan.layers import NON_SATURATING, dcgan_downsampling, init_dcgan_weights
from ampgan.gan.models.acgan import BASE_SIZE, Generator, upsamplings
from ampgan.gan.options import require_image_size, require_whole


class Discriminator(nn.Module):
    """image -> one logit (B,). `batch_norm=False` gives a critic a gradient penalty can be taken
    through (batch norm mixes the images of a batch, so D's input gradient of one image would depend on
    the others)."""

    def __init__(self, data: DataSpec, width: int, *, batch_norm: bool = True):
        super().__init__()
        layers, features = dcgan_downsampling(data, width, upsamplings(data.image_size), batch_norm=batch_norm)
        self.score = nn.Sequential(*layers, nn.Linear(features, 1))
        self.apply(init_dcgan_weights)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.score(images).squeeze(1)


@built_in("dcgan")
def dcgan(data: DataSpec, *, width: int = 32, z_dim: int = 128) -> GAN:
    """Unconditional DCGAN: width w (channels w, 2w, 4w), noise size z_dim (128, not the paper's 100: a
    multiple of 8 keeps the first matrix product on tensor cores / AMX)."""
    require_image_size("dcgan", data, tuple(BASE_SIZE))
    require_whole(width=width, z_dim=z_dim)

    return GAN(
        generator=Generator(data, z_dim, width, conditional=False),
        discriminator=Discriminator(data, width),
        z_dim=z_dim,
        **NON_SATURATING,
        description=f"DCGAN, unconditional, width {width}, z {z_dim}",
    )
