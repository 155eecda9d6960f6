"""StyleGAN2 in miniature (Karras et al. 2020): a mapping network z -> w, modulated and demodulated
convolutions done as one grouped convolution (groups = batch, as the official code does), per-pixel noise
inputs, a residual D, the non-saturating logistic loss, lazy R1 every 16 steps and path-length
regularisation every 4, through ampgan's contract.

Both penalties take input gradients with `ctx.input_gradients`, from the *unreduced* outputs: the
path-length term passes `img * y`, not the reference's `(img * y).sum()`, whose backward pass would start
every element from the whole fp16 loss scale and overflow (see docs/your-gan.md).

    ampgan preflight --model examples/stylegan2_lite.py:stylegan2_lite
    ampgan bench     --model examples/stylegan2_lite.py:stylegan2_lite --batch-sizes 16 --max-seconds 30
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

import ampgan


class ModulatedConv(nn.Module):
    """A 3x3 convolution whose weight each image's style scales per input channel (modulation) and
    renormalises per output channel (demodulation): one grouped convolution over the whole batch."""

    def __init__(self, cin: int, cout: int, w_dim: int, demodulate: bool = True, kernel: int = 3):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(cout, cin, kernel, kernel))
        self.affine = nn.Linear(w_dim, cin)
        nn.init.ones_(self.affine.bias)
        self.demodulate, self.padding = demodulate, kernel // 2

    def forward(self, x, w):  # x: (B, cin, s, s), w: (B, w_dim)
        b, cin, h, width = x.shape
        style = self.affine(w)  # (B, cin)
        weight = self.weight.unsqueeze(0) * style.view(b, 1, cin, 1, 1)  # (B, cout, cin, k, k)
        if self.demodulate:
            weight = weight * torch.rsqrt(weight.float().pow(2).sum(dim=(2, 3, 4), keepdim=True) + 1e-8).to(
                weight.dtype
            )
        out = F.conv2d(
            x.reshape(1, b * cin, h, width), weight.reshape(-1, cin, *weight.shape[3:]), padding=self.padding, groups=b
        )
        return out.view(b, -1, h, width)


class SynthesisLayer(nn.Module):
    def __init__(self, cin: int, cout: int, w_dim: int):
        super().__init__()
        self.conv = ModulatedConv(cin, cout, w_dim)
        self.noise_strength = nn.Parameter(torch.zeros(()))
        self.bias = nn.Parameter(torch.zeros(cout))

    def forward(self, x, w):
        x = self.conv(x, w)
        noise = torch.randn(x.shape[0], 1, x.shape[2], x.shape[3], device=x.device, dtype=x.dtype)
        return F.leaky_relu(x + noise * self.noise_strength + self.bias.view(1, -1, 1, 1), 0.2)


class Generator(nn.Module):
    def __init__(self, z_dim: int, w_dim: int, width: int, channels: int, image_size: int):
        super().__init__()
        self.mapping = nn.Sequential(
            nn.Linear(z_dim, w_dim), nn.LeakyReLU(0.2), nn.Linear(w_dim, w_dim), nn.LeakyReLU(0.2)
        )
        self.constant = nn.Parameter(torch.randn(1, width, 4, 4))
        self.layers = nn.ModuleList(
            [SynthesisLayer(width, width, w_dim) for _ in range((image_size // 4).bit_length())]
        )  # one at 4 px, one per doubling
        self.to_rgb = ModulatedConv(width, channels, w_dim, demodulate=False, kernel=1)

    def synthesis(self, w):  # (B, w_dim) -> (B, C, H, W)
        x = self.constant.expand(w.shape[0], -1, -1, -1)
        for index, layer in enumerate(self.layers):
            if index:
                x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
            x = layer(x, w)
        return torch.tanh(self.to_rgb(x, w))

    def forward(self, z):
        return self.synthesis(self.mapping(z))


class Discriminator(nn.Module):
    def __init__(self, width: int, channels: int, image_size: int):
        super().__init__()
        self.stem = nn.Conv2d(channels, width, 1)
        self.blocks = nn.ModuleList(
            [nn.Conv2d(width, width, 3, padding=1) for _ in range((image_size // 4).bit_length() - 1)]
        )  # image_size -> 4
        self.head = nn.Linear(width * 16, 1)

    def forward(self, images):
        x = F.leaky_relu(self.stem(images), 0.2)
        for conv in self.blocks:
            x = F.avg_pool2d(x + F.leaky_relu(conv(x), 0.2), 2)  # residual, then half the size
        return self.head(x.flatten(1)).squeeze(1)  # (B,) logits


# ---- the glue ---------------------------------------------------------------------------------------
def stylegan2_lite(
    data: ampgan.DataSpec,
    *,
    width: int = 64,
    z_dim: int = 128,
    r1_gamma: float = 1.0,
    r1_every: int = 16,
    pl_weight: float = 2.0,
    pl_every: int = 4,
) -> ampgan.GAN:
    if data.image_size not in (8, 16, 32, 64):
        raise ValueError(f"this StyleGAN2-lite draws 8-64 px images, the data is {data.image_size} px")
    G = Generator(z_dim, z_dim, width, data.channels, data.image_size)
    G.register_buffer("pl_mean", torch.zeros(()))  # the running path length (a buffer: checkpointed)

    def r1(ctx):
        real = ctx.real.detach().float().requires_grad_(True)
        scores = ctx.D(real)
        gradients = ctx.input_gradients(scores, real)  # fp32, unscaled
        penalty = gradients.flatten(1).pow(2).sum(1).mean()
        # D's last bias moves no input gradient: an exact zero gives it one, or DDP stops (NVlabs: real_logits * 0)
        return r1_gamma / 2 * penalty + ampgan.unused_but_reduced(scores), {"r1_penalty": penalty.detach()}

    def path_length(ctx):
        z, _ = ctx.draw(max(1, ctx.batch_size // 2))
        w = G.mapping(z)
        images = G.synthesis(w)
        y = torch.randn(images.shape, device=images.device, generator=ctx.rng) / math.sqrt(images[0, 0].numel())
        gradients = ctx.input_gradients(images * y, w)  # the unreduced tensor, not (images * y).sum()
        lengths = gradients.pow(2).sum(1).sqrt()  # (B,)
        with torch.no_grad():
            G.pl_mean.lerp_(lengths.mean(), 0.01)
        return pl_weight * (lengths - G.pl_mean).pow(2).mean(), {"path_length": lengths.mean().detach()}

    def d_loss(ctx):
        return F.softplus(ctx.D(ctx.fake).float()).mean() + F.softplus(-ctx.D(ctx.real).float()).mean()

    return ampgan.GAN(
        generator=G,
        discriminator=Discriminator(width, data.channels, data.image_size),
        z_dim=z_dim,
        d_loss=d_loss,
        g_loss=lambda ctx: F.softplus(-ctx.D(ctx.fake).float()).mean(),
        # The mapping network learns at 0.01x (a parameter group); both networks are regularised lazily, so
        # their Adam gets StyleGAN2's lr/betas adjustment for an optimizer that steps every/(every+1) more often.
        optimizer_g=ampgan.Adam.lazy(pl_every, lr=2e-3, betas=(0.0, 0.99), lr_multipliers={"mapping.": 0.01}),
        optimizer_d=ampgan.Adam.lazy(r1_every, lr=2e-3, betas=(0.0, 0.99)),
        extra_updates=[
            ampgan.Update("r1", r1, networks=("discriminator",), every=r1_every, scale_by_interval=True),
            ampgan.Update("pl", path_length, networks=("generator",), every=pl_every, scale_by_interval=True),
        ],
        description=f"StyleGAN2-lite, width {width}",
    )
