"""The run folder: config.json, metrics.jsonl, samples/, checkpoints/ (and tensorboard/).

RUN_DIR/
  config.json            resolved config + dataset source + environment stamp
  metrics.jsonl          one JSON object per log point
  samples/step-XXXXXX.png fixed-noise grids, one row per class
  checkpoints/step-XXXXXX.pt  the last checkpoints.keep checkpoints (weights_only-loadable)
  generator.safetensors  the final generator alone (metadata: model and options, class names)
  tensorboard/           only with logging.tensorboard
"""

from __future__ import annotations

import importlib.util
import json
import math
import uuid
from contextlib import contextmanager
from pathlib import Path

from safetensors import SafetensorError, safe_open
from safetensors.torch import save

from ampgan.errors import AmpganError, warn, write_fix
from ampgan.files.atomic import (
    open_for_append,
    os_error_behind,
    write_atomically,
    write_json_atomically,
    write_jsonl_atomically,
)
from ampgan.files.images import save_png
from ampgan.files.jsonfile import not_a_regular_file, read_jsonl
from ampgan.files.manifest import record_tree
from ampgan.files.paths import file_in, read_json_in
from ampgan.files.schema import COUNT, Between, check_shape
from ampgan.runs.checkpoint import checkpoint_path, list_checkpoints, prune_checkpoints, save_checkpoint
from ampgan.runs.samples import fixed_noise, render_samples
from ampgan.system.environment import environment_stamp, stamp_line
from ampgan.trust import resume_command

# The subfolders a run writes into (and metrics.jsonl, appended to).
WRITTEN_INTO = ("samples", "checkpoints", "tensorboard", "metrics.jsonl")

# Of config.json; bumped when a run folder's layout changes. 2: the config tree and any GAN (1: ampgan 0.1's
# flat config of the AC-GAN, still read: config/legacy.py).
RUN_FORMAT_VERSION = 2


