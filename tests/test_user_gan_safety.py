"""What ampgan's step must never do to a user's GAN: train a parameter the user froze, train on through an
update that is non-finite or skipped every time, or fail inside its step with a traceback."""

import pytest
import torch
from torch import nn

import ampgan
from ampgan.config import config_from_options
from ampgan.data.batches import BatchStream
from ampgan.data.synthetic import make_synthetic
from ampgan.gan.registry import model_name_for
from ampgan.training.precision import build_policy
from ampgan.training.prepared import prepare_run
from ampgan.training.state import build_train_state
from ampgan.training.step import train_step

CPU = torch.device("cpu")
SIZE = 8


class BlurStemD(nn.Module):
    """A D behind a fixed 3x3 blur (a Projected-GAN-style frozen stem), with a frozen bias beside its head."""

    def __init__(self, channels: int):
        super().__init__()
        self.blur = nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False)
        nn.init.constant_(self.blur.weight, 1 / 9)
        self.blur.weight.requires_grad_(False)
        self.head = nn.Linear(channels * SIZE * SIZE, 1)
        self.offset = nn.Parameter(torch.full((1,), 0.25), requires_grad=False)

    def forward(self, images):  # (B, C, 8, 8) -> (B,)
        return (self.head(self.blur(images).flatten(1)) + self.offset).squeeze(1)


def frozen_stem_gan(data: ampgan.DataSpec) -> ampgan.GAN:
    pixels = data.channels * data.image_size**2
    generator = nn.Sequential(
        nn.Linear(8, 16),
        nn.ReLU(),
        nn.Linear(16, pixels),
        nn.Tanh(),
        nn.Unflatten(1, (data.channels, data.image_size, data.image_size)),
    )
    generator[0].weight.requires_grad_(False)  # a frozen layer of G's too
    discriminator = BlurStemD(data.channels)

    def r1(ctx):
        real = ctx.real.detach().float().requires_grad_(True)
        return ctx.input_gradients(ctx.D(real), real).flatten(1).pow(2).sum(1).mean()

    return ampgan.GAN(
        generator=generator,
        discriminator=discriminator,
        z_dim=8,
        d_loss=lambda c: ampgan.real_fake_loss(c.D(c.real), 1.0) + ampgan.real_fake_loss(c.D(c.fake), 0.0),
        g_loss=lambda c: ampgan.real_fake_loss(c.D(c.fake), 1.0),
        extra_updates=[ampgan.Update("r1", r1, every=2)],
    )


def _state(model, precision: str, dataset):
    config = config_from_options(
        model=model_name_for(model), dataset="synthetic", image_size=SIZE, precision=precision, batch_size=8
    )
    prepared = prepare_run(config, dataset)
    state = build_train_state(prepared.config, prepared.model, prepared.data, build_policy(precision, CPU))
    stream = BatchStream(prepared.dataset, 8, CPU, 0, image_range=state.gan.image_range)
    return state, stream


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_a_frozen_parameter_is_never_trained(precision):
    state, stream = _state(frozen_stem_gan, precision, make_synthetic(image_size=SIZE, count=32))
    frozen = {
        "D.blur": state.discriminator.blur.weight,
        "D.offset": state.discriminator.offset,
        "G.0": state.generator[0].weight,
    }
    before = {name: p.detach().clone() for name, p in frozen.items()}
    head_before = state.discriminator.head.weight.detach().clone()
    for _ in range(4):  # two with the R1 update, where G is frozen by ampgan
        train_step(state, stream.next_batch)
    for name, parameter in frozen.items():
        assert torch.equal(parameter, before[name]), name
        assert not parameter.requires_grad, f"{name} was switched back on"
    assert not torch.equal(state.discriminator.head.weight, head_before)  # D did learn
    in_optimizers = {
        id(p) for opt in (state.optimizer_g, state.optimizer_d) for g in opt.param_groups for p in g["params"]
    }
    assert not in_optimizers & {id(p) for p in frozen.values()}
    assert all(p.requires_grad for p in state.discriminator.head.parameters())  # restored after G's update


