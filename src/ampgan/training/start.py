"""Starting a new run or resuming one, in one place: the config, the run folder, the checkpoint.

    new run:  config from the options  -> prepare (validate) -> claim the folder (rank 0) -> train
    resume:   the folder's config + the options safe to change -> prepare -> its latest checkpoint -> train

Nothing is written before every input was validated, so a bad option never touches a run folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from ampgan.config import TrainConfig, config_from_document, flag_of, moves_files, safe_to_change
from ampgan.config.sources import absolute_paths
from ampgan.data import ImageDataset, load_dataset
from ampgan.data.files import file_digest
from ampgan.errors import AmpganError, ConfigError
from ampgan.files.schema import has_shape
from ampgan.runs.checkpoint import check_step_matches_name, latest_checkpoint, list_checkpoints, load_checkpoint
from ampgan.runs.claim import FolderLock, check_place, claimed_folder, settle_leftovers
from ampgan.runs.run_folder import finished_at, read_run_config
from ampgan.training.distributed import any_rank, world
from ampgan.training.interruption import TrainingInterrupted
from ampgan.training.prepared import PreparedRun, prepare_run
from ampgan.trust import model_file


def saved_config(run_dir: Path) -> TrainConfig:
    """The config a run folder's config.json records (a flat one from ampgan 0.1 included), or one
    error line saying the file is damaged."""
    try:
        return config_from_document(read_run_config(run_dir)["config"])
    except ConfigError as error:
        raise AmpganError(
            f"{Path(run_dir) / 'config.json'} is damaged or foreign ({error}): it cannot be resumed or read; start "
            "a new run, or restore the file"
        ) from None


def resumed_config(run_dir: Path, changes: dict) -> TrainConfig:
    """The run's own config, with only the changes that are safe to make on resume applied, and its files where
    the user says they moved (moved_files).

    `changes`: {config path: value} the user set explicitly."""
    if os.environ.get("RANK", "0") == "0":  # one process puts back what a killed --overwrite set aside
        settle_leftovers(run_dir)
    config = saved_config(run_dir)
    # A path no run has is refused as a new run refuses it (set_path, each section's from_dict), before the
    # comparison below reads the run's value at that path; each alone, so that a value checked against the run's
    # other fields (a loss scale with a precision) is named by the comparison, not by a flag the user never gave.
    known = config.paths()
    for path, value in changes.items():
        if path not in known:
            config.with_fields({path: value})
    applied = {}
    for path, value in absolute_paths(changes).items():
        # the run's own paths given again, as typed then (a run made before paths were recorded absolute
        # holds them relative): the same files from the folder resumed in
        if value == config.get(path) or absolute_paths({path: config.get(path)})[path] == value:
            continue
        if not safe_to_change(path) and path not in RECORDED:  # where its files are now: moved_files
            option = flag_of(path) or f"--set {path}="
            raise AmpganError(
                f"{option} {value} differs from the run's {config.get(path)} and would make "
                f"the resumed run a different experiment: drop it, or start a new run with --out"
            )
        applied[path] = value
    if "budget.time_budget_s" in changes and "budget.steps" not in changes:
        applied["budget.steps"] = None  # a new budget given as time alone replaces the run's step budget
    moved = {path: applied.pop(path) for path in list(applied) if path in RECORDED}
    return moved_files(run_dir, config, moved, read_run_config(run_dir)).with_fields(applied)


def check_checkpoint_belongs(
    payload: dict, checkpoint: Path, run_dir: Path, config: TrainConfig, load_data: Callable[[], ImageDataset]
) -> ImageDataset:
    """A checkpoint resumes only the run that saved it: the same run identity (config.json's run_id,
    which every checkpoint carries), the same experiment (every field that may not change on resume) and the
    same data (config.json's content SHA-256 of the dataset `load_data()` returns, when it records one). One
    error line otherwise: config.json was edited, the checkpoint was copied from another run, or the data
    changed since. The data is loaded after the cheap checks (a large folder takes a while): returned."""
    recorded = read_run_config(run_dir)
    saved_id, own_id = payload.get("run_id"), recorded.get("run_id")
    if saved_id is not None and own_id is not None and saved_id != own_id:
        raise AmpganError(
            f"{checkpoint} was saved by another run (run {saved_id}, this folder's is {own_id}): it was "
            "copied in from elsewhere; remove it to resume from this run's own checkpoints"
        )
    try:
        saved = TrainConfig.from_dict(payload.get("config")).paths()
    except (ConfigError, AmpganError):
        raise AmpganError(
            f"{checkpoint} holds no readable config: it is damaged or foreign; remove it to resume from the one before"
        ) from None
    # moved files (moved_files): run_data and check_model_file check them against what config.json records
    check_model_file(recorded, run_dir, config)
    for path, value in config.paths().items():
        if (
            saved.get(path) != value
            and not safe_to_change(path)
            and not (moves_files(path, saved.get(path), value) and has_shape(recorded, RECORDED[path]))
        ):
            raise AmpganError(
                f"{checkpoint} was trained with {path} = {saved.get(path)!r}, but {run_dir}/config.json "
                f"says {value!r}: config.json was edited, or the checkpoint comes from another run; "
                "restore config.json, or start a new run"
            )
    dataset = run_data(recorded, run_dir, config, load_data)
    check_step_matches_name(payload, checkpoint)  # last: whose run and which experiment are the clearer reasons
    return dataset


# What a run's config.json records of the files it can be told moved (config.moves_files), by the paths that name
# them: the data's content SHA-256 (or its files', a downloaded dataset's), the model file's SHA-256 (gan/registry).
_DATA_HASH = {"dataset": {"source": {"sha256": (str, dict)}}}
RECORDED = {"data.dataset": _DATA_HASH, "data.data_dir": _DATA_HASH, "model.name": {"model": {"source_sha256": str}}}


def moved_files(whose: Path, config: TrainConfig, moved: dict, recorded: dict | None) -> TrainConfig:
    """`config` (`whose`: a run's, a study's) with its files where `moved` ({config path: value}: --dataset
    folder:PATH, --data-dir DIR, --model PATH.py:FUNCTION) says they now are, for every command that reads a run
    back (train --resume, evaluate, generate, doctor --run, compare --resume). Each must be a new place of the run's
    own files (config.moves_files) whose SHA-256 `recorded` (the config.json of a run trained on them; None: no run
    yet, nothing to check) keeps, or it could never be checked to be them: one line naming the flag. The model file
    is checked here, before it is imported (check_model_file); the data where it is loaded (run_data)."""
    moved = {path: value for path, value in absolute_paths(moved).items() if value != config.get(path)}  # (not its own)
    for path, value in moved.items():
        flag, old = flag_of(path), config.get(path)
        if not moves_files(path, old, value):
            raise AmpganError(
                f"{whose} was trained with {old or config.data.dataset}, and {flag} {value} is no new place of its "
                f"model file, image folder or data dir (another dataset or function): drop {flag} {value}"
            )
        if recorded is not None and not has_shape(recorded, RECORDED[path]):
            raise AmpganError(
                f"{flag} {value}: {whose}/config.json records no SHA-256 of {old} (every ampgan records it: the file "
                f"was edited), so no new place can be checked to hold what it trained with: put it back at {old}, or "
                "start a new run"
            )
    config = config.with_fields(moved)
    if recorded is not None:
        check_model_file(recorded, whose, config)
    return config


def run_data(recorded: dict, run_dir: Path, config: TrainConfig, load: Callable[[], ImageDataset] | None = None):
    """The data `run_dir` trained on (`recorded`: its config.json), read where `config` says it is now (moved: the
    user gave its new place), or one line: gone (the flag that gives its new place), or other data than the run's
    (its content SHA-256 differs). `load`: the loaded data (default: load_dataset)."""
    data = config.data
    check_data_is_here(data, run_dir)
    dataset = load() if load else load_dataset(data, seed=config.seed)
    if has_shape(recorded, _DATA_HASH) and (recorded["dataset"]["source"]["sha256"] != dataset.source["sha256"]):
        raise AmpganError(
            f"{data.data_dir or data.dataset} holds other data than {run_dir} was trained on (images added, removed "
            "or edited since, or another dataset): give the place of the run's own data (--dataset folder:PATH, "
            "--data-dir DIR), or put it back as it was"
        )
    return dataset


def check_model_file(recorded: dict, run_dir: Path, config: TrainConfig) -> None:
    """Before it is imported: the run's model file (path.py:FUNCTION) is where `config` says it is now (moved: the
    user gave its new place) and is the file the run trained with (the SHA-256 `recorded`, its config.json, keeps),
    or one line: gone (the flag that gives its new place), or edited since. Only that file is checked: not the
    modules it imports, a built-in model or a package's module."""
    name = config.model.name
    where, function = model_file(name), name.rpartition(":")[2]
    if where is None:
        return
    if not Path(where).expanduser().is_file():
        raise AmpganError(
            f"{run_dir} was trained with the model in {where}, which is gone: give --model PATH.py:{function} "
            "where the file is now (checked to be the same file)"
        )
    then = recorded["model"]["source_sha256"] if has_shape(recorded, RECORDED["model.name"]) else ""
    now = file_digest(Path(where).expanduser())
    if then and now != then:
        raise AmpganError(
            f"{where} changed since {run_dir} was trained with it (SHA-256 {then[:12]} then, {now[:12]} now): "
            f"its checkpoints belong to the code as it was; restore the file (or give --model PATH.py:{function} where "
            "it is kept as it was), or start a new run with --out"
        )


