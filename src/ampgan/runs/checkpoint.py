"""Checkpoint files: stored atomically, listed, loaded safely, pruned. Storage only.

What a checkpoint holds is decided by the training state that saves itself
(`training.state.RunState.state_dict()`); this module only writes such a payload to
`checkpoints/step-XXXXXX.pt` (temporary file, fsync, rename: a crash at any moment leaves every
listed checkpoint complete) and reads it back with `torch.load(weights_only=True)`, so loading
never executes code.

A checkpoint proves it is the one written before anything in it is trusted (`verify_checkpoint`, on every
load: resume, evaluate, generate, a study's runs): its size and sha256 must equal what the run folder's
manifest recorded when ampgan wrote it (files/manifest.py); one without a record (ampgan 0.1's, or a file
copied out of its folder) must at least pass its zip CRC test. A damaged newest checkpoint, or one that is
not a regular file (a FIFO, a link, a folder), is refused with one line naming the newest intact one to
resume from once it is moved out: ampgan never falls back on its own, because continuing from an older
step silently discards training the user may want to recover, and never deletes the damaged file.

Format versions: 2 adds `seed_scheme` (seeds.py). A version-1 checkpoint loads as scheme 1, so a
run started by ampgan 0.1 resumes drawing exactly the data order and noise it would have drawn.
"""

from __future__ import annotations

import math
import os
import re
import zipfile
from pathlib import Path

import torch

from ampgan.errors import AmpganError, one_line
from ampgan.files import manifest
from ampgan.files.atomic import write_atomically
from ampgan.files.jsonfile import not_a_regular_file
from ampgan.files.paths import file_in
from ampgan.files.schema import COUNT, Between, check_shape

FORMAT_VERSION = 2
# One process's RNG states (training/state.py capture_global_rngs); `device` since per-rank states.
_SECONDS = Between(0.0, math.inf, says="a number of seconds of at least 0")
_RNG = {"torch_cpu": torch.Tensor, "?device": str, "?torch_cuda": [torch.Tensor], "numpy": dict, "python": dict}
# What resuming reads (training/state.py, training/loop.py): checked before any of it is trusted.
_SHAPE = {
    "format_version": int,
    "step": int,
    "seed_scheme": int,
    "?run_id": str,
    "?config": dict,
    "generator": dict,
    "discriminator": dict,
    "optimizer_g": dict,
    "optimizer_d": dict,
    "scaler_g": dict,
    "scaler_d": dict,
    "?extra_optimizers": dict,
    "?extra_scalers": dict,
    "?rng": _RNG,
    "?step_generator_device": str,
    # Progress the loop adds to (a negative time read "trained 4 steps in -95.5 s", a text one was a TypeError).
    "?progress": {
        "train_seconds": _SECONDS,
        "?wall_seconds": _SECONDS,
        "skipped_total": {"*": COUNT},
        "data": {"world_size": int, "ranks": [{"epoch": COUNT, "position": COUNT}]},
        "?step_generators": [torch.Tensor],
        "?step_generator_device": str,
        "?rngs": [_RNG],
        "?metrics_last_step": COUNT,
    },
}
OLDEST_READABLE_VERSION = 1
_NAME = re.compile(r"^step-(\d{6,})\.pt$")