FAILING_MODELS = '''
import torch
from torch import nn
import ampgan


def nets(data):
    pixels = data.channels * data.image_size ** 2
    shape = (data.channels, data.image_size, data.image_size)
    G = nn.Sequential(nn.Linear(8, pixels), nn.Tanh(), nn.Unflatten(1, shape))
    D = nn.Sequential(nn.Flatten(), nn.Linear(pixels, 1), nn.Flatten(0))
    return G, D


def d_loss(ctx):
    return ampgan.real_fake_loss(ctx.D(ctx.real), 1.0) + ampgan.real_fake_loss(ctx.D(ctx.fake), 0.0)


def g_loss(ctx):
    return ampgan.real_fake_loss(ctx.D(ctx.fake), 1.0)


def reaches_nothing(data):
    """An update of G's whose loss reads only D on real images: no gradient reaches G."""
    G, D = nets(data)
    return ampgan.GAN(generator=G, discriminator=D, z_dim=8, d_loss=d_loss, g_loss=g_loss,
                      extra_updates=[ampgan.Update("reg", lambda ctx: ctx.D(ctx.real).float().pow(2).mean(),
                                                   networks=("generator",), every=2)])


def raises(data):
    G, D = nets(data)
    return ampgan.GAN(generator=G, discriminator=D, z_dim=8, d_loss=d_loss,
                      g_loss=lambda ctx: ampgan.real_fake_loss(ctx.D(ctx.fake, ctx.labels), 1.0))


class RunningMeanD(nn.Module):
    """A D written with fp16 in mind (as StyleGAN2-ADA's layers test for float16): it keeps a running mean
    of its features in an fp32 buffer and casts fp16 features to fp32 first; bf16 features reach the
    fp32 buffer's lerp_ as they are, which refuses a second dtype."""

    def __init__(self, pixels):
        super().__init__()
        self.linear = nn.Linear(pixels, 16)
        self.register_buffer("feature_mean", torch.zeros(16))

    def forward(self, images):
        h = self.linear(images.flatten(1))
        if h.dtype == torch.float16:
            h = h.float()
        self.feature_mean.lerp_(h.detach().mean(0), 0.01)
        return h.mean(1)


def fp16_minded(data):
    G, _ = nets(data)
    return ampgan.GAN(generator=G, discriminator=RunningMeanD(data.channels * data.image_size ** 2), z_dim=8,
                      d_loss=d_loss, g_loss=g_loss)
'''


@pytest.mark.parametrize(
    ("function", "command", "expected"),
    [
        (
            "reaches_nothing",
            ["train", "--precision", "fp16", "--steps", "2"],
            "update 'reg' (of the generator): its loss reaches no trainable parameter of the generator",
        ),
        ("reaches_nothing", ["preflight"], "update 'reg' (of the generator): its loss reaches no trainable parameter"),
        ("raises", ["preflight"], "G's update, g_loss failed: TypeError: Sequential.forward() takes 2 positional"),
        ("raises", ["train", "--precision", "bf16", "--steps", "1"], "G's update, g_loss failed: TypeError"),
        # fails only under bf16: preflight's real bf16 step finds it (exit 2) before a comparison starts
        ("fp16_minded", ["preflight"], "error: under bf16: model "),
        (
            "fp16_minded",
            ["preflight"],
            "D's update, d_loss failed: RuntimeError: expected dtype float for `end` but got dtype c10::BFloat16",
        ),
    ],
)
def test_a_failure_inside_the_step_is_one_line_naming_network_and_update(function, command, expected, tmp_path, capsys):
    from conftest import run_cli

    path = tmp_path / "models.py"
    path.write_text(FAILING_MODELS)
    extra = (
        ["--batch-size", "8", "--device", "cpu", "--quiet", "--out", str(tmp_path / "run")]
        if command[0] == "train"
        else []
    )
    code, out, err = run_cli(
        capsys, *command, "--model", f"{path}:{function}", "--dataset", "synthetic", "--image-size", "8", *extra
    )
    assert code == 2, out + err
    assert "Traceback" not in err and expected in out + err, out + err


