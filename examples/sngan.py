"""SNGAN (Miyato et al. 2018) for 8-64 px images: a ResNet generator, a ResNet discriminator whose every
layer is spectrally normalised with PyTorch's own `torch.nn.utils.parametrizations.spectral_norm`, the
hinge loss, and 5 critic steps per G step, through ampgan's contract.

    ampgan preflight --model examples/sngan.py:sngan
    ampgan compare   --model examples/sngan.py:sngan --set model.width=64
"""

import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm

import ampgan


class GBlock(nn.Module):
    """BN-ReLU-upsample-conv-BN-ReLU-conv, plus an upsampled 1x1 shortcut: (B, cin, s, s) -> (B, cout, 2s, 2s)."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.bn1, self.bn2 = nn.BatchNorm2d(cin), nn.BatchNorm2d(cout)
        self.conv1, self.conv2 = nn.Conv2d(cin, cout, 3, padding=1), nn.Conv2d(cout, cout, 3, padding=1)
        self.shortcut = nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        h = F.interpolate(F.relu(self.bn1(x)), scale_factor=2)
        h = self.conv2(F.relu(self.bn2(self.conv1(h))))
        return h + self.shortcut(F.interpolate(x, scale_factor=2))


class DBlock(nn.Module):
    """ReLU-conv-ReLU-conv-avgpool, plus a pooled 1x1 shortcut, every conv spectrally normalised."""

    def __init__(self, cin: int, cout: int, first: bool = False):
        super().__init__()
        self.first = first
        self.conv1 = spectral_norm(nn.Conv2d(cin, cout, 3, padding=1))
        self.conv2 = spectral_norm(nn.Conv2d(cout, cout, 3, padding=1))
        self.shortcut = spectral_norm(nn.Conv2d(cin, cout, 1))

    def forward(self, x):
        h = x if self.first else F.relu(x)
        h = F.avg_pool2d(self.conv2(F.relu(self.conv1(h))), 2)
        return h + F.avg_pool2d(self.shortcut(x), 2)


class Generator(nn.Module):
    def __init__(self, z_dim: int, width: int, channels: int, image_size: int):
        super().__init__()
        self.base, self.width = 4, width
        ups = (image_size // 4).bit_length() - 1  # 4 -> image_size
        self.linear = nn.Linear(z_dim, 4 * 4 * width)
        self.blocks = nn.Sequential(*[GBlock(width, width) for _ in range(ups)])
        self.out = nn.Sequential(nn.BatchNorm2d(width), nn.ReLU(), nn.Conv2d(width, channels, 3, padding=1), nn.Tanh())

    def forward(self, z):
        return self.out(self.blocks(self.linear(z).view(-1, self.width, 4, 4)))  # (B, C, H, W)


class Discriminator(nn.Module):
    def __init__(self, width: int, channels: int):
        super().__init__()
        self.blocks = nn.Sequential(DBlock(channels, width, first=True), DBlock(width, width), DBlock(width, width))
        self.linear = spectral_norm(nn.Linear(width, 1))

    def forward(self, images):
        features = F.relu(self.blocks(images)).sum(dim=(2, 3))  # (B, width): global sum pooling
        return self.linear(features).squeeze(1)  # (B,) scores


# ---- the glue ---------------------------------------------------------------------------------------
def sngan(data: ampgan.DataSpec, *, width: int = 128, z_dim: int = 128, n_critic: int = 5) -> ampgan.GAN:
    if data.image_size not in (8, 16, 32, 64):
        raise ValueError(
            f"this SNGAN draws 8, 16, 32 or 64 px images, the data is {data.image_size} px: use --image-size 32"
        )
    adam = ampgan.Adam(lr=2e-4, betas=(0.0, 0.9))  # the paper's ResNet settings

    return ampgan.GAN(
        generator=Generator(z_dim, width, data.channels, data.image_size),
        discriminator=Discriminator(width, data.channels),
        z_dim=z_dim,
        d_steps=n_critic,
        optimizer_g=adam,
        optimizer_d=adam,
        description=f"SNGAN, width {width}",
        d_loss=[
            lambda ctx: ampgan.hinge_loss(ctx.D(ctx.real), "real"),
            lambda ctx: ampgan.hinge_loss(ctx.D(ctx.fake), "fake"),
        ],
        g_loss=lambda ctx: ampgan.hinge_loss(ctx.D(ctx.fake), "generator"),
    )
