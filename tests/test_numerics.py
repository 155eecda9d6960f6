"""The claims, not only the plumbing: the seam did not change the AC-GAN's numbers, bf16 follows fp32,
and a compiled step computes what the eager one does (torchtitan pins its numerics the same way)."""

import json
from pathlib import Path

import pytest
import torch
from conftest import step_on, tiny_batch, tiny_state

from ampgan.training.state import wrap_modules
from ampgan.training.step import train_step

GOLDEN = json.loads((Path(__file__).parent / "assets" / "acgan_fp32_losses.json").read_text())
# Per built-in model: the data it is tested on (acgan-2019's 6272x1024 layers are its point; 28 px keeps
# them that size), and what that data's batches look like.
MODELS = {
    "acgan": dict(image_size=32, channels=3),
    "acgan-2019": dict(image_size=28, channels=1),
    "dcgan": dict(image_size=28, channels=1, sets=["model.width=8"]),
    "wgan-gp": dict(image_size=28, channels=1, sets=["model.width=8", "model.critic_steps=2"]),
    "r1": dict(image_size=28, channels=1, sets=["model.width=4", "model.r1_every=2"]),
}


def _batch_shape(shape: dict) -> dict:
    return {k: v for k, v in shape.items() if k != "sets"}


def losses(state, batch, steps: int) -> list[tuple[float, float]]:
    found = []
    for _ in range(steps):
        metrics = train_step(state, step_on(batch))
        found.append((metrics["loss_d"].item(), metrics["loss_g"].item()))
    return found


def test_the_acgan_step_reproduces_the_losses_of_the_code_before_the_seam():
    """Recorded by the pre-seam train_step (commit 56b6077). Across thread counts they move by 1e-7
    relative, across machines by float rounding: rtol 1e-4 is far below what any change to the
    losses, the update order or the draws of noise would move them."""
    state = tiny_state("fp32")
    got = [value for step in losses(state, tiny_batch(), 10) for value in step]
    assert got == pytest.approx([value for step in GOLDEN["fp32"] for value in step], rel=1e-4)


# (model, steps, tolerance). Measured when written (Zen 3): bf16 within 0.2% of fp32 over 8 steps of
# acgan; acgan-2019 within 3.6% over 3 steps (its G loss moves 2.2% at the first step: its fakes' logits
# pass two 1024-wide bf16 products), after which Adam's sign-sized steps let the two trajectories part
# (8% by step 6), as any two GAN runs part: a test of the step compares where they have not yet.
# On a Zen 4 (AVX512-BF16 dot products, 2026-12-03) acgan-2019's G loss at step 2 moves 6.0%, against 26-40%
# for another start: its tolerance is 10%, still below half of the other start's smallest gap.
# dcgan within 0.07% over 8 steps, r1 0.08% over 6 (its penalty at steps 2, 4, 6), wgan-gp 3% over 6 (G's
# loss, the critic's score of the fakes, is near 0: a relative gap of a small number), against 12%, 2.5% and
# 230% for another start.
BF16_TOLERANCES = [
    ("acgan", 8, 0.01),
    ("acgan-2019", 3, 0.1),
    ("dcgan", 8, 0.01),
    ("r1", 6, 0.005),
    ("wgan-gp", 6, 0.1),
]


@pytest.mark.parametrize("model, steps, tolerance", BF16_TOLERANCES)
def test_bf16_follows_fp32_from_the_same_start_and_another_start_does_not(model, steps, tolerance):
    shape = MODELS[model]
    batch = tiny_batch(**_batch_shape(shape))
    fp32 = losses(tiny_state("fp32", model=model, **shape), batch, steps)
    bf16 = losses(tiny_state("bf16", model=model, **shape), batch, steps)
    other_seed = losses(tiny_state("fp32", model=model, seed=1, **shape), batch, steps)

    def worst_relative_gap(a, b):
        return max(abs(x - y) / abs(x) for step_a, step_b in zip(a, b) for x, y in zip(step_a, step_b))

    # A different initial state differs by far more: the tolerance tells a faithful bf16 step from an
    # unrelated run.
    assert worst_relative_gap(fp32, bf16) < tolerance
    assert worst_relative_gap(fp32, other_seed) > 2 * tolerance


def _after_steps(model: str, precision: str, compile: bool, steps: int = 2) -> dict[str, torch.Tensor]:
    shape = MODELS[model]
    state = tiny_state(precision, model=model, **shape)
    wrap_modules(state, compile=compile, data_parallel=False)
    batch = tiny_batch(**_batch_shape(shape))
    for _ in range(steps):
        train_step(state, step_on(batch))
    return {
        **{f"G.{k}": v for k, v in state.generator.state_dict().items()},
        **{f"D.{k}": v for k, v in state.discriminator.state_dict().items()},
    }


@pytest.mark.parametrize(
    "model, precision",
    [("acgan", "fp32"), ("acgan", "bf16"), ("acgan-2019", "fp32"), ("acgan-2019", "bf16"), ("dcgan", "bf16")],
)
def test_a_compiled_step_gives_the_eager_steps_weights(model, precision, monkeypatch, tmp_path):
    """aot_eager: the graphs dynamo captures and AOT autograd splits, run without generated kernels. It
    catches what compiling changes in the computation (PyTorch issue 139476: a frame reused after the
    G update set D's requires_grad, which every step does) in seconds; the same is bit-exact here."""
    monkeypatch.setenv("AMPGAN_COMPILE_BACKEND", "aot_eager")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch._dynamo.reset()
    eager, compiled = _after_steps(model, precision, False), _after_steps(model, precision, True)
    assert eager.keys() == compiled.keys()
    assert all(torch.equal(eager[k], compiled[k]) for k in eager), [
        k for k in eager if not torch.equal(eager[k], compiled[k])
    ]


@pytest.mark.slow
def test_an_inductor_compiled_step_stays_within_float_rounding_of_the_eager_one(monkeypatch, tmp_path):
    """Generated kernels reorder float sums: not bit-exact, but within 1e-4 relative after 4 steps
    (7e-6 measured when written, fp32, dcgan at width 8). The DCGAN has the AC-GAN's kinds of layers
    (transposed and strided convolutions, batch norm, leaky ReLU) in fewer kernels: inductor's C++ build of
    them is most of this test's time (30 s against 64 s for the AC-GAN on the 2-core Zen 3). The aot_eager
    test above holds the AC-GANs' and the DCGAN's compiled graphs to the eager step bit for bit."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch._dynamo.reset()
    eager, compiled = _after_steps("dcgan", "fp32", False, 4), _after_steps("dcgan", "fp32", True, 4)
    for key, value in eager.items():
        if value.is_floating_point():
            torch.testing.assert_close(compiled[key], value, rtol=1e-4, atol=1e-6)
