import dataclasses

import pytest

from ampgan.config import TrainConfig, parse_duration, parse_loss_scale
from ampgan.errors import AmpganError


@pytest.mark.parametrize("text, seconds", [("7m", 420), ("90s", 90), ("90", 90), ("1h30m", 5400), ("0.5m", 30)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["7 minutes", "m7", "", "7x"])
def test_parse_duration_rejects_nonsense(text):
    with pytest.raises(AmpganError, match="duration"):
        parse_duration(text)


def test_parse_loss_scale():
    assert parse_loss_scale("dynamic") is None
    assert parse_loss_scale("128") == 128.0
    with pytest.raises(AmpganError, match="loss-scale"):
        parse_loss_scale("big")


@pytest.mark.parametrize("overrides, message", [
    (dict(precision="fp8"), "unknown precision 'fp8'"),
    (dict(batch_size=0), "--batch-size must be"),
    (dict(device="tpu"), "unknown device"),
    (dict(precision="bf16", loss_scale=128.0), "fp16 only"),
    (dict(precision="fp16", loss_scale=-1.0), "positive"),
    (dict(image_size=48), "--image-size 48"),
    (dict(mode_seeking=-0.1), "--mode-seeking must be 0 or more"),
    (dict(class_weight_g=float("nan")), "--class-weight-g must be 0 or more"),
    (dict(real_label=1.2), r"--real-label must be in \(0, 1\]"),
    (dict(channels=2), "--channels"),
    (dict(steps=0), "--steps"),
])
def test_config_refuses_bad_values(overrides, message):
    with pytest.raises(AmpganError, match=message):
        TrainConfig(**overrides)


def test_config_round_trips_through_a_dict():
    config = TrainConfig(dataset="synthetic", precision="fp16", loss_scale=128.0, steps=5)
    assert TrainConfig.from_dict(config.to_dict()) == config
    with pytest.raises(AmpganError, match="unknown keys"):
        TrainConfig.from_dict({**config.to_dict(), "warp_drive": True})


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        TrainConfig().batch_size = 3


@pytest.mark.parametrize("overrides, message", [
    (dict(dataset="synthetic", classes="foo,bar"), "--classes applies to quickdraw only, not to synthetic"),
    (dict(dataset="quickdraw", classes=""), "--classes needs at least one class name"),
    (dict(dataset="digits", data_dir="/data"), "--data-dir applies to cifar10 and quickdraw and mnist only"),
    (dict(dataset="digits", cache=True), "--cache applies to folder:PATH datasets only"),
    (dict(dataset="mnist", download=True), "--download applies to cifar10 and quickdraw only"),
])
def test_options_the_dataset_would_ignore_are_refused(overrides, message):
    with pytest.raises(AmpganError, match=message):
        TrainConfig(**overrides)


def test_a_config_from_before_the_loss_options_keeps_the_published_losses():
    from ampgan.config import TrainConfig

    later_fields = ("mode_seeking", "class_loss_on_fakes", "real_label", "class_weight_g", "spectral_norm_d")
    old = {k: v for k, v in TrainConfig().to_dict().items() if k not in later_fields}
    config = TrainConfig.from_dict(old)
    assert [getattr(config, name) for name in later_fields] == [0.0, True, 1.0, 1.0, False]


def test_a_config_from_between_two_added_fields_keeps_what_it_had_and_the_old_value_of_the_rest():
    from ampgan.config import TrainConfig

    # Written when mode seeking existed but smoothing and spectral norm did not.
    old = {k: v for k, v in TrainConfig().to_dict().items() if k not in ("real_label", "spectral_norm_d")}
    config = TrainConfig.from_dict(old)
    assert (config.mode_seeking, config.real_label, config.spectral_norm_d) == (0.3, 1.0, False)
