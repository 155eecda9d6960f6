"""Any GAN through the seam: the examples a user starts from run through `compare`, the built-in families
train in fp32 and bf16, a bad model file is one line, preflight names what would go wrong, the Python API
returns the verdict as data, and a lazy penalty is timed over its whole cycle."""

import json
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import run_cli

import ampgan
from ampgan.config import config_from_options
from ampgan.doctor.preflight import preflight
from ampgan.errors import AmpganError
from ampgan.gan import GAN, DataSpec, Update, resolve_model
from ampgan.training.precision import PrecisionPolicy
from ampgan.training.state import build_train_state

ROOT = Path(__file__).resolve().parents[1]
QUICK = [
    "--precisions",
    "fp32,bf16",
    "--seeds",
    "1",
    "--steps",
    "2",
    "--set",
    "compare.eval_points=1",
    "--set",
    "compare.eval_samples=40",
    "--set",
    "compare.bench.batch_sizes=8",
    "--set",
    "compare.bench.min_seconds=0.2",
    "--set",
    "compare.bench.max_seconds=0.6",
    "--batch-size",
    "8",
    "--device",
    "cpu",
    "--quiet",
]


def test_the_pytorch_examples_dcgan_benches_and_trains_at_64_px(tmp_path, capsys):
    """(Through `bench` and `train`: a study at 64 px spends a minute and a half training its evaluator on
    2 cores; its own plumbing is the same as the examples' below.)"""
    model = [
        "--model",
        str(ROOT / "examples" / "pytorch_dcgan.py:dcgan"),
        "--image-size",
        "64",
        "--set",
        "model.ngf=8",
        "--set",
        "model.ndf=8",
    ]
    code, out, err = run_cli(
        capsys,
        "bench",
        *model,
        "--batch-sizes",
        "8",
        "--precisions",
        "fp32,bf16",
        "--steps",
        "3",
        "--set",
        "bench.min_seconds=0.2",
        "--out",
        str(tmp_path / "bench"),
    )
    assert code == 0, err[-2000:]
    results = json.loads((tmp_path / "bench" / "results.json").read_text())
    assert [(c["precision"], c["status"]) for c in results["configs"]] == [("fp32", "ok"), ("bf16", "ok")]
    code, out, err = run_cli(
        capsys,
        "train",
        *model,
        "--steps",
        "2",
        "--batch-size",
        "8",
        "--precision",
        "bf16",
        "--quiet",
        "--out",
        str(tmp_path / "run"),
    )
    assert code == 0, err[-2000:]
    assert (tmp_path / "run" / "generator.safetensors").is_file()
    code, out, err = run_cli(capsys, "preflight", *model)
    assert code == 0 and "nothing found" in out, out + err
    code, out, err = run_cli(capsys, "preflight", "--model", str(ROOT / "examples" / "pytorch_dcgan.py:dcgan"))
    assert code == 2 and "written for 64 px images, the data is 32 px: add --image-size 64" in err


@pytest.mark.parametrize(
    ("example", "extra"),
    [
        ("wgan_gp.py:wgan_gp", ["--image-size", "28", "--set", "model.dim=8", "--set", "model.critic_iters=2"]),
        ("conditional_mlp.py:cgan", ["--set", "model.hidden=64"]),
    ],
)
def test_each_example_runs_through_compare(example, extra, tmp_path, capsys):
    out = tmp_path / "out"
    code, stdout, err = run_cli(
        capsys, "compare", "--model", str(ROOT / "examples" / example), *extra, *QUICK, "--out", str(out)
    )
    assert code == 0, err[-2000:]
    document = json.loads((out / "compare.json").read_text())
    assert set(document["runs"]) == {"fp32", "bf16"}
    conditional = example.startswith("conditional")
    assert document["headline"]["metric"] == ("evaluator_accuracy" if conditional else "frechet_distance")
    final = document["runs"]["bf16"]["final"]
    assert ("evaluator_accuracy" in final) == conditional and "frechet_distance" in final
    verdict = " ".join(document["verdict"])
    assert ("Final evaluator accuracy" if conditional else "Final Fréchet distance") in verdict
    config = json.loads((out / "runs" / "bf16-seed0" / "config.json").read_text())
    assert config["model"]["name"].endswith(example)
    report = (out / "report.md").read_text()
    assert ("classes the evaluator reads" in report) != conditional
    run = out / "runs" / "bf16-seed0"
    code, stdout, err = run_cli(
        capsys, "generate", str(run), "--n", "4", "--out", str(tmp_path / "four.png"), "--trust-model"
    )
    assert (code == 0) != conditional, err  # a conditional GAN needs --class, an unconditional one refuses it
    code, stdout, err = run_cli(
        capsys, "generate", str(run), "--class", "0", "--n", "4", "--out", str(tmp_path / "c.png"), "--trust-model"
    )
    assert (code == 0) == conditional and ("draws no class" in err) != conditional, err


@pytest.mark.parametrize(
    ("model", "options"),
    [("dcgan", {"width": 8}), ("wgan-gp", {"width": 8, "critic_steps": 2}), ("r1", {"width": 4, "r1_every": 2})],
)
def test_each_built_in_family_takes_a_real_step_in_fp32_and_bf16(model, options):
    from ampgan.data.batches import BatchStream
    from ampgan.data.synthetic import make_synthetic
    from ampgan.training.precision import build_policy
    from ampgan.training.prepared import prepare_run
    from ampgan.training.state import build_train_state
    from ampgan.training.step import train_step

    dataset = make_synthetic(image_size=32, count=80)
    for precision in ("fp32", "bf16"):
        config = config_from_options(
            model=model, precision=precision, batch_size=8, sets=[f"model.{k}={v}" for k, v in options.items()]
        )
        prepared = prepare_run(config, dataset)
        state = build_train_state(
            prepared.config, prepared.model, prepared.data, build_policy(precision, torch.device("cpu"))
        )
        stream = BatchStream(dataset, 8, torch.device("cpu"), 0, image_range=state.gan.image_range)
        before = [p.detach().clone() for p in state.discriminator.parameters()]
        for _ in range(2):
            metrics = train_step(state, stream.next_batch)
        assert all(torch.isfinite(v).all() for v in metrics.values()), metrics
        assert any(not torch.equal(a, b) for a, b in zip(before, state.discriminator.parameters()))
        if model == "r1":
            assert "loss_r1" in metrics and metrics["r1_penalty"] > 0  # the lazy penalty ran at step 2
        if model == "wgan-gp":
            assert "gradient_penalty" in metrics


