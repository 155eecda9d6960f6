"""`ampgan doctor`: range arithmetic, flagged layers, the loss-scale recommendation, alignment."""

import json
import textwrap

import pytest
import torch
from conftest import run_cli
from torch import nn

from ampgan.doctor.ranges import BF16, FP16, classify
from ampgan.doctor.recorder import (
    HIST_LOW,
    LayerRecorder,
    computed_in_fp32,
    flagged,
    fractions_at_scale,
    gradient_histogram,
    recommend_loss_scale,
    summarize_layers,
)
from ampgan.gan.alignment import misaligned_layers
from ampgan.gan.contract import DataSpec


@pytest.mark.parametrize(
    "value, expected",
    [
        (65504.0, "normal"),  # fp16's largest finite value
        (65519.0, "normal"),  # still rounds down to 65504
        (65520.0, "overflow"),  # halfway to 2^16: rounds to inf
        (2.0**-14, "normal"),  # smallest normal
        (0.99 * 2.0**-14, "subnormal"),
        (2.0**-24, "subnormal"),  # smallest subnormal survives
        (1.5 * 2.0**-25, "subnormal"),  # rounds up to 2^-24
        (2.0**-25, "flush_to_zero"),  # exactly half the smallest subnormal: ties to even, i.e. zero
        (1e-9, "flush_to_zero"),
    ],
)
def test_fp16_limits_by_hand_and_by_torch(value, expected):
    counts = classify(torch.tensor([value], dtype=torch.float64), FP16)
    kind = next((k for k in ("overflow", "flush_to_zero", "subnormal") if counts[k]), "normal")
    assert kind == expected
    cast = torch.tensor([value], dtype=torch.float32).half()  # what the hardware format really does
    truth = (
        "overflow"
        if torch.isinf(cast)
        else "flush_to_zero"
        if cast == 0
        else "subnormal"
        if cast.abs() < torch.finfo(torch.float16).tiny
        else "normal"
    )
    assert truth == expected


def test_bf16_limits_and_agreement_with_torch_on_random_values():
    assert classify(torch.tensor([1e38, 3.3e38]), BF16)["overflow"] == 0
    assert classify(torch.tensor([3.4e38]), BF16)["overflow"] == 1
    assert classify(torch.tensor([2.0**-126]), BF16)["subnormal"] == 0
    assert classify(torch.tensor([2.0**-130]), BF16)["subnormal"] == 1
    assert classify(torch.tensor([0.0, 1.0]), BF16)["zeros"] == 1
    values = torch.exp2(torch.empty(20000).uniform_(-140, 128)).float()
    values = values[torch.isfinite(values)]
    cast = values.bfloat16().float()
    counts = classify(values, BF16)
    assert counts["overflow"] == int(torch.isinf(cast).sum())
    assert counts["flush_to_zero"] == int((cast == 0).sum())
    cast16 = values.half().float()
    counts16 = classify(values, FP16)
    assert counts16["overflow"] == int(torch.isinf(cast16).sum()) and counts16["flush_to_zero"] == int(
        (cast16 == 0).sum()
    )


class HugeAndTiny(nn.Module):
    """`huge` makes activations of ~1e5 (beyond fp16, fine in bf16); the loss is scaled by 1e-9, so
    `tiny`'s weight gradients are ~1e-10 (flushed to zero in fp16, fine in bf16)."""

    def __init__(self):
        super().__init__()
        self.huge = nn.Linear(8, 8)
        self.tiny = nn.Linear(8, 8)
        with torch.no_grad():
            self.huge.weight.fill_(2e4)
            self.tiny.weight.fill_(0.1)

    def forward(self, x):
        return self.tiny(self.huge(x) * 1e-6)


def test_huge_activations_and_tiny_gradients_are_flagged_and_the_scale_rescues_them():
    torch.manual_seed(0)
    model = HugeAndTiny()
    recorder = LayerRecorder({"M": model})
    x = torch.randn(64, 8).abs() + 0.5
    (model(x).sum() * 1e-9).backward()
    recorder.after_backward()
    recorder.close()
    flags = flagged(summarize_layers(recorder.records))
    assert any(item.startswith("M.huge (activations") for item in flags["fp16_overflow"])
    assert "bf16_overflow" not in flags
    assert any(item.startswith("M.tiny (weight_grads") for item in flags["fp16_flush_to_zero"])
    assert "bf16_flush_to_zero" not in flags
    recommendation = recommend_loss_scale(gradient_histogram(recorder.records))
    assert recommendation["scaled"]["overflow"] == 0.0 and recommendation["rescued_fraction"] > 0.1
    tiny_grads = recorder.records["M.tiny"].histograms["weight_grads"]
    assert fractions_at_scale(tiny_grads, 0)["flush_to_zero"] > 0.5  # most of them lost unscaled
    assert fractions_at_scale(tiny_grads, recommendation["exponent"])["flush_to_zero"] == 0.0  # all rescued


