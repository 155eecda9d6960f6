"""A finished run read back: its trained generator, and samples of one class drawn from it."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ampgan.config import TrainConfig
from ampgan.data.registry import DATASET_NAME
from ampgan.errors import AmpganError, ConfigError
from ampgan.files.atomic import write_atomically
from ampgan.files.images import image_grid, save_png, to_uint8
from ampgan.files.schema import check_shape
from ampgan.gan.contract import GAN, DataSpec
from ampgan.gan.registry import resolve_model
from ampgan.runs.checkpoint import check_step_matches_name, latest_checkpoint, load_checkpoint, load_weights
from ampgan.runs.run_folder import read_run_config
from ampgan.system.memory import largest_count, refuse_unless_it_fits
from ampgan.training.ema import attach_average, load_average
from ampgan.training.precision import PRECISION_DESCRIBED
from ampgan.training.start import moved_files, run_data, saved_config


@dataclass
class TrainedRun:
    run_dir: Path
    document: dict  # config.json
    config: TrainConfig
    gan: GAN  # its generator (and EMA of G, if declared) hold the latest checkpoint's weights, in eval mode
    step: int

    @property
    def class_names(self) -> list[str]:
        return self.document["dataset"]["class_names"]


def _data_of(document: dict, path: Path) -> DataSpec:
    """The data a run trained on, as its config.json describes it (checked: a damaged description
    would build a model of another shape, or score samples against the wrong classes)."""
    dataset = document.get("dataset") if isinstance(document.get("dataset"), dict) else {}
    shape, names, counts = (dataset.get(key) for key in ("image_shape", "class_names", "counts_per_class"))
    if not (
        isinstance(shape, list)
        and len(shape) == 3
        and all(isinstance(v, int) and v > 0 for v in shape)
        and isinstance(names, list)
        and names
        and all(isinstance(n, str) for n in names)
    ):
        raise AmpganError(f"{path} lacks a valid dataset description (image_shape, class_names): the file is damaged")
    if isinstance(counts, list) and len(counts) != len(names):
        raise AmpganError(f"{path} names {len(names)} classes but counts images of {len(counts)}: the file is damaged")
    return DataSpec(image_size=shape[1], channels=shape[0], num_classes=len(names), class_names=tuple(names))


def load_trained_run(run_dir: Path, device: torch.device | str = "cpu", moved: dict | None = None) -> TrainedRun:
    """The run's generator at its latest checkpoint, in eval mode. A run of a user's model imports its
    model file again (as training did). `moved`: {config path: value} where the run's files are now (--dataset
    folder:PATH, --data-dir DIR, --model PATH.py:FUNCTION; start.moved_files); None values are not given."""
    run_dir = Path(run_dir)
    # The names it records beside its config are shown as the run's (evaluate's quality.json, a report's table).
    document = check_shape(
        read_run_config(run_dir),
        {"?precision": PRECISION_DESCRIBED, "?dataset": {"?name": DATASET_NAME}},
        str(run_dir / "config.json"),
        "restore the file, or train the run again",
    )
    given = {path: str(value) for path, value in (moved or {}).items() if value is not None}
    config = moved_files(run_dir, saved_config(run_dir), given, document)  # its model file checked before import
    data = _data_of(document, run_dir / "config.json")
    checkpoint = latest_checkpoint(run_dir)
    payload = load_checkpoint(checkpoint, map_location="cpu")
    check_step_matches_name(payload, checkpoint)
    try:  # a model or option the model refuses came from the file, not from a flag the person gave
        with torch.random.fork_rng(devices=[]):
            gan = resolve_model(config.model.name, config.model.options).build(data)
    except ConfigError as error:
        raise AmpganError(
            f"{run_dir / 'config.json'} is damaged or foreign ({error}): restore the file, or train the run again"
        ) from None
    load_weights(gan.generator, payload["generator"], f"the checkpoint in {run_dir} (generator)")
    attach_average(gan)
    load_average(gan, payload, f"the checkpoint in {run_dir}")
    gan.generator.to(device).eval()
    if gan.averaged_generator is not None:
        gan.averaged_generator.to(device).eval()
    return TrainedRun(run_dir, document, config, gan, payload["step"])


def class_index(class_names: list[str], wanted: str) -> int:
    """A class by name or by index, with a clear error listing the choices."""
    if wanted in class_names:
        return class_names.index(wanted)
    if wanted.isdecimal() and int(wanted) < len(class_names):
        return int(wanted)
    raise AmpganError(
        f"no class {wanted!r}: choose a name or index 0-{len(class_names) - 1} of {', '.join(class_names)}"
    )


@torch.no_grad()
def class_samples(run: TrainedRun, label: int | None, count: int, seed: int) -> np.ndarray:
    """uint8 (count, H, W, C) samples of one class (None: of the whole data, an unconditional GAN's); the
    same seed draws the same images."""
    gan = run.gan
    generator_net = gan.sampling_generator  # the EMA of G when the model declares one
    device = next(generator_net.parameters()).device
    # Held at once: G's fp32 output, its copy in [0, 1], the uint8 images and the grid (a lower bound).
    bytes_each = math.prod(run.document["dataset"]["image_shape"]) * (4 + 4 + 1 + 1) + 4 * gan.z_dim
    refuse_unless_it_fits(
        f"--n {count}",
        count * bytes_each,
        "the samples, generated at once",
        f"use --n {largest_count(bytes_each, device)} or fewer",
        device,
    )
    # An image-to-image G translates maps drawn from the images of the class (GAN.inputs_for): the data is loaded
    # for it alone; a draw of codes that reads only the batch's size is given a blank image.
    real = torch.zeros(1, *run.document["dataset"]["image_shape"], dtype=torch.uint8)
    if gan.translates(run.document["dataset"]["image_shape"]):
        dataset = run_data(run.document, run.run_dir, run.config)
        real = dataset.images if label is None else dataset.images[dataset.labels == label]
    z = gan.inputs_for(count, torch.Generator().manual_seed(seed), real).to(device)
    labels = torch.full((count,), label, dtype=torch.long, device=device) if gan.conditional else None
    return to_uint8(gan.to_unit_range(gan.generate(generator_net, z, labels).float()))


def write_class_samples(images: np.ndarray, label: int, class_name: str, out: Path, description: str = "") -> None:
    """`out` ending in .npz: the images, labels and class name; otherwise a PNG grid (about square).
    A destination that refuses the write (a read-only or special filesystem, a full disk) is one error."""
    try:
        if Path(out).suffix.lower() == ".npz":
            buffer = io.BytesIO()
            np.savez(buffer, images=images, labels=np.full(len(images), label), class_name=np.array(class_name))
            write_atomically(out, lambda stream: stream.write(buffer.getvalue()))
        else:
            save_png(image_grid(images, rows=max(1, int(np.sqrt(len(images))))), out, description)
    except OSError as error:
        raise AmpganError(f"cannot write --out {out} ({error.strerror or error}): choose a writable place") from None
