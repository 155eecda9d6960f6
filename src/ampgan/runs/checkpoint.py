"""Checkpoint files: stored atomically, listed, loaded safely, pruned. Storage only.

What a checkpoint holds is decided by the training state that saves itself
(`training.state.RunState.state_dict()`); this module only writes such a payload to
`checkpoints/step-XXXXXX.pt` (temporary file, fsync, rename: a crash at any moment leaves every
listed checkpoint complete) and reads it back with `torch.load(weights_only=True)`, so loading
never executes code.

Format versions: 2 adds `seed_scheme` (seeds.py). A version-1 checkpoint loads as scheme 1, so a
run started by ampgan 0.1 resumes drawing exactly the data order and noise it would have drawn.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from ampgan.errors import AmpganError
from ampgan.files.atomic import write_atomically
from ampgan.files.schema import check_shape

FORMAT_VERSION = 2
# One process's RNG states (training/state.py capture_global_rngs); `device` since per-rank states.
_RNG = {"torch_cpu": torch.Tensor, "?device": str, "?torch_cuda": [torch.Tensor], "numpy": dict, "python": dict}
# What resuming reads (training/state.py, training/loop.py): checked before any of it is trusted.
_SHAPE = {
    "format_version": int, "step": int, "seed_scheme": int, "?run_id": str, "?config": dict,
    "generator": dict, "discriminator": dict, "optimizer_g": dict, "optimizer_d": dict, "scaler_g": dict,
    "scaler_d": dict, "?extra_optimizers": dict, "?extra_scalers": dict,
    "?rng": _RNG, "?step_generator_device": str,
    "?progress": {"train_seconds": (int, float), "skipped_total": {"*": int},
                  "data": {"world_size": int, "ranks": [{"epoch": int, "position": int}]},
                  "?step_generators": [torch.Tensor], "?step_generator_device": str, "?rngs": [_RNG],
                  "?metrics_last_step": int},
}
OLDEST_READABLE_VERSION = 1
_NAME = re.compile(r"^step-(\d{6,})\.pt$")


def checkpoint_path(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"step-{step:06d}.pt"


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first (temporary files are never listed)."""
    folder = Path(run_dir) / "checkpoints"
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: Path) -> Path:
    checkpoints = list_checkpoints(run_dir)
    if not checkpoints:
        raise AmpganError(f"{run_dir} has no checkpoint: it is not an ampgan run folder, or it stopped before its first save")
    return checkpoints[-1]


def save_checkpoint(path: Path, payload: dict) -> None:
    """`payload`: tensors and plain Python values only (so a weights_only load can read it)."""
    payload = {"format_version": FORMAT_VERSION, **payload}
    write_atomically(path, lambda stream: torch.save(payload, stream))


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict:
    path = Path(path)
    if not path.is_file():
        raise AmpganError(f"no checkpoint at {path}: give a run folder that finished at least one save")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # truncated, not a torch file, or holds objects we refuse to unpickle
        raise AmpganError(
            f"cannot read checkpoint {path} ({type(error).__name__}): the file is damaged or not an ampgan "
            "checkpoint; delete it to resume from the one before"
        ) from None
    version = payload.get("format_version") if isinstance(payload, dict) else None
    if not isinstance(version, int):
        raise AmpganError(f"{path} is not an ampgan checkpoint (no format version)")
    if version > FORMAT_VERSION:
        raise AmpganError(f"checkpoint {path} has format version {version}, newer than this ampgan reads "
                          f"({FORMAT_VERSION}): upgrade ampgan to continue this run")
    if version < OLDEST_READABLE_VERSION:
        raise AmpganError(f"checkpoint {path} has the old format version {version}, which this ampgan no longer "
                          f"reads ({OLDEST_READABLE_VERSION}-{FORMAT_VERSION}): continue it with the ampgan version "
                          "that wrote it")
    payload.setdefault("seed_scheme", 1)  # version 1 predates seeds.py's scheme 2
    return check_shape(payload, _SHAPE, f"checkpoint {path}", "delete it to resume from the one before")


def prune_checkpoints(run_dir: Path, keep: int) -> None:
    """Delete all but the newest `keep` checkpoints (after the newest was safely written)."""
    for old in list_checkpoints(run_dir)[:-keep]:
        old.unlink(missing_ok=True)
