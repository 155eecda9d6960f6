"""Issue 47's classes 10 and 11: what a new user's mistakes in their own GAN are told, and that the advice
is the fix (a loss taken out as a number is returned as the tensor; G's output dtype is named as G's; a D
loss that runs G again is found; every `ampgan.X` the docs and messages name exists)."""

from __future__ import annotations

import importlib
import re
import textwrap
from pathlib import Path

import pytest
from conftest import run_cli

import ampgan
from ampgan.config import config_from_options
from ampgan.data.synthetic import make_synthetic
from ampgan.doctor.preflight import preflight

ROOT = Path(__file__).resolve().parents[1]

MODELS = textwrap.dedent("""
    import torch
    from torch import nn
    import ampgan

    def nets(data, batch_norm=False, out_dtype=None):
        pixels = data.channels * data.image_size ** 2
        layers = [nn.Linear(16, 32), *([nn.BatchNorm1d(32)] if batch_norm else []), nn.ReLU(), nn.Linear(32, pixels),
                  nn.Tanh(), nn.Unflatten(1, (data.channels, data.image_size, data.image_size))]
        G = nn.Sequential(*layers)
        if out_dtype is not None:
            G.append(Cast(out_dtype))
        D = nn.Sequential(nn.Flatten(), nn.Linear(pixels, 1), nn.Flatten(0))
        return G, D

    class Cast(nn.Module):
        def __init__(self, dtype):
            super().__init__()
            self.dtype = dtype
        def forward(self, x):
            return x.to(self.dtype)

    def d_loss(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.real), 1.0) + ampgan.real_fake_loss(ctx.D(ctx.fake), 0.0)

    def g_loss(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.fake), 1.0)

    def gan(data, d=d_loss, **options):
        G, D = nets(data, **options)
        return ampgan.GAN(generator=G, discriminator=D, z_dim=16, d_loss=d, g_loss=g_loss)

    def item(data):
        return gan(data, d=lambda ctx: d_loss(ctx).item())

    def python_float(data):
        return gan(data, d=lambda ctx: float(d_loss(ctx)))

    def numpy_value(data):
        return gan(data, d=lambda ctx: d_loss(ctx).detach().numpy())

    def detached(data):
        return gan(data, d=lambda ctx: d_loss(ctx).detach())

    def g_float64(data):
        return gan(data, out_dtype=torch.float64)

    def g_float16(data):
        return gan(data, out_dtype=torch.float16)

    def batch_norm_clean(data):
        return gan(data, batch_norm=True)

    def d_runs_g(data):
        def d(ctx):
            fake = ctx.G(ctx.z)  # not detached, not ctx.fake: G's batch norm updates again
            return ampgan.real_fake_loss(ctx.D(ctx.real), 1.0) + ampgan.real_fake_loss(ctx.D(fake.detach()), 0.0)
        return gan(data, d=d, batch_norm=True)

    def d_runs_g_without_grad(data):
        def d(ctx):
            with torch.no_grad():  # no graph, but batch norm's running statistics still move
                fake = ctx.G(ctx.gan.draw_z(ctx.real.shape[0], ctx.rng))
            return ampgan.real_fake_loss(ctx.D(ctx.real), 1.0) + ampgan.real_fake_loss(ctx.D(fake), 0.0)
        return gan(data, d=[d], batch_norm=True)

    def d_sets_g_progress(data):  # a ProGAN's fade-in set in D's loss: G drew the step's fakes before it
        built = gan(data)
        built.generator.register_buffer("progress", torch.zeros(()))
        def d(ctx):
            built.generator.progress.fill_(ctx.step + 1)
            return d_loss(ctx)
        built.d_loss = d
        return built
""")


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    return path


def _findings(models, function):
    config = config_from_options(model=f"{models}:{function}", dataset="synthetic", image_size=8)
    return {(f.severity, f.check): f.text for f in preflight(config, make_synthetic(image_size=8, count=40))}


@pytest.mark.parametrize("function, kind", [("item", "float"), ("python_float", "float"), ("numpy_value", "ndarray")])
def test_a_loss_taken_out_as_a_number_is_told_to_return_the_tensor(models, function, kind):
    text = _findings(models, function)[("error", "step")]
    assert f"returned a {kind}" in text and "return the loss tensor itself" in text
    assert "reduce it" not in text


def test_a_detached_loss_is_told_it_reaches_no_parameter(models):
    text = _findings(models, "detached")[("error", "step")]
    assert "its loss reaches no trainable parameter of the discriminator" in text and "reduce it" not in text


