"""Checkpoints: everything needed to use or continue a run, written atomically.

Stored as plain tensors, numbers and strings so `torch.load(weights_only=True)` can read them:
loading a checkpoint never executes code.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ampgan.atomic import write_atomically
from ampgan.errors import AmpganError

FORMAT_VERSION = 1


def save_checkpoint(path: Path, state, config_dict: dict) -> None:
    payload = {
        "format_version": FORMAT_VERSION,
        "step": state.step,
        "config": config_dict,
        "generator": state.generator.state_dict(),
        "discriminator": state.discriminator.state_dict(),
        "optimizer_g": state.optimizer_g.state_dict(),
        "optimizer_d": state.optimizer_d.state_dict(),
        "scaler_g": state.scaler_g.state_dict(),
        "scaler_d": state.scaler_d.state_dict(),
    }
    write_atomically(path, lambda stream: torch.save(payload, stream))


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict:
    path = Path(path)
    if not path.is_file():
        raise AmpganError(f"no checkpoint at {path}: give a run folder that finished at least one save")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # truncated, not a torch file, or holds objects we refuse to unpickle
        raise AmpganError(f"cannot read checkpoint {path} ({type(error).__name__}): the file is damaged or not an ampgan checkpoint") from None
    version = payload.get("format_version") if isinstance(payload, dict) else None
    if version != FORMAT_VERSION:
        raise AmpganError(
            f"checkpoint {path} has format version {version}, this ampgan reads {FORMAT_VERSION}: "
            "use the ampgan version that wrote it"
        )
    return payload
