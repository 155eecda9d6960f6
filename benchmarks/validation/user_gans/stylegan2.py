"""StyleGAN2 (Karras et al. 2020) with StyleGAN2-ADA's mixed precision (Karras et al. 2020b, NVlabs/stylegan2-ada),
written from the papers and the repositories' description as a user would bring it to ampgan: config F's channels
(min(32768 / resolution, 512)), an 8-layer mapping network (512, lr x0.01, equalized learning rate), a synthesis
network of modulated / demodulated 3x3 convolutions with per-layer noise inputs and skip (toRGB) outputs, a
residual discriminator with minibatch standard deviation (group 4), the non-saturating logistic loss, lazy R1
(gamma 10, every 16 steps) and lazy path-length regularisation (weight 2, every 4 steps, half batch).

Mixed precision as StyleGAN2-ADA does it: 16-bit compute only in the `num_fp16_res` highest resolutions of G and D
(4: at 1024 px, the blocks at 128 to 1024), every lower-resolution block, the mapping network and D's epilogue in
fp32 (declared as ampgan's `fp32_modules`, so autocast is off inside them), and activations clamped to
+-`conv_clamp` (256). `--set model.num_fp16_res=99` (more than the blocks) puts every layer under autocast
(ampgan's plain AMP).

Approximations: the up/downsampling FIR filters ([1,3,3,1]) are a fixed depthwise 4x4 blur after the transposed
convolution (G) or before the strided one (D), and the skip image is upsampled bilinearly; no style mixing, no
truncation, no ADA augmentation, no w_avg tracking; the noise is drawn with torch's global generator; the clamp
stays in fp32 too (NVlabs switches it off with --fp32; it is an element-wise min/max).

    ampgan bench --trace-only --model benchmarks/validation/user_gans/stylegan2.py:stylegan2 --image-size 1024 \
        --batch-sizes 4 --out T
    ampgan project T --devices V100
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

import ampgan

SQRT2 = math.sqrt(2)


def channels_at(resolution, base, cmax):
    return min(base // resolution, cmax)


class EqualLinear(nn.Module):
    def __init__(self, cin, cout, lr_mult=1.0, bias_init=0.0, activate=True):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(cout, cin) / lr_mult)
        self.bias = nn.Parameter(torch.full((cout,), float(bias_init)))
        self.gain, self.lr_mult, self.activate = lr_mult / math.sqrt(cin), lr_mult, activate

    def forward(self, x):
        x = F.linear(x, self.weight * self.gain, self.bias * self.lr_mult)
        return F.leaky_relu(x, 0.2) * SQRT2 if self.activate else x


class Blur(nn.Module):
    """The [1, 3, 3, 1] FIR filter as a fixed depthwise 4x4 convolution."""

    def __init__(self, channels, pad, gain=1.0):
        super().__init__()
        k = torch.tensor([1.0, 3.0, 3.0, 1.0])
        k = torch.outer(k, k)
        self.register_buffer("kernel", (k / k.sum() * gain).expand(channels, 1, 4, 4).clone())
        self.pad, self.channels = pad, channels

    def forward(self, x):
        return F.conv2d(F.pad(x, self.pad), self.kernel.to(x.dtype), groups=self.channels)


class ModulatedConv(nn.Module):
    """Modulate the input by the style, convolve with the shared weight, demodulate the output: StyleGAN2-ADA's
    training path (fused_modconv off), so every convolution is an ordinary one over the batch."""

    def __init__(self, cin, cout, w_dim, kernel=3, demodulate=True, up=False, activate=True, clamp=None):
        super().__init__()
        self.affine = EqualLinear(w_dim, cin, bias_init=1.0, activate=False)
        self.weight = nn.Parameter(torch.randn(cout, cin, kernel, kernel))
        self.bias = nn.Parameter(torch.zeros(cout))
        self.gain = 1 / math.sqrt(cin * kernel * kernel)
        self.demodulate, self.up, self.activate, self.clamp, self.kernel = demodulate, up, activate, clamp, kernel
        self.blur = Blur(cout, (1, 1, 1, 1), gain=4.0) if up else None
        self.noise_strength = nn.Parameter(torch.zeros(())) if activate else None

    def forward(self, x, w):
        styles = self.affine(w) * (1.0 if self.demodulate else self.gain)
        weight = self.weight * self.gain if self.demodulate else self.weight
        x = x * styles.to(x.dtype)[:, :, None, None]
        if self.up:
            x = F.conv_transpose2d(x, weight.transpose(0, 1).to(x.dtype), stride=2)
            x = self.blur(x)
        else:
            x = F.conv2d(x, weight.to(x.dtype), padding=self.kernel // 2)
        if self.demodulate:
            dcoefs = ((weight[None] * styles[:, None, :, None, None]).square().sum([2, 3, 4]) + 1e-8).rsqrt()
            x = x * dcoefs.to(x.dtype)[:, :, None, None]
        if self.activate:
            noise = torch.randn(x.shape[0], 1, x.shape[2], x.shape[3], device=x.device, dtype=x.dtype)
            x = x + noise * self.noise_strength.to(x.dtype)
        x = x + self.bias.to(x.dtype)[None, :, None, None]
        if self.activate:
            x = F.leaky_relu(x, 0.2) * SQRT2
        return x.clamp(-self.clamp, self.clamp) if self.clamp is not None else x


class MappingNetwork(nn.Module):
    def __init__(self, z_dim, w_dim, layers):
        super().__init__()
        dims = [z_dim] + [w_dim] * layers
        self.fc = nn.ModuleList(EqualLinear(a, b, lr_mult=0.01) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, z):
        x = z * (z.square().mean(1, keepdim=True) + 1e-8).rsqrt()
        for layer in self.fc:
            x = layer(x)
        return x


class SynthesisBlock(nn.Module):
    def __init__(self, cin, cout, resolution, w_dim, clamp, image_channels=3):
        super().__init__()
        self.resolution = resolution
        if resolution == 4:
            self.const = nn.Parameter(torch.randn(cout, 4, 4))
            self.conv0 = None
        else:
            self.conv0 = ModulatedConv(cin, cout, w_dim, up=True, clamp=clamp)
        self.conv1 = ModulatedConv(cout, cout, w_dim, clamp=clamp)
        self.torgb = ModulatedConv(cout, image_channels, w_dim, kernel=1, demodulate=False, activate=False, clamp=clamp)

    def forward(self, x, img, w):
        if self.conv0 is None:
            x = self.const[None].expand(w.shape[0], -1, -1, -1)
        else:
            x = self.conv0(x, w)
        x = self.conv1(x, w)
        rgb = self.torgb(x, w).float()
        if img is not None:
            img = F.interpolate(img, scale_factor=2, mode="bilinear", align_corners=False)
        return x, rgb if img is None else img + rgb


class Generator(nn.Module):
    def __init__(self, resolution, z_dim, w_dim, map_layers, base, cmax, clamp, image_channels=3):
        super().__init__()
        self.mapping = MappingNetwork(z_dim, w_dim, map_layers)
        resolutions = [2**i for i in range(2, int(math.log2(resolution)) + 1)]
        self.blocks = nn.ModuleList(
            SynthesisBlock(channels_at(r // 2, base, cmax), channels_at(r, base, cmax), r, w_dim, clamp, image_channels)
            for r in resolutions
        )

    def synthesis(self, w):
        x = img = None
        for block in self.blocks:
            x, img = block(x, img, w)
        return img

    def forward(self, z):
        return self.synthesis(self.mapping(z))


class DiscriminatorBlock(nn.Module):
    """Residual: fromRGB (first block only), 3x3 conv, blur + 3x3 conv stride 2, 1x1 skip with blur stride 2."""

    def __init__(self, cin, cout, resolution, first, clamp, image_channels=3):
        super().__init__()
        self.resolution, self.clamp = resolution, clamp
        self.fromrgb = nn.Conv2d(image_channels, cin, 1) if first else None
        self.conv0 = nn.Conv2d(cin, cin, 3, padding=1)
        self.blur = Blur(cin, (2, 2, 2, 2))
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=2)
        self.skip_blur = Blur(cin, (1, 1, 1, 1))
        self.skip = nn.Conv2d(cin, cout, 1, stride=2, bias=False)

    def act(self, x):
        return (F.leaky_relu(x, 0.2) * SQRT2).clamp(-self.clamp, self.clamp) if self.clamp else x

    def forward(self, x, img):
        if self.fromrgb is not None:
            x = self.act(self.fromrgb(img))
        y = self.skip(self.skip_blur(x)) * (1 / SQRT2)
        x = self.act(self.conv0(x))
        x = self.act(self.conv1(self.blur(x))) * (1 / SQRT2)
        return x + y


class Epilogue(nn.Module):
    def __init__(self, channels, group=4):
        super().__init__()
        self.group = group
        self.conv = nn.Conv2d(channels + 1, channels, 3, padding=1)
        self.fc = nn.Linear(channels * 16, channels)
        self.out = nn.Linear(channels, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        g = min(self.group, b)
        y = x.float().reshape(g, -1, c, h, w)
        y = (y - y.mean(0)).square().mean(0).add(1e-8).sqrt().mean([1, 2, 3])
        y = y.reshape(-1, 1, 1, 1).repeat(g, 1, h, w)
        x = F.leaky_relu(self.conv(torch.cat([x.float(), y], 1)), 0.2) * SQRT2
        x = F.leaky_relu(self.fc(x.flatten(1)), 0.2) * SQRT2
        return self.out(x).flatten()


class Discriminator(nn.Module):
    def __init__(self, resolution, base, cmax, clamp, image_channels=3):
        super().__init__()
        resolutions = [2**i for i in range(int(math.log2(resolution)), 2, -1)]
        self.blocks = nn.ModuleList(
            DiscriminatorBlock(
                channels_at(r, base, cmax), channels_at(r // 2, base, cmax), r, r == resolution, clamp, image_channels
            )
            for r in resolutions
        )
        self.epilogue = Epilogue(channels_at(4, base, cmax))

    def forward(self, img):
        x = None
        for block in self.blocks:
            x = block(x, img)
        return self.epilogue(x)


def stylegan2(
    data: ampgan.DataSpec,
    *,
    channel_base: int = 32768,
    channel_max: int = 512,
    map_layers: int = 8,
    num_fp16_res: int = 4,
    conv_clamp: int = 256,
    r1_gamma: float = 10.0,
    pl_weight: float = 2.0,
) -> ampgan.GAN:
    """Config F (`--cfg=stylegan2` of stylegan2-ada-pytorch) by default; `channel_base=16384, map_layers=2` is
    `--cfg=paper256`'s network."""
    clamp = conv_clamp or None
    G = Generator(data.image_size, 512, 512, map_layers, channel_base, channel_max, clamp, data.channels)
    D = Discriminator(data.image_size, channel_base, channel_max, clamp, data.channels)
    # StyleGAN2-ADA: fp16 at the num_fp16_res highest resolutions, fp16_resolution = max(2 ** (log2(res) + 1 -
    # num_fp16_res), 8); everything below it (and the mapping network, D's epilogue) computes in fp32.
    # num_fp16_res above the number of blocks: every layer under autocast (ampgan's plain AMP, no floor at 8x8).
    fp16_from = max(2 ** (int(math.log2(data.image_size)) + 1 - num_fp16_res), 8)
    fp32 = [G.mapping, D.epilogue]
    fp32 += [b for b in (*G.blocks, *D.blocks) if b.resolution < fp16_from]
    if num_fp16_res > len(G.blocks):
        fp16_from, fp32 = 4, []

    def d_real(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.real), 1.0)

    def d_fake(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.fake), 0.0)

    def g_loss(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.fake), 1.0)

    def r1(ctx):
        real = ctx.real.detach().float().requires_grad_(True)
        grad = ctx.input_gradients(ctx.D(real), real)
        return (r1_gamma / 2) * grad.flatten(1).square().sum(1).mean()

    G.register_buffer("pl_mean", torch.zeros(()))  # in G's state, so a checkpoint keeps it

    def path_length(ctx):  # half the batch (pl_batch_shrink 2), pl_decay 0.01
        gen = ctx.G.module if hasattr(ctx.G, "module") else ctx.G
        z = ctx.z[: max(ctx.z.shape[0] // 2, 1)]
        w = gen.mapping(z)
        img = gen.synthesis(w)
        y = torch.randn(img.shape, device=img.device, generator=ctx.rng) / math.sqrt(img.shape[2] * img.shape[3])
        grad = ctx.input_gradients(img * y, w)
        lengths = grad.square().sum(1).sqrt()
        gen.pl_mean.lerp_(lengths.mean().detach().to(gen.pl_mean.dtype), 0.01)
        return pl_weight * (lengths - gen.pl_mean).square().mean()

    updates = [ampgan.Update("r1", r1, networks=("discriminator",), every=16, scale_by_interval=True)]
    if pl_weight:
        updates.append(ampgan.Update("pl", path_length, networks=("generator",), every=4, scale_by_interval=True))
    return ampgan.GAN(
        generator=G,
        discriminator=D,
        z_dim=512,
        d_loss=(d_real, d_fake),
        g_loss=g_loss,
        extra_updates=updates,
        fp32_modules=fp32,
        optimizer_g=ampgan.Adam.lazy(4 if pl_weight else 1, lr=0.002, betas=(0.0, 0.99)),  # mapping: x0.01 in its gain
        optimizer_d=ampgan.Adam.lazy(16, lr=0.002, betas=(0.0, 0.99)),
        ema=ampgan.EMA(decay=0.998, rampup=None),  # ema_kimg 10 at batch 32
        description=f"StyleGAN2 config F (base {channel_base}), skip G / residual D, R1 + path length, "
        f"fp16 at resolutions >= {fp16_from}",
    )
