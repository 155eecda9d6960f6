"""Reading a config written before the config tree (ampgan 0.1's flat `config.json`).

Those configs are one flat table and always trained the AC-GAN (`acgan`). Fields added to it later
with a new default are filled in with what training did before they existed, so an old run resumes
exactly as it began.
"""

from __future__ import annotations

from typing import Any

from ampgan.errors import ConfigError

# flat field -> its path in the tree. The AC-GAN's options became model options.
_PATHS = {
    "dataset": "data.dataset",
    "image_size": "data.image_size",
    "channels": "data.channels",
    "data_dir": "data.data_dir",
    "classes": "data.classes",
    "max_per_class": "data.max_per_class",
    "download": "data.download",
    "cache": "data.cache",
    "precision": "precision.name",
    "loss_scale": "precision.loss_scale",
    "device": "compute.device",
    "channels_last": "compute.channels_last",
    "compile": "compute.compile",
    "sync_bn": "compute.sync_bn",
    "z_dim": "model.z_dim",
    "width": "model.width",
    "mode_seeking": "model.mode_seeking",
    "class_loss_on_fakes": "model.class_loss_on_fakes",
    "real_label": "model.real_label",
    "class_weight_g": "model.class_weight_g",
    "spectral_norm_d": "model.spectral_norm_d",
    "batch_size": "budget.batch_size",
    "steps": "budget.steps",
    "time_budget_s": "budget.time_budget_s",
    "beta1": "optim.beta1",
    "beta2": "optim.beta2",
    "checkpoint_every_steps": "checkpoints.every_steps",
    "checkpoint_every_s": "checkpoints.every_s",
    "keep": "checkpoints.keep",
    "sample_every": "logging.sample_every",
    "log_every": "logging.log_every",
    "samples_per_class": "logging.samples_per_class",
    "tensorboard": "logging.tensorboard",
    "seed": "seed",
}

# What training did before each of these flat fields existed: the published AC-GAN's losses and D.
_BEFORE_EACH_FIELD = {
    "mode_seeking": 0.0,
    "class_loss_on_fakes": True,
    "real_label": 1.0,
    "class_weight_g": 1.0,
    "spectral_norm_d": False,
}
# The flat config's defaults for fields that old files always wrote (a file missing one is damaged,
# but the value it trained with was this).
_FLAT_DEFAULTS = {"z_dim": 128, "width": 64, "lr": 2e-4, "beta1": 0.5, "beta2": 0.999}


def is_flat_config(values: dict) -> bool:
    """A flat config names its precision as a string at the top level; a tree has a precision section."""
    return isinstance(values.get("precision"), str) or ("batch_size" in values and "budget" not in values)


def tree_from_flat(flat: dict[str, Any]) -> dict[str, Any]:
    values = _FLAT_DEFAULTS | _BEFORE_EACH_FIELD | dict(flat)
    lr = values.pop("lr")
    tree: dict[str, Any] = {"model": {"name": "acgan"}, "optim": {"lr_g": lr, "lr_d": lr}}
    for name, value in values.items():
        if name not in _PATHS:
            raise ConfigError(
                name, "is not a field of an ampgan 0.1 config: the file was written by another ampgan version"
            )
        section, dot, field = _PATHS[name].partition(".")
        if dot:
            tree.setdefault(section, {})[field] = value
        else:
            tree[section] = value
    return tree
