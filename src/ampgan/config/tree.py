"""The config tree: one frozen section per concern, assembled in `TrainConfig`, written to config.json.

    data         what to train on (data/registry.py)
    model        which GAN (a built-in name or path/to/file.py:FUNCTION) and its options
    optim        Adam's learning rates and betas (None: the model's own)
    precision    the mode and, for fp16, the loss scale
    compute      device, memory format, compile, SyncBatchNorm
    budget       batch size per process, steps and/or training seconds
    checkpoints  how often to save, how many to keep
    logging      metrics, sample grids, TensorBoard
    seed

Declared once and shared by `train`, `bench`, `compare` and `doctor` (each command adds its own few
settings beside a TrainConfig, never a copy of its fields). Every field is validated by its path,
whoever set it: a flag, `--set section.field=value`, a config file or a Python caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ampgan import precisions
from ampgan.data.registry import DataConfig
from ampgan.errors import ConfigError
from ampgan.sections import Section, Setting, close_match_hint, setting
from ampgan.seeds import MAX_SEED

DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True, kw_only=True)
class ModelConfig(Section):
    """`name`: a built-in GAN (gan/registry.py) or path/to/file.py:FUNCTION or package.module:FUNCTION.
    `options`: the model function's keyword options; config.json records every one (defaults included)."""

    NAME = "model"

    name: str = setting(
        "acgan",
        "The GAN: acgan (default), acgan-2019 (the study's network), dcgan, wgan-gp, r1, or your own as "
        "path/to/file.py:FUNCTION or package.module:FUNCTION (imported and run; docs/your-gan.md).",
        "--model",
    )
    options: dict = field(default_factory=dict)
    # The model options most GANs take, as settings (any other is `--set model.OPTION=VALUE`, as these are).
    OPTION_SETTINGS = (
        Setting(
            "model.width",
            None,
            "Model option `width` (the built-ins' channels w, 2w, 4w; acgan 64, dcgan/wgan-gp 32, r1 16).",
            "--width",
            "whole",
        ),
        Setting("model.z_dim", None, "Model option `z_dim`: the noise size.", None, "whole"),
    )

    def check(self) -> None:
        if not self.name.strip():
            raise ConfigError(self.path("name"), "is empty: name a model such as acgan or path/to/file.py:FUNCTION")
        for key in self.options:
            if not isinstance(key, str) or not key.isidentifier():
                raise ConfigError(f"model.{key}", "is not an option name (options are Python identifiers)")
        object.__setattr__(self, "options", dict(self.options))

    def to_dict(self) -> dict:
        return {"name": self.name, **self.options}

    @classmethod
    def from_dict(cls, values: Any) -> ModelConfig:
        if not isinstance(values, dict):
            raise ConfigError("model", f"must be a table of fields, got {values!r}")
        values = dict(values)
        name = values.pop("name", cls.name)
        if "options" in values and isinstance(values["options"], dict):  # also read {"name", "options": {...}}
            values = {**values.pop("options"), **values}
        return cls(name=name, options=values)