def test_a_layer_in_fp32_modules_is_not_judged_by_fp16_s_range():
    """A GAN's fp32_modules compute in fp32 in every precision: the doctor flagged their tiny gradients as flushing to
    zero in fp16 (StyleGAN2-ADA's fp32 low-resolution blocks), a range they never run in."""
    from ampgan.gan.layers import keep_in_fp32

    torch.manual_seed(0)
    model = HugeAndTiny()
    keep_in_fp32(model.tiny)
    x = torch.randn(64, 8).abs() + 0.5
    with torch.autocast("cpu", dtype=torch.bfloat16):
        in_fp32 = computed_in_fp32({"M": model}, lambda: model(x))
    assert in_fp32 == {"M.tiny"}  # seen computing in fp32: the layer kept there, not the one after it
    recorder = LayerRecorder({"M": model}, {"fp16": in_fp32, "bf16": in_fp32})
    (model(x).sum() * 1e-9).backward()
    recorder.after_backward()
    recorder.close()
    assert list(recorder.records) == ["M.huge"]
    assert not any(
        item.startswith("M.tiny") for items in flagged(summarize_layers(recorder.records)).values() for item in items
    )


def test_loss_scale_recommendation_by_hand():
    histogram = [0] * 281
    histogram[-20 - HIST_LOW] = 3  # values in [2^-20, 2^-19): fp16 subnormals
    histogram[-30 - HIST_LOW] = 1  # [2^-30, 2^-29): flushed to zero
    histogram[2 - HIST_LOW] = 6  # the largest, in [4, 8)
    assert fractions_at_scale(histogram, 0) == {"overflow": 0.0, "flush_to_zero": 0.1, "subnormal": 0.3}
    recommendation = recommend_loss_scale(histogram)
    # 15 - 1 (safety) - 2 = 12: the largest values land in [2^14, 2^15), one power of two below overflow.
    assert recommendation["exponent"] == 12 and recommendation["scale"] == 4096.0
    assert recommendation["scaled"] == {"overflow": 0.0, "flush_to_zero": 0.0, "subnormal": 0.1}
    assert fractions_at_scale(histogram, 14)["overflow"] == pytest.approx(0.6)


def test_the_fixed_and_the_dynamic_loss_scale_each_say_what_they_are():
    """'fp16 loss scale: recommend 2^12 = 4096' beside 'dynamic scaling settled at 65536 for D' read as two answers
    to one question, one of them wrong: each line now says which scale it is and how it was found."""
    from ampgan.doctor.run import summary_lines

    histogram = [0] * 281
    histogram[-20 - HIST_LOW], histogram[-30 - HIST_LOW], histogram[2 - HIST_LOW] = 3, 1, 6
    dynamic = {"d": {"settled": 65536.0}, "g": {"settled": 16384.0}, "source": "8 fresh fp16 steps from 2^16"}
    report = {"loss_scale": recommend_loss_scale(histogram), "steps": 5, "flags": {}, "dynamic_scaling": dynamic}
    report |= {"hardware": {"recommended_mode": "fp32"}, "alignment": []}
    lines = [line for line in summary_lines(report) if line.startswith("fp16 loss scale")]
    assert lines == [
        "fp16 loss scale, fixed (--loss-scale 4096): 2^12 = 4096, the largest power of 2 that keeps the largest "
        "gradient of 5 fp32 steps (~2^2, every network's) 2x below fp16's overflow; scaled by it, gradients flushed "
        "to zero 10.000% -> 0%, subnormal 30.000% -> 10.000%, overflowing 0%.",
        "fp16 loss scale, dynamic (the default): GradScaler settled at 65536 for D, 16384 for G (8 fresh fp16 steps "
        "from 2^16), the scale those steps ran at without overflowing (it halves at each overflow and doubles only "
        "after 2000 steps without one); it keeps no headroom and is each network's own, so it need not match the "
        "fixed scale.",
    ]