class RunWriter:
    """What rank 0 writes into the run folder while a run trains.

    `prepared`: the run's config, policy, dataset and model (training.prepared.PreparedRun);
    `state`: the TrainState whose generator is sampled and exported; `processes`: the world size.
    """

    def __init__(self, run_dir: Path, prepared, state, processes: int = 1, resumed_at: int | None = None):
        self.run_dir = Path(run_dir)
        self.prepared = prepared
        self.state = state
        self.processes = processes
        config, dataset = prepared.config, prepared.dataset
        self.environment = environment_stamp(prepared.policy.device)
        self.stamp = stamp_line(
            self.environment,
            prepared.policy.describe(),
            config.budget.batch_size if processes == 1 else f"{config.budget.batch_size} x {processes} processes",
            model=config.model.name,
        )
        self.last_record: dict = {}
        self.last_logged_step = 0
        self.resumed = resumed_at is not None
        if self.resumed:  # what it writes stays in its folder: a subfolder linked out is refused before any write
            for name in WRITTEN_INTO:
                file_in(self.run_dir, name)
        previous = read_run_config(self.run_dir) if self.resumed else {}
        # Every checkpoint carries the run's identity, so one copied in from another run is refused.
        self.run_id = previous.get("run_id") if isinstance(previous.get("run_id"), str) else uuid.uuid4().hex
        document = self._config_document()
        if resumed_at is not None:
            document["resumed"] = previous.get("resumed", []) + [
                {"at_step": resumed_at, "date": self.environment["date"], "command": self.environment["command"]}
            ]
            self.last_logged_step = truncate_metrics(file_in(self.run_dir, "metrics.jsonl"), resumed_at)
        with self._stopping_cleanly_if_unwritable(self.run_dir / "config.json"):
            write_json_atomically(self.run_dir / "config.json", document)
        self._metrics = open_for_append(self.run_dir / "metrics.jsonl")
        per_class = config.logging.samples_per_class
        self._noise = fixed_noise(
            state.gan, dataset.num_classes, per_class, config.seed, dataset.images[: per_class**2]
        )
        self._tensorboard = _open_tensorboard(self.run_dir) if config.logging.tensorboard else None

    def _config_document(self) -> dict:
        config, dataset, gan = self.prepared.config, self.prepared.dataset, self.state.gan
        return {
            "format_version": RUN_FORMAT_VERSION,
            "run_id": self.run_id,
            "config": config.to_dict(),
            "processes": self.processes,
            "global_batch_size": config.budget.batch_size * self.processes,
            "precision": self.prepared.policy.describe(),
            "device": str(self.prepared.policy.device),
            "dataset": {
                "name": config.data.dataset,
                "images": len(dataset),
                "image_shape": [dataset.channels, dataset.image_size, dataset.image_size],
                "class_names": list(dataset.class_names),
                "counts_per_class": dataset.counts_per_class(),
                "source": dataset.source,
            },
            "model": {
                "name": config.model.name,
                "description": gan.description,
                "conditional": gan.conditional,
                "z_dim": gan.z_dim,
                "image_range": list(gan.image_range),
                "parameters": {
                    "generator": sum(p.numel() for p in self.state.generator.parameters()),
                    "discriminator": sum(p.numel() for p in self.state.discriminator.parameters()),
                },
                "fingerprint": self.prepared.fingerprint,
                "source_sha256": self.prepared.model.source_sha256,
            },
            "environment": self.environment,
            "stamp": self.stamp,
        }

    def log_metrics(self, record: dict) -> None:
        self.last_record = record
        self.last_logged_step = record["step"]
        with self._stopping_cleanly_if_unwritable(self.run_dir / "metrics.jsonl"):
            self._metrics.write(json.dumps(record) + "\n")
            self._metrics.flush()
        if self._tensorboard is not None:
            for name, value in record.items():
                if name != "step":
                    self._tensorboard.add_scalar(name, value, record["step"])
            # TensorBoard writes its own files: flushed, then noted in the manifest, so a run stopped at any
            # point can still be replaced (files/manifest.py).
            self._tensorboard.flush()
            record_tree(self.run_dir / "tensorboard")

    def save_samples(self, step: int) -> Path:
        z, labels = self._noise
        grid = render_samples(
            self.state.gan,
            z,
            labels,
            rows=self.prepared.config.logging.samples_per_class
            if not self.state.gan.conditional
            else self.prepared.dataset.num_classes,
            autocast=self.prepared.policy.autocast,
        )
        path = self.run_dir / "samples" / f"step-{step:06d}.png"
        with self._stopping_cleanly_if_unwritable(path):
            save_png(grid, path, f"{self.stamp} | step {step}, fixed noise")
        if self._tensorboard is not None:
            self._tensorboard.add_image("samples", grid, step, dataformats="HWC")
        return path

    def save_checkpoint(self, payload: dict) -> Path:
        """`payload`: what the run state saves of itself (RunState.state_dict())."""
        path = checkpoint_path(self.run_dir, self.state.step)
        with self._stopping_cleanly_if_unwritable(path):
            save_checkpoint(path, {"config": self.prepared.config.to_dict(), "run_id": self.run_id, **payload})
        prune_checkpoints(self.run_dir, self.prepared.config.checkpoints.keep)
        return path

    def export_generator(self) -> Path:
        """generator.safetensors: the trained generator alone (its EMA when the model declares one; the
        metadata's `weights` says which), loadable without ampgan or pickle."""
        generator = self.state.gan.sampling_generator  # the EMA of G when the model declares one
        model = self.prepared.config.model
        metadata = {
            "model": json.dumps({"name": model.name, "options": model.options}),
            "image_range": json.dumps(list(self.state.gan.image_range)),
            "class_names": json.dumps(list(self.prepared.dataset.class_names)),
            "step": str(self.state.step),
            "weights": self.state.gan.sampling_weights,
            "ampgan_stamp": self.stamp,
        }
        path = self.run_dir / "generator.safetensors"
        blob = save({k: v.detach().contiguous().cpu() for k, v in generator.state_dict().items()}, metadata=metadata)
        with self._stopping_cleanly_if_unwritable(path):
            write_atomically(path, lambda stream: stream.write(blob))
        return path

    @contextmanager
    def _stopping_cleanly_if_unwritable(self, path: Path):
        """A full disk, a quota or a folder gone read-only mid-run: stop with one line that says the
        run's saved data is intact and how to continue (every file here is written atomically or
        appended, so a failed write never damages what was written before)."""
        try:
            yield
        except (OSError, RuntimeError) as error:
            cause = os_error_behind(error)
            if cause is None:
                raise
            raise AmpganError(self._unwritable_message(path, cause)) from None

    def _unwritable_message(self, path: Path, cause: OSError) -> str:
        checkpoints = list_checkpoints(self.run_dir)
        head = (
            f"could not write {path.relative_to(self.run_dir)} in {self.run_dir} ({cause.strerror or cause}); "
            "the run stopped"
        )
        fix = write_fix(cause)
        if not self.run_dir.is_dir():  # moved or deleted while it ran: what it saved went with it
            return f"{head}; what it saved went with the folder: continue with 'ampgan train --resume' and its new path"
        if self.resumed or any(p.name != "step-000000.pt" for p in checkpoints):  # it saved some training
            return (
                f"{head}. What it saved is intact: the last good checkpoint is "
                f"{checkpoints[-1].relative_to(self.run_dir)}; {fix}, then continue with "
                f"'{resume_command(self.run_dir, self.prepared.config.model.name)}'"
            )
        return f"{head} before it saved any training, so nothing of it is kept: {fix} and run the command again"

    def close(self) -> None:
        self._metrics.close()
        if self._tensorboard is not None:
            self._tensorboard.close()
            record_tree(self.run_dir / "tensorboard")


