"""DiffAugment (Zhao et al. 2020) on a DCGAN: the same random colour, translation and cutout applied,
differentiably, to every image D sees (real and fake, in D's update and in G's), which is what lets a GAN
learn from a few hundred images of one class. ampgan trains it on any data; its study needs two classes or
more (its evaluator learns features by telling classes apart), so on one class compare refuses in one line.

    ampgan preflight --model examples/diffaugment.py:dcgan_diffaugment --dataset folder:my_cats
    ampgan train     --model examples/diffaugment.py:dcgan_diffaugment --dataset folder:my_cats --precision bf16
"""

import torch
import torch.nn.functional as F
from torch import nn

import ampgan


def diff_augment(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Colour (brightness, saturation, contrast), translation (1/8 of the image) and cutout (half of it),
    each random per image, drawn with `generator` (ampgan's step noise) and differentiable in x."""
    b, _, h, w = x.shape
    rand = lambda *shape: torch.rand(*shape, device=x.device, generator=generator, dtype=x.dtype)  # noqa: E731
    x = x + (rand(b, 1, 1, 1) - 0.5)
    mean = x.mean(dim=1, keepdim=True)
    x = (x - mean) * (rand(b, 1, 1, 1) * 2) + mean
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    x = (x - mean) * (rand(b, 1, 1, 1) + 0.5) + mean
    shift = max(1, h // 8)
    dx, dy = [torch.randint(-shift, shift + 1, (1,), device=x.device, generator=generator).item() for _ in range(2)]
    x = torch.roll(F.pad(x, (shift, shift, shift, shift)), shifts=(dy, dx), dims=(2, 3))[
        :, :, shift:-shift, shift:-shift
    ]
    cy, cx = [torch.randint(0, s, (b, 1, 1), device=x.device, generator=generator) for s in (h, w)]
    rows = torch.arange(h, device=x.device).view(1, h, 1)
    cols = torch.arange(w, device=x.device).view(1, 1, w)
    keep = ((rows - cy).abs() >= h // 4) | ((cols - cx).abs() >= w // 4)  # (B, H, W): a square cut out
    return x * keep.unsqueeze(1).to(x.dtype)


def generator(z_dim: int, width: int, channels: int, image_size: int) -> nn.Sequential:
    ups = (image_size // 4).bit_length() - 1  # 4 -> image_size
    layers = [nn.ConvTranspose2d(z_dim, width * 2 ** (ups - 1), 4), nn.BatchNorm2d(width * 2 ** (ups - 1)), nn.ReLU()]
    for i in range(ups - 1, 0, -1):  # (B, width * 2^i, s, s) -> (B, width * 2^(i-1), 2s, 2s)
        layers += [
            nn.ConvTranspose2d(width * 2**i, width * 2 ** (i - 1), 4, 2, 1),
            nn.BatchNorm2d(width * 2 ** (i - 1)),
            nn.ReLU(),
        ]
    layers += [nn.ConvTranspose2d(width, channels, 4, 2, 1), nn.Tanh()]
    return nn.Sequential(nn.Unflatten(1, (z_dim, 1, 1)), *layers)


def discriminator(width: int, channels: int, image_size: int) -> nn.Sequential:
    downs = (image_size // 4).bit_length() - 1
    layers, cin = [], channels
    for i in range(downs):  # (B, cin, s, s) -> (B, width * 2^i, s/2, s/2)
        layers += [nn.Conv2d(cin, width * 2**i, 4, 2, 1), nn.LeakyReLU(0.2)]
        cin = width * 2**i
    return nn.Sequential(*layers, nn.Conv2d(cin, 1, 4), nn.Flatten(0))  # (B,) logits


# ---- the glue ---------------------------------------------------------------------------------------
def dcgan_diffaugment(data: ampgan.DataSpec, *, width: int = 64, z_dim: int = 100) -> ampgan.GAN:
    if data.image_size not in (8, 16, 32, 64):
        raise ValueError(f"this DCGAN draws 8-64 px images, the data is {data.image_size} px: use --image-size 32")

    def D(ctx, images):
        return ctx.D(diff_augment(images, ctx.rng))

    return ampgan.GAN(
        generator=generator(z_dim, width, data.channels, data.image_size),
        discriminator=discriminator(width, data.channels, data.image_size),
        z_dim=z_dim,
        d_loss=[
            lambda ctx: ampgan.real_fake_loss(D(ctx, ctx.real), 1.0),
            lambda ctx: ampgan.real_fake_loss(D(ctx, ctx.fake), 0.0),
        ],
        g_loss=lambda ctx: ampgan.real_fake_loss(D(ctx, ctx.fake), 1.0),
        description=f"DCGAN with DiffAugment, width {width}",
    )
