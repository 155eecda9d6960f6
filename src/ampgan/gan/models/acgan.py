"""`acgan` (the default): a class-conditional DCGAN generator and a discriminator with two heads.

Two changes to the original AC-GAN losses, each found by measurement on the embedded digits
(benchmarks/gan_trials.py; benchmarks/RESULTS.md, "Making the AC-GAN learn"):
- D's class head learns from real images only. Trained on fakes with their intended labels too, D and
  G can agree on any consistent class mapping: rows drew the wrong digit.
- G's loss has a mode-seeking term (Mao et al. 2019, "Mode Seeking GANs"): the batch is drawn in pairs
  with one class and two noise vectors, and G is rewarded for images that differ as much as their noise
  does. Without it each class collapsed to one image whatever the noise.
Spectral normalisation of D and real labels smoothed to 0.9 keep D from winning outright on Quick, Draw!.
`class_loss_on_fakes=True, mode_seeking=0, real_label=1, spectral_norm_d=False` is the published AC-GAN.

The discriminator returns logits, never probabilities: BCE-with-logits and cross-entropy are the
autocast-safe losses (PyTorch refuses BCE on probabilities under autocast).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ampgan.gan.contract import GAN, DataSpec, built_in
from ampgan.gan.layers import (
    SpectralNormConv2d,
    SpectralNormLinear,
    class_loss,
    dcgan_downsampling,
    dcgan_upsampling,
    init_dcgan_weights,
    real_fake_loss,
    start_spectral_normalisation,
    unused_but_reduced,
)
from ampgan.gan.options import require_fraction, require_image_size, require_non_negative, require_whole

# The generator starts from a small map and doubles it with each transposed convolution.
BASE_SIZE = {28: 7, 32: 4, 64: 4}


def upsamplings(image_size: int) -> int:
    return int(math.log2(image_size // BASE_SIZE[image_size]))


class Generator(nn.Module):
    """(z, label) -> image in [-1, 1]; `conditional=False`: z -> image, DCGAN's G (dcgan, wgan-gp).

    For 32 px and width w: [z, embed(label)] -> linear -> (B, 4w, 4, 4) -> (B, 2w, 8, 8)
    -> (B, w, 16, 16) -> (B, C, 32, 32). For 28 px the map starts at (B, 2w, 7, 7); 64 px has one more doubling.
    """

    def __init__(self, data: DataSpec, z_dim: int, width: int, *, conditional: bool = True):
        super().__init__()
        n_up, base = upsamplings(data.image_size), BASE_SIZE[data.image_size]
        start_channels = width * 2 ** (n_up - 1)
        # The label enters as a learned embedding concatenated to z (kept at PyTorch's N(0, 1)
        # initialisation, as strong as the noise): multiplying z by it made the evaluator recognise
        # the samples far less often.
        self.label_embedding = nn.Embedding(data.num_classes, z_dim) if conditional else None
        self.project = nn.Sequential(
            nn.Linear(2 * z_dim if conditional else z_dim, start_channels * base**2, bias=False),
            nn.BatchNorm1d(start_channels * base**2),
            nn.ReLU(inplace=True),
        )
        self._start = (start_channels, base, base)
        self.upsample = dcgan_upsampling(start_channels, data.channels, n_up)
        self.apply(init_dcgan_weights)

    def forward(self, z: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        if self.label_embedding is not None:
            z = torch.cat([z, self.label_embedding(labels)], dim=1)  # (B, 2 z_dim)
        x = self.project(z).view(-1, *self._start)  # (B, start_channels, base, base)
        return self.upsample(x)  # (B, C, H, W)


class Discriminator(nn.Module):
    """image -> (real/fake logit (B,), class logits (B, K)), from one shared feature trunk.

    `spectral_norm`: the convolutions and the real/fake head are spectrally normalised (the class
    head is not: it is a plain classifier of real images). Off, this is the published AC-GAN's D.
    """

    def __init__(self, data: DataSpec, width: int, *, spectral_norm: bool = False):
        super().__init__()
        conv, linear = (SpectralNormConv2d, SpectralNormLinear) if spectral_norm else (nn.Conv2d, nn.Linear)
        layers, feature_dim = dcgan_downsampling(data, width, upsamplings(data.image_size), conv)
        self.features = nn.Sequential(*layers)  # (B, 4w * 4 * 4) for 32 px
        self.real_fake_head = linear(feature_dim, 1)
        self.class_head = nn.Linear(feature_dim, data.num_classes)  # the auxiliary classifier
        self.apply(init_dcgan_weights)
        start_spectral_normalisation(self)

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.features(images)
        return self.real_fake_head(features).squeeze(1), self.class_head(features)


def _mode_seeking_penalty(fake: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """1 / (image distance / noise distance) over the pairs (i, i + B/2), which share a class: small
    when G turns different noise into different images. FP32 whatever the compute dtype."""
    half = fake.shape[0] // 2
    images = fake.float()
    image_distance = (images[:half] - images[half : 2 * half]).abs().mean()
    noise_distance = (z[:half] - z[half : 2 * half]).abs().mean()
    return 1.0 / (image_distance / noise_distance + 1e-5)


@built_in("acgan")
def acgan(
    data: DataSpec,
    *,
    width: int = 64,
    z_dim: int = 128,
    spectral_norm_d: bool = True,
    mode_seeking: float = 0.3,
    real_label: float = 0.9,
    class_weight_g: float = 1.0,
    class_loss_on_fakes: bool = False,
) -> GAN:
    """ampgan's AC-GAN: width w (channels w, 2w, 4w), noise size z_dim; the loss options above."""
    # Over 60 lines, kept whole: a model definition read top to bottom, its losses closures over its options.
    require_image_size("acgan", data, tuple(BASE_SIZE))
    require_whole(width=width, z_dim=z_dim)
    require_non_negative(mode_seeking=mode_seeking, class_weight_g=class_weight_g)
    require_fraction(real_label=real_label)

    def draw_inputs(context):
        z = torch.randn(context.batch_size, z_dim, device=context.device, generator=context.rng)
        labels = torch.randint(data.num_classes, (context.batch_size,), device=context.device, generator=context.rng)
        if mode_seeking:
            half = context.batch_size // 2  # pairs (i, i + half) share a class and differ in their noise
            labels = torch.cat([labels[:half], labels[: context.batch_size - half]])
        return z, labels

    def d_real(context):
        """Real images -> real (smoothed), and their class."""
        real_fake, classes = context.D(context.real)
        return real_fake_loss(real_fake, real_label) + class_loss(classes, context.labels), {
            "d_real_acc": (real_fake > 0).float().mean(),
            "class_acc_real": (classes.argmax(1) == context.labels).float().mean(),
        }

    def d_fake(context):
        """Fakes -> fake. The class head learns from real images only unless class_loss_on_fakes; a
        zero-weighted term then gives it a gradient, which DDP expects from every parameter."""
        real_fake, classes = context.D(context.fake)
        loss = real_fake_loss(real_fake, 0.0) + (
            class_loss(classes, context.fake_labels) if class_loss_on_fakes else unused_but_reduced(classes)
        )
        return loss, {
            "d_fake_acc": (real_fake < 0).float().mean(),
            "class_acc_fake": (classes.argmax(1) == context.fake_labels).float().mean(),
        }

    def g_loss(context):
        """Make D call the fakes real, and of the class they were drawn for; mode seeking on top."""
        real_fake, classes = context.D(context.fake)
        loss = real_fake_loss(real_fake, 1.0) + class_weight_g * class_loss(classes, context.fake_labels)
        if mode_seeking:
            loss = loss + mode_seeking * _mode_seeking_penalty(context.fake, context.z)
        return loss

    return GAN(
        generator=Generator(data, z_dim, width),
        discriminator=Discriminator(data, width, spectral_norm=spectral_norm_d),
        z_dim=z_dim,
        conditional=True,
        num_classes=data.num_classes,
        d_loss=(d_real, d_fake),
        g_loss=g_loss,
        draw_inputs=draw_inputs,
        description=f"AC-GAN, DCGAN layers, width {width}, z {z_dim}"
        + (", spectral-norm D" if spectral_norm_d else ""),
    )
