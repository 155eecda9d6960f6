"""A run resolved and validated before anything is written: device, precision, data, the model.

    prepare_run(config) -> PreparedRun   the config with every model option and optimizer setting written
                                         out (what config.json records), the policy, the dataset, the data's
                                         description and the model recipe that builds the GAN

The model is traced on the meta device (shapes only) to check that it can take this data at this batch
size, and that a step fits in memory, before a byte is allocated or a folder created.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ampgan.config import TrainConfig
from ampgan.data import ImageDataset, load_dataset
from ampgan.errors import AmpganError, warn
from ampgan.gan.alignment import alignment_warning
from ampgan.gan.contract import GAN, DataSpec
from ampgan.gan.ema import G_OWN_WEIGHTS
from ampgan.gan.registry import ModelRecipe, build_on_meta, resolve_model
from ampgan.runs.run_folder import require_tensorboard
from ampgan.system.memory import largest_count, refuse_unless_it_fits
from ampgan.training.distributed import world
from ampgan.training.memory import check_batch_shapes, refuse_what_cannot_fit
from ampgan.training.precision import PrecisionPolicy, build_policy, resolve_device


@dataclass(frozen=True)
class PreparedRun:
    """Everything a run needs, resolved and validated before anything is written."""

    config: TrainConfig
    policy: PrecisionPolicy
    dataset: ImageDataset
    data: DataSpec
    model: ModelRecipe
    fingerprint: str  # the model's (gan/registry.py): what cached speed decisions are keyed by
    conditional: bool = True  # the GAN draws its samples for a class (quality then has an intended class)
    sampling_weights: str = G_OWN_WEIGHTS  # what samples and evaluations use (GAN.sampling_weights)


def resolve_config(config: TrainConfig, dataset: ImageDataset) -> tuple[TrainConfig, ModelRecipe, GAN, DataSpec]:
    """(the config with the model's options and optimizer settings written out, the recipe, the GAN built
    on the meta device (on the CPU when it cannot be built there), the data's description)."""
    data = DataSpec(dataset.image_size, dataset.channels, dataset.num_classes, tuple(dataset.class_names))
    recipe = resolve_model(config.model.name, config.model.options)
    gan = build_on_meta(recipe, data)
    if gan is None:
        with torch.random.fork_rng(devices=[]):
            gan = recipe.build(data)  # the real build says what is wrong, or builds on the CPU
    optim = config.optim
    changes = {f"model.{name}": value for name, value in recipe.options.items()} | {
        "optim.lr_g": optim.lr_g if optim.lr_g is not None else gan.optimizer_g.lr,
        "optim.lr_d": optim.lr_d if optim.lr_d is not None else gan.optimizer_d.lr,
        "optim.beta1": optim.beta1 if optim.beta1 is not None else gan.optimizer_g.betas[0],
        "optim.beta2": optim.beta2 if optim.beta2 is not None else gan.optimizer_g.betas[1],
    }
    return config.with_fields(changes), recipe, gan, data


def prepare_run(
    config: TrainConfig, dataset: ImageDataset | None = None, device: torch.device | None = None
) -> PreparedRun:
    """Validate everything a run needs. `dataset`: one already loaded (a comparison loads it once);
    `device`: this rank's device under torchrun (distributed.join_process_group), else resolved here."""
    device = device or resolve_device(config.compute.device)
    policy = build_policy(config.precision.name, device, config.precision.loss_scale)
    dataset = dataset if dataset is not None else load_dataset(config.data, seed=config.seed)
    if len(dataset) == 0:
        raise AmpganError(
            f"dataset {config.data.dataset} has no training images: give a dataset with images "
            "(check --data-dir, data.classes and data.max_per_class)"
        )
    config, recipe, gan, data = resolve_config(config, dataset)
    if config.logging.tensorboard:
        require_tensorboard()
    if any(parameter.is_meta for parameter in gan.generator.parameters()):
        check_batch_shapes(gan, data, config.budget.batch_size)
        refuse_what_cannot_fit(
            gan,
            data,
            config.budget.batch_size,
            device,
            policy.mode.compute_dtype.itemsize,
            world().local_size if device.type == "cpu" else 1,
        )
    # The sample grid is drawn at once: its noise, G's fp32 output, its copy in [0, 1] and the uint8 grid.
    per_class = config.logging.samples_per_class
    images = (data.num_classes if gan.conditional else per_class) * per_class
    bytes_each = data.channels * data.image_size**2 * (4 + 4 + 1) + 4 * gan.z_dim
    fits = largest_count(bytes_each)  # images
    largest = fits // data.num_classes if gan.conditional else math.isqrt(fits)
    refuse_unless_it_fits(
        f"logging.samples_per_class={per_class}",
        images * bytes_each,
        f"a sample grid of {images} images, drawn at once",
        f"use --set logging.samples_per_class={largest} or fewer",
    )
    message = alignment_warning({"G": gan.generator, "D": gan.discriminator}, data)
    if message:
        warn(message)
    return PreparedRun(
        config=config,
        policy=policy,
        dataset=dataset,
        data=data,
        model=recipe,
        fingerprint=recipe.fingerprint(gan),
        conditional=gan.conditional,
        sampling_weights=gan.sampling_weights,
    )
