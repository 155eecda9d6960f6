"""Building blocks the built-in GANs share: initialisations, spectral normalisation, fp32 islands."""

from __future__ import annotations

import contextlib
import functools

import torch
import torch.nn.functional as F
from torch import nn

from ampgan.errors import AmpganError


def autocast_off(device_type: str):
    """Autocast switched off on this device type (nothing to switch off on the meta device, where
    ampgan traces shapes)."""
    if torch.amp.is_autocast_available(device_type):
        return torch.autocast(device_type, enabled=False)
    return contextlib.nullcontext()


def init_dcgan_weights(module: nn.Module) -> None:
    """DCGAN's initialisation: N(0, 0.02) weights; batch-norm scale N(1, 0.02), shift 0."""
    if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
        nn.init.normal_(module.weight, 0.0, 0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d)):
        nn.init.normal_(module.weight, 1.0, 0.02)
        nn.init.zeros_(module.bias)


class _SpectralNormalisation:
    """Divides a layer's weight by its largest singular value (Miyato et al. 2018), so D's real/fake
    score cannot sharpen faster than G can follow.

    The singular value comes from one power iteration per training pass, in fp32 whatever autocast
    says: the policy keeps reductions like this one out of bf16/fp16, as it does batch-norm's. The
    vectors `spectral_u`, `spectral_v` are buffers, so checkpoints restore them and DDP broadcasts them.
    Written here rather than with torch.nn.utils.parametrizations.spectral_norm, which runs its power
    iteration under the caller's autocast and renames the weight (`parametrizations.weight.original`).
    Call `start_power_iteration` once the layer's weight is initialised.
    """

    weight: nn.Parameter
    training: bool

    def start_power_iteration(self, iterations: int = 15) -> None:
        matrix = self.weight.detach().reshape(self.weight.shape[0], -1).float()  # (out, in * k * k)
        self.register_buffer("spectral_u", F.normalize(torch.randn(matrix.shape[0], device=matrix.device), dim=0))
        self.register_buffer("spectral_v", torch.zeros(matrix.shape[1], device=matrix.device))
        if matrix.is_meta:  # shapes only (ampgan traces on the meta device): no values to iterate on
            return
        for _ in range(iterations):
            self._power_iteration(matrix)

    @torch.no_grad()
    def _power_iteration(self, matrix: torch.Tensor) -> None:
        self.spectral_v.copy_(F.normalize(matrix.t() @ self.spectral_u, dim=0, eps=1e-12))
        self.spectral_u.copy_(F.normalize(matrix @ self.spectral_v, dim=0, eps=1e-12))

    def normalised_weight(self) -> torch.Tensor:
        with autocast_off(self.weight.device.type):
            matrix = self.weight.reshape(self.weight.shape[0], -1).float()
            if self.training:
                self._power_iteration(matrix.detach())
            # sigma = u . W v, from copies: the buffers change in place on D's next pass, before this one's backward.
            return self.weight / torch.dot(self.spectral_u.clone(), matrix @ self.spectral_v.clone())


class SpectralNormConv2d(_SpectralNormalisation, nn.Conv2d):
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(images, self.normalised_weight(), self.bias)


class SpectralNormLinear(_SpectralNormalisation, nn.Linear):
    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return F.linear(features, self.normalised_weight(), self.bias)