def test_train_says_the_same_in_one_line(models, capsys, tmp_path):
    code, _, err = run_cli(
        capsys, "train", "--model", f"{models}:item", "--dataset", "synthetic", "--image-size", "8", "--steps", "1",
        "--batch-size", "8", "--quiet", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    errors = [line for line in err.splitlines() if line.startswith("error")]
    assert code == 2 and len(errors) == 1 and "return the loss tensor itself" in errors[0], err


@pytest.mark.parametrize("function, dtype", [("g_float64", "float64"), ("g_float16", "float16")])
def test_g_output_of_another_dtype_is_named_as_g_s(models, function, dtype):
    findings = _findings(models, function)
    text = findings[("error", "generator")]
    assert f"G returns {dtype} images, not float32" in text and "G's output dtype" in text
    assert not any("D's update" in t for t in findings.values())


def test_a_d_loss_that_runs_g_again_is_found_with_the_fix(models):
    for function in ("d_runs_g", "d_runs_g_without_grad"):
        text = _findings(models, function)[("warning", "g-state")]
        assert "num_batches_tracked" in text and "use ctx.fake" in text, function
    assert _findings(models, "batch_norm_clean") == {}


def test_a_d_loss_that_sets_g_s_buffer_itself_gets_the_fix_that_fits(models):
    """A ProGAN's fade-in alpha set in d_loss moved G's buffer without running G: the warning said it ran G and to
    use ctx.fake, which it did. It now says G drew the fakes before the loss set it, and where to set it."""
    text = _findings(models, "d_sets_g_progress")[("warning", "g-state")]
    assert "changes G's buffers (progress): the loss sets them itself" in text and "ctx.step + 1" in text
    assert "ctx.fake" not in text


def test_unused_but_reduced_is_public_as_the_messages_say():
    import torch

    assert ampgan.unused_but_reduced is importlib.import_module("ampgan.gan.layers").unused_but_reduced
    assert "unused_but_reduced" in ampgan.__all__
    out = torch.ones(3, requires_grad=True)
    ampgan.unused_but_reduced(out).backward()
    assert out.grad is not None


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    found = importlib.import_module(parts[0])
    for index, part in enumerate(parts[1:], start=1):
        try:
            found = getattr(found, part)
        except AttributeError:
            try:
                found = importlib.import_module(".".join(parts[: index + 1]))
            except ImportError:
                return False
    return True


def test_every_ampgan_name_in_the_docs_examples_and_messages_exists():
    files = [*ROOT.glob("docs/**/*.md"), ROOT / "README.md", *ROOT.glob("examples/*.py"), *ROOT.glob("src/**/*.py")]
    named = re.compile(r"\bampgan\.(?!py\b)[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")  # ampgan.py is a file name
    missing = sorted(
        f"{name} ({path.relative_to(ROOT)})"
        for path in files
        for name in set(named.findall(path.read_text(encoding="utf-8")))
        if not _resolves(name)
    )
    assert missing == []
    assert _resolves("ampgan.unused_but_reduced") and not _resolves("ampgan.no_such_helper")


# --- class 12: DDP's text about unused parameters, as one ampgan line ----------------------------------------


@pytest.fixture
def one_rank_group():
    """A real process group of one rank (gloo, in this process): DDP's reducer raises its unused-parameter
    error at world size 1 too, so the real message is met without torchrun."""
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("spare_in", ["discriminator", "generator"])
def test_an_unused_parameter_under_ddp_is_one_ampgan_line_naming_it(models, monkeypatch, one_rank_group, spare_in):
    import torch
    from torch import nn

    import ampgan.training.state as state_module
    from ampgan.errors import AmpganError
    from ampgan.training.distributed import World
    from ampgan.training.precision import PrecisionPolicy
    from ampgan.training.state import build_train_state, wrap_modules
    from ampgan.training.step import train_step

    config = config_from_options(model=f"{models}:gan", dataset="synthetic", image_size=8, batch_size=4)
    recipe = ampgan.gan.resolve_model(config.model.name, config.model.options)
    state = build_train_state(config, recipe, ampgan.DataSpec(image_size=8, channels=3, num_classes=2),
                              PrecisionPolicy("fp32", torch.device("cpu")))  # fmt: skip
    network = getattr(state.gan, spare_in)  # an nn.Sequential: a module added to it would be called
    for name in ("spare_weight", "spare_bias"):
        network.register_parameter(name, nn.Parameter(torch.zeros(3)))  # trainable, in no loss
    monkeypatch.setattr(state_module, "world", lambda: World(rank=0, size=2))  # wrap as under torchrun
    wrap_modules(state, compile=False)
    batch = (torch.rand(4, 3, 8, 8) * 2 - 1, torch.zeros(4, dtype=torch.long))
    with pytest.raises(AmpganError) as raised:
        for _ in range(3):
            train_step(state, lambda: batch)
    line = str(raised.value)
    assert "\n" not in line and "find_unused_parameters" not in line and "TORCH_DISTRIBUTED_DEBUG" not in line
    assert f"parameters spare_weight, spare_bias of the {spare_in} got no gradient" in line, line
    assert "ampgan.unused_but_reduced(output)" in line and line.endswith("names them in one process)")


def test_a_long_library_message_is_cut_between_words():
    from ampgan.errors import first_words

    text = "word " * 100 + "\nsecond line"
    cut = first_words(text, 42)
    assert cut.endswith(" ...") and len(cut) <= 46 and all(w in ("word", "...") for w in cut.split())
    assert first_words("short one\nsecond") == "short one"
    assert first_words("x" * 500, 10) == "x" * 10 + " ..."


LAZY_MODELS = textwrap.dedent("""
    import torch
    from torch import nn
    import ampgan

    def lazy(data, penalty, every=16):
        pixels = data.channels * data.image_size ** 2
        G = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, pixels), nn.Tanh(),
                          nn.Unflatten(1, (data.channels, data.image_size, data.image_size)))
        D = nn.Sequential(nn.Flatten(), nn.Linear(pixels, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Flatten(0))
        return ampgan.GAN(
            generator=G, discriminator=D, z_dim=16,
            d_loss=[lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.real), 1.0),
                    lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.fake), 0.0)],
            g_loss=lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.fake), 1.0),
            extra_updates=[ampgan.Update("reg", penalty, every=every)] if every else [],
        )

    def part_of_d(ctx):  # D runs whole (under DDP each parameter then needs a gradient), the loss uses its first layer
        ctx.D(ctx.real)
        return ctx.D[1](ctx.real.flatten(1)).float().square().mean()

    def probabilities(ctx):  # BCE on probabilities: refused by autocast on CUDA
        scores = torch.sigmoid(ctx.D(ctx.real).float())
        return nn.functional.binary_cross_entropy(scores, torch.ones_like(scores))

    def unused_every_16(data):
        return lazy(data, part_of_d)

    def bce_every_4(data):
        return lazy(data, probabilities, every=4)

    def no_lazy(data):
        return lazy(data, None, every=0)
""")


@pytest.mark.parametrize(
    "function, expected",
    [
        ("unused_every_16", "2 parameter(s) get no gradient in a backward pass of update 'reg' (D.3.bias, D.3.weight)"),
        ("bce_every_4", "computes binary_cross_entropy (BCE on probabilities), which autocast refuses on CUDA"),
    ],
)
def test_a_periodic_update_is_checked_as_the_first_step_is(function, expected, tmp_path, capsys, monkeypatch):
    """Preflight watched one step, in which no update due every 4 or 16 steps runs (a lazy R1, a path length): what
    the first step's checks find in a loss (a parameter DDP waits for in vain, BCE on probabilities) went unsaid for
    them. The watched step runs again as the cycle's last, where every periodic update runs; a GAN without one runs
    no more steps than before (preflight's steps counted)."""
    import ampgan.doctor.preflight as preflight_module

    steps = []
    real_step = preflight_module.train_step
    monkeypatch.setattr(preflight_module, "train_step", lambda state, batch: steps.append(1) or real_step(state, batch))
    path = tmp_path / "lazy.py"
    path.write_text(LAZY_MODELS)
    code, out, err = run_cli(
        capsys, "preflight", "--model", f"{path}:{function}", "--dataset", "synthetic", "--image-size", "8"
    )
    assert code == 0, err
    assert expected in out and "1 warning(s), nothing that stops training" in out, out
    assert len(steps) == 5  # the watched step twice (the second as the cycle's last), then fp32, bf16, fp16 once
    steps.clear()
    code, out, err = run_cli(
        capsys, "preflight", "--model", f"{path}:no_lazy", "--dataset", "synthetic", "--image-size", "8"
    )
    assert code == 0 and "nothing found" in out, out + err
    assert len(steps) == 4


def test_the_zero_that_touches_unused_outputs_stays_zero_when_an_fp16_score_overflowed():
    """0 x inf is NaN: a score past fp16's 65504 made the whole R1 loss NaN (its penalty finite), and eight such
    applications in a row stop a run whose updates were applied. Its gradient still reaches every output."""
    import torch

    import ampgan

    scores = torch.tensor([1.0, float("inf"), -float("inf"), float("nan")], dtype=torch.float16, requires_grad=True)
    head = torch.tensor([2.0], requires_grad=True)
    zero = ampgan.unused_but_reduced(scores, head)
    assert zero.item() == 0.0
    zero.backward()
    assert scores.grad is not None and head.grad is not None and torch.isfinite(head.grad).all()