def checkpoint_path(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"step-{step:06d}.pt"


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first (temporary files are never listed)."""
    folder = file_in(run_dir, "checkpoints")  # a linked checkpoint folder or file leading out: refused
    if not folder.is_dir():
        return []
    found = sorted(
        (int(m.group(1)), file_in(run_dir, "checkpoints", p.name))
        for p in folder.iterdir()
        if (m := _NAME.match(p.name))
    )
    return [p for _, p in found]


def latest_checkpoint(run_dir: Path) -> Path:
    checkpoints = list_checkpoints(run_dir)
    if not checkpoints:
        raise AmpganError(
            f"{run_dir} has no checkpoint: it is not an ampgan run folder, or it stopped before its first save"
        )
    return checkpoints[-1]


def save_checkpoint(path: Path, payload: dict) -> None:
    """`payload`: tensors and plain Python values only (so a weights_only load can read it)."""
    write_atomically(path, lambda stream: torch.save({"format_version": FORMAT_VERSION, **payload}, stream))


def damage(path: Path) -> str | None:
    """Why `path` is not a checkpoint as ampgan wrote it, or None when it proves it is."""
    if not os.path.lexists(path):
        return "is missing"
    if kind := not_a_regular_file(path, follow_links=False):
        return f"is {kind}, not a checkpoint file"
    proven = manifest.recorded(path)
    if proven is True:
        return None
    if proven is False:
        return (
            "is damaged: its sha256 differs from what ampgan wrote there (changed on disk, or copied in from elsewhere)"
        )
    try:  # no record (ampgan 0.1, or copied): the zip CRC of every entry, as torch wrote them
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        return f"is damaged or not a checkpoint ({type(error).__name__})"
    return f"is damaged: its entry {bad} fails its CRC check" if bad else None


def verify_checkpoint(path: Path) -> None:
    """One error line unless `path` is a checkpoint as ampgan wrote it, naming the newest intact one before it."""
    problem = damage(path)
    if problem is None:
        return
    if problem == "is missing":
        raise AmpganError(f"no checkpoint at {one_line(path)}: give a run folder that finished at least one save")
    intact = next(
        (p for p in reversed(list_checkpoints(path.parent.parent)) if _step(p) < _step(path) and damage(p) is None),
        None,
    )
    fix = (
        f"move it out of {one_line(path.parent)} to resume from {intact.name}, the newest intact checkpoint"
        if intact is not None
        else "no intact checkpoint is left before it: restore it from a copy, or start a new run"
    )
    raise AmpganError(f"checkpoint {one_line(path)} {problem}: {fix}")


def _step(path: Path) -> int:
    named = _NAME.match(Path(path).name)
    return int(named.group(1)) if named else -1


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict:
    path = Path(path)
    verify_checkpoint(path)
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
        raise AmpganError(
            f"checkpoint {path} has format version {version}, newer than this ampgan reads "
            f"({FORMAT_VERSION}): upgrade ampgan to continue this run"
        )
    if version < OLDEST_READABLE_VERSION:
        raise AmpganError(
            f"checkpoint {path} has the old format version {version}, which this ampgan no longer "
            f"reads ({OLDEST_READABLE_VERSION}-{FORMAT_VERSION}): continue it with the ampgan version "
            "that wrote it"
        )
    payload.setdefault("seed_scheme", 1)  # version 1 predates seeds.py's scheme 2
    check_shape(payload, _SHAPE, f"checkpoint {path}", "delete it to resume from the one before")
    if payload["step"] < 0:
        raise AmpganError(
            f"checkpoint {one_line(path)} says step {payload['step']}: it was edited; delete it to "
            "resume from the one before"
        )
    where = _first_non_finite(payload)
    if where:
        raise AmpganError(
            f"checkpoint {one_line(path)} holds non-finite values in {where}: the run had diverged when "
            "it was saved, or the file was altered; delete it to resume from the one before"
        )
    return payload


def check_step_matches_name(payload: dict, path: Path) -> None:
    """A checkpoint named step-N.pt holds step N: one that says another was renamed or edited. (Checked by
    its readers after they check whose run it is, which is the clearer reason when both fail.)"""
    if _step(path) not in (-1, payload["step"]):
        raise AmpganError(
            f"checkpoint {one_line(path)} says step {payload['step']}, not the step its name gives: it "
            "was edited or renamed; delete it to resume from the one before"
        )


def _first_non_finite(value, where: str = "") -> str | None:
    """The path of the first floating-point tensor or number holding NaN or infinity, else None."""
    if isinstance(value, torch.Tensor):
        return where if value.is_floating_point() and not bool(torch.isfinite(value).all()) else None
    if isinstance(value, float):
        return where if not math.isfinite(value) else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    found = (
        _first_non_finite(item, f"{where}.{key}" if where else str(key))
        for key, item in items
        # a loss scale may be inf mid-search; RNG states are bytes
        if not (where.startswith("scaler") or key in ("rng", "torch_cpu", "torch_cuda"))
    )
    return next(filter(None, found), None)


def load_weights(module: torch.nn.Module, saved: dict, origin: str) -> None:
    """`saved` into `module`, once every tensor has the name, shape and dtype the module's own has (an
    int64 or float16 copy of a float32 weight would load silently, rounded or truncated)."""
    own = module.state_dict()
    if not isinstance(saved, dict) or set(saved) != set(own):
        missing, extra = sorted(set(own) - set(saved or {})), sorted(set(saved or {}) - set(own))
        raise AmpganError(
            f"{origin} holds a model of another shape than this run's config (missing "
            f"{', '.join(missing[:3]) or 'none'}; unexpected {', '.join(map(str, extra[:3])) or 'none'})"
        )
    for name, tensor in own.items():
        value = saved[name]
        if not isinstance(value, torch.Tensor) or value.shape != tensor.shape or value.dtype != tensor.dtype:
            found = (
                f"{tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}"
                if isinstance(value, torch.Tensor)
                else type(value).__name__
            )
            raise AmpganError(
                f"{origin} holds {name} as {found}, where this run's model has "
                f"{tuple(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')}: it is damaged or "
                "belongs to another model"
            )
    module.load_state_dict(saved)


def prune_checkpoints(run_dir: Path, keep: int) -> None:
    """Delete all but the newest `keep` checkpoints (after the newest was safely written): only those
    ampgan can show it wrote (files/manifest.py); a file of that name someone edited or put there stays."""
    for old in list_checkpoints(run_dir)[:-keep]:
        manifest.delete_written(old)