def dcgan_upsampling(channels: int, image_channels: int, doublings: int) -> nn.Sequential:
    """DCGAN's generator body: (B, c, s, s) -> (B, c/2, 2s, 2s) -> ... -> (B, image_channels, s * 2**doublings, ...)
    in [-1, 1]. Each doubling but the last halves the channels (transposed conv, batch norm, ReLU); the last
    makes the image (transposed conv with a bias, tanh)."""
    layers: list[nn.Module] = []
    for _ in range(doublings - 1):
        layers += [
            nn.ConvTranspose2d(channels, channels // 2, 4, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(channels // 2),
            nn.ReLU(inplace=True),
        ]
        channels //= 2
    layers += [nn.ConvTranspose2d(channels, image_channels, 4, stride=2, padding=1), nn.Tanh()]
    return nn.Sequential(*layers)


def dcgan_downsampling(
    data, width: int, halvings: int, conv: type[nn.Conv2d] = nn.Conv2d, batch_norm: bool = True
) -> tuple[list[nn.Module], int]:
    """DCGAN's discriminator body: (B, C, s, s) -> (B, w, s/2, s/2) -> (B, 2w, s/4, s/4) -> ... flattened, and
    the number of features it gives per image. Each halving is a strided 4x4 convolution (`conv`), batch norm
    (not on the first: it sees the images; none without `batch_norm`) and leaky ReLU 0.2. `data`: gan.DataSpec."""
    layers: list[nn.Module] = []
    in_channels, out_channels = data.channels, width
    for index in range(halvings):
        layers.append(conv(in_channels, out_channels, 4, stride=2, padding=1, bias=index == 0 or not batch_norm))
        if index > 0 and batch_norm:
            layers.append(nn.BatchNorm2d(out_channels))
        layers.append(nn.LeakyReLU(0.2, inplace=True))
        in_channels, out_channels = out_channels, out_channels * 2
    return [*layers, nn.Flatten()], in_channels * (data.image_size // 2**halvings) ** 2


def start_spectral_normalisation(network: nn.Module) -> None:
    """Start the power iteration of every spectrally normalised layer (after the weights' initialisation)."""
    for module in network.modules():
        if isinstance(module, _SpectralNormalisation):
            module.start_power_iteration()


def keep_in_fp32(module: nn.Module) -> None:
    """Run `module` in fp32 whatever the precision: autocast off inside it, floating inputs cast to fp32.
    (Its parameters are fp32 already: ampgan never casts master weights.)"""
    if getattr(module, "_ampgan_fp32", False):
        return
    original = module.forward

    @functools.wraps(original)
    def forward(*args, **kwargs):
        device_type = next((t.device.type for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)), "cpu")
        with autocast_off(device_type):
            args = tuple(a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)
            kwargs = {
                k: v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in kwargs.items()
            }
            return original(*args, **kwargs)

    module.forward = forward
    module._ampgan_fp32 = True


def in_fp32_modules(*networks: nn.Module) -> set[int]:
    """The ids of the modules that compute in fp32 whatever the precision: GAN.fp32_modules (keep_in_fp32) and the
    layers inside them."""
    kept = (top for network in networks for top in network.modules() if getattr(top, "_ampgan_fp32", False))
    return {id(module) for top in kept for module in top.modules()}


def _one_score_per_image(logits, loss: str) -> torch.Tensor:
    # One score per image, or a PatchGAN's one per patch ((B, 1, H, W): pix2pix, CycleGAN and pix2pixHD average
    # the loss over the patches); a (B, K) output is a class head or features, not a real/fake score.
    if not isinstance(logits, torch.Tensor) or not (logits.dim() == 1 or (logits.dim() >= 2 and logits.shape[1] == 1)):
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise AmpganError(
            f"{loss} takes D's real/fake logits, one per image ((B,) or (B, 1)) or per patch ((B, 1, H, W)), "
            f"got {got}: end D in a layer to one output channel (a tuple from D? pass its real/fake part)"
        )
    return logits.float()


def hinge_loss(scores: torch.Tensor, target: str) -> torch.Tensor:
    """The hinge loss of SNGAN, BigGAN and SAGAN, in fp32: D's loss on real scores (`target="real"`:
    mean relu(1 - D(x))) and on fakes (`"fake"`: mean relu(1 + D(G(z)))); G's loss (`"generator"`:
    -mean D(G(z))). `scores`: one per image, (B,) or (B, 1), or per patch, (B, 1, H, W)."""
    scores = _one_score_per_image(scores, "hinge_loss")
    if target not in tuple(_HINGE):  # compared, not hashed: any value gets the one-line error
        raise AmpganError(f"hinge_loss target must be 'real', 'fake' or 'generator', got {target!r}")
    return _HINGE[target](scores)


_HINGE = {
    "real": lambda scores: F.relu(1.0 - scores).mean(),
    "fake": lambda scores: F.relu(1.0 + scores).mean(),
    "generator": lambda scores: -scores.mean(),
}


def real_fake_loss(logits: torch.Tensor, target: float) -> torch.Tensor:
    """BCE-with-logits against a constant target (1 real, 0 fake; 0.9 with one-sided smoothing),
    in fp32 whatever the compute dtype (the sigmoid's log-sum-exp). `logits`: one per image, (B,) or (B, 1),
    or per patch, (B, 1, H, W) (averaged)."""
    logits = _one_score_per_image(logits, "real_fake_loss")
    return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, target))


def d_real_term(context):
    """D's loss on real images (BCE on logits, target 1) for a D that returns one logit per image."""
    logits = context.D(context.real)
    return real_fake_loss(logits, 1.0), {"d_real_acc": (logits > 0).float().mean()}


def d_fake_term(context):
    """D's loss on the (detached) fakes, target 0."""
    logits = context.D(context.fake)
    return real_fake_loss(logits, 0.0), {"d_fake_acc": (logits < 0).float().mean()}


def non_saturating_g_loss(context):
    """G's non-saturating loss, -log D(G(z)): BCE on the fakes' logits with target 1."""
    return real_fake_loss(context.D(context.fake), 1.0)


# The non-saturating GAN's losses (Goodfellow et al. 2014) for a D with one logit per image: GAN(..., **NON_SATURATING).
NON_SATURATING = {"d_loss": (d_real_term, d_fake_term), "g_loss": non_saturating_g_loss}


def class_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy in fp32 (the softmax's log-sum-exp). `logits`: (B, K); `labels`: (B,) class indices."""
    if (
        not isinstance(logits, torch.Tensor)
        or logits.dim() != 2
        or labels is None
        or logits.shape[0] != labels.shape[0]
    ):
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise AmpganError(
            f"class_loss takes class logits (B, K) and labels (B,), got {got} and "
            f"{None if labels is None else tuple(labels.shape)}: give D's class head and the batch's labels"
        )
    return F.cross_entropy(logits.float(), labels)


def unused_but_reduced(*outputs: torch.Tensor) -> torch.Tensor:
    """An exact zero that touches `outputs`: DDP expects every parameter of a wrapped network to get a
    gradient in each backward pass, and a head a loss does not use gets one from this (zero, so the
    update is unchanged) without find_unused_parameters. An output that overflowed (an fp16 score past 65504) counts
    as 0: zero times inf is NaN, which would fail a step whose own loss is finite."""
    return sum(0.0 * torch.nan_to_num(output.float(), 0.0, 0.0, 0.0).sum() for output in outputs)
