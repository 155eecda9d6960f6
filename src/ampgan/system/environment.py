"""The environment stamp: hardware, software versions, code version, date, command line."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import platform
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from ampgan.system.cpu_tuning import tuning_state
from ampgan.system.hardware import detect_hardware


def _git(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", str(Path(__file__).resolve().parent), *arguments],
        capture_output=True,
        text=True,
        timeout=5,
        check=False,
    )


def git_commit() -> str | None:
    """The commit of the ampgan checkout, if it runs from one (None for an installed wheel)."""
    try:
        result = _git("rev-parse", "--short", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    dirty = _git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return result.stdout.strip() + ("-dirty" if dirty else "")


def environment_stamp(device: torch.device) -> dict:
    hardware = detect_hardware(device)
    return {
        "hardware": asdict(hardware),
        "hardware_summary": hardware.summary(),
        "versions": {
            "ampgan": importlib.metadata.version("ampgan"),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
            "numpy": np.__version__,
        },
        "platform": platform.platform(),
        "process_tuning": tuning_state(),
        "git_commit": git_commit(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
    }


def stamp_line(stamp: dict, precision: str, batch_size: int | str, model: str | None = None) -> str:
    """One line naming what produced a figure: hardware, precision, batch, model, versions."""
    versions = stamp["versions"]
    model_part = f"model {model} | " if model else ""
    return (
        f"{stamp['hardware_summary']} | {precision} | batch {batch_size} | {model_part}"
        f"torch {versions['torch']}, ampgan {versions['ampgan']}"
    )