def nan_penalty_gan(data: ampgan.DataSpec) -> ampgan.GAN:
    """A lazy penalty that is NaN at every application (as a path-length term from a pre-summed tensor is
    under fp16 scaling): its update is skipped each time while D and G train on."""
    pixels = data.channels * data.image_size**2
    generator = nn.Sequential(
        nn.Linear(8, pixels), nn.Tanh(), nn.Unflatten(1, (data.channels, data.image_size, data.image_size))
    )
    discriminator = nn.Sequential(nn.Flatten(), nn.Linear(pixels, 1), nn.Flatten(0))

    def broken_penalty(ctx):
        real = ctx.real.detach().float().requires_grad_(True)
        return ctx.input_gradients(ctx.D(real), real).pow(2).sum().sqrt() * float("nan")

    return ampgan.GAN(
        generator=generator,
        discriminator=discriminator,
        z_dim=8,
        d_loss=lambda c: ampgan.real_fake_loss(c.D(c.real), 1.0) + ampgan.real_fake_loss(c.D(c.fake), 0.0),
        g_loss=lambda c: ampgan.real_fake_loss(c.D(c.fake), 1.0),
        extra_updates=[ampgan.Update("penalty", broken_penalty, every=2)],
    )


def test_a_run_whose_lazy_update_is_nan_at_every_application_stops(tmp_path):
    from ampgan.training.faults import NumericFault
    from ampgan.training.loop import FAILED_APPLICATIONS_TO_STOP, run_training

    config = config_from_options(
        model=model_name_for(nan_penalty_gan),
        dataset="synthetic",
        image_size=SIZE,
        precision="fp16",
        batch_size=8,
        steps=100,
        device="cpu",
        log_every=2,
    )
    with pytest.raises(
        NumericFault,
        match=r"update 'penalty' was skipped or non-finite at each of its last 8 "
        r"applications \(by step 16, fp16",
    ):
        run_training(
            prepare_run(config, make_synthetic(image_size=SIZE, count=32)), tmp_path / "run", show_progress=False
        )
    assert FAILED_APPLICATIONS_TO_STOP == 8


def test_a_study_whose_bench_finished_nothing_keeps_its_runs_and_reports(tmp_path, capsys):
    """The bench marks every configuration too slow (compare.bench.max_seconds far under one step): the runs still
    train, the cost stage says why it could not run, compare.json is written and `ampgan report` renders it."""
    import json

    from conftest import run_cli

    out = tmp_path / "study"
    code, stdout, err = run_cli(
        capsys,
        "compare",
        "--model",
        f"{__file__}:frozen_stem_gan",
        "--dataset",
        "synthetic",
        "--image-size",
        str(SIZE),
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
        "compare.bench.min_seconds=0.0001",
        "--set",
        "compare.bench.max_seconds=0.0003",
        "--batch-size",
        "8",
        "--device",
        "cpu",
        "--out",
        str(out),
    )
    assert code == 0, err[-2000:]
    assert "bench: no configuration finished" in stdout + err  # said before training
    assert "give a larger --set compare.bench.max_seconds" in stdout + err  # the setting that caps it
    document = json.loads((out / "compare.json").read_text())
    assert set(document["runs"]) == {"fp32", "bf16"}
    assert document["cost"]["basis"] is None and "the cost stage could not run" in document["cost"]["note"]
    assert any(line.startswith("Cost: not computed") for line in document["verdict"])
    code, stdout, err = run_cli(capsys, "report", str(out))
    assert code == 0, err[-2000:]
    assert "Cost: not computed" in (out / "report.md").read_text()