BAD_MODELS = textwrap.dedent("""
    import math
    import torch
    from torch import nn
    import ampgan

    def nets(data, out_size=None, d_out=1):
        size = out_size or data.image_size
        shape = (data.channels, size, size)
        G = nn.Sequential(nn.Linear(8, data.channels * size * size), nn.Tanh(), nn.Unflatten(1, shape))
        D = nn.Sequential(nn.Flatten(), nn.Linear(data.channels * data.image_size ** 2, d_out))
        return G, D

    def loss(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.real), 1.0)

    def raises(data):
        raise RuntimeError("out of ideas")

    def says_memory(data):
        raise ValueError("the buffer is out of memory slots")

    def not_a_gan(data):
        return nets(data)

    def small_images(data):
        G, D = nets(data, out_size=8)
        return ampgan.GAN(generator=G, discriminator=D, z_dim=8, d_loss=loss, g_loss=loss)

    def not_images(data, shape=(12,)):  # a CTGAN's table rows; (1, 256): a WaveGAN's audio; (1, 4, 4, 4): voxels
        G = nn.Sequential(nn.Linear(8, math.prod(shape)), nn.Unflatten(1, shape))
        return ampgan.GAN(generator=G, discriminator=nets(data)[1], z_dim=8, d_loss=loss, g_loss=loss)

    def audio(data):
        return not_images(data, (1, 256))

    def voxels(data):
        return not_images(data, (1, 4, 4, 4))

    def schedule_float(data):
        G, D = nets(data)
        return ampgan.GAN(generator=G, discriminator=D, z_dim=8, d_loss=loss, g_loss=loss,
                          optimizer_g=ampgan.Adam(lr_schedule=0.5))

    def schedule_text(data):
        G, D = nets(data)
        return ampgan.GAN(generator=G, discriminator=D, z_dim=8, d_loss=loss, g_loss=loss,
                          optimizer_d=ampgan.Adam(lr_schedule=lambda step: "half"))

    def flat_images(data):  # an MLP G's rows of an image's values, not reshaped
        return not_images(data, (data.channels * data.image_size**2,))

    def no_channel_axis(data):  # (B, H, W): the channel axis dropped
        return not_images(data, (data.image_size, data.image_size))

    def three_logits(data):
        G, D = nets(data, d_out=3)
        return ampgan.GAN(generator=G, discriminator=D, z_dim=8, d_loss=loss, g_loss=loss)

    def g_loss_terms(data):
        G, D = nets(data)
        return ampgan.GAN(generator=G, discriminator=D, z_dim=8, d_loss=[loss, loss], g_loss=[loss, loss])

    def with_metrics(data, metric):
        G, D = nets(data)
        return ampgan.GAN(generator=G, discriminator=D, z_dim=8, d_loss=loss,
                          g_loss=lambda ctx: (loss(ctx), {"score": metric(ctx)}))

    def metric_text(data):
        return with_metrics(data, lambda ctx: "high")

    def metric_per_image(data):
        return with_metrics(data, lambda ctx: ctx.D(ctx.fake))

    def metric_number(data):
        return with_metrics(data, lambda ctx: 0.5)

    def on_meta(data):
        G, D = nets(data)
        return ampgan.GAN(generator=G.to("meta"), discriminator=D, z_dim=8, d_loss=loss, g_loss=loss)

    def lazy(data):  # nn.LazyLinear: no shape until a first forward, which build did not run
        G, _ = nets(data)
        D = nn.Sequential(nn.Flatten(), nn.LazyLinear(1))
        return ampgan.GAN(generator=G, discriminator=D, z_dim=8, d_loss=loss, g_loss=loss)

    class ImageAndFeatures(nn.Module):  # a G returning (images, features), as some papers' code does
        def __init__(self, data):
            super().__init__()
            self.net = nets(data)[0]

        def forward(self, z):
            return self.net(z), z

    def tuple_g(data):
        return ampgan.GAN(generator=ImageAndFeatures(data), discriminator=nets(data)[1], z_dim=8, d_loss=loss,
                          g_loss=loss)

    def exits(data):
        raise SystemExit("giving up")

    def exits_in_loss(data):
        G, D = nets(data)
        return ampgan.GAN(generator=G, discriminator=D, z_dim=8, d_loss=loss, g_loss=lambda ctx: exit(3))

    def grad_off(data):
        torch.set_grad_enabled(False)  # an inference habit: every step after it would train nothing
        G, D = nets(data)
        return ampgan.GAN(generator=G, discriminator=D, z_dim=8, d_loss=loss, g_loss=loss)

    def float64_default(data):
        torch.set_default_dtype(torch.float64)
        G, D = nets(data)
        return ampgan.GAN(generator=G, discriminator=D, z_dim=8, d_loss=loss, g_loss=loss)
""")


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        ("missing", "has no function 'missing'"),
        ("raises", "raised RuntimeError: out of ideas (bad_models.py, line"),
        # an error of the user's that mentions memory is not the machine's limit (it reached the CLI as a traceback)
        ("says_memory", "raised ValueError: the buffer is out of memory slots (bad_models.py, line"),
        ("not_a_gan", "returned tuple, not an ampgan GAN"),
        ("small_images", "the generator returned (8, 3, 8, 8) for a batch of 8, not (B, C, H, W) = (8, 3, 32, 32)"),
        ("small_images", "as the data is: make G's output match the data's shape"),
        # G's output not images at all: what ampgan cannot study, said (its metrics and grids read images only)
        ("not_images", "the generator returned (8, 12) for a batch of 8, not (B, C, H, W) = (8, 3, 32, 32)"),
        ("not_images", "a GAN of 1-D signals, tables or voxels cannot be trained, scored or benched by it"),
        ("audio", "returned (8, 1, 256) for a batch of 8, not (B, C, H, W) = (8, 3, 32, 32) as the data is: ampgan's"),
        ("voxels", "returned (8, 1, 4, 4, 4) for a batch of 8, not (B, C, H, W) = (8, 3, 32, 32) as the data is: amp"),
        # a learning-rate schedule that is no function of the step: at load, not inside the first step
        ("schedule_float", "GAN.optimizer_g.lr_schedule is float, not a function: give a function of the step"),
        ("schedule_text", "GAN.optimizer_d.lr_schedule returned 'half' at step 0, not a factor of at least 0"),
        # an image G's slip is told to reshape, not that ampgan cannot read its kind of data
        ("flat_images", "returned (8, 3072) for a batch of 8, not (B, C, H, W) = (8, 3, 32, 32) as the data is: make"),
        ("no_channel_axis", "returned (8, 32, 32) for a batch of 8, not (B, C, H, W) = (8, 3, 32, 32) as the data"),
        ("no_channel_axis", "as the data is: make G's output match the data's shape"),
        ("flat_images", "as the data is: make G's output match the data's shape"),
        ("three_logits", "real_fake_loss takes D's real/fake logits, one per image ((B,) or (B, 1)) or per patch"),
        ("three_logits", "per patch ((B, 1, H, W)), got (8, 3): end D in a layer to one output channel"),
        # d_loss may be a list of terms; g_loss is one function (the step calls it once)
        (
            "g_loss_terms",
            "GAN.g_loss must be one function of the loss context (G's update is one backward pass), got list",
        ),
        # a loss's metrics are logged as one number each: anything else is named before it reaches the log
        ("metric_text", "g_loss returned metric 'score' as str, not a one-number tensor"),
        ("metric_per_image", "g_loss returned metric 'score' as (8, 1), not a one-number tensor"),
        ("metric_number", "g_loss returned metric 'score' as float, not a one-number tensor"),
        (
            "on_meta",
            "G.0.weight and 1 more tensor(s) are on the meta device (no values): build the networks on the CPU",
        ),
        # lazy layers have no shape to count, cast, optimize or save (a traceback in the fingerprint before)
        ("lazy", "GAN.discriminator's 1.weight (2 tensor(s)) is uninitialized (nn.LazyConv2d, nn.LazyLinear...)"),
        ("lazy", "call the network once in the model function on a batch of its input's shape"),
        # G's output must be the images alone (a traceback in train's first step before: 'tuple' has no detach)
        ("tuple_g", "bad_models.py:tuple_g: G returned a tuple, not a (B, C, H, W) tensor: return the images alone"),
        # the user's code exiting is one line naming it, not a silent exit with the user's message
        ("exits", "raised SystemExit: giving up (bad_models.py, line"),
        ("exits_in_loss", "G's update, g_loss failed: SystemExit: 3"),
        # a process-wide torch setting the model function changes is named (and put back)
        ("grad_off", "changed torch's settings for the whole process (torch.set_grad_enabled(False))"),
        ("float64_default", "changed torch's settings for the whole process (torch.set_default_dtype(torch.float64))"),
    ],
)
def test_a_bad_model_file_is_one_line_naming_it(function, expected, tmp_path, capsys):
    path = tmp_path / "bad_models.py"
    path.write_text(BAD_MODELS)
    code, out, err = run_cli(
        capsys,
        "train",
        "--model",
        f"{path}:{function}",
        "--dataset",
        "synthetic",
        "--steps",
        "1",
        "--batch-size",
        "8",
        "--quiet",
        "--out",
        str(tmp_path / "run"),
    )
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and expected in lines[0], err
    assert "Traceback" not in err and not (tmp_path / "run").exists()
    assert torch.is_grad_enabled() and torch.get_default_dtype() == torch.float32


