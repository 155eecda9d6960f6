"""Reading finished run folders back: the generator, the metrics, the quality records."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from ampgan.checkpoint import latest_checkpoint, load_checkpoint
from ampgan.config import TrainConfig
from ampgan.errors import AmpganError
from ampgan.models import Generator, ModelShape
from ampgan.run_folder import read_run_config


@dataclass
class LoadedRun:
    run_dir: Path
    document: dict  # config.json
    config: TrainConfig
    generator: Generator
    step: int

    @property
    def class_names(self) -> list[str]:
        return self.document["dataset"]["class_names"]


def load_run(run_dir: Path, device: torch.device | str = "cpu") -> LoadedRun:
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
    return LoadedRun(run_dir, document, config, generator, payload["step"])


def read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by a crash
    return records


def class_index(class_names: list[str], wanted: str) -> int:
    """A class by name or by index, with a clear error listing the choices."""
    if wanted in class_names:
        return class_names.index(wanted)
    if wanted.isdigit() and int(wanted) < len(class_names):
        return int(wanted)
    raise AmpganError(f"no class {wanted!r}: choose a name or index 0-{len(class_names) - 1} of {', '.join(class_names)}")
