"""pix2pixHD (Wang et al. 2018, NVIDIA/pix2pixHD) written from its paper and README as a user would bring it
to ampgan: the global generator (ngf 64, 4 downsamplings, 9 residual blocks, instance norm, reflection
padding), two multiscale PatchGAN discriminators (ndf 64, 3 layers, intermediate features kept), the
least-squares GAN loss, D's feature matching (x10) and the VGG19 perceptual loss (x10), Adam(2e-4, 0.5).

What the contract has no field for, and how this file gets around it (benchmarks/validation/user_gans/README.md):
  - the input is a label map, not noise: `draw_inputs` draws a one-hot semantic map (label_nc classes plus
    the instance-edge channel) as `z`, the same map G translates and D sees beside the real image. The cost of
    a step does not depend on which map it is, so the timing is the published configuration's; training it
    for quality would need paired data, which ampgan's datasets do not carry.
  - the VGG19 of the perceptual loss is a frozen network: it rides on D (`D.vgg`, no trainable parameter) so
    ampgan moves it with D; its weights here are random (the cost of a step does not depend on them).

    ampgan bench --model benchmarks/validation/user_gans/pix2pixhd.py:pix2pixhd --dataset folder:DIR \
        --image-size 64 --batch-sizes 1 --steps 2 --max-seconds 20
"""

import torch
import torch.nn.functional as F
from torch import nn

import ampgan


def _resnet_block(dim):
    return nn.Sequential(
        nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3), nn.InstanceNorm2d(dim), nn.ReLU(True),
        nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3), nn.InstanceNorm2d(dim),
    )  # fmt: skip


class GlobalGenerator(nn.Module):
    """(B, input_nc, H, W) label map -> (B, 3, H, W) image in [-1, 1]; H and W divisible by 2**downsample."""

    def __init__(self, input_nc, output_nc, ngf, downsample, blocks):
        super().__init__()
        layers = [nn.ReflectionPad2d(3), nn.Conv2d(input_nc, ngf, 7), nn.InstanceNorm2d(ngf), nn.ReLU(True)]
        for i in range(downsample):
            c = ngf * 2**i
            layers += [nn.Conv2d(c, 2 * c, 3, stride=2, padding=1), nn.InstanceNorm2d(2 * c), nn.ReLU(True)]
        self.down = nn.Sequential(*layers)
        self.blocks = nn.ModuleList(_resnet_block(ngf * 2**downsample) for _ in range(blocks))
        layers = []
        for i in range(downsample, 0, -1):
            c = ngf * 2**i
            layers += [
                nn.ConvTranspose2d(c, c // 2, 3, stride=2, padding=1, output_padding=1),
                nn.InstanceNorm2d(c // 2),
                nn.ReLU(True),
            ]
        layers += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, output_nc, 7), nn.Tanh()]
        self.up = nn.Sequential(*layers)

    def forward(self, label_map):
        x = self.down(label_map)
        for block in self.blocks:
            x = x + block(x)
        return self.up(x)


class PatchD(nn.Module):
    """A 70x70 PatchGAN; returns every layer's output (the last is the score map) for feature matching."""

    def __init__(self, input_nc, ndf, n_layers):
        super().__init__()
        stages, c = [nn.Sequential(nn.Conv2d(input_nc, ndf, 4, 2, 2), nn.LeakyReLU(0.2, True))], ndf
        for n in range(1, n_layers + 1):
            out, stride = min(c * 2, 512), 2 if n < n_layers else 1
            stages.append(nn.Sequential(nn.Conv2d(c, out, 4, stride, 2), nn.InstanceNorm2d(out), nn.LeakyReLU(0.2)))
            c = out
        stages.append(nn.Conv2d(c, 1, 4, 1, 2))
        self.stages = nn.ModuleList(stages)

    def forward(self, x):
        features = []
        for stage in self.stages:
            x = stage(x)
            features.append(x)
        return features


class VGG19Features(nn.Module):
    """VGG19's convolutions up to relu5_1, returning relu1_1, relu2_1, relu3_1, relu4_1 and relu5_1."""

    SLICES = ((64,), (64, "M", 128), (128, "M", 256), (256, 256, 256, "M", 512), (512, 512, 512, "M", 512))

    def __init__(self):
        super().__init__()
        self.slices, c = nn.ModuleList(), 3
        for plan in self.SLICES:
            layers = []
            for v in plan:
                if v == "M":
                    layers.append(nn.MaxPool2d(2))
                else:
                    layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU(True)]
                    c = v
            self.slices.append(nn.Sequential(*layers))
        self.requires_grad_(False)

    def forward(self, x):
        out = []
        for s in self.slices:
            x = s(x)
            out.append(x)
        return out


