"""Checkpoints: everything needed to continue a run exactly, written atomically.

A checkpoint holds both networks, both optimizers, both loss scalers, every RNG state (torch CPU
and CUDA, the step's device generator, numpy, Python), the data order position, the step, the
training wall time already spent and the metrics position. Everything is stored as tensors and
plain Python values so `torch.load(weights_only=True)` reads it: loading never executes code.

Files are `checkpoints/step-XXXXXX.pt`, each written to a temporary file, fsynced and renamed
into place (atomic.py), so a crash at any moment leaves every listed checkpoint complete.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import torch

from ampgan.atomic import write_atomically
from ampgan.errors import AmpganError

FORMAT_VERSION = 1
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


def capture_rng_states(state) -> dict:
    numpy_state = np.random.get_state()
    python_version, python_internal, python_gauss = random.getstate()
    return {
        "torch_cpu": torch.get_rng_state(),
        "torch_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "step_generator": state.rng.get_state(),
        "numpy": {"kind": numpy_state[0], "keys": torch.from_numpy(numpy_state[1].astype(np.int64)),
                  "pos": int(numpy_state[2]), "has_gauss": int(numpy_state[3]), "cached_gaussian": float(numpy_state[4])},
        "python": {"version": python_version, "internal": list(python_internal), "gauss_next": python_gauss},
    }


def restore_rng_states(state, saved: dict) -> None:
    torch.set_rng_state(saved["torch_cpu"])
    if torch.cuda.is_available() and saved["torch_cuda"]:
        torch.cuda.set_rng_state_all(saved["torch_cuda"])
    state.rng.set_state(saved["step_generator"])
    numpy_state = saved["numpy"]
    np.random.set_state((numpy_state["kind"], numpy_state["keys"].numpy().astype(np.uint32), numpy_state["pos"],
                         numpy_state["has_gauss"], numpy_state["cached_gaussian"]))
    python_state = saved["python"]
    random.setstate((python_state["version"], tuple(python_state["internal"]), python_state["gauss_next"]))


def save_checkpoint(path: Path, state, config_dict: dict, progress: dict) -> None:
    """`progress`: train_seconds, data position, metrics position, skipped totals (plain values)."""
    payload = {
        "format_version": FORMAT_VERSION,
        "step": state.step,
        "config": config_dict,
        "progress": progress,
        "generator": state.generator.state_dict(),
        "discriminator": state.discriminator.state_dict(),
        "optimizer_g": state.optimizer_g.state_dict(),
        "optimizer_d": state.optimizer_d.state_dict(),
        "scaler_g": state.scaler_g.state_dict(),
        "scaler_d": state.scaler_d.state_dict(),
        "rng": capture_rng_states(state),
    }
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
    if version < FORMAT_VERSION:
        raise AmpganError(f"checkpoint {path} has the old format version {version}, which this ampgan no longer "
                          f"reads ({FORMAT_VERSION}): continue it with the ampgan version that wrote it")
    return payload


def restore_train_state(state, payload: dict, path: Path, rank: int = 0, world_size: int = 1) -> None:
    """Load networks, optimizers, scalers and RNGs into a freshly built state of the same shape.

    Each rank takes its own noise generator back when the number of processes is unchanged; on
    another number, ranks re-seed theirs from (seed, rank, step)."""
    try:
        state.generator.load_state_dict(payload["generator"])
        state.discriminator.load_state_dict(payload["discriminator"])
        state.optimizer_g.load_state_dict(payload["optimizer_g"])
        state.optimizer_d.load_state_dict(payload["optimizer_d"])
    except (RuntimeError, KeyError, ValueError) as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        detail = next((line for line in lines if line.startswith("size mismatch")), lines[0] if lines else type(error).__name__)
        raise AmpganError(f"the checkpoint in {path} holds a model of another shape than this run's config "
                          f"({detail[:200]})") from None
    if payload["scaler_g"]:
        state.scaler_g.load_state_dict(payload["scaler_g"])
        state.scaler_d.load_state_dict(payload["scaler_d"])
    restore_rng_states(state, payload["rng"])
    state.step = payload["step"]
    generators = payload["progress"].get("step_generators", [])
    if len(generators) == world_size:
        state.rng.set_state(generators[rank])
    else:
        from ampgan.train import noise_seed

        state.rng.manual_seed(noise_seed(payload["config"]["seed"], rank, state.step))


def prune_checkpoints(run_dir: Path, keep: int) -> None:
    """Delete all but the newest `keep` checkpoints (after the newest was safely written)."""
    for old in list_checkpoints(run_dir)[:-keep]:
        old.unlink(missing_ok=True)