@pytest.mark.parametrize("function", ["audio", "small_images"])
def test_a_bench_of_a_g_that_does_not_draw_the_data_s_shape_is_one_line_before_anything_is_measured(
    function, tmp_path, capsys
):
    """It was the same error once per configuration and once per traced precision, then 'the bench measured no
    configuration': 7 copies of one line for a WaveGAN-like G's audio."""
    path = tmp_path / "bad_models.py"
    path.write_text(BAD_MODELS)
    code, out, err = run_cli(
        capsys, "bench", "--model", f"{path}:{function}", "--dataset", "synthetic", "--batch-sizes", "4,8",
        "--precisions", "fp32,bf16", "--max-seconds", "2", "--out", str(tmp_path / "bench"),
    )  # fmt: skip
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert err.count("the generator returned") == 1 and "for a batch of 8" in err, err[-2000:]  # the largest


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def build(data:\n    return 1\n", "SyntaxError: '(' was never closed (setup_model.py, line 1)"),
        ("import torch\ntorch.set_default_device('meta')\n", "(torch.set_default_device(meta))"),
        ("import torch\ntorch.set_grad_enabled(False)\n", "(torch.set_grad_enabled(False))"),
        ("import sys\nsys.exit(0)\n", "failed: SystemExit: 0 (setup_model.py, line 2)"),
    ],
)
def test_a_model_file_that_fails_or_changes_torch_as_it_is_imported_is_one_line(source, expected, tmp_path, capsys):
    """Importing the file runs its top level: what it raises, and a process-wide torch setting it changes
    (an inference script's habits), are one line naming the file; the settings are put back."""
    path = tmp_path / "setup_model.py"
    path.write_text(source + "def gan(data):\n    raise AssertionError('never built')\n")
    code, out, err = run_cli(capsys, "preflight", "--model", f"{path}:gan", "--dataset", "synthetic")
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(lines) == 1 and f"importing {path}" in lines[0] and expected in lines[0], err
    assert lines[0].count("line ") <= 1 and "never built" not in err  # a place is given once
    assert torch.is_grad_enabled() and torch.get_default_device() == torch.device("cpu")