def _image_folder(root, counts: dict[str, int], size: int = 8):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for name, count in counts.items():
        (root / name).mkdir(parents=True)
        for index in range(count):
            Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(root / name / f"{index}.png")
    return root


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        (
            {"cats": 24},
            "the data has one class (cats): ampgan's evaluator learns its features by telling the classes apart",
        ),
        ({"cats": 24, "dogs": 3}, "class 'dogs' has 3 image(s): the evaluator needs at least 8 per class"),
    ],
)
def test_data_no_evaluator_can_learn_from_is_refused_before_anything_runs(counts, expected, tmp_path, capsys):
    from conftest import run_cli

    folder = _image_folder(tmp_path / "images", counts)
    out = tmp_path / "study"
    code, stdout, err = run_cli(
        capsys,
        "compare",
        "--model",
        f"{__file__}:frozen_stem_gan",
        "--dataset",
        f"folder:{folder}",
        "--image-size",
        str(SIZE),
        "--precisions",
        "fp32,bf16",
        "--seeds",
        "1",
        "--steps",
        "2",
        "--device",
        "cpu",
        "--out",
        str(out),
    )
    assert code == 2 and expected in err and "Traceback" not in err, err
    assert not out.exists() and "preflight" not in stdout + err  # said before any step ran


def test_adam_parameter_groups_give_a_prefix_its_own_learning_rate():
    from ampgan.gan.contract import check_gan
    from ampgan.training.state import make_adam, trainable

    network = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    optimizer = make_adam(trainable(network), ampgan.Adam(lr=1e-3, lr_multipliers={"0.": 0.01}))
    assert [(group["lr"], len(group["params"])) for group in optimizer.param_groups] == [(1e-5, 2), (1e-3, 2)]
    lazy = ampgan.Adam.lazy(4, lr=2e-3, betas=(0.0, 0.99))
    assert lazy.lr == pytest.approx(2e-3 * 0.8) and lazy.betas == pytest.approx((0.0, 0.99**0.8))
    gan = frozen_stem_gan(ampgan.DataSpec(SIZE, 3, 10))
    gan.optimizer_g = ampgan.Adam(lr_multipliers={"mapping.": 0.01})
    from ampgan.errors import AmpganError

    with pytest.raises(
        AmpganError, match="lr_multipliers names 'mapping.', which no parameter name of the generator starts with"
    ):
        check_gan(gan, "my_gan.py:build")


def test_weight_tying_between_g_and_d_is_refused_naming_the_shared_parameter():
    """BigGAN-style code sharing one class embedding between G and D was refused with a count alone ('share 1
    parameter(s)'), leaving the user to find which of their modules was shared."""
    from ampgan.errors import AmpganError
    from ampgan.gan.contract import check_gan

    embedding = nn.Embedding(10, 4)
    generator, discriminator = nn.ModuleDict({"net": nn.Linear(4, 4)}), nn.ModuleDict({"head": nn.Linear(4, 1)})
    generator.classes, discriminator.project = embedding, embedding
    gan = ampgan.GAN(generator=generator, discriminator=discriminator, z_dim=4, d_loss=sum, g_loss=sum)
    with pytest.raises(AmpganError, match=r"share 1 parameter\(s\) \(G.classes.weight is D.project.weight\)"):
        check_gan(gan, "my_gan.py:build")


class PretrainedBackboneD(nn.Module):
    """Projected GAN's D: a frozen feature network with batch norm whose statistics are pretrained, kept in eval
    mode by D's train() override (stylegan2-ada's loop calls D.train() once, which is what makes it hold)."""

    def __init__(self, channels: int):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(channels, 8, 3, padding=1), nn.BatchNorm2d(8)).requires_grad_(False)
        self.head = nn.Linear(8 * SIZE * SIZE, 1)

    def train(self, mode: bool = True):
        super().train(mode)
        self.backbone.train(False)
        return self

    def forward(self, images):  # (B, C, 8, 8) -> (B,)
        return self.head(self.backbone(images).flatten(1)).squeeze(1)


def pretrained_backbone_gan(data: ampgan.DataSpec) -> ampgan.GAN:
    gan = frozen_stem_gan(data)
    gan.discriminator, gan.extra_updates = PretrainedBackboneD(data.channels), ()
    return gan


def test_a_network_s_train_override_is_called_so_a_frozen_backbone_s_statistics_stay_pretrained():
    """ampgan relied on nn.Module's construction default (train mode) and never called train(): a D that keeps its
    pretrained backbone in eval mode by overriding train() had the backbone's batch-norm statistics moved by every
    forward pass, which the same file trained by its own loop never did."""
    state, stream = _state(pretrained_backbone_gan, "fp32", make_synthetic(image_size=SIZE, count=32))
    norm = state.discriminator.backbone[1]
    assert not norm.training and state.discriminator.training
    train_step(state, stream.next_batch)
    assert torch.equal(norm.running_mean, torch.zeros(8)) and int(norm.num_batches_tracked) == 0


