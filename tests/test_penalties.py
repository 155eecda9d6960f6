"""Gradient penalties under loss scaling: WGAN-GP's and R1's penalty computed under fp16 with the
dynamic loss scale ampgan starts from (65536) equal the fp32 penalty, and the common bug, a penalty
taken from the scaled score and never unscaled, is caught by the same comparison."""

import pytest
import torch

from ampgan.gan import DataSpec, LossContext, resolve_model
from ampgan.gan.models.r1 import r1_penalty
from ampgan.gan.models.wgan_gp import gradient_penalty
from ampgan.training.precision import LossScaler, build_policy

CPU = torch.device("cpu")
DATA = DataSpec(image_size=28, channels=1, num_classes=10)


def _context(gan, policy, real, fake):
    scaler = LossScaler(policy)
    return LossContext(
        G=gan.generator,
        D=gan.discriminator,
        real=real,
        labels=None,
        z=None,
        fake_labels=None,
        fake=fake,
        step=0,
        rng=torch.Generator().manual_seed(3),
        gan=gan,
        scaler=scaler,
        device=CPU,
    )


def _penalty(model: str, precision: str, penalty_of) -> float:
    torch.manual_seed(0)
    gan = resolve_model(model, {"width": 8}).build(DATA)
    real = torch.rand(16, 1, 28, 28, generator=torch.Generator().manual_seed(1)) * 2 - 1
    with torch.no_grad():
        fake = gan.generate(gan.generator, gan.draw_z(16, torch.Generator().manual_seed(2)), None)
    policy = build_policy(precision, CPU)
    context = _context(gan, policy, real, fake)
    with policy.autocast():
        return penalty_of(context, real, fake).item()


def _wgan(context, real, fake):
    return gradient_penalty(context, real, fake)


def _r1(context, real, fake):
    return r1_penalty(context)


def _scaled_but_not_unscaled(context, real, fake):
    """The bug: the input gradients of the scaled score, squared with the scale left in (PyTorch's AMP
    recipe without its unscaling step): the penalty comes out scale^2 times too big."""
    x = real.detach().float().requires_grad_(True)
    (gradients,) = torch.autograd.grad(context.D(x).float().mean() * context.scale, x, create_graph=True)
    gradients = gradients * x.shape[0]  # d mean / dx_i is d D(x_i) / dx_i over B
    return gradients.flatten(1).pow(2).sum(1).mean()


def _r1_done_right_by_hand(context, real, fake):
    x = real.detach().float().requires_grad_(True)
    gradients = context.input_gradients(context.D(x), x)
    return gradients.flatten(1).pow(2).sum(1).mean()


def agrees(mixed: float, fp32: float, rtol: float = 0.05) -> bool:
    """fp16 computes D in 11-bit mantissas: a few percent apart at most; a bug is orders of magnitude off."""
    return abs(mixed - fp32) <= rtol * abs(fp32)


@pytest.mark.parametrize(("model", "penalty"), [("wgan-gp", _wgan), ("r1", _r1)])
def test_penalty_under_fp16_loss_scaling_equals_the_fp32_penalty(model, penalty):
    fp32 = _penalty(model, "fp32", penalty)
    fp16 = _penalty(model, "fp16", penalty)
    assert fp32 > 0
    assert agrees(fp16, fp32), (fp16, fp32)
    assert agrees(_penalty(model, "bf16", penalty), fp32, rtol=0.1)


def test_a_penalty_left_scaled_is_caught():
    fp32 = _penalty("r1", "fp32", _r1_done_right_by_hand)
    assert agrees(_penalty("r1", "fp16", _r1_done_right_by_hand), fp32)
    buggy = _penalty("r1", "fp16", _scaled_but_not_unscaled)
    assert _penalty("r1", "fp32", _scaled_but_not_unscaled) == pytest.approx(fp32, rel=1e-6)  # fp32: scale 1, no bug
    assert not agrees(buggy, fp32)
    assert buggy / fp32 == pytest.approx(2.0**32, rel=0.05)  # the scale (65536), squared


PENALTY_MISTAKES = '''
import torch
from torch import nn
import ampgan


class Mapped(nn.Module):
    """A StyleGAN-like G in miniature: z -> w (mapping) -> image (synthesis)."""

    def __init__(self, data):
        super().__init__()
        self.shape = (data.channels, data.image_size, data.image_size)
        self.mapping = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2))
        self.synthesis = nn.Sequential(nn.Linear(32, data.channels * data.image_size ** 2), nn.Tanh())

    def forward(self, z):
        return self.image(self.mapping(z))

    def image(self, w):
        return self.synthesis(w).unflatten(1, self.shape)


def gan(data, *, mistake="clean"):
    G = Mapped(data)
    D = nn.Sequential(nn.Flatten(), nn.Linear(data.channels * data.image_size ** 2, 1), nn.Flatten(0))

    def d_loss(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.real), 1.0) + ampgan.real_fake_loss(ctx.D(ctx.fake), 0.0)

    def r1(ctx):
        real = ctx.real.detach().float().requires_grad_(True)
        if mistake == "plain_grad":
            (grad,) = torch.autograd.grad(ctx.D(real).sum(), real, create_graph=True)
        elif mistake == "scaled_score":  # PyTorch's AMP recipe without its unscaling step
            (grad,) = torch.autograd.grad(ctx.D(real).float().sum() * ctx.scale, real, create_graph=True)
        else:
            grad = ctx.input_gradients(ctx.D(real), real)
        return 5.0 * grad.flatten(1).pow(2).sum(1).mean()

    def path_length(ctx):
        z, _ = ctx.draw()
        w = G.mapping(z)
        img = G.image(w)
        y = torch.randn_like(img) * 30  # a large-magnitude projection: pre-summed, it overflows fp16
        outputs = (img * y).sum() if mistake == "summed" else img * y
        grad = ctx.input_gradients(outputs, w)
        return (grad.pow(2).sum(1) - 1).pow(2).mean() * 1e-6

    return ampgan.GAN(generator=G, discriminator=D, z_dim=16, d_loss=d_loss,
                      g_loss=lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.fake), 1.0),
                      extra_updates=[ampgan.Update("r1", r1, every=4),
                                     ampgan.Update("pl", path_length, networks=("generator",), every=2)])
'''


@pytest.mark.parametrize(
    ("mistake", "check", "fix"),
    [
        ("clean", None, None),
        ("summed", "scaling", "pass the unreduced tensor"),
        ("scaled_score", "scaling", "multiplies by ctx.scale itself and never divides it out"),
        ("plain_grad", "penalty", "take them with ctx.input_gradients(outputs, inputs)"),
    ],
)
def test_preflight_stops_each_penalty_mistake_with_its_fix(mistake, check, fix, tmp_path):
    from ampgan.config import config_from_options
    from ampgan.data.synthetic import make_synthetic
    from ampgan.doctor.preflight import preflight

    path = tmp_path / "penalties.py"
    path.write_text(PENALTY_MISTAKES)
    config = config_from_options(
        model=f"{path}:gan", dataset="synthetic", image_size=8, sets=[f"model.mistake={mistake}"]
    )
    findings = preflight(config, make_synthetic(image_size=8, count=32))
    errors = {f.check: f.text for f in findings if f.severity == "error"}
    if check is None:
        assert errors == {}, findings
    else:
        assert list(errors) == [check] and fix in errors[check], findings
