import dataclasses
import json

import pytest
from conftest import run_cli

from ampgan.config import (
    TrainConfig,
    build_config,
    config_from_options,
    parse_duration,
    parse_loss_scale,
    parse_set,
    read_config_file,
)
from ampgan.errors import AmpganError, ConfigError


@pytest.mark.parametrize("text, seconds", [("7m", 420), ("90s", 90), ("90", 90), ("1h30m", 5400), ("0.5m", 30)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["7 minutes", "m7", "", "7x", "inf"])
def test_parse_duration_rejects_nonsense(text):
    with pytest.raises(AmpganError, match="duration"):
        parse_duration(text)


def test_parse_loss_scale():
    assert parse_loss_scale("dynamic") is None
    assert parse_loss_scale("128") == 128.0
    for text in ("big", "inf", "nan", "-1", "0"):
        with pytest.raises(AmpganError, match="'dynamic' or a"):
            parse_loss_scale(text)


@pytest.mark.parametrize(
    "options, field, problem",
    [
        (dict(precision="fp8"), "precision.name", "is 'fp8': choose one of fp32, tf32, bf16, fp16"),
        (dict(batch_size=0), "budget.batch_size", "must be a whole number of at least 1, got 0"),
        (dict(batch_size=True), "budget.batch_size", "takes int"),
        (dict(device="tpu"), "compute.device", "is 'tpu'"),
        (dict(precision="bf16", loss_scale=128.0), "precision.loss_scale", "applies to fp16 only, not bf16"),
        (dict(precision="fp16", loss_scale=-1.0), "precision.loss_scale", "must be a positive, finite number"),
        (dict(precision="fp16", loss_scale=float("inf")), "precision.loss_scale", "must be a positive, finite number"),
        (dict(channels=2), "data.channels", "must be 1 or 3"),
        (dict(steps=0), "budget.steps", "must be a whole number"),
        (dict(time_budget=float("nan")), "budget.time_budget_s", "positive, finite"),
        (dict(lr_g=-1.0), "optim.lr_g", "positive"),
        (dict(seed=-3), "seed", "at least 0"),
        # Ranges that come from the field's declared kind (sections.py setting), one per kind.
        (dict(keep=0), "checkpoints.keep", "at least 1, got 0"),
        (dict(image_size=3), "data.image_size", "at least 4, got 3"),
        (dict(every_s=-1.0), "checkpoints.every_s", "positive, finite"),
        (dict(lr_d=0.0), "optim.lr_d", "positive, finite"),
        (dict(log_every=0), "logging.log_every", "at least 1"),
        (dict(checkpoint_every=0), "checkpoints.every_steps", "at least 1"),
    ],
)
def test_every_field_is_checked_by_its_path(options, field, problem):
    with pytest.raises(ConfigError) as caught:
        config_from_options(**options)
    assert caught.value.field == field and problem in caught.value.problem


def test_config_round_trips_through_a_dict_and_names_unknown_parts():
    config = config_from_options(
        dataset="synthetic", precision="fp16", loss_scale=128.0, steps=5, sets=["model.mode_seeking=0.5"]
    )
    assert TrainConfig.from_dict(config.to_dict()) == config
    assert config.to_dict()["model"] == {"name": "acgan", "mode_seeking": 0.5}
    with pytest.raises(ConfigError, match="warp_drive is not a config section"):
        TrainConfig.from_dict({**config.to_dict(), "warp_drive": True})
    with pytest.raises(ConfigError, match=r"budget.batchsize is not a field of budget \(did you mean batch_size\?\)"):
        config.with_fields({"budget.batchsize": 3})


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        TrainConfig().budget.batch_size = 3


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(dataset="synthetic", classes="foo,bar"), "data.classes applies to quickdraw only, not to synthetic"),
        (dict(dataset="quickdraw", classes=" , "), "data.classes needs at least one class name"),
        (dict(dataset="digits", data_dir="/data"), "data.data_dir applies to cifar10 and mnist and quickdraw only"),
        (dict(dataset="digits", cache=True), "data.cache applies to folder:PATH datasets only"),
        (dict(dataset="mnist", download=True), "data.download applies to cifar10 and quickdraw only"),
    ],
)
def test_options_the_dataset_would_ignore_are_refused(options, message):
    with pytest.raises(AmpganError, match=message):
        config_from_options(**options)


def test_set_values_read_like_toml_and_paths_are_checked():
    assert parse_set("budget.batch_size=128") == ("budget.batch_size", 128)
    assert parse_set("model.spectral_norm_d=false") == ("model.spectral_norm_d", False)
    assert parse_set("data.classes=apple,eye") == ("data.classes", "apple,eye")
    assert parse_set('data.dataset="folder:my images"') == ("data.dataset", "folder:my images")
    assert parse_set("budget.steps=null") == ("budget.steps", None)
    with pytest.raises(AmpganError, match="section.field=value"):
        parse_set("batch_size")
    with pytest.raises(ConfigError, match="names no config section"):
        config_from_options(sets=["bugdet.steps=3"])


