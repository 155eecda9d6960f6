"""The AC-GAN: a class-conditional DCGAN generator and a discriminator with two heads.

The discriminator returns logits, never probabilities: BCE-with-logits and cross-entropy are the
autocast-safe losses (PyTorch refuses BCE on probabilities under autocast).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# The generator starts from a small map and doubles it with each transposed convolution.
_BASE_SIZE = {28: 7, 32: 4, 64: 4}


@dataclass(frozen=True)
class ModelShape:
    image_size: int
    channels: int
    num_classes: int
    z_dim: int = 128
    width: int = 64

    @property
    def upsamplings(self) -> int:
        return int(math.log2(self.image_size // _BASE_SIZE[self.image_size]))

    @property
    def base_size(self) -> int:
        return _BASE_SIZE[self.image_size]


def _init_dcgan_weights(module: nn.Module) -> None:
    # DCGAN's initialisation: N(0, 0.02) weights; batch-norm scale N(1, 0.02), shift 0.
    if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
        nn.init.normal_(module.weight, 0.0, 0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d)):
        nn.init.normal_(module.weight, 1.0, 0.02)
        nn.init.zeros_(module.bias)


class Generator(nn.Module):
    """(z, label) -> image in [-1, 1].

    For 32 px and width w: [z, embed(label)] -> linear -> (B, 4w, 4, 4) -> (B, 2w, 8, 8)
    -> (B, w, 16, 16) -> (B, C, 32, 32). For 28 px the map starts at (B, 2w, 7, 7).
    """

    def __init__(self, shape: ModelShape):
        super().__init__()
        self.shape = shape
        n_up = shape.upsamplings
        start_channels = shape.width * 2 ** (n_up - 1)
        self.label_embedding = nn.Embedding(shape.num_classes, shape.z_dim)
        self.project = nn.Sequential(
            nn.Linear(2 * shape.z_dim, start_channels * shape.base_size**2, bias=False),
            nn.BatchNorm1d(start_channels * shape.base_size**2),
            nn.ReLU(inplace=True),
        )
        self._start = (start_channels, shape.base_size, shape.base_size)
        layers: list[nn.Module] = []
        channels = start_channels
        for _ in range(n_up - 1):
            layers += [
                nn.ConvTranspose2d(channels, channels // 2, 4, stride=2, padding=1, bias=False),
                nn.BatchNorm2d(channels // 2),
                nn.ReLU(inplace=True),
            ]
            channels //= 2
        layers += [nn.ConvTranspose2d(channels, shape.channels, 4, stride=2, padding=1), nn.Tanh()]
        self.upsample = nn.Sequential(*layers)
        # The label enters as a learned embedding concatenated to z (kept at PyTorch's N(0, 1)
        # initialisation, as strong as the noise). Multiplying z by the embedding instead gave
        # samples the evaluator recognised far less often (0.13 vs 0.47 after 300 bf16 steps on digits).
        self.apply(_init_dcgan_weights)

    def forward(self, z: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        conditioned = torch.cat([z, self.label_embedding(labels)], dim=1)  # (B, 2 z_dim)
        x = self.project(conditioned).view(-1, *self._start)  # (B, start_channels, base, base)
        return self.upsample(x)  # (B, C, H, W)


class _SpectralNormalisation:
    """Divides a layer's weight by its largest singular value (Miyato et al. 2018), so D's real/fake
    score cannot sharpen faster than G can follow: on the six Quick, Draw! classes D otherwise told
    real from fake 98% of the time and G learned little (benchmarks/gan_trials.py; README).

    The singular value comes from one power iteration per training pass, in fp32 whatever autocast
    says: the policy keeps reductions like this one out of bf16/fp16, as it does batch-norm's. The
    vectors `spectral_u`, `spectral_v` are buffers, so checkpoints restore them and DDP broadcasts them.
    Written here rather than with torch.nn.utils.parametrizations.spectral_norm, which runs its power
    iteration under the caller's autocast and renames the weight (`parametrizations.weight.original`).
    """

    weight: nn.Parameter
    training: bool

    def _start_power_iteration(self, iterations: int = 15) -> None:
        matrix = self.weight.detach().reshape(self.weight.shape[0], -1).float()  # (out, in * k * k)
        self.register_buffer("spectral_u", F.normalize(torch.randn(matrix.shape[0], device=matrix.device), dim=0))
        self.register_buffer("spectral_v", torch.zeros(matrix.shape[1], device=matrix.device))
        for _ in range(iterations):
            self._power_iteration(matrix)

    @torch.no_grad()
    def _power_iteration(self, matrix: torch.Tensor) -> None:
        self.spectral_v.copy_(F.normalize(matrix.t() @ self.spectral_u, dim=0, eps=1e-12))
        self.spectral_u.copy_(F.normalize(matrix @ self.spectral_v, dim=0, eps=1e-12))

    def normalised_weight(self) -> torch.Tensor:
        with torch.autocast(self.weight.device.type, enabled=False):
            matrix = self.weight.reshape(self.weight.shape[0], -1).float()
            if self.training:
                self._power_iteration(matrix.detach())
            # Copies: the buffers change in place on D's next pass, before this one's backward.
            sigma = torch.dot(self.spectral_u.clone(), matrix @ self.spectral_v.clone())
            return self.weight / sigma


class SpectralNormConv2d(_SpectralNormalisation, nn.Conv2d):
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(images, self.normalised_weight(), self.bias)


class SpectralNormLinear(_SpectralNormalisation, nn.Linear):
    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return F.linear(features, self.normalised_weight(), self.bias)


class Discriminator(nn.Module):
    """image -> (real/fake logit (B,), class logits (B, K)), from one shared feature trunk.

    `spectral_norm`: the convolutions and the real/fake head are spectrally normalised (the class
    head is not: it is a plain classifier of real images). Off, this is the published AC-GAN's D.
    """

    def __init__(self, shape: ModelShape, *, spectral_norm: bool = False):
        super().__init__()
        self.shape = shape
        conv, linear = (SpectralNormConv2d, SpectralNormLinear) if spectral_norm else (nn.Conv2d, nn.Linear)
        layers: list[nn.Module] = []
        in_channels, out_channels = shape.channels, shape.width
        for index in range(shape.upsamplings):
            layers.append(conv(in_channels, out_channels, 4, stride=2, padding=1, bias=index == 0))
            if index > 0:  # DCGAN: no batch-norm on the layer that sees the images
                layers.append(nn.BatchNorm2d(out_channels))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            in_channels, out_channels = out_channels, out_channels * 2
        layers.append(nn.Flatten())
        self.features = nn.Sequential(*layers)
        feature_size = shape.image_size // 2**shape.upsamplings
        feature_dim = in_channels * feature_size**2  # (B, 4w * 4 * 4) for 32 px
        self.real_fake_head = linear(feature_dim, 1)
        self.class_head = nn.Linear(feature_dim, shape.num_classes)  # the auxiliary classifier
        self.apply(_init_dcgan_weights)
        for module in self.modules():
            if isinstance(module, _SpectralNormalisation):
                module._start_power_iteration()

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.features(images)
        return self.real_fake_head(features).squeeze(1), self.class_head(features)


def misaligned_dimensions(shape: ModelShape) -> list[str]:
    """Dimensions that matrix engines (tensor cores, AMX) want as multiples of 8 but are not.

    The image channels (1 or 3) and the heads' outputs (1, K) are fixed by the task and tiny,
    so only the choosable sizes are checked: the noise size and every hidden width.
    """
    problems = []
    if shape.z_dim % 8:
        problems.append(f"z_dim={shape.z_dim} (try {_round_up_to_8(shape.z_dim)})")
    if shape.width % 8:
        problems.append(f"width={shape.width} (try {_round_up_to_8(shape.width)})")
    return problems


def _round_up_to_8(value: int) -> int:
    return (value + 7) // 8 * 8
