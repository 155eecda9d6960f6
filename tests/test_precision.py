import math

import pytest
import torch
from conftest import CPU, step_on, tiny_batch, tiny_state

from ampgan.errors import AmpganError
from ampgan.precisions import FP16, FP32
from ampgan.training.precision import build_policy
from ampgan.training.step import train_step


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_every_precision_trains_a_few_steps_with_finite_losses(precision):
    state = tiny_state(precision)
    real, labels = tiny_batch()
    # Six steps: dynamic fp16 scaling starts at 2**16 and backs off through a few skipped steps.
    for _ in range(6):
        metrics = train_step(state, step_on((real, labels)))
    assert state.step == 6
    assert math.isfinite(metrics["loss_d"].item()) and math.isfinite(metrics["loss_g"].item())
    assert all(p.dtype == torch.float32 for p in state.generator.parameters())
    # Optimizer state (Adam moments) stays FP32 too: the master copy is never reduced.
    moments = [s["exp_avg"] for s in state.optimizer_g.state.values()]
    assert moments and all(m.dtype == torch.float32 for m in moments)


def _poison_next_discriminator_gradient(state, value=float("inf")):
    parameter = state.discriminator.real_fake_head.weight
    handle = parameter.register_hook(lambda grad: torch.full_like(grad, value))
    return parameter, handle


def test_dynamic_loss_scaling_skips_an_overflowing_step_lowers_the_scale_and_counts_it():
    state = tiny_state("fp16")
    real, labels = tiny_batch()
    for _ in range(5):  # let the scale back off from 2**16 until steps are clean
        train_step(state, step_on((real, labels)))
    assert train_step(state, step_on((real, labels)))["skipped_d"].item() == 0.0
    scale_before = state.scaler_d.scale()
    parameter, handle = _poison_next_discriminator_gradient(state)
    weights_before = parameter.detach().clone()
    metrics = train_step(state, step_on((real, labels)))
    handle.remove()
    assert metrics["skipped_d"].item() == 1.0
    assert metrics["skipped_g"].item() == 0.0  # G's own scaler is untouched by D's overflow
    assert state.scaler_d.scale() == scale_before / 2
    assert torch.equal(parameter.detach(), weights_before)  # the step really was skipped
    assert train_step(state, step_on((real, labels)))["skipped_d"].item() == 0.0


def test_static_loss_scale_is_honoured_and_still_skips_overflow():
    state = tiny_state("fp16", loss_scale=128.0)
    real, labels = tiny_batch()
    train_step(state, step_on((real, labels)))
    assert state.scaler_d.scale() == 128.0 and state.scaler_g.scale() == 128.0
    _, handle = _poison_next_discriminator_gradient(state, float("nan"))
    metrics = train_step(state, step_on((real, labels)))
    handle.remove()
    assert metrics["skipped_d"].item() == 1.0
    assert state.scaler_d.scale() == 128.0  # a static scale never moves


def test_bf16_and_fp32_do_not_scale():
    for precision in ("fp32", "bf16"):
        state = tiny_state(precision)
        assert not state.scaler_d.enabled and state.scaler_d.scale() == 1.0


def test_losses_are_computed_in_fp32_under_autocast(monkeypatch):
    import torch.nn.functional as F

    seen = []
    original = F.cross_entropy
    monkeypatch.setattr(
        F, "cross_entropy", lambda logits, *a, **k: seen.append(logits.dtype) or original(logits, *a, **k)
    )
    state = tiny_state("bf16")
    train_step(state, step_on(tiny_batch()))
    assert seen and set(seen) == {torch.float32}


def test_tf32_on_cpu_is_refused_with_a_clear_message():
    with pytest.raises(AmpganError, match="tf32 is a CUDA tensor-core mode"):
        build_policy("tf32", CPU)


TTUR_GAN = """
import ampgan
from torch import nn


def build(data, *, halving: int = 2):
    pixels = data.channels * data.image_size**2
    shape = (data.channels, data.image_size, data.image_size)
    G = nn.Sequential(nn.Linear(8, pixels), nn.Tanh(), nn.Unflatten(1, shape))
    D = nn.Sequential(nn.Flatten(), nn.Linear(pixels, 1))
    return ampgan.GAN(
        generator=G, discriminator=D, z_dim=8, d_steps=2,
        d_loss=lambda ctx: ctx.D(ctx.fake).float().mean() - ctx.D(ctx.real).float().mean(),
        g_loss=lambda ctx: -ctx.D(ctx.fake).float().mean(),
        optimizer_g=ampgan.Adam(1e-4, (0.0, 0.9), lr_schedule=lambda step: 0.5 ** (step // halving)),
        optimizer_d=ampgan.Adam(4e-4, (0.0, 0.9), lr_schedule=lambda step: 0.5 ** (step // halving)),
    )
"""


def test_a_learning_rate_schedule_follows_the_step_count_in_every_precision_skipped_updates_too(tmp_path):
    """TTUR (D at 4x G's rate) with a step decay: each network's rate at step N is its own x schedule(N) in fp32
    and under fp16 scaling alike, an update skipped for overflow included (a scheduler stepped per applied update
    would fall behind fp32's), and a run resumed from a checkpoint continues it."""
    from conftest import step_on, tiny_batch

    (tmp_path / "ttur.py").write_text(TTUR_GAN)
    model = f"{tmp_path / 'ttur.py'}:build"
    real, labels = tiny_batch()
    rates = {}
    for precision in (FP32, FP16):
        state, seen = tiny_state(precision, model=model), []
        for step in range(5):
            handle = None
            if precision == FP16 and step == 2:  # an overflow in D's gradient: D's update skipped
                handle = state.discriminator[1].weight.register_hook(lambda grad: torch.full_like(grad, float("inf")))
            metrics = train_step(state, step_on((real, labels)))
            if handle is not None:
                handle.remove()
                assert metrics["skipped_d"].item() == 2.0  # both of the step's D updates
            seen.append((state.optimizer_g.param_groups[0]["lr"], state.optimizer_d.param_groups[0]["lr"]))
        rates[precision] = seen
        resumed = tiny_state(precision, model=model)
        resumed.load_state_dict(state.state_dict())
        train_step(resumed, step_on((real, labels)))
        assert resumed.optimizer_d.param_groups[0]["lr"] == pytest.approx(4e-4 * 0.5**2)  # step 5: 5 // 2 halvings
    expected = [rate * 0.5 ** (step // 2) for step in range(5) for rate in (1e-4, 4e-4)]
    assert [r for pair in rates[FP32] for r in pair] == pytest.approx(expected)
    assert [r for pair in rates[FP16] for r in pair] == pytest.approx(expected)
