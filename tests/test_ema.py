"""The EMA of G a model declares (GAN(ema=ampgan.EMA(...))): the hand-computed average, fp32 in every
precision, never in an optimizer, resumed bit for bit, and the generator that samples, exports and
evaluations use."""

import math

import pytest
import torch
from conftest import run_cli
from safetensors import safe_open
from safetensors.torch import load_file

import ampgan
from ampgan.config import config_from_options
from ampgan.data.batches import BatchStream
from ampgan.data.synthetic import make_synthetic
from ampgan.errors import AmpganError
from ampgan.files.manifest import record
from ampgan.gan.ema import EMA, check_ema
from ampgan.quality.evaluator import generate_evenly
from ampgan.training.precision import build_policy
from ampgan.training.prepared import prepare_run
from ampgan.training.state import build_train_state
from ampgan.training.step import train_step
from ampgan.training.trained import load_trained_run

CPU = torch.device("cpu")

# A tiny GAN with batch norm in G (a buffer the average copies) and the EMA its `ema_*` options declare.
MODEL = """
import ampgan
from torch import nn


def averaged(data, *, decay: float = 0.9, start: int = 0, every: int = 1, rampup: float = 0.0):
    pixels = data.channels * data.image_size ** 2
    G = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, pixels), nn.Tanh(),
                      nn.Unflatten(1, (data.channels, data.image_size, data.image_size)))
    D = nn.Sequential(nn.Flatten(), nn.Linear(pixels, 1))
    return ampgan.GAN(
        generator=G, discriminator=D, z_dim=8,
        d_loss=lambda c: ampgan.real_fake_loss(c.D(c.real), 1.0) + ampgan.real_fake_loss(c.D(c.fake), 0.0),
        g_loss=lambda c: ampgan.real_fake_loss(c.D(c.fake), 1.0),
        ema=ampgan.EMA(decay=decay, start=start, every=every, rampup=rampup or None),
    )
"""
TINY = ["--dataset", "synthetic", "--image-size", "8", "--batch-size", "8", "--device", "cpu", "--quiet"]


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "averaged_gan.py"
    path.write_text(MODEL)
    return path


def _state(model_file, precision="fp32", **options):
    sets = [f"model.{name}={value}" for name, value in options.items()]
    config = config_from_options(
        model=f"{model_file}:averaged", dataset="synthetic", image_size=8, precision=precision, batch_size=8, sets=sets
    )
    prepared = prepare_run(config, make_synthetic(image_size=8, count=32))
    state = build_train_state(prepared.config, prepared.model, prepared.data, build_policy(precision, CPU))
    return state, BatchStream(prepared.dataset, 8, CPU, 0, image_range=state.gan.image_range)


@pytest.mark.parametrize(
    ("options", "steps"), [({"decay": 0.9}, 5), ({"decay": 0.8, "start": 2, "every": 2}, 6), ({"rampup": 0.5}, 4)]
)
def test_the_average_is_the_hand_computed_one(model_file, options, steps):
    state, stream = _state(model_file, **options)
    settings = EMA(decay=options.get("decay", 0.9), start=options.get("start", 0), every=options.get("every", 1))
    settings = EMA(settings.decay, settings.start, settings.every, options.get("rampup"))
    expected = {name: p.detach().clone() for name, p in state.generator.named_parameters()}
    for step in range(1, steps + 1):
        train_step(state, stream.next_batch)
        if step % settings.every:
            continue
        if step <= settings.start:
            decay = 0.0
        elif settings.rampup:  # StyleGAN2-ADA: the half-life is at most rampup x the steps so far
            decay = 0.5 ** (1 / min(math.log(0.5) / math.log(settings.decay), settings.rampup * step))
        else:
            decay = settings.decay
        for name, p in state.generator.named_parameters():
            expected[name] = decay * expected[name] + (1 - decay) * p.detach()
    average = dict(state.gan.averaged_generator.named_parameters())
    for name, value in expected.items():
        torch.testing.assert_close(average[name], value, rtol=1e-6, atol=1e-7)
    # buffers (batch norm's running statistics) are G's own, copied
    for (name, ours), (_, theirs) in zip(state.gan.averaged_generator.named_buffers(), state.generator.named_buffers()):
        assert torch.equal(ours, theirs), name
    assert not torch.equal(average["0.weight"], state.generator[0].weight)  # an average, not a copy


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_the_average_stays_fp32_and_out_of_every_optimizer(model_file, precision):
    state, stream = _state(model_file, precision)
    for _ in range(3):
        train_step(state, stream.next_batch)
    average = state.gan.averaged_generator
    assert all(p.dtype == torch.float32 and not p.requires_grad for p in average.parameters())
    held = {id(p) for opt in (state.optimizer_g, state.optimizer_d) for g in opt.param_groups for p in g["params"]}
    assert not held & {id(p) for p in average.parameters()}
    assert not any(p.grad is not None for p in average.parameters())


