"""A finished run read back: its trained generator, and samples of one class drawn from it."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ampgan.config import TrainConfig
from ampgan.errors import AmpganError
from ampgan.files.atomic import write_atomically
from ampgan.files.images import image_grid, save_png, to_uint8
from ampgan.runs.checkpoint import latest_checkpoint, load_checkpoint
from ampgan.runs.run_folder import read_run_config
from ampgan.training.models import Generator, ModelShape


@dataclass
class TrainedRun:
    run_dir: Path
    document: dict  # config.json
    config: TrainConfig
    generator: Generator
    step: int

    @property
    def class_names(self) -> list[str]:
        return self.document["dataset"]["class_names"]


def load_trained_run(run_dir: Path, device: torch.device | str = "cpu") -> TrainedRun:
    """The run's generator at its latest checkpoint, in eval mode."""
    run_dir = Path(run_dir)
    document = read_run_config(run_dir)
    try:
        shape = ModelShape(**document["model"]["shape"])
        config = TrainConfig.from_dict(document["config"])
    except (KeyError, TypeError) as error:
        raise AmpganError(f"{run_dir}/config.json lacks {error}: not a complete ampgan run folder") from None
    payload = load_checkpoint(latest_checkpoint(run_dir), map_location=device)
    generator = Generator(shape).to(device)
    try:
        generator.load_state_dict(payload["generator"])
    except RuntimeError:
        raise AmpganError(f"the checkpoint in {run_dir} does not match its config.json: the folder is damaged") from None
    generator.eval()
    return TrainedRun(run_dir, document, config, generator, payload["step"])


def class_index(class_names: list[str], wanted: str) -> int:
    """A class by name or by index, with a clear error listing the choices."""
    if wanted in class_names:
        return class_names.index(wanted)
    if wanted.isdigit() and int(wanted) < len(class_names):
        return int(wanted)
    raise AmpganError(f"no class {wanted!r}: choose a name or index 0-{len(class_names) - 1} of {', '.join(class_names)}")


@torch.no_grad()
def class_samples(run: TrainedRun, label: int, count: int, seed: int) -> np.ndarray:
    """uint8 (count, H, W, C) samples of one class; the same seed draws the same images."""
    z = torch.randn(count, run.config.z_dim, generator=torch.Generator().manual_seed(seed))
    return to_uint8(run.generator(z, torch.full((count,), label, dtype=torch.long)))


def write_class_samples(images: np.ndarray, label: int, class_name: str, out: Path) -> None:
    """`out` ending in .npz: the images, labels and class name; otherwise a PNG grid (about square).
    A destination that refuses the write (a read-only or special filesystem, a full disk) is one error."""
    try:
        if Path(out).suffix.lower() == ".npz":
            buffer = io.BytesIO()
            np.savez(buffer, images=images, labels=np.full(len(images), label), class_name=np.array(class_name))
            write_atomically(out, lambda stream: stream.write(buffer.getvalue()))
        else:
            save_png(image_grid(images, rows=max(1, int(np.sqrt(len(images))))), out)
    except OSError as error:
        raise AmpganError(f"cannot write --out {out} ({error.strerror or error}): choose a writable place") from None