@dataclass(frozen=True, kw_only=True)
class OptimConfig(Section):
    """Adam for both networks; None takes the model's own value (the AC-GANs: 2e-4, (0.5, 0.999))."""

    NAME = "optim"

    lr_g: float | None = setting(None, "G's Adam learning rate (default: the model's).", kind="positive")
    lr_d: float | None = setting(None, "D's Adam learning rate (default: the model's).", kind="positive")
    beta1: float | None = setting(None, "Adam's beta1 for both networks (default: the model's).")
    beta2: float | None = setting(None, "Adam's beta2 for both networks (default: the model's).")

    def check(self) -> None:
        for name in ("beta1", "beta2"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < 1:
                raise ConfigError(self.path(name), f"must be in [0, 1), got {value}")


@dataclass(frozen=True, kw_only=True)
class PrecisionConfig(Section):
    """`loss_scale` (fp16 only): None for dynamic scaling (torch.amp.GradScaler), a number for a fixed
    scale (the study used 128)."""

    NAME = "precision"

    name: str = setting(precisions.FP32, "fp32 (default), tf32, bf16 or fp16.", "--precision", "precision")
    loss_scale: float | None = setting(
        None, "fp16 only: 'dynamic' (GradScaler, the default) or a fixed number such as 128.", True, "loss_scale"
    )

    def check(self) -> None:
        if self.name not in precisions.NAMES:
            raise ConfigError(self.path("name"), f"is {self.name!r}: choose one of {', '.join(precisions.NAMES)}")
        if self.loss_scale is not None:
            if not precisions.precision(self.name).loss_scaling:
                raise ConfigError(self.path("loss_scale"), f"applies to fp16 only, not {self.name}: drop it")
            self.positive("loss_scale")


@dataclass(frozen=True, kw_only=True)
class ComputeConfig(Section):
    NAME = "compute"

    device: str = setting("auto", "auto (default), cpu or cuda.", True, "device")
    channels_last: bool = setting(
        False,
        "NHWC (or, with --no-, NCHW) memory format for every precision; default: measured per precision on this "
        "machine (cached), channels-last where it is faster.",
        True,
        "switch",
    )
    compile: bool = setting(
        False,
        "torch.compile the networks (or, with --no-, run them eager); default: compiled where it pays for its "
        "compile time over the run's length on this machine (measured once, cached).",
        True,
        "switch",
    )
    sync_bn: bool = setting(False, "With several processes: SyncBatchNorm (CUDA only).", kind="flag")

    def check(self) -> None:
        if self.device not in DEVICES:
            raise ConfigError(self.path("device"), f"is {self.device!r}: choose one of {', '.join(DEVICES)}")


@dataclass(frozen=True, kw_only=True)
class BudgetConfig(Section):
    """A number of steps, a training time, or both (the first reached ends the run). A step is one G
    update (after the model's D updates)."""

    NAME = "budget"

    batch_size: int = setting(64, "Per process.", True, "whole")
    steps: int | None = setting(None, "Stop after this many steps (one step: one G update).", True, "whole")
    time_budget_s: float | None = setting(
        None, "Stop after this much training wall time, e.g. 7m, 90s, 1h.", "--time-budget", "duration"
    )


@dataclass(frozen=True, kw_only=True)
class CheckpointConfig(Section):
    NAME = "checkpoints"

    # --checkpoint-every sets both: steps (500) or training time (10m).
    every_steps: int | None = setting(
        500, "Steps (500) or training time (10m) between checkpoints.", "--checkpoint-every", "steps_or_duration"
    )
    every_s: float | None = setting(None, "Training time between checkpoints.", kind="duration")
    keep: int = setting(3, "How many recent checkpoints to keep.", kind="whole")

    def check(self) -> None:
        self.whole("every_steps", optional=True)  # its kind reads steps or a time: the steps are checked here


@dataclass(frozen=True, kw_only=True)
class LoggingConfig(Section):
    NAME = "logging"

    log_every: int = setting(10, "Steps between metric records.", kind="whole")
    sample_every: int = setting(500, "Steps between sample grids.", kind="whole")
    samples_per_class: int = setting(8, "Images per class in a sample grid (its columns).", kind="whole")
    tensorboard: bool = setting(False, "Also write TensorBoard event files.", kind="flag")


SECTIONS: dict[str, type[Section]] = {
    section.NAME: section
    for section in (
        DataConfig,
        ModelConfig,
        OptimConfig,
        PrecisionConfig,
        ComputeConfig,
        BudgetConfig,
        CheckpointConfig,
        LoggingConfig,
    )
}
TOP_LEVEL = ("seed",)


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    # Flags that are gone: {old name: its path now}; given to any command, each is one error line naming it.
    MOVED = {"lr": "optim.lr_g (and optim.lr_d)"}

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    compute: ComputeConfig = field(default_factory=ComputeConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    checkpoints: CheckpointConfig = field(default_factory=CheckpointConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    # seeds.py derives each stream from it.
    seed: int = setting(0, "Seeds weights, data order, noise and evaluation.", True, "whole0")

    def __post_init__(self) -> None:
        for name, section in SECTIONS.items():
            if not isinstance(getattr(self, name), section):
                raise ConfigError(name, f"must be a {section.__name__}, got {type(getattr(self, name)).__name__}")
        if not (isinstance(self.seed, int) and not isinstance(self.seed, bool) and 0 <= self.seed <= MAX_SEED):
            raise ConfigError("seed", f"must be a whole number of at least 0 and at most {MAX_SEED}, got {self.seed!r}")

    @property
    def budget_is_set(self) -> bool:
        return self.budget.steps is not None or self.budget.time_budget_s is not None

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name).to_dict() for name in SECTIONS} | {"seed": self.seed}

    @classmethod
    def from_dict(cls, values: Any) -> TrainConfig:
        """The config from its dict (config.json's "config", a config file); a flat config written before
        the tree existed is read as what that ampgan trained (config/legacy.py)."""
        from ampgan.config.legacy import is_flat_config, tree_from_flat

        if not isinstance(values, dict):
            raise ConfigError("config", f"must be a table of sections, got {type(values).__name__}")
        if is_flat_config(values):
            values = tree_from_flat(values)
        unknown = sorted(set(values) - set(SECTIONS) - set(TOP_LEVEL))
        if unknown:
            raise ConfigError(
                unknown[0],
                f"is not a config section{close_match_hint(unknown[0], [*SECTIONS, *TOP_LEVEL])}"
                f" (the sections: {', '.join([*SECTIONS, *TOP_LEVEL])})",
            )
        return cls(
            **{name: SECTIONS[name].from_dict(values[name]) for name in SECTIONS if name in values},
            **{name: values[name] for name in TOP_LEVEL if name in values},
        )

    def paths(self) -> dict[str, Any]:
        """Every field by its path: {"budget.batch_size": 64, "model.width": 64, "seed": 0, ...}."""
        return by_path(self.to_dict())

    def get(self, path: str) -> Any:
        section, _, name = path.partition(".")
        part = getattr(self, section)
        if name and isinstance(part, ModelConfig) and name != "name":
            return part.options.get(name)
        return getattr(part, name) if name else part

    def with_fields(self, changes: dict[str, Any]) -> TrainConfig:
        """A copy with `changes` ({"budget.batch_size": 8, "model.width": 16, "seed": 3}) applied."""
        tree = self.to_dict()
        for path, value in changes.items():
            set_path(tree, path, value)
        return TrainConfig.from_dict(tree)


def by_path(tree: dict) -> dict[str, Any]:
    """A config tree's values by their paths: {"budget": {"steps": 5}, "seed": 0} -> {"budget.steps": 5, "seed": 0}."""
    found = {}
    for name, values in tree.items():
        if isinstance(values, dict):
            found.update({f"{name}.{field_name}": value for field_name, value in values.items()})
        else:
            found[name] = values
    return found


def set_path(tree: dict, path: str, value: Any) -> None:
    """Set `section.field` (or a top-level field) in a config dict, refusing names that do not exist."""
    section, dot, name = path.partition(".")
    if not dot:
        if section not in TOP_LEVEL:
            raise ConfigError(
                path,
                f"is not a config field{close_match_hint(section, [*SECTIONS, *TOP_LEVEL])}: "
                "write section.field (e.g. budget.batch_size)",
            )
        tree[section] = value
        return
    if section not in SECTIONS:
        raise ConfigError(
            path, f"names no config section{close_match_hint(section, SECTIONS)} (the sections: {', '.join(SECTIONS)})"
        )
    # A field the section does not have is refused by its from_dict, as the tree is read (Section.from_dict).
    tree.setdefault(section, {})[name] = value