PREFLIGHT_MODELS = textwrap.dedent("""
    import torch
    import torch.nn.functional as F
    from torch import nn
    import ampgan

    def nets(data, sigmoid=False, tanh=True):
        pixels = data.channels * data.image_size ** 2
        G = nn.Sequential(nn.Linear(16, pixels), nn.Tanh() if tanh else nn.Identity(),
                          nn.Unflatten(1, (data.channels, data.image_size, data.image_size)))
        D = nn.Sequential(nn.Flatten(), nn.Linear(pixels, 1), *([nn.Sigmoid()] if sigmoid else []), nn.Flatten(0))
        return G, D

    def d_loss(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.real), 1.0) + ampgan.real_fake_loss(ctx.D(ctx.fake), 0.0)

    def g_loss(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.fake), 1.0)

    def clean(data):
        G, D = nets(data)
        return ampgan.GAN(generator=G, discriminator=D, z_dim=16, d_loss=d_loss, g_loss=g_loss)

    def probabilities(data):
        G, D = nets(data, sigmoid=True)
        ones, zeros = torch.ones(8), torch.zeros(8)
        def d(ctx):
            return F.binary_cross_entropy(ctx.D(ctx.real), ones) + F.binary_cross_entropy(ctx.D(ctx.fake), zeros)
        return ampgan.GAN(generator=G, discriminator=D, z_dim=16, d_loss=d,
                          g_loss=lambda ctx: F.binary_cross_entropy(ctx.D(ctx.fake), ones))

    def unbounded(data):
        G, D = nets(data, tanh=False)
        G[0].weight.data *= 50
        return ampgan.GAN(generator=G, discriminator=D, z_dim=16, d_loss=d_loss, g_loss=g_loss)

    def casts_itself(data):
        G, D = nets(data)
        D.half()
        return ampgan.GAN(generator=G, discriminator=D, z_dim=16, d_loss=d_loss, g_loss=g_loss)

    def keeps_the_scale(data):
        G, D = nets(data)
        def d(ctx):
            x = ctx.real.detach().requires_grad_(True)
            grad, = torch.autograd.grad(ctx.D(x).float().mean() * ctx.scale, x, create_graph=True)
            return d_loss(ctx) + 10 * grad.pow(2).sum()
        return ampgan.GAN(generator=G, discriminator=D, z_dim=16, d_loss=d, g_loss=g_loss)

    class WithSpare(nn.Module):
        def __init__(self, pixels):
            super().__init__()
            self.score, self.spare = nn.Linear(pixels, 1), nn.Linear(4, 4)
        def forward(self, x):
            return self.score(x.flatten(1)).squeeze(1)

    def unused(data):
        G, _ = nets(data)
        return ampgan.GAN(generator=G, discriminator=WithSpare(data.channels * data.image_size ** 2), z_dim=16,
                          d_loss=d_loss, g_loss=g_loss)

    def squares_in_low_precision(data):
        G, D = nets(data)
        return ampgan.GAN(generator=G, discriminator=D, z_dim=16,
                          g_loss=lambda ctx: ((ctx.D(ctx.fake) - 1) ** 2).mean(),
                          d_loss=lambda ctx: ((ctx.D(ctx.real) - 1) ** 2).mean() + (ctx.D(ctx.fake) ** 2).mean())
""")