def finished_at(run_dir: Path, step: int) -> bool:
    """Whether the run's final files are written for `step`: generator.safetensors, the last thing a run
    writes, holds that step's generator. A run stopped at its last step (a signal, a full disk) is not
    finished, and resuming it writes them."""
    path = Path(run_dir) / "generator.safetensors"
    if not_a_regular_file(path) is not None:  # a FIFO would block the read
        return False
    try:
        with safe_open(path, "pt") as exported:  # its header alone
            return (exported.metadata() or {}).get("step") == str(step)
    except (OSError, SafetensorError):
        return False


class NullWriter:
    """What ranks other than 0 write: nothing (rank 0 alone owns the run folder)."""

    def __init__(self, state):
        self.state = state
        self.last_logged_step = 0
        self.last_record: dict = {}

    def log_metrics(self, record: dict) -> None:
        self.last_record, self.last_logged_step = record, record["step"]

    def _nothing(self, *args) -> None:
        """What rank 0 writes, left unwritten."""

    save_samples = save_checkpoint = export_generator = close = _nothing
    stamp = ""


def read_run_config(run_dir: Path) -> dict:
    """config.json of an existing run folder, checked for a format this ampgan understands."""
    path, document = read_json_in(
        run_dir,
        "config.json",
        missing=f"{run_dir} is not an ampgan run folder (no config.json)",
        fix="this run cannot be resumed",
    )
    # The version first: a newer ampgan's run may lay out the rest differently, and its reader says "upgrade".
    check_shape(document, {"format_version": int}, str(path), "the run cannot be resumed or read")
    version = document["format_version"]
    if version < 1:
        raise AmpganError(f"{path} has no valid format_version ({version!r}): the file is damaged or foreign")
    if version > RUN_FORMAT_VERSION:
        raise AmpganError(
            f"{run_dir} was written by a newer ampgan (run format {version}, this one reads "
            f"{RUN_FORMAT_VERSION}): upgrade ampgan to use it"
        )
    check_shape(document, {"config": dict}, str(path), "the run cannot be resumed or read")
    return document


# A step below 0 or a time below 0 was resumed from and appended to (the damage fuzzer's "step -3").
METRICS_RECORD = {"step": COUNT, "train_seconds": Between(0.0, math.inf)}


def read_metrics(path: Path, said=None) -> list[dict]:
    """metrics.jsonl's records, each checked for the fields every reader relies on (one error line for a
    damaged file; a last line cut short by a crash is skipped, and `said`)."""
    fix = "remove the damaged line, or resume from an earlier checkpoint"
    return read_jsonl(path, said, METRICS_RECORD, fix, rising="step")


def truncate_metrics(path: Path, last_step: int) -> int:
    """Keep the records up to `last_step` (the checkpoint's), dropping any the lost part of the run
    wrote after it and a line cut short by a crash; rewritten atomically. Returns the last kept step."""
    kept = [record for record in read_metrics(path, warn) if record["step"] <= last_step]
    write_jsonl_atomically(path, kept)
    return kept[-1]["step"] if kept else 0


def require_tensorboard() -> None:
    """Checked while validating, so a missing package never costs an existing run folder."""
    if importlib.util.find_spec("tensorboard") is None:
        raise AmpganError("logging.tensorboard needs the tensorboard package: pip install 'ampgan[tensorboard]'")


def _open_tensorboard(run_dir: Path):
    # Imported here: tensorboard is an optional extra (require_tensorboard checks it first), and its import
    # costs seconds that a run without logging.tensorboard never pays.
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(log_dir=str(run_dir / "tensorboard"))
