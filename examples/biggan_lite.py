"""BigGAN in miniature (Brock et al. 2019): a class-conditional generator whose batch norms take their
scale and shift from the class (conditional batch norm), a projection discriminator (Miyato & Koyama 2018:
the score is a linear head plus the inner product of a class embedding with D's features), spectral norm
on D, the hinge loss, Adam (0, 0.999) with D's learning rate 4x G's, and an exponential moving average
of G that samples and evaluations use (`GAN(ema=...)`), through ampgan's contract.

    ampgan preflight --model examples/biggan_lite.py:biggan_lite
    ampgan compare   --model examples/biggan_lite.py:biggan_lite --set model.width=64
"""

import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm

import ampgan


class ConditionalBatchNorm(nn.Module):
    """Batch norm without its own affine; each class has its scale and shift (BigGAN's shared embedding)."""

    def __init__(self, channels: int, num_classes: int):
        super().__init__()
        self.norm = nn.BatchNorm2d(channels, affine=False)
        self.scale, self.shift = nn.Embedding(num_classes, channels), nn.Embedding(num_classes, channels)
        nn.init.ones_(self.scale.weight)
        nn.init.zeros_(self.shift.weight)

    def forward(self, x, labels):  # x: (B, C, s, s), labels: (B,)
        return self.norm(x) * self.scale(labels)[:, :, None, None] + self.shift(labels)[:, :, None, None]


class GBlock(nn.Module):
    def __init__(self, width: int, num_classes: int):
        super().__init__()
        self.bn1, self.bn2 = ConditionalBatchNorm(width, num_classes), ConditionalBatchNorm(width, num_classes)
        self.conv1, self.conv2 = nn.Conv2d(width, width, 3, padding=1), nn.Conv2d(width, width, 3, padding=1)

    def forward(self, x, labels):  # (B, w, s, s) -> (B, w, 2s, 2s)
        h = F.interpolate(F.relu(self.bn1(x, labels)), scale_factor=2)
        h = self.conv2(F.relu(self.bn2(self.conv1(h), labels)))
        return h + F.interpolate(x, scale_factor=2)


class Generator(nn.Module):
    def __init__(self, z_dim: int, width: int, channels: int, image_size: int, num_classes: int):
        super().__init__()
        self.width = width
        self.linear = nn.Linear(z_dim, 4 * 4 * width)
        self.blocks = nn.ModuleList([GBlock(width, num_classes) for _ in range((image_size // 4).bit_length() - 1)])
        self.out = nn.Sequential(nn.BatchNorm2d(width), nn.ReLU(), nn.Conv2d(width, channels, 3, padding=1), nn.Tanh())

    def forward(self, z, labels):
        x = self.linear(z).view(-1, self.width, 4, 4)
        for block in self.blocks:
            x = block(x, labels)
        return self.out(x)


class ProjectionDiscriminator(nn.Module):
    def __init__(self, width: int, channels: int, image_size: int, num_classes: int):
        super().__init__()
        layers, cin = [], channels
        for _ in range((image_size // 4).bit_length() - 1):  # image_size -> 4
            layers += [spectral_norm(nn.Conv2d(cin, width, 3, padding=1)), nn.ReLU(), nn.AvgPool2d(2)]
            cin = width
        self.features = nn.Sequential(*layers)
        self.linear = spectral_norm(nn.Linear(width, 1))
        self.embed = spectral_norm(nn.Embedding(num_classes, width))

    def forward(self, images, labels):
        h = self.features(images).sum(dim=(2, 3))  # (B, width)
        return self.linear(h).squeeze(1) + (self.embed(labels) * h).sum(1)  # (B,) scores


# ---- the glue ---------------------------------------------------------------------------------------
def biggan_lite(
    data: ampgan.DataSpec, *, width: int = 64, z_dim: int = 120, ema_decay: float = 0.999, ema_start: int = 100
) -> ampgan.GAN:
    if data.image_size not in (8, 16, 32, 64):
        raise ValueError(f"this BigGAN-lite draws 8-64 px images, the data is {data.image_size} px")
    classes = max(1, data.num_classes)
    return ampgan.GAN(
        generator=Generator(z_dim, width, data.channels, data.image_size, classes),
        discriminator=ProjectionDiscriminator(width, data.channels, data.image_size, classes),
        z_dim=z_dim,
        conditional=True,
        num_classes=classes,
        d_steps=2,
        d_loss=[
            lambda ctx: ampgan.hinge_loss(ctx.D(ctx.real, ctx.labels), "real"),
            lambda ctx: ampgan.hinge_loss(ctx.D(ctx.fake, ctx.fake_labels), "fake"),
        ],
        g_loss=lambda ctx: ampgan.hinge_loss(ctx.D(ctx.fake, ctx.fake_labels), "generator"),
        optimizer_g=ampgan.Adam(lr=1e-4, betas=(0.0, 0.999)),
        optimizer_d=ampgan.Adam(lr=4e-4, betas=(0.0, 0.999)),
        # BigGAN averages G from step 20000 of ~150k at decay 0.9999; a run of hundreds of steps starts
        # earlier and averages over ~1000 steps, or the average would hold mostly untrained weights.
        ema=ampgan.EMA(decay=ema_decay, start=ema_start),
        description=f"BigGAN-lite, width {width}",
    )