def test_preflight_names_what_would_go_wrong(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(PREFLIGHT_MODELS)
    from ampgan.data.synthetic import make_synthetic

    dataset = make_synthetic(image_size=16, count=80)

    def findings(function):
        config = config_from_options(model=f"{path}:{function}", dataset="synthetic", image_size=16)
        return {(f.severity, f.check): f.text for f in preflight(config, dataset)}

    assert findings("clean") == {}
    assert ("warning", "logits") in findings("probabilities") and ("warning", "autocast") in findings("probabilities")
    assert "outside the data range [-1, 1]" in findings("unbounded")[("warning", "range")]
    assert "D.1.weight (torch.float16)" in findings("casts_itself")[("error", "dtype")]
    assert "carries the loss scale" in findings("keeps_the_scale")[("error", "scaling")]
    assert "D.spare.bias, D.spare.weight" in findings("unused")[("warning", "unused")]
    assert "pow" in findings("squares_in_low_precision")[("warning", "fragile")]
    built_in_data = make_synthetic(image_size=28, count=80, channels=1)
    found = {}
    for model in ("dcgan", "wgan-gp", "r1", "acgan"):  # the built-ins are clean
        config = config_from_options(model=model, dataset="synthetic", image_size=28, channels=1, width=4)
        found[model] = [(f.severity, f.check, f.text) for f in preflight(config, built_in_data)]
    # r1's lazy R1 gives D's last bias, which moves no input gradient, an exact zero (NVlabs' real_logits * 0):
    # without it a 2-process torchrun stopped at the first R1 step ('D.head.bias ... got no gradient')
    assert found == {"dcgan": [], "wgan-gp": [], "r1": [], "acgan": []}


def test_preflight_stops_compare_before_anything_is_measured(tmp_path, capsys):
    path = tmp_path / "models.py"
    path.write_text(PREFLIGHT_MODELS)
    out = tmp_path / "out"
    code, _, err = run_cli(
        capsys, "compare", "--model", f"{path}:keeps_the_scale", "--dataset", "synthetic", *QUICK, "--out", str(out)
    )
    assert code == 2 and "preflight: error: d_loss term 1 is" in err
    assert not out.exists()


def tiny_gan(data: DataSpec, *, width: int = 4) -> GAN:
    """A module-level model function: the API records it as this file's path."""
    from torch import nn

    pixels = data.channels * data.image_size**2
    generator = nn.Sequential(
        nn.Linear(8, pixels), nn.Tanh(), nn.Unflatten(1, (data.channels, data.image_size, data.image_size))
    )
    discriminator = nn.Sequential(
        nn.Flatten(), nn.Linear(pixels, width), nn.LeakyReLU(0.2), nn.Linear(width, 1), nn.Flatten(0)
    )
    return GAN(
        generator=generator,
        discriminator=discriminator,
        z_dim=8,
        d_loss=lambda c: ampgan.real_fake_loss(c.D(c.real), 1.0) + ampgan.real_fake_loss(c.D(c.fake), 0.0),
        g_loss=lambda c: ampgan.real_fake_loss(c.D(c.fake), 1.0),
    )


def test_the_python_api_returns_the_verdict_as_data(tmp_path):
    study = ampgan.compare(
        tiny_gan,
        tmp_path / "study",
        settings={"data.dataset": "synthetic", "budget.steps": 2, "budget.batch_size": 8, "compute.device": "cpu"},
        precisions=["fp32", "bf16"],
        seeds=1,
        eval_points=1,
        eval_samples=40,
        bench={"batch_sizes": [8], "min_seconds": 0.2, "max_seconds": 3.0},  # bf16 measured even on a busy machine
    )
    assert study.outcome == "raced" and study.precisions == ["fp32", "bf16"]
    assert study.headline == "frechet_distance" and study.verdict == study.document["verdict"]
    assert study.speedup["bf16"]["low"] <= study.speedup["bf16"]["estimate"] <= study.speedup["bf16"]["high"]
    assert study.final["bf16"]["frechet_distance"] > 0 and study.report.is_file()
    config = json.loads((tmp_path / "study" / "runs" / "fp32-seed0" / "config.json").read_text())
    assert config["model"]["name"] == f"{Path(__file__).resolve()}:tiny_gan"  # the command line can build it again


def test_a_notebook_function_is_known_to_its_process_only():
    from ampgan.gan.registry import model_name_for

    def in_a_cell(data):
        return tiny_gan(data)

    name = model_name_for(in_a_cell)
    assert name == "python:in_a_cell"
    assert resolve_model(name, {}).build(DataSpec(8, 1, 1)).z_dim == 8
    assert model_name_for(tiny_gan).endswith("test_your_gan.py:tiny_gan")


def test_a_function_of_the_running_script_is_taken_from_it_not_imported_again(tmp_path, monkeypatch):
    """`python train.py` whose top level calls ampgan.train(build): the model named train.py:build is taken from
    the running script; importing the file again ran its top level a second time (a nested training run)."""
    import sys
    import types

    from ampgan.gan.registry import consent_to_import, model_name_for

    script_file = tmp_path / "train.py"
    script_file.write_text("open(__file__ + '.ran', 'a').write('ran')\n")
    script = types.ModuleType("__main__")
    script.__file__ = str(script_file)
    script.tiny_gan = tiny_gan
    exec(compile("def build(data, *, width=8):\n    return tiny_gan(data)\n", script_file, "exec"), vars(script))
    monkeypatch.setitem(sys.modules, "__main__", script)
    name = model_name_for(script.build)
    assert name == f"{script_file.resolve()}:build"
    consent_to_import(name)  # as ampgan.train does: the caller named it
    assert resolve_model(name, {}).build(DataSpec(8, 1, 1)).z_dim == 8
    assert not Path(f"{script_file}.ran").exists()  # the script's top level did not run again
    assert model_name_for(tiny_gan).endswith("test_your_gan.py:tiny_gan")  # other files: imported as before


def test_a_cycle_is_timed_by_its_kinds_of_step():
    data = DataSpec(8, 1, 1)
    base = tiny_gan(data)
    base.extra_updates = (Update("r1", lambda c: c.real.sum(), every=16),)
    assert base.cycle_steps == 16 and base.cycle_kinds() == [(0, 15), (15, 1)]
    base.extra_updates = (Update("a", lambda c: 0, every=2), Update("b", lambda c: 0, every=3))
    kinds = dict(base.cycle_kinds())
    assert base.cycle_steps == 6 and sum(kinds.values()) == 6
    assert kinds == {0: 2, 1: 2, 2: 1, 5: 1}  # plain (steps 1, 5), a (2, 4), b (3), both (6)


def test_compiling_a_gradient_penalty_is_one_line_not_a_traceback(tmp_path, capsys, monkeypatch):
    # aot_autograd has no double backward (torch 2.13): the penalty's backward through a compiled critic fails.
    # aot_eager is aot_autograd without inductor's code generation: the same failure, without compiling kernels.
    monkeypatch.setenv("AMPGAN_COMPILE_BACKEND", "aot_eager")
    code, _, err = run_cli(
        capsys,
        "train",
        "--model",
        "wgan-gp",
        "--width",
        "4",
        "--set",
        "model.critic_steps=1",
        "--dataset",
        "synthetic",
        "--image-size",
        "28",
        "--steps",
        "2",
        "--batch-size",
        "8",
        "--compile",
        "--quiet",
        "--out",
        str(tmp_path / "run"),
    )
    assert code == 2 and "takes gradients of gradients" in err and "--no-compile" in err
    assert "Traceback" not in err


# An image-to-image GAN: G translates a map that draw_inputs draws from the real batch (`from_real`, pix2pix's
# shape: the map is the images themselves, here their mean over channels) or from ctx.labels alone, which is None
# outside the training step (`from_labels`: it cannot draw for samples, and G then fails on (N, z_dim) noise).
IMAGE_TO_IMAGE = textwrap.dedent("""
    import torch
    from torch import nn
    import ampgan

    def translator(data, *, map_channels: int = 2, source: str = "from_real"):
        G = nn.Sequential(nn.Conv2d(map_channels, data.channels, 3, padding=1), nn.Tanh())  # (B, maps, H, W) in
        D = nn.Sequential(nn.Conv2d(data.channels, 4, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(4, 1))

        def draw_inputs(ctx):
            if source == "from_real":
                return ctx.real.mean(1, keepdim=True).repeat(1, map_channels, 1, 1), None
            b, _, h, w = ctx.real.shape
            return ctx.labels.float().view(-1, 1, 1, 1).expand(b, map_channels, h, w), None

        return ampgan.GAN(generator=G, discriminator=D, z_dim=map_channels, draw_inputs=draw_inputs,
                          d_loss=(lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.real), 1.0),
                                  lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.fake), 0.0)),
                          g_loss=lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.fake), 1.0))
""")


def _trains_samples_passes_preflight_and_generates(tmp_path, capsys, source: str, function: str) -> None:
    """The user's file `source` (its GAN built by `function`) trains 3 steps with samples at step 2, passes
    preflight without an error and `generate` draws from its run (tmp_path/run)."""
    path = tmp_path / f"{function}.py"
    path.write_text(source)
    model = ("--model", f"{path}:{function}", "--dataset", "synthetic", "--image-size", "8")
    code, out, err = run_cli(
        capsys, "train", *model, "--steps", "3", "--batch-size", "4", "--precision", "fp32", "--quiet",
        "--set", "logging.sample_every=2", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert code == 0, err[-2000:]
    assert (tmp_path / "run" / "samples" / "step-000002.png").is_file()
    config = config_from_options(model=f"{path}:{function}", dataset="synthetic", image_size=8)
    assert not [f for f in preflight(config) if f.severity == "error"]
    code, out, err = run_cli(capsys, "generate", str(tmp_path / "run"), "--n", "4", "--out", str(tmp_path / "g.png"))
    assert code == 0 and (tmp_path / "g.png").is_file(), err[-2000:]


def test_an_image_to_image_g_draws_its_samples_and_evaluations_from_maps_of_real_images(tmp_path, capsys):
    """Samples, `generate`, evaluations and preflight called G on (N, z_dim) noise: a G that translates a map
    trained, then stopped at its first samples. They now translate what draw_inputs draws from real images."""
    from ampgan.data import load_dataset
    from ampgan.quality.evaluator import generate_evenly
    from ampgan.training.trained import load_trained_run

    _trains_samples_passes_preflight_and_generates(tmp_path, capsys, IMAGE_TO_IMAGE, "translator")
    # What G draws follows the real images it is given: other images, other samples; the same, the same.
    run = load_trained_run(tmp_path / "run")
    gan, images = run.gan, load_dataset(run.config.data).images
    first, again, other = (
        generate_evenly(gan, 1, 6, 0, "cpu", real=real)[0] for real in (images, images, 255 - images)
    )
    assert first.shape == (6, 3, 8, 8) and torch.equal(first, again) and not torch.equal(first, other)
    # The maps are drawn from the real images exactly as training feeds them (data.batches.scale_images): a
    # scaling of its own left 111 of the 256 uint8 values a few ulps off in [-1, 1].
    from ampgan.data.batches import scale_images

    every_value = torch.arange(256, dtype=torch.uint8).view(4, 1, 8, 8).expand(4, 3, 8, 8).contiguous()
    maps = gan.inputs_for(4, torch.Generator().manual_seed(0), every_value)
    assert torch.equal(maps, scale_images(every_value, gan.image_range).mean(1, keepdim=True).repeat(1, 2, 1, 1))


def test_generate_of_an_unconditional_image_to_image_g_translates_the_images_of_the_class_named(tmp_path, capsys):
    """docs/your-gan.md: `generate` translates the class's images. An unconditional pix2pix's `generate --class 1`
    was refused ('it draws no class'); it now translates class 1's images, and class 0's differ from them."""
    import numpy as np

    _trains_samples_passes_preflight_and_generates(tmp_path, capsys, IMAGE_TO_IMAGE, "translator")
    drawn = {}
    for label in ("0", "1"):
        out = tmp_path / f"class{label}.npz"
        args = ("generate", str(tmp_path / "run"), "--class", label, "--n", "4", "--out", str(out))
        code, _, err = run_cli(capsys, *args)
        assert code == 0, err[-2000:]
        drawn[label] = np.load(out)["images"]
    assert drawn["0"].shape == drawn["1"].shape and not np.array_equal(drawn["0"], drawn["1"])


# InfoGAN's draw: z is (noise, a one-hot categorical code); this G refuses any other input, so it fails wherever
# it is handed noise from z_distribution in place of the codes it trained on.
CODES = textwrap.dedent("""
    import torch
    import torch.nn.functional as F
    from torch import nn
    import ampgan

    class CodedG(nn.Module):
        def __init__(self, data):
            super().__init__()
            self.shape = (data.channels, data.image_size, data.image_size)
            self.fc = nn.Linear(8, data.channels * data.image_size ** 2)

        def forward(self, z):
            code = z[:, 4:]
            if not bool(((code == 0) | (code == 1)).all() and (code.sum(1) == 1).all()):
                raise ValueError("the categorical code is not one-hot")
            return torch.tanh(self.fc(z)).view(-1, *self.shape)

    def infogan(data):
        D = nn.Sequential(nn.Flatten(), nn.Linear(data.channels * data.image_size ** 2, 1))

        def draw_inputs(ctx):
            b = ctx.real.shape[0]
            code = torch.randint(4, (b,), generator=ctx.rng, device=ctx.device)
            noise = torch.randn(b, 4, generator=ctx.rng, device=ctx.device)
            return torch.cat([noise, F.one_hot(code, 4).float()], 1), None

        return ampgan.GAN(generator=CodedG(data), discriminator=D, z_dim=8, draw_inputs=draw_inputs,
                          d_loss=(lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.real), 1.0),
                                  lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.fake), 0.0)),
                          g_loss=lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.fake), 1.0))
""")


def test_an_unconditional_g_draws_its_samples_and_evaluations_from_the_codes_draw_inputs_draws(tmp_path, capsys):
    """InfoGAN's G trains on a one-hot categorical code inside z; samples, `generate`, evaluations and preflight
    gave it N(0, 1) noise in the code's place: inputs it never trained on, silently (here a G that checks stops)."""
    from ampgan.data import load_dataset
    from ampgan.quality.evaluator import generate_evenly
    from ampgan.training.trained import load_trained_run

    _trains_samples_passes_preflight_and_generates(tmp_path, capsys, CODES, "infogan")
    run = load_trained_run(tmp_path / "run")
    images = load_dataset(run.config.data).images
    assert generate_evenly(run.gan, 1, 6, 0, "cpu", real=images)[0].shape == (6, 3, 8, 8)


@pytest.mark.parametrize("when", ["at the end", "on the way"])
def test_a_g_whose_inputs_cannot_be_drawn_outside_the_step_stops_in_one_line_at_its_samples_and_loses_no_step(
    tmp_path, capsys, when
):
    path = tmp_path / "translator.py"
    path.write_text(IMAGE_TO_IMAGE)
    model = ("--model", f"{path}:translator", "--dataset", "synthetic", "--image-size", "8")
    model += ("--set", "model.source=from_labels")
    sample_every = "500" if when == "at the end" else "2"  # the run's last samples, or a grid due at step 2
    code, out, err = run_cli(
        capsys, "train", *model, "--steps", "3", "--batch-size", "4", "--precision", "fp32", "--quiet",
        "--checkpoint-every", "2", "--set", f"logging.sample_every={sample_every}", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert code == 2, err[-2000:]
    assert "Traceback" not in err and "G failed drawing images" in err, err[-2000:]
    assert "z of shape (N, z_dim)" in err and "on what it draws from real images" in err
    from ampgan.runs.checkpoint import checkpoint_path

    # the checkpoint due with the failing samples is written before them
    assert checkpoint_path(tmp_path / "run", 3 if when == "at the end" else 2).is_file()

    config = config_from_options(
        model=f"{path}:translator", dataset="synthetic", image_size=8, sets=("model.source=from_labels",)
    )
    findings = {(f.severity, f.check): f.text for f in preflight(config)}
    assert "on what it draws from real images" in findings[("error", "generator")]


USER_GANS = ROOT / "benchmarks" / "validation" / "user_gans"
TINY_USER_GANS = {  # each file at a size and width this CPU steps in seconds, and the frozen VGG19 each keeps on D
    "pix2pixhd-labels": ("pix2pixhd.py:pix2pixhd", 16, ["model.label_nc=3", "model.ngf=4", "model.ndf=4",
                                                         "model.downsample=2", "model.blocks=1"]),
    "pix2pixhd-rgb": ("pix2pixhd.py:pix2pixhd", 16, ["model.label_nc=0", "model.instance=0", "model.ngf=4",
                                                      "model.ndf=4", "model.downsample=2", "model.blocks=1"]),
    "spade": ("spade.py:spade", 32, ["model.label_nc=3", "model.ngf=2", "model.ndf=4", "model.n_layers_d=2"]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(TINY_USER_GANS))
def test_the_user_gan_files_step_in_every_precision_with_their_vgg_frozen(name):
    """benchmarks/validation/user_gans/ (issue 43's published-GAN check) at a tiny size: each file's label map (or RGB
    input) from draw_inputs, its discriminators and the frozen VGG19 on D train in fp32, bf16 and fp16."""
    from ampgan.data.batches import BatchStream
    from ampgan.data.synthetic import make_synthetic
    from ampgan.training.precision import build_policy
    from ampgan.training.prepared import prepare_run
    from ampgan.training.step import train_step

    file, size, sets = TINY_USER_GANS[name]
    dataset = make_synthetic(image_size=size, count=16)
    for precision in ("fp32", "bf16", "fp16"):
        config = config_from_options(
            model=str(USER_GANS / file), dataset="synthetic", image_size=size, precision=precision, batch_size=2,
            sets=sets,
        )  # fmt: skip
        prepared = prepare_run(config, dataset)
        state = build_train_state(
            prepared.config, prepared.model, prepared.data, build_policy(precision, torch.device("cpu"))
        )
        vgg = {name: p.detach().clone() for name, p in state.gan.discriminator.vgg.named_parameters()}
        stream = BatchStream(dataset, 2, torch.device("cpu"), 0, image_range=state.gan.image_range)
        for _ in range(2):
            metrics = train_step(state, stream.next_batch)
        assert all(torch.isfinite(v) for name, v in metrics.items() if name.startswith("loss")), (precision, metrics)
        assert metrics["vgg"] > 0 and metrics["feat"] > 0
        assert all(torch.equal(p, vgg[name]) for name, p in state.gan.discriminator.vgg.named_parameters())


@pytest.mark.parametrize("name", ["spade"])
def test_the_user_gan_files_trace_for_the_projection(name):
    """What `ampgan project` reads: each file's step traced at the bench's two batch sizes, its cost growing with
    the batch, every convolution of G, D and the VGG19 counted."""
    from ampgan.bench.ops import trace_op_table
    from ampgan.data import DataConfig, load_dataset
    from ampgan.speed.step_timer import StepTimer

    file, size, sets = TINY_USER_GANS[name]
    config = config_from_options(model=str(USER_GANS / file), dataset="synthetic", image_size=size, sets=sets)
    dataset = load_dataset(DataConfig(dataset="synthetic", image_size=size), seed=0)

    def timer(batch_size):
        config_at = config.with_fields({"budget.batch_size": batch_size})
        return StepTimer(config_at, dataset, torch.device("cpu"), data_parallel=False, across_ranks=False)

    table = trace_op_table(timer, "fp32")
    assert table.flops_at(16) > table.flops_at(8) > 0
    assert sum(1 for row in table.rows if "convolution" in row.op) >= 20


TWO_LAYER_GAN = textwrap.dedent("""
    from torch import nn
    import ampgan
    import helpers

    def build(data):
        pixels = data.channels * data.image_size ** 2
        G = nn.Sequential(nn.Linear(8, helpers.WIDTH), nn.Linear(helpers.WIDTH, pixels), nn.Tanh(),
                          nn.Unflatten(1, (data.channels, data.image_size, data.image_size)))
        D = nn.Sequential(nn.Flatten(), nn.Linear(pixels, 1), nn.Flatten(0))
        loss = lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.fake), 1.0)
        return ampgan.GAN(generator=G, discriminator=D, z_dim=8, d_loss=loss, g_loss=loss, description=TAG)
""")


def test_model_files_import_the_helpers_beside_them_each_its_own(tmp_path, monkeypatch):
    """Two model files of one name in two folders, each importing its own `helpers.py` (and a file edited since it
    was imported), in one process: each builds with its own helpers and its text as it is now, whatever the
    current folder; the file's folder never stands in for a module ampgan imports later."""
    from ampgan.trust import consent_to_import

    data = DataSpec(image_size=8, channels=1, num_classes=2)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))  # the folders go on it
    for folder, width in (("a", 4), ("b", 12), ("c/deeper", 20)):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "helpers.py").write_text(f"WIDTH = {width}\n")
        (tmp_path / folder / "gan.py").write_text(f"TAG = 'first {folder}'\n" + TWO_LAYER_GAN)
        (tmp_path / folder / "jinja2.py").write_text("raise ImportError('a user file stood in for jinja2')\n")
    built = {}
    for cwd, folder in ((tmp_path, "a"), (tmp_path / "c", "b"), (tmp_path / "a", "c/deeper"), (tmp_path, "a")):
        monkeypatch.chdir(cwd)
        name = f"{tmp_path / folder / 'gan.py'}:build"
        consent_to_import(name)
        gan = resolve_model(name, {}).build(data)
        built[folder] = (gan.generator[0].out_features, gan.description)
        (tmp_path / folder / "gan.py").write_text(f"TAG = 'edited {folder}'\n" + TWO_LAYER_GAN)
    assert built == {"a": (4, "edited a"), "b": (12, "first b"), "c/deeper": (20, "first c/deeper")}
    import jinja2.sandbox  # not imported by this process yet; the real one, not the user's file of that name

    assert "site-packages" in jinja2.__file__
    monkeypatch.delitem(__import__("sys").modules, "helpers")


def test_a_folders_second_model_file_keeps_its_helpers_its_own(tmp_path, monkeypatch):
    """The first file of a folder leaves the folder on sys.path (at its end); the folder's second file, importing
    other helpers, must still have them tracked as that folder's, so a third folder's file of the same helper
    name gets its own."""
    import sys

    from ampgan.trust import consent_to_import

    data = DataSpec(image_size=8, channels=1, num_classes=2)
    monkeypatch.setattr("sys.path", list(sys.path))
    first, second = tmp_path / "x", tmp_path / "y"
    for folder, width in ((first, 4), (second, 12)):
        folder.mkdir()
        (folder / "helpers.py").write_text("WIDTH = 6\n")
        (folder / "helpers2.py").write_text(f"WIDTH = {width}\n")
        (folder / "c.py").write_text("TAG = 'c'\n" + TWO_LAYER_GAN.replace("helpers", "helpers2"))
    (first / "a.py").write_text("TAG = 'a'\n" + TWO_LAYER_GAN)
    widths = []
    for path in (first / "a.py", first / "c.py", second / "c.py"):
        consent_to_import(f"{path}:build")
        widths.append(resolve_model(f"{path}:build", {}).build(data).generator[0].out_features)
    assert widths == [6, 4, 12]
    for name in ("helpers", "helpers2"):
        monkeypatch.delitem(sys.modules, name, raising=False)


@pytest.mark.parametrize("factor", [0.5, 1, "numpy", "tensor"])
def test_a_schedule_returning_any_number_the_step_reads_is_taken(factor):
    """The step reads a schedule's factor with float(): a NumPy number or a 0-dim tensor (torch.cos of the step)
    trained before the load check; the check takes them as the step does, and refuses text and switches."""
    import numpy as np

    from ampgan.gan.contract import _check_schedule

    value = {"numpy": np.float32(0.5), "tensor": torch.tensor(0.5)}.get(factor, factor)
    _check_schedule(lambda step: value, "model m: GAN.optimizer_g.lr_schedule")
    for bad in (True, "0.5", float("nan"), -1.0, torch.tensor([0.5, 0.5])):
        with pytest.raises(AmpganError, match="not a factor of at least 0"):
            _check_schedule(lambda step, bad=bad: bad, "model m: GAN.optimizer_g.lr_schedule")


def test_a_g_built_with_numpy_s_or_python_s_random_starts_the_same_in_every_run_of_one_seed(tmp_path):
    """ampgan seeded torch's generator for the weights but not numpy's or Python's, which it saves and
    restores: a G built with np.random (a fixed permutation, a random mask) started elsewhere in each run,
    so fp32 and bf16 did not race from the same start."""
    (tmp_path / "drawn.py").write_text(
        textwrap.dedent(
            """
            import random
            import numpy as np
            import torch
            from torch import nn
            import ampgan

            class G(nn.Module):
                def __init__(self, data):
                    super().__init__()
                    drawn = np.random.permutation(16).tolist() + [random.random()]
                    self.register_buffer("drawn", torch.tensor(drawn))
                    self.out = nn.Linear(8, data.channels * data.image_size**2)
                    self.shape = (data.channels, data.image_size, data.image_size)

                def forward(self, z):
                    return torch.tanh(self.out(z)).view(-1, *self.shape)

            def build(data):
                D = nn.Sequential(nn.Flatten(), nn.Linear(data.channels * data.image_size**2, 1))
                loss = lambda target: lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.real if target else ctx.fake), target)
                return ampgan.GAN(generator=G(data), discriminator=D, z_dim=8, d_loss=[loss(1.0), loss(0.0)],
                                  g_loss=loss(1.0))
            """
        )
    )
    config = config_from_options(model=f"{tmp_path / 'drawn.py'}:build", dataset="synthetic", device="cpu")
    recipe, data = resolve_model(config.model.name, config.model.options), DataSpec(8, 3, 4)
    drawn = [
        build_train_state(config, recipe, data, PrecisionPolicy(name, torch.device("cpu"))).gan.generator.drawn
        for name in ("fp32", "bf16")
    ]
    assert torch.equal(drawn[0], drawn[1])


def test_an_image_to_image_gs_flags_say_its_translations_lose_a_class_not_that_it_drops_one(tmp_path, capsys):
    """An image-to-image G's evaluated images are its translations of the held-out images, every class among
    them: 'classes dropped (drawn under a quarter as often as in the data)' said it never drew them. Its flags now
    say the translations lost them; a G of noise still drops a class."""
    import numpy as np

    from ampgan.quality.metrics import unconditional_flags

    shares, real_shares = np.array([0.02, 0.98]), np.array([0.5, 0.5])
    assert unconditional_flags(None, shares, real_shares, ["cats", "dogs"]) == [
        "1 of 2 classes dropped (drawn under a quarter as often as in the data): cats (2% of the samples, 50% of real)"
    ]
    assert unconditional_flags(0.1, shares, real_shares, ["cats", "dogs"], translated=True) == [
        "diversity 10% of real (collapsed: to the evaluator the translations are nearly one image)",
        "1 of 2 classes lost in translation (read in the translations under a quarter as often as in the data): "
        "cats (2% of the translations, 50% of real)",
    ]
    _trains_samples_passes_preflight_and_generates(tmp_path, capsys, IMAGE_TO_IMAGE, "translator")
    code, _, err = run_cli(capsys, "evaluate", str(tmp_path / "run"), "--samples", "40")
    flags = json.loads((tmp_path / "run" / "quality.json").read_text())["final"]["flags"]
    assert code == 0 and flags and all("translation" in flag for flag in flags), (err, flags)


@pytest.mark.real_op_trace  # the step traced for real, on the meta device
def test_stylegan2_computes_in_16_bits_only_at_its_highest_resolutions_on_the_meta_trace():
    """benchmarks/validation/user_gans/stylegan2.py (issue 43's check against StyleGAN2-ADA's published mixed-precision
    speedup) at 16x16: its fp32_modules are the mapping network, D's epilogue and the blocks below the fp16 resolution
    (num_fp16_res=1: every block but the 16x16 ones), and the fp16 step traced on the meta device computes both
    fp16 and fp32 matrix work. Only the meta trace: a CPU trace of it runs a whole 16-step lazy-R1 cycle."""
    from ampgan.bench.op_tables import trace_op_tables
    from ampgan.bench.spec import BenchSpec
    from ampgan.data.synthetic import make_synthetic
    from ampgan.gan.registry import resolve_model
    from ampgan.trust import consent_to_import

    name = str(USER_GANS / "stylegan2.py:stylegan2")
    consent_to_import(name)  # as the command line does: the caller named it
    sets = ["model.channel_base=64", "model.channel_max=16", "model.map_layers=2"]
    for num_fp16_res, fp32_resolutions in ((1, {4, 8}), (2, {4}), (3, {4})):  # never below 8x8, as NVlabs
        config = config_from_options(model=name, dataset="synthetic", image_size=16,
                                     sets=[*sets, f"model.num_fp16_res={num_fp16_res}"])  # fmt: skip
        recipe = resolve_model(config.model.name, config.model.options)
        gan = recipe.build(ampgan.DataSpec(image_size=16, channels=3, num_classes=1))
        islands = {id(m) for m in gan.fp32_modules}
        assert id(gan.generator.mapping) in islands and id(gan.discriminator.epilogue) in islands
        for blocks in (gan.generator.blocks, gan.discriminator.blocks):
            present = {b.resolution for b in blocks}  # D's last block is at 8x8 (its epilogue at 4x4)
            assert {b.resolution for b in blocks if id(b) in islands} == fp32_resolutions & present
    plain = config_from_options(model=name, dataset="synthetic", image_size=16, sets=[*sets, "model.num_fp16_res=99"])
    assert resolve_model(plain.model.name, plain.model.options).build(ampgan.DataSpec(16, 3, 1)).fp32_modules == []

    config = config_from_options(model=name, dataset="synthetic", image_size=16, sets=[*sets, "model.num_fp16_res=1"])
    stop = iter([False])
    traced = trace_op_tables(BenchSpec(base=config, precisions=("fp16",)), make_synthetic(count=16, image_size=16),
                             torch.device("meta"), lambda line: None, lambda: next(stop, True))  # fmt: skip
    assert "fp16" in traced["op_tables"], traced["op_tables_failed"]
    table = traced["op_tables"]["fp16"]
    rows = [dict(zip(table["columns"], row)) for row in table["rows"]]
    flops = {dtype: sum(r["flops"][1] * r["weight"] for r in rows if r["unit"] == "matrix" and r["dtype"] == dtype)
             for dtype in ("float16", "float32")}  # fmt: skip
    assert flops["float16"] > 0 and flops["float32"] > 0, flops