def check_data_is_here(data, whose: Path) -> None:
    """One line naming the flag that gives the new place of `whose` data (a run's, a study's) when it is gone."""
    for place, flag in [(folder, "--dataset folder:PATH") for folder in data.folders_read] + [
        (data.data_dir, "--data-dir DIR")
    ]:
        if place and not data.download and not Path(place).exists():
            raise AmpganError(
                f"{whose} was trained on the data in {place}, which is gone: give {flag} where it is now "
                "(checked to be the same data)" + ", or --download to fetch it again" * data.downloads
            )


@dataclass(frozen=True)
class RunStart:
    prepared: PreparedRun
    run_dir: Path
    resume_from: dict | None = None  # the loaded checkpoint to continue from
    checkpoint: Path | None = None


def has_progress(run_dir: Path) -> bool:
    """A checkpoint past step 0: the run trained, and can be resumed. A run folder without one is
    removed when its command fails (nothing of it would be worth keeping)."""
    return any(path.name != "step-000000.pt" for path in list_checkpoints(run_dir))


@contextmanager
def new_run(config: TrainConfig, run_dir: Path, overwrite: bool, device: torch.device | None = None):
    """Validate, then claim the folder (rank 0) for the block: a run that fails before its first
    checkpoint past step 0 leaves no folder behind (a replaced one comes back)."""
    prepared = prepare_run(config, device=device)
    with claimed_on_main_rank(
        run_dir, overwrite, prepared.policy.device, "run", worth_keeping=has_progress, data=config.data.folders_read
    ):
        try:
            yield RunStart(prepared=prepared, run_dir=Path(run_dir))
        except TrainingInterrupted as stopped:
            if has_progress(run_dir):
                raise
            # Stopped at step 0: the folder is given back, so there is no run to --resume (as its line said).
            raise KeyboardInterrupt(stopped.signum) from None


