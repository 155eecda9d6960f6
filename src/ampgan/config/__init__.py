"""The configuration: one tree of sections (tree.py), built from defaults, a config file, flags and
`--set section.field=value` (sources.py), validated field by field, written to every run folder."""

from ampgan.config.resume import (
    SAFE_TO_CHANGE_ON_RESUME,
    config_from_document,
    flag_of,
    moves_files,
    safe_to_change,
)
from ampgan.config.sources import build_config, config_from_options, parse_set, read_config_file
from ampgan.config.tree import (
    SECTIONS,
    BudgetConfig,
    CheckpointConfig,
    ComputeConfig,
    LoggingConfig,
    ModelConfig,
    OptimConfig,
    PrecisionConfig,
    TrainConfig,
)
from ampgan.config.values import parse_duration, parse_loss_scale
from ampgan.data.registry import DataConfig

__all__ = [
    "SAFE_TO_CHANGE_ON_RESUME",
    "SECTIONS",
    "BudgetConfig",
    "CheckpointConfig",
    "ComputeConfig",
    "DataConfig",
    "LoggingConfig",
    "ModelConfig",
    "OptimConfig",
    "PrecisionConfig",
    "TrainConfig",
    "config_from_document",
    "build_config",
    "config_from_options",
    "flag_of",
    "moves_files",
    "parse_duration",
    "parse_loss_scale",
    "parse_set",
    "read_config_file",
    "safe_to_change",
]