def test_misaligned_dimensions_are_found_and_aligned_ones_are_not():
    model = nn.Sequential(nn.Conv2d(3, 12, 3), nn.Conv2d(12, 16, 3), nn.Flatten(), nn.Linear(16, 32), nn.Linear(32, 10))
    found = {(f["layer"], f["dimension"]): f for f in misaligned_layers({"M": model})}
    assert set(found) == {
        ("M.0", "in_channels"),
        ("M.0", "out_channels"),
        ("M.1", "in_channels"),
        ("M.4", "out_features"),
    }
    assert found[("M.0", "out_channels")]["suggested"] == 16 and not found[("M.0", "out_channels")]["fixed_by_task"]
    assert found[("M.0", "in_channels")]["fixed_by_task"]  # 3 image channels


def test_doctor_command_writes_json_figures_and_summary(tmp_path, capsys):
    out = tmp_path / "doctor"
    code, stdout, err = run_cli(
        capsys,
        "doctor",
        "--dataset",
        "synthetic",
        "--width",
        "12",
        "--set",
        "model.z_dim=16",
        "--batch-size",
        "8",
        "--steps",
        "2",
        "--fp16-steps",
        "2",
        "--device",
        "cpu",
        "--out",
        str(out),
    )
    assert code == 0, err
    report = json.loads((out / "doctor.json").read_text())
    layers = {row["layer"] for row in report["layers"]}
    assert {"G.project.0", "D.features.0", "D.class_head"} <= layers
    assert report["loss_scale"]["scale"] >= 1 and report["dynamic_scaling"]["steps"] == 2
    assert any(a["value"] == 12 for a in report["alignment"])  # width 12 is not a multiple of 8
    assert set(report["hardware"]["speedup_vs_fp32"]) == {"bf16", "fp16"}
    assert (out / "doctor_gradients.png").is_file() and (out / "doctor_layers.png").is_file()
    assert "fp16 loss scale, fixed (--loss-scale " in stdout and "try 16" in stdout