class InkConditionedG(nn.Module):
    def __init__(self, data: ampgan.DataSpec):
        super().__init__()
        shape = (data.channels, data.image_size, data.image_size)
        self.net = nn.Sequential(nn.Linear(9, shape[0] * shape[1] * shape[2]), nn.Tanh(), nn.Unflatten(1, shape))

    def forward(self, z, ink):  # ink: (B,) a continuous condition
        return self.net(torch.cat([z, ink.float()[:, None]], 1))


def continuous_condition_gan(data: ampgan.DataSpec) -> ampgan.GAN:
    gan = frozen_stem_gan(data)
    gan.generator, gan.extra_updates, gan.conditional, gan.num_classes = InkConditionedG(data), (), True, 10
    gan.draw_inputs = lambda ctx: (
        torch.randn(ctx.batch_size, 8, generator=ctx.rng),
        torch.rand(ctx.batch_size, generator=ctx.rng),  # ink in [0, 1)
    )
    return gan


def test_a_conditional_gan_s_float_labels_are_refused_naming_z_as_the_place_for_a_continuous_condition():
    """conditional=True with draw_inputs returning a continuous condition as the labels trained, and every sample
    grid, generate and evaluation then fed G the class indices 0..9 as that condition, far outside what it
    trained on: silent nonsense pictures."""
    from ampgan.errors import AmpganError

    state, stream = _state(continuous_condition_gan, "fp32", make_synthetic(image_size=SIZE, count=32))
    with pytest.raises(AmpganError, match=r"draw_inputs returned torch.float32 labels, .*in z .*conditional=False"):
        train_step(state, stream.next_batch)


@pytest.mark.parametrize("where", ["optimizer_g", "optimizer_d", "update"])
def test_a_torch_optimizer_in_place_of_ampgan_adam_is_one_line(where):
    """optimizer_g=torch.optim.Adam (a user's own optimizer, as their loop had it) stopped with an AttributeError
    traceback ('type object Adam has no attribute lr_multipliers'); one made over G's parameters likewise."""
    from ampgan.errors import AmpganError
    from ampgan.gan.contract import check_gan

    gan = frozen_stem_gan(ampgan.DataSpec(SIZE, 3, 10))
    made = torch.optim.Adam(gan.generator[2].parameters(), lr=1e-3)
    if where == "update":
        gan.extra_updates = [ampgan.Update("aux", gan.g_loss, ("generator",), optimizer=made)]
        said = "Update 'aux' optimizer is torch.optim.adam.Adam, not ampgan.Adam"
    else:
        setattr(gan, where, torch.optim.Adam)
        said = f"GAN.{where} is torch.optim.adam.Adam, not ampgan.Adam"
    with pytest.raises(AmpganError, match=rf"my_gan.py:build: {said}: give its settings, ampgan.Adam\(lr=\.\.\."):
        check_gan(gan, "my_gan.py:build")


@pytest.mark.parametrize("kind", [torch.optim.RAdam, torch.optim.SGD])
def test_an_optimizer_other_than_adam_is_said_to_be_unavailable_not_taken_as_adam_s_settings(kind):
    """optimizer_g=torch.optim.RAdam was told to 'give its settings, ampgan.Adam(...)', as if RAdam's settings made
    an RAdam: ampgan's step runs Adam for every network, and the line now says so."""
    from ampgan.errors import AmpganError
    from ampgan.gan.contract import check_gan

    gan = frozen_stem_gan(ampgan.DataSpec(SIZE, 3, 10))
    gan.optimizer_d = kind
    said = f"GAN.optimizer_d is torch.optim.{kind.__module__.rsplit('.', 1)[1]}.{kind.__name__}, not ampgan.Adam: "
    with pytest.raises(AmpganError, match=rf"{said}ampgan's step runs Adam only, not {kind.__name__}: give its"):
        check_gan(gan, "my_gan.py:build")