def test_layers_apply_in_order_and_a_new_model_drops_the_old_ones_options(tmp_path):
    toml = tmp_path / "study.toml"
    toml.write_text('seed = 4\n[budget]\nbatch_size = 16\n[model]\nname = "acgan"\nwidth = 32\n')
    config = build_config({"budget.batch_size": 8}, file=toml)  # the file is below the layers
    assert (config.seed, config.budget.batch_size, config.model.options) == (4, 8, {"width": 32})
    other = build_config({"model.name": "acgan-2019"}, file=toml)
    assert other.model.options == {}  # width is the AC-GAN's option, not the study network's
    bad = tmp_path / "bad.toml"
    bad.write_text("[budget]\nbatch_size = 0\n")
    with pytest.raises(AmpganError, match=f"config file {bad}: budget.batch_size must be"):
        build_config(file=bad)
    bad.write_text("[budget\n")
    with pytest.raises(AmpganError, match="is not valid TOML"):
        read_config_file(bad)
    for name in ("study.yaml", "study.yml", "study.cfg"):  # the fix names the formats read, by the file's name
        (tmp_path / name).write_text("budget:\n  batch_size: 8\n")
        with pytest.raises(AmpganError, match=r"is not valid JSON .*: ampgan reads TOML from a \.toml file and JSON"):
            read_config_file(tmp_path / name)


def test_a_run_folders_config_json_is_a_config_file(tmp_path, capsys):
    run = tmp_path / "run"
    code, _, err = run_cli(
        capsys,
        "train",
        "--dataset",
        "synthetic",
        "--width",
        "8",
        "--set",
        "model.z_dim=16",
        "--batch-size",
        "4",
        "--steps",
        "1",
        "--device",
        "cpu",
        "--no-channels-last",
        "--no-compile",
        "--out",
        str(run),
        "--quiet",
        "--set",
        "model.mode_seeking=0.7",
    )
    assert code == 0, err
    again = build_config(file=run / "config.json")
    assert again.model.options["mode_seeking"] == 0.7 and again.budget.batch_size == 4


def test_a_flat_config_from_before_the_tree_is_read_as_the_acgan_it_trained():
    flat = {
        "dataset": "synthetic",
        "precision": "bf16",
        "batch_size": 16,
        "width": 16,
        "z_dim": 32,
        "lr": 1e-3,
        "beta1": 0.5,
        "beta2": 0.999,
        "steps": 20,
        "seed": 2,
    }
    config = TrainConfig.from_dict(flat)
    assert config.model.name == "acgan" and config.precision.name == "bf16" and config.budget.batch_size == 16
    assert (config.optim.lr_g, config.optim.lr_d) == (1e-3, 1e-3)
    # Fields added to the flat config later: an old file trained what ampgan did before they existed.
    assert {
        k: config.model.options[k]
        for k in ("mode_seeking", "class_loss_on_fakes", "real_label", "class_weight_g", "spectral_norm_d")
    } == {
        "mode_seeking": 0.0,
        "class_loss_on_fakes": True,
        "real_label": 1.0,
        "class_weight_g": 1.0,
        "spectral_norm_d": False,
    }
    between = TrainConfig.from_dict(flat | {"mode_seeking": 0.3})
    assert between.model.options["mode_seeking"] == 0.3 and between.model.options["spectral_norm_d"] is False
    with pytest.raises(ConfigError, match="warp_drive is not a field of an ampgan 0.1 config"):
        TrainConfig.from_dict(flat | {"warp_drive": 1})


def test_cli_errors_name_the_field_and_its_flag(capsys, tmp_path):
    code, _, err = run_cli(capsys, "train", "--set", "budget.batch_size=0", "--dry-run")
    assert code == 2 and err.strip() == (
        "error: budget.batch_size (--batch-size) must be a whole number of at least 1, got 0"
    )
    code, _, err = run_cli(capsys, "train", "--set", "model.widht=3", "--dry-run")
    assert code == 2 and "model.widht is not an option of model acgan (did you mean width?)" in err
    code, _, err = run_cli(capsys, "train", "--model", "acgan-2019", "--width", "32", "--dry-run")
    assert code == 2 and "model.width (--width) is not an option of model acgan-2019 (its options: z_dim)" in err
    code, out, err = run_cli(
        capsys,
        "train",
        "--dataset",
        "synthetic",
        "--set",
        "model.spectral_norm_d=false",
        "--set",
        "budget.steps=7",
        "--dry-run",
    )
    resolved = json.loads(out)["config"]
    assert code == 0 and resolved["model"]["spectral_norm_d"] is False and resolved["budget"]["steps"] == 7
    assert resolved["model"]["width"] == 64  # every option written out, defaults included