class MultiscaleD(nn.Module):
    """num_D PatchGANs, each on the (label map, image) pair downsampled once more than the last."""

    def __init__(self, input_nc, ndf, n_layers, num_d):
        super().__init__()
        self.scales = nn.ModuleList(PatchD(input_nc, ndf, n_layers) for _ in range(num_d))
        self.vgg = VGG19Features()  # the perceptual loss's network: frozen, moved with D

    def forward(self, label_map, image):
        x, results = torch.cat([label_map, image], dim=1), []
        for index, scale in enumerate(self.scales):
            if index:
                x = F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False)
            results.append(scale(x))
        return results


def _lsgan(results, target):
    return sum(F.mse_loss(r[-1].float(), torch.full_like(r[-1].float(), target)) for r in results)


def pix2pixhd(
    data: ampgan.DataSpec,
    *,
    label_nc: int = 35,
    instance: int = 1,
    ngf: int = 64,
    downsample: int = 4,
    blocks: int = 9,
    ndf: int = 64,
    n_layers_d: int = 3,
    num_d: int = 2,
    lambda_feat: float = 10.0,
    vgg: int = 1,
) -> ampgan.GAN:
    """label2city defaults: 35 Cityscapes labels + the instance-edge channel. `--set model.label_nc=0` takes
    an RGB image as the input map (3 channels: issue #213's `--label_nc 0 --no_instance` with instance=0)."""
    input_nc = (label_nc or 3) + instance
    G = GlobalGenerator(input_nc, data.channels, ngf, downsample, blocks)
    D = MultiscaleD(input_nc + data.channels, ndf, n_layers_d, num_d)

    def draw_inputs(ctx):  # a label map the size of the real batch (B, input_nc, H, W)
        b, _, h, w = ctx.real.shape
        if label_nc:
            classes = torch.randint(label_nc, (b, h, w), generator=ctx.rng, device=ctx.device)
            label = F.one_hot(classes, label_nc).permute(0, 3, 1, 2).float()
        else:
            label = torch.rand(b, 3, h, w, generator=ctx.rng, device=ctx.device) * 2 - 1
        if instance:
            edges = (torch.rand(b, 1, h, w, generator=ctx.rng, device=ctx.device) < 0.05).float()
            label = torch.cat([label, edges], dim=1)
        return label, None

    def d_real(ctx):
        return _lsgan(ctx.D(ctx.z, ctx.real), 1.0) * 0.5

    def d_fake(ctx):
        return _lsgan(ctx.D(ctx.z, ctx.fake), 0.0) * 0.5

    def g_loss(ctx):
        fake_results = ctx.D(ctx.z, ctx.fake)
        loss, metrics = _lsgan(fake_results, 1.0), {}
        if lambda_feat:
            with torch.no_grad():  # pix2pixHD reuses D's real pass; here D is frozen, so one pass without graph
                real_results = ctx.D(ctx.z, ctx.real)
            feat = sum(
                F.l1_loss(f.float(), r.float())
                for fr, rr in zip(fake_results, real_results)
                for f, r in zip(fr[:-1], rr[:-1])
            )  # fmt: skip
            metrics["feat"] = feat
            loss = loss + feat * (lambda_feat / num_d)
        if vgg:
            weights = (1 / 32, 1 / 16, 1 / 8, 1 / 4, 1.0)
            vgg_net = ctx.D.vgg if hasattr(ctx.D, "vgg") else ctx.D.module.vgg
            with torch.no_grad():
                real_features = vgg_net(ctx.real)
            perceptual = sum(
                w * F.l1_loss(f.float(), r.float()) for w, f, r in zip(weights, vgg_net(ctx.fake), real_features)
            )
            metrics["vgg"] = perceptual
            loss = loss + 10.0 * perceptual
        return loss, metrics

    return ampgan.GAN(
        generator=G,
        discriminator=D,
        z_dim=input_nc,
        d_loss=(d_real, d_fake),
        g_loss=g_loss,
        draw_inputs=draw_inputs,
        optimizer_g=ampgan.Adam(2e-4, (0.5, 0.999)),
        optimizer_d=ampgan.Adam(2e-4, (0.5, 0.999)),
        description="pix2pixHD global generator, 2 multiscale PatchGANs, LSGAN + feature matching + VGG19",
    )