def test_dynamic_scaling_names_each_loss_scaler_not_only_d(tmp_path):
    """The study's AC-GAN has three loss scalers (D's, G's and its classifier update's, which trains both networks
    with an optimizer of its own): the state names each, a run logs each, and the doctor says where each settled.
    It said "settled at 16384 for D" alone, over a G whose scale it had measured and did not print."""
    from conftest import tiny_config, tiny_state

    from ampgan.doctor.run import _dynamic_fp16_run, summary_lines
    from ampgan.training.loop import MetricWindow

    state = tiny_state("fp16", model="acgan-2019", image_size=28, channels=1, num_classes=10)
    scalers = state.loss_scalers()
    assert list(scalers) == ["d", "g", "classifier"] and len({id(s) for s in scalers.values()}) == 3
    classifier = state.extra_scalers["classifier"]
    classifier.load_state_dict({**classifier.state_dict(), "scale": 2.0**15})  # as one overflow of its own leaves it
    record = MetricWindow().flush(state)
    assert (record["loss_scale_d"], record["loss_scale_g"], record["loss_scale_classifier"]) == (2.0**16,) * 2 + (
        2.0**15,
    )
    # read back from a run's metrics: one history per scaler logged, each where it settled
    scales = {"d": [64.0, 32.0, 32.0, 32.0], "g": [64.0] * 4, "classifier": [64.0, 64.0, 16.0, 16.0]}
    lines = [{"step": i, "train_seconds": i, **{f"loss_scale_{k}": v[i] for k, v in scales.items()}} for i in range(4)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    dynamic = _dynamic_fp16_run(tiny_config(precision="fp16"), None, 0, tmp_path)
    assert {name: dynamic[name]["settled"] for name in scales} == {"d": 32.0, "g": 64.0, "classifier": 16.0}
    assert dynamic["steps"] == 4
    report = {
        "loss_scale": {},
        "flags": {},
        "dynamic_scaling": dynamic,
        "hardware": {"recommended_mode": "fp32"},
        "alignment": [],
    }
    assert (
        f"fp16 loss scale, dynamic (the default): GradScaler settled at 32 for D, 64 for G, 16 for update "
        f"'classifier' (its own scaler) ({tmp_path}/metrics.jsonl), the scale those steps ran at"
        in " ".join(summary_lines(report))
    )


def test_the_doctors_advice_says_which_modes_are_unsettled_and_what_would_settle_them():
    """A doctor on a loaded machine printed bf16 at 0.84x (95% CI 0.40-1.74, 13 rounds) and 'use fp32 here', as if
    bf16 were known no faster: its band is no answer (speed/intervals.py), and the advice says so."""
    from ampgan.doctor.run import summary_lines

    wide = {"estimate": 0.84, "low": 0.40, "high": 1.74, "rounds": 13}
    slower = {"estimate": 0.42, "low": 0.26, "high": 0.70, "rounds": 13}
    decisions = {
        name: {"interval": interval, "description": f"{name}: ..."}
        for name, interval in (("bf16", wide), ("fp16", slower))
    }
    report = {
        "loss_scale": {},
        "flags": {},
        "dynamic_scaling": {},
        "hardware": {"recommended_mode": "fp32", "batch_size": 8, "decisions": decisions},
        "alignment": [],
    }
    (advice,) = [line for line in summary_lines(report) if line.startswith("use fp32 here")]
    assert advice.endswith("; bf16 unsettled: run ampgan doctor again with fewer other processes running.")


def test_the_gradient_figure_keeps_its_legend_and_notes_off_the_histograms(monkeypatch, tmp_path):
    """The legend sat inside the upper right, over the top of the scaled histogram, and the bf16 note at the
    top left, where a histogram of larger gradients rises: both now stay off the bars, wherever they lie."""
    import ampgan.doctor.run as doctor_run

    captured = {}
    monkeypatch.setattr(doctor_run, "save_figure", lambda figure, path, footer: captured.update(figure=figure))
    for centre in (-30, -8, 10):  # gradients far left, in the middle, and large
        counts = [0] * 281
        counts[centre - HIST_LOW : centre - HIST_LOW + 5] = [1, 4, 9, 4, 1]
        report = {"gradient_histogram": {"low_exponent": HIST_LOW, "counts": counts}, "loss_scale": {"exponent": 6}}
        report |= {"steps": 1, "config": {"model": {"name": "m"}, "budget": {"batch_size": 8}}}
        report["environment"] = {"hardware_summary": "cpu", "versions": {"torch": "2.13.0", "ampgan": "0.1.0"}}
        doctor_run._gradient_figure(report, tmp_path / "g.png")
        figure = captured["figure"]
        axis = figure.axes[0]
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        legend, frame = axis.get_legend().get_window_extent(renderer), axis.get_window_extent(renderer)
        assert legend.x0 >= frame.x1  # beside the axis, not on it
        assert not axis.texts and "bf16 covers 2^-133 .. 2^127" in axis.get_title()


def test_a_network_s_own_input_and_output_sizes_are_not_alignment_advice_but_its_widths_are():
    """A pix2pix D reads the image pair (2C = 2 channels) and an SS-GAN D's head predicts 4 rotations: no
    other layer makes or takes those sizes, so the data and the task fix them ('try 8' was wrong advice). A
    width of 12 between two layers is the model's to choose and is still named."""
    data = DataSpec(32, 1, 10, tuple("0123456789"))

    def d(width):  # pair in, rotation head out
        return nn.Sequential(nn.Conv2d(2, width, 3), nn.Conv2d(width, 16, 3), nn.Flatten(), nn.Linear(16, 4))

    assert [a for a in misaligned_layers({"D": d(16)}, data) if not a["fixed_by_task"]] == []
    named = [(a["layer"], a["dimension"]) for a in misaligned_layers({"D": d(12)}, data) if not a["fixed_by_task"]]
    assert named == [("D.0", "out_channels"), ("D.1", "in_channels")]
    # DCGAN's z_dim of 100 into G's first layer is unmatched too, but the model's to choose: named, as before
    g = nn.Sequential(nn.Linear(100, 16 * 4 * 4), nn.Unflatten(1, (16, 4, 4)), nn.ConvTranspose2d(16, 1, 3))
    assert ("G.0", "in_features") in [
        (a["layer"], a["dimension"]) for a in misaligned_layers({"G": g}, data) if not a["fixed_by_task"]
    ]


def test_a_scalar_condition_into_a_layer_is_not_alignment_advice_on_one_channel_data():
    """A GAN conditioned on one continuous number embeds it with Linear(1, 16) in G and D. On 1-channel data G's
    last layer makes 1 and D's head makes 1, so the 1 was 'matched' and named: 'G.embed in_features=1 (try 8)'."""
    data = DataSpec(16, 1, 10, tuple("0123456789"))
    g = nn.ModuleDict({"embed": nn.Linear(1, 16), "out": nn.Conv2d(16, 1, 3)})
    d = nn.ModuleDict({"proj": nn.Linear(1, 16), "features": nn.Conv2d(1, 16, 3), "head": nn.Linear(16, 1)})
    assert [a["layer"] for a in misaligned_layers({"G": g, "D": d}, data) if not a["fixed_by_task"]] == []


USER_GANS = textwrap.dedent("""
    import torch
    from torch import nn
    import ampgan

    class D(nn.Module):
        def __init__(self, pixels, fp32_head=False):
            super().__init__()
            self.body = nn.Sequential(nn.Flatten(), nn.Linear(pixels, 16))
            self.head = nn.Linear(16, 1)
            self.fp32_head = fp32_head
            with torch.no_grad():  # weights of 1e-9 (body's first row, half the head's): zero in fp16
                self.body[1].weight[0].fill_(1e-9)
                self.head.weight[0, :8].fill_(1e-9)

        def forward(self, x):
            h = self.body(x)
            if not self.fp32_head:
                return self.head(h).flatten()
            with torch.autocast(h.device.type, enabled=False):  # the user's own fp32 region
                return self.head(h.float()).flatten()

    def nets(data, sigmoid=False, fp32_head=False):
        pixels = data.channels * data.image_size ** 2
        G = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, pixels), nn.Sigmoid() if sigmoid else nn.Tanh(),
                          nn.Unflatten(1, (data.channels, data.image_size, data.image_size)))
        return G, D(pixels, fp32_head)

    def d_loss(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.real), 1.0) + ampgan.real_fake_loss(ctx.D(ctx.fake), 0.0)

    def g_loss(ctx):
        return ampgan.real_fake_loss(ctx.D(ctx.fake), 1.0)

    def gan(data, **options):
        G, D = nets(data, **options)
        return ampgan.GAN(generator=G, discriminator=D, z_dim=16, d_loss=d_loss, g_loss=g_loss)

    def sigmoid_g(data):  # G's range is not the data's: a preflight warning
        return gan(data, sigmoid=True)

    def fp32_head(data):
        return gan(data, fp32_head=True)

    def plain_head(data):
        return gan(data)
""")


def _doctor(capsys, tmp_path, monkeypatch, function, *extra):
    """`ampgan doctor` on a user GAN of USER_GANS, its precision advice on an injected machine (the real decision
    times bf16 and fp16 for as long as a loaded machine takes; tests/test_speed.py covers it)."""
    import ampgan.speed.decision as decision

    steps = {"fp32": 0.01, "bf16": 0.02, "fp16": 0.02}
    monkeypatch.setattr(
        decision,
        "measure_on_training_step",
        lambda config, dataset, device: decision.measure_with(lambda name: lambda: steps[name]),
    )
    (tmp_path / "gans.py").write_text(USER_GANS)
    out = tmp_path / f"doctor-{function}"
    code, stdout, err = run_cli(
        capsys,
        "doctor",
        "--model",
        f"{tmp_path / 'gans.py'}:{function}",
        "--dataset",
        "synthetic",
        "--image-size",
        "8",
        "--batch-size",
        "8",
        "--steps",
        "1",
        "--fp16-steps",
        "0",
        "--device",
        "cpu",
        "--out",
        str(out),
        *extra,
    )
    assert code == 0, err
    return stdout, json.loads((out / "doctor.json").read_text())


def test_each_preflight_warning_is_said_once_in_the_doctors_summary(tmp_path, capsys, monkeypatch):
    """The doctor printed each preflight warning twice: as preflight ran, and again in its summary."""
    stdout, report = _doctor(capsys, tmp_path, monkeypatch, "sigmoid_g")
    assert [f["check"] for f in report["preflight"]] == ["range"]
    said = [line for line in stdout.splitlines() if "G's output spans" in line]
    assert len(said) == 1 and said[0].startswith("- preflight: warning: G's output spans"), stdout
    assert said[0].removeprefix("- ") in report["summary_lines"]


def test_a_layer_the_model_keeps_in_fp32_itself_is_not_judged_by_fp16_s_range(tmp_path, capsys, monkeypatch):
    """A head the user keeps in fp32 in their own autocast(enabled=False) region computes in fp32 in every precision,
    as a GAN.fp32_modules layer does: the doctor flagged its weights of 1e-9 as flushing to zero in fp16. What runs
    decides: the same head without the region, and the layer before it in either, are still flagged."""
    _, report = _doctor(capsys, tmp_path, monkeypatch, "fp32_head")
    flushed = report["flags"]["fp16_flush_to_zero"]
    assert any(item.startswith("D.body.1 (weights") for item in flushed), flushed
    assert not any(item.startswith("D.head") for item in flushed), flushed
    assert "D.head" not in {row["layer"] for row in report["layers"]}  # fp32 under fp16 and bf16 alike
    _, report = _doctor(capsys, tmp_path, monkeypatch, "plain_head")
    assert any(item.startswith("D.head (weights") for item in report["flags"]["fp16_flush_to_zero"])