def test_the_average_resumes_bit_for_bit_and_is_what_samples_and_exports_use(model_file, tmp_path, capsys):
    straight, halves = tmp_path / "straight", tmp_path / "halves"
    args = [*TINY, "--model", f"{model_file}:averaged", "--checkpoint-every", "3"]
    assert run_cli(capsys, "train", *args, "--steps", "6", "--out", str(straight))[0] == 0
    assert run_cli(capsys, "train", *args, "--steps", "3", "--out", str(halves))[0] == 0
    code, _, err = run_cli(capsys, "train", "--resume", str(halves), "--steps", "6", "--quiet")
    assert code == 0, err
    a, b = (torch.load(r / "checkpoints" / "step-000006.pt", weights_only=True) for r in (straight, halves))
    assert a["ema_generator"].keys() == b["ema_generator"].keys()
    assert all(torch.equal(a["ema_generator"][k], b["ema_generator"][k]) for k in a["ema_generator"])
    assert not torch.equal(a["ema_generator"]["0.weight"], a["generator"]["0.weight"])
    # generator.safetensors is the average, and says so
    exported = load_file(straight / "generator.safetensors")
    assert torch.equal(exported["0.weight"], a["ema_generator"]["0.weight"])
    with safe_open(straight / "generator.safetensors", "pt") as handle:
        assert handle.metadata()["weights"] == "the EMA of G (decay 0.9)"
    # a finished run read back samples and evaluates from the average
    run = load_trained_run(straight)
    assert run.gan.sampling_generator is run.gan.averaged_generator
    assert torch.equal(run.gan.averaged_generator[0].weight, a["ema_generator"]["0.weight"])
    images, _ = generate_evenly(run.gan, 1, 4, seed=0, device="cpu")
    with torch.no_grad():
        run.gan.generator.eval()
        expected = run.gan.averaged_generator(run.gan.draw_z(4, torch.Generator().manual_seed(0)))
    torch.testing.assert_close(images, expected)
    code, out, err = run_cli(capsys, "generate", str(straight), "--n", "4", "--out", str(tmp_path / "s.png"))
    assert code == 0 and "(the EMA of G (decay 0.9))" in out, err


def test_a_checkpoint_without_the_average_is_one_line(model_file, tmp_path, capsys):
    run = tmp_path / "run"
    assert (
        run_cli(capsys, "train", *TINY, "--model", f"{model_file}:averaged", "--steps", "2", "--out", str(run))[0] == 0
    )
    checkpoint = run / "checkpoints" / "step-000002.pt"
    payload = torch.load(checkpoint, weights_only=True)
    del payload["ema_generator"]
    torch.save(payload, checkpoint)
    record(checkpoint)  # as if ampgan had saved it so: the check after its digest (files/manifest.py)
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "4", "--quiet")
    assert code == 2 and "holds no EMA of G, and this model declares one" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("decay=1.0", "GAN.ema decay must be a number between 0 and 1"),
        ("decay=-0.5", "GAN.ema decay must be a number between 0 and 1"),
        ("every=0", "GAN.ema every must be a whole number of at least 1"),
        ("rampup=-1", "GAN.ema rampup must be a positive number"),
    ],
)
def test_a_bad_ema_is_one_line(model_file, tmp_path, capsys, option, expected):
    code, _, err = run_cli(
        capsys, "preflight", "--model", f"{model_file}:averaged", "--dataset", "synthetic", "--set", f"model.{option}"
    )
    errors = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(errors) == 1 and expected in errors[0], err


@pytest.mark.parametrize(
    ("fields", "named", "value"),
    [
        ({"decay": True}, "decay must be a number between 0 and 1 (the share the average keeps", "True"),
        ({"decay": "0.99"}, "decay must be a number between 0 and 1 (the share the average keeps", "'0.99'"),
        ({"start": -1}, "start must be a whole number of at least 0", "-1"),
        ({"start": 1.5}, "start must be a whole number of at least 0", "1.5"),
        ({"every": True}, "every must be a whole number of at least 1", "True"),
        ({"rampup": 0}, "rampup must be a positive number (StyleGAN2-ADA uses 0.05) or None", "0"),
        ({"rampup": False}, "rampup must be a positive number (StyleGAN2-ADA uses 0.05) or None", "False"),
    ],
)
def test_each_field_of_an_ema_is_checked_with_one_line_naming_it_and_its_value(fields, named, value):
    with pytest.raises(AmpganError) as raised:
        check_ema(EMA(**fields), "my.py:gan")
    assert str(raised.value).startswith(f"my.py:gan: GAN.ema {named}") and str(raised.value).endswith(f"got {value}")


def test_an_ema_at_its_edges_passes_its_check():
    for ema in (EMA(), EMA(decay=0.5, start=0, every=1, rampup=None), EMA(decay=1 - 1e-9, start=10, rampup=0.05)):
        assert check_ema(ema, "my.py:gan") is ema
    assert check_ema(None, "my.py:gan") is None


def test_a_gan_without_ema_samples_from_g_itself():
    gan = ampgan.GAN(
        generator=torch.nn.Linear(2, 2), discriminator=torch.nn.Linear(2, 1), z_dim=2, d_loss=len, g_loss=len
    )
    assert gan.sampling_generator is gan.generator and gan.sampling_weights == "G's own weights"


def test_the_biggan_example_declares_an_average_that_the_study_records():
    # what compare logs ("quality: samples drawn from ...") and records in compare.json's sampled_from
    from pathlib import Path

    model = str(Path(__file__).resolve().parents[1] / "examples" / "biggan_lite.py:biggan_lite")
    config = config_from_options(model=model, dataset="synthetic", image_size=8, sets=["model.width=8"])
    prepared = prepare_run(config, make_synthetic(image_size=8, count=32))
    assert prepared.sampling_weights == "the EMA of G (decay 0.999, from step 100)"


def test_samples_are_drawn_without_a_gradient_graph(tmp_path, capsys):
    """generate draws --n samples at once, their memory checked as images alone: G ran with autograd on built its
    graph for all of them (an image-to-image helper took class_samples' no_grad for itself)."""
    from fixtures import TINY_RUN

    from ampgan.training.trained import class_samples

    run_dir = tmp_path / "run"
    assert run_cli(capsys, "train", *TINY_RUN, "--steps", "1", "--out", str(run_dir))[0] == 0
    run = load_trained_run(run_dir)
    seen = []
    run.gan.sampling_generator.register_forward_hook(lambda module, args, out: seen.append(out.requires_grad))
    images = class_samples(run, 0, 4, seed=0)
    assert images.shape[0] == 4 and seen == [False]
