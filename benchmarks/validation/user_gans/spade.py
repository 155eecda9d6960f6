"""SPADE / GauGAN (Park et al. 2019, NVlabs/SPADE) written from its paper and repository description as a user
would bring it to ampgan: the SPADE generator (ngf 64, `num_upsampling_layers normal`: the label map downsampled
to 1/32 of the image, a 3x3 convolution to 16 ngf channels, seven SPADE residual blocks with five upsamplings,
spectral norm on every convolution, SPADE's parameter-free batch norm modulated by 128-channel 3x3 convolutions
of the label map), two multiscale PatchGAN discriminators (ndf 64, 4 layers, spectral norm and instance norm,
intermediate features kept), the hinge loss, D's feature matching (x10) and the VGG19 perceptual loss (x10),
TTUR: Adam(1e-4) for G, Adam(4e-4) for D, betas (0, 0.9).

The label map comes from `draw_inputs` as pix2pixHD's does (benchmarks/validation/user_gans/README.md): a one-hot
map of `label_nc` classes, plus the don't-care class and the instance-edge channel (COCO-Stuff's defaults:
182 + 1 + 1 = 184 channels). The step is fully convolutional (the generator starts from the map at 1/32 of
the image, not from a vector), so a step at S x S, batch B is traced at s x s and projected at batch B (S/s)^2.

    ampgan bench --model benchmarks/validation/user_gans/spade.py:spade --dataset folder:DIR \
        --image-size 32 --batch-sizes 1 --steps 2 --precisions fp32 --no-channels-last --max-seconds 2400
"""

import torch
import torch.nn.functional as F
from pix2pixhd import VGG19Features
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm

import ampgan


class SPADENorm(nn.Module):
    """Parameter-free batch norm, then a per-pixel scale and shift from the label map (hidden width 128)."""

    def __init__(self, channels, label_channels, hidden=128):
        super().__init__()
        self.norm = nn.BatchNorm2d(channels, affine=False)
        self.shared = nn.Sequential(nn.Conv2d(label_channels, hidden, 3, padding=1), nn.ReLU())
        self.gamma = nn.Conv2d(hidden, channels, 3, padding=1)
        self.beta = nn.Conv2d(hidden, channels, 3, padding=1)

    def forward(self, x, label_map):
        label_map = F.interpolate(label_map, size=x.shape[2:], mode="nearest")
        hidden = self.shared(label_map)
        return self.norm(x) * (1 + self.gamma(hidden)) + self.beta(hidden)


class SPADEBlock(nn.Module):
    def __init__(self, fin, fout, label_channels):
        super().__init__()
        middle = min(fin, fout)
        self.norm_0 = SPADENorm(fin, label_channels)
        self.conv_0 = spectral_norm(nn.Conv2d(fin, middle, 3, padding=1))
        self.norm_1 = SPADENorm(middle, label_channels)
        self.conv_1 = spectral_norm(nn.Conv2d(middle, fout, 3, padding=1))
        self.shortcut = None
        if fin != fout:  # a learned shortcut: its own SPADE and a 1x1 convolution
            self.norm_s = SPADENorm(fin, label_channels)
            self.shortcut = spectral_norm(nn.Conv2d(fin, fout, 1, bias=False))

    def forward(self, x, label_map):
        skip = x if self.shortcut is None else self.shortcut(self.norm_s(x, label_map))
        dx = self.conv_0(F.leaky_relu(self.norm_0(x, label_map), 0.2))
        return skip + self.conv_1(F.leaky_relu(self.norm_1(dx, label_map), 0.2))