@contextmanager
def resumed_run(config: TrainConfig, run_dir: Path, device: torch.device | None = None):
    """`config`: from resumed_config(); the folder is locked for the block (rank 0). Refuses a budget
    the run has already reached."""
    with ExitStack() as stack:
        if world().is_main:  # (what a killed --overwrite left was settled by resumed_config)
            stack.callback(FolderLock(run_dir, mention_leftovers=False).release)
        # Every check of the folder comes before the model is built: building a user's model imports
        # its code, which must not happen for a folder that is refused anyway.
        # A run left inside its dataset by an older ampgan, or a study's run (its study's command continues it).
        check_place(run_dir, "run", config.data.folders_read, given="--resume")
        checkpoint = latest_checkpoint(run_dir)
        # Loaded to the CPU: RNG states must be CPU tensors, and the optimizers move their state to
        # the parameters' device themselves (keeping Adam's step counters on the CPU).
        payload = load_checkpoint(checkpoint, map_location="cpu")
        steps = config.budget.steps
        # A run stopped at its last step (a signal, a full disk) is resumed to write its final files.
        if (
            steps is not None
            and payload["step"] >= steps
            and config.budget.time_budget_s is None
            and finished_at(run_dir, payload["step"])
        ):
            raise AmpganError(
                f"{run_dir} already reached step {payload['step']} of --steps {steps}: "
                "give a larger --steps to train further"
            )
        dataset = check_checkpoint_belongs(
            payload, checkpoint, run_dir, config, lambda: load_dataset(config.data, seed=config.seed)
        )
        yield RunStart(
            prepared=prepare_run(config, dataset, device=device),
            run_dir=Path(run_dir),
            resume_from=payload,
            checkpoint=checkpoint,
        )


@contextmanager
def claimed_on_main_rank(
    out: Path,
    overwrite: bool,
    device: torch.device,
    kind: str,
    worth_keeping=lambda folder: False,
    data: tuple[str, ...] = (),
):
    """Rank 0 alone claims the output folder (runs.claim) for the block; the other ranks learn whether
    it could, instead of waiting in the first collective for a rank that has already exited."""
    with ExitStack() as stack:
        failure = None
        if world().is_main:
            try:
                stack.enter_context(claimed_folder(out, overwrite, kind, worth_keeping, data=data))
            except AmpganError as error:
                failure = error
        (failed,) = any_rank([failure is not None])
        if failure is not None:
            raise failure
        if failed:
            raise AmpganError("rank 0 could not claim the output folder (see its message)")
        yield


@contextmanager
def reopened_on_main_rank(folder: Path):
    """An interrupted output folder continued in place: rank 0 holds its lock for the block."""
    with ExitStack() as stack:
        if world().is_main:
            stack.callback(FolderLock(folder).release)
        yield
