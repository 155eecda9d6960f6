"""What a resumed run may change: how long it runs and what it writes, never what it computes; and what a
config read back from a document may make ampgan do."""

from __future__ import annotations

from ampgan.config.tree import TrainConfig
from ampgan.sections import settings
from ampgan.trust import model_file

# Paths, or whole sections ending in ".*". Anything else would make the resumed run a different experiment.
SAFE_TO_CHANGE_ON_RESUME = frozenset(
    {
        "budget.steps",
        "budget.time_budget_s",
        "checkpoints.*",
        "logging.*",
        "data.download",
        "data.cache",
    }
)


def safe_to_change(path: str) -> bool:
    return path in SAFE_TO_CHANGE_ON_RESUME or f"{path.partition('.')[0]}.*" in SAFE_TO_CHANGE_ON_RESUME


def moves_files(path: str, old: object, new: object) -> bool:
    """`new` at `path` is a new place for the run's files, not other ones: its data (a folder dataset's folder, a
    data_dir) or its model's file (path.py:FUNCTION, the same function). A run resumed or read back from there is
    the same experiment once they are checked to be the run's (training/start.py: the data's content SHA-256,
    run_data; the model file's SHA-256, check_model_file)."""
    if path == "model.name":
        return all(isinstance(name, str) and model_file(name) for name in (old, new)) and (
            old.rpartition(":")[2] == new.rpartition(":")[2]
        )
    if path == "data.dataset":
        return all(isinstance(name, str) and name.startswith("folder:") for name in (old, new))
    return path == "data.data_dir" and old is not None and new is not None


def flag_of(path: str) -> str | None:
    """The flag that sets a config path ('budget.batch_size' -> '--batch-size'), if one does."""
    return next((s.flag for s in settings(TrainConfig()) if s.path == path), None)


# The switches by which a config makes ampgan write where its data lives: a download into data.data_dir, the
# folder dataset's cache beside its images. A document (a run's config.json, a study's spec) names where data
# is read; it never makes ampgan write there: in a config read from one they are off, and the command that
# reads it may turn them on again (--download, --cache: both are safe to change on resume).
WRITES_WHERE_DATA_LIVES = ("data.download", "data.cache")


def config_from_document(tree: object) -> TrainConfig:
    """The TrainConfig a document records, with WRITES_WHERE_DATA_LIVES off."""
    config = TrainConfig.from_dict(tree)
    return config.with_fields({path: False for path in WRITES_WHERE_DATA_LIVES if config.get(path)})