class SPADEGenerator(nn.Module):
    """(B, label_channels, H, W) label map -> (B, 3, H, W) image; H and W divisible by 32."""

    def __init__(self, label_channels, ngf, out_channels):
        super().__init__()
        self.fc = nn.Conv2d(label_channels, 16 * ngf, 3, padding=1)
        widths = (16, 16, 16, 8, 4, 2, 1)  # head, middle x2, up_0..up_3: (B, 16 ngf, H/32) ... (B, ngf, H)
        self.blocks = nn.ModuleList(
            SPADEBlock(ngf * widths[i - 1] if i else 16 * ngf, ngf * widths[i], label_channels)
            for i in range(len(widths))
        )
        self.out = nn.Conv2d(ngf, out_channels, 3, padding=1)

    def forward(self, label_map):
        x = self.fc(F.interpolate(label_map, size=(label_map.shape[2] // 32, label_map.shape[3] // 32)))
        for index, block in enumerate(self.blocks):
            if index in (1, 3, 4, 5, 6):  # five upsamplings: before middle_0 and before each up block
                x = F.interpolate(x, scale_factor=2)
            x = block(x, label_map)
        return torch.tanh(self.out(F.leaky_relu(x, 0.2)))


class PatchD(nn.Module):
    """SPADE's NLayerDiscriminator: 4x4 convolutions, spectral norm and instance norm, every layer's output kept."""

    def __init__(self, input_nc, ndf, n_layers):
        super().__init__()
        stages, c = [nn.Sequential(nn.Conv2d(input_nc, ndf, 4, 2, 2), nn.LeakyReLU(0.2))], ndf
        for n in range(1, n_layers):
            out, stride = min(c * 2, 512), 1 if n == n_layers - 1 else 2
            stages.append(
                nn.Sequential(spectral_norm(nn.Conv2d(c, out, 4, stride, 2)), nn.InstanceNorm2d(out), nn.LeakyReLU(0.2))
            )
            c = out
        stages.append(nn.Conv2d(c, 1, 4, 1, 2))
        self.stages = nn.ModuleList(stages)

    def forward(self, x):
        features = []
        for stage in self.stages:
            x = stage(x)
            features.append(x)
        return features


class MultiscaleD(nn.Module):
    def __init__(self, input_nc, ndf, n_layers, num_d):
        super().__init__()
        self.scales = nn.ModuleList(PatchD(input_nc, ndf, n_layers) for _ in range(num_d))
        self.vgg = VGG19Features()  # the perceptual loss's frozen network, moved with D

    def forward(self, label_map, image):
        x, results = torch.cat([label_map, image], dim=1), []
        for index, scale in enumerate(self.scales):
            if index:
                x = F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False)
            results.append(scale(x))
        return results


def spade(
    data: ampgan.DataSpec,
    *,
    label_nc: int = 182,
    dontcare: int = 1,
    instance: int = 1,
    ngf: int = 64,
    ndf: int = 64,
    n_layers_d: int = 4,
    num_d: int = 2,
    lambda_feat: float = 10.0,
    lambda_vgg: float = 10.0,
) -> ampgan.GAN:
    """COCO-Stuff's defaults (182 labels, don't-care, instance edges); `--set model.label_nc=...` for others."""
    label_channels = label_nc + dontcare + instance
    G = SPADEGenerator(label_channels, ngf, data.channels)
    D = MultiscaleD(label_channels + data.channels, ndf, n_layers_d, num_d)

    def draw_inputs(ctx):  # (B, label_channels, H, W): one-hot classes, then the instance-edge channel
        b, _, h, w = ctx.real.shape
        classes = torch.randint(label_nc + dontcare, (b, h, w), generator=ctx.rng, device=ctx.device)
        label = F.one_hot(classes, label_nc + dontcare).permute(0, 3, 1, 2).float()
        if instance:
            edges = (torch.rand(b, 1, h, w, generator=ctx.rng, device=ctx.device) < 0.05).float()
            label = torch.cat([label, edges], dim=1)
        return label, None

    def d_loss(ctx):  # hinge, on every scale's score map
        real, fake = ctx.D(ctx.z, ctx.real), ctx.D(ctx.z, ctx.fake)
        return (
            sum(
                ampgan.hinge_loss(r[-1].float(), "real") + ampgan.hinge_loss(f[-1].float(), "fake")
                for r, f in zip(real, fake)
            )
            / num_d
        )

    def g_loss(ctx):
        fake_results = ctx.D(ctx.z, ctx.fake)
        loss = sum(ampgan.hinge_loss(f[-1].float(), "generator") for f in fake_results) / num_d
        metrics = {}
        if lambda_feat:
            with torch.no_grad():  # SPADE runs D on the real pair in the same pass; D is frozen here
                real_results = ctx.D(ctx.z, ctx.real)
            feat = sum(
                F.l1_loss(f.float(), r.float())
                for fr, rr in zip(fake_results, real_results)
                for f, r in zip(fr[:-1], rr[:-1])
            ) / num_d  # fmt: skip
            metrics["feat"] = feat
            loss = loss + lambda_feat * feat
        if lambda_vgg:
            vgg = ctx.D.vgg if hasattr(ctx.D, "vgg") else ctx.D.module.vgg
            with torch.no_grad():
                real_features = vgg(ctx.real)
            perceptual = sum(
                w * F.l1_loss(f.float(), r.float())
                for w, f, r in zip((1 / 32, 1 / 16, 1 / 8, 1 / 4, 1.0), vgg(ctx.fake), real_features)
            )
            metrics["vgg"] = perceptual
            loss = loss + lambda_vgg * perceptual
        return loss, metrics

    return ampgan.GAN(
        generator=G,
        discriminator=D,
        z_dim=label_channels,
        d_loss=d_loss,
        g_loss=g_loss,
        draw_inputs=draw_inputs,
        optimizer_g=ampgan.Adam(1e-4, (0.0, 0.9)),
        optimizer_d=ampgan.Adam(4e-4, (0.0, 0.9)),
        description="SPADE generator (ngf 64), 2 multiscale spectral PatchGANs, hinge + feature matching + VGG19",
    )
