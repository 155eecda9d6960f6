"""The training configuration: one frozen, keyword-only dataclass that validates itself.

The resolved config is written to every run folder as `config.json`, so a run can always be
traced back to exactly what produced it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

from ampgan.errors import AmpganError

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
DEVICES = ("auto", "cpu", "cuda")
IMAGE_SIZES = (28, 32, 64)


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    # What to train on.
    dataset: str = "digits"
    image_size: int | None = None  # None: the dataset's own size
    channels: int | None = None  # None: the dataset's own channel count
    data_dir: str | None = None
    classes: str | None = None  # comma-separated class names (Quick, Draw!)
    max_per_class: int | None = None
    download: bool = False
    cache: bool = False

    # How to compute.
    precision: str = "fp32"
    loss_scale: float | None = None  # fp16 only; None means dynamic scaling
    device: str = "auto"

    # The model.
    z_dim: int = 128
    width: int = 64

    # Speed options (see README, "Speed of the step").
    channels_last: bool = False
    compile: bool = False
    sync_bn: bool = False  # with several processes: batch-norm statistics over the global batch

    # The optimisation (Adam, as in DCGAN and the study).
    batch_size: int = 64
    lr: float = 2e-4
    beta1: float = 0.5
    beta2: float = 0.999

    # The AC-GAN's losses (training/step.py says why; benchmarks/gan_trials.py measured them).
    # mode_seeking: weight of the mode-seeking term that keeps G from drawing one image per class;
    # class_loss_on_fakes: also train D's class head on generated images (the original AC-GAN, which
    # lets G and D agree on a permuted class mapping). A config written before one of these fields
    # existed loads with what ampgan did then (_BEFORE_EACH_FIELD), so its run resumes as it began.
    mode_seeking: float = 0.3
    class_loss_on_fakes: bool = False
    # real_label: D's target for real images (below 1: one-sided label smoothing);
    # class_weight_g: the weight of the class loss in G's update;
    # spectral_norm_d: D's convolutions and real/fake head spectrally normalised (training/models.py).
    # Smoothing and spectral norm keep D from winning outright on Quick, Draw! (README, "The GAN").
    real_label: float = 0.9
    class_weight_g: float = 1.0
    spectral_norm_d: bool = True

    # The budget: a number of steps, a wall-clock budget in seconds, or both (first reached wins).
    steps: int | None = None
    time_budget_s: float | None = None

    # Checkpoints: every N steps and/or every N seconds of training; the last `keep` are kept.
    checkpoint_every_steps: int | None = 500
    checkpoint_every_s: float | None = None
    keep: int = 3

    seed: int = 0
    sample_every: int = 500
    log_every: int = 10
    samples_per_class: int = 8
    tensorboard: bool = False

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise AmpganError(
                f"unknown precision {self.precision!r}: choose one of {', '.join(PRECISIONS)}"
            )
        if self.device not in DEVICES:
            raise AmpganError(f"unknown device {self.device!r}: choose one of {', '.join(DEVICES)}")
        if self.loss_scale is not None:
            if self.precision != "fp16":
                raise AmpganError(
                    f"--loss-scale applies to fp16 only, not {self.precision}: drop the option"
                )
            if not self.loss_scale > 0:
                raise AmpganError(
                    f"--loss-scale must be 'dynamic' or a positive number, got {self.loss_scale}"
                )
        _require_positive("--batch-size", self.batch_size)
        _require_positive("--z-dim", self.z_dim)
        _require_positive("--width", self.width)
        _require_positive("--sample-every", self.sample_every)
        _require_positive("--log-every", self.log_every)
        _require_positive("--samples-per-class", self.samples_per_class)
        _require_positive("--keep", self.keep)
        if self.max_per_class is not None:
            _require_positive("--max-per-class", self.max_per_class)
        if self.checkpoint_every_steps is not None:
            _require_positive("--checkpoint-every", self.checkpoint_every_steps)
        if self.checkpoint_every_s is not None and not self.checkpoint_every_s > 0:
            raise AmpganError(f"--checkpoint-every must be positive, got {self.checkpoint_every_s} s")
        if self.steps is not None:
            _require_positive("--steps", self.steps)
        if self.time_budget_s is not None and not self.time_budget_s > 0:
            raise AmpganError(f"--time-budget must be positive, got {self.time_budget_s} s")
        if self.image_size is not None and self.image_size not in IMAGE_SIZES:
            raise AmpganError(
                f"--image-size {self.image_size} is not supported: choose one of "
                f"{', '.join(map(str, IMAGE_SIZES))}"
            )
        if self.channels is not None and self.channels not in (1, 3):
            raise AmpganError(f"--channels must be 1 or 3, got {self.channels}")
        self._refuse_options_that_do_not_apply()
        if not self.lr > 0:
            raise AmpganError(f"--lr must be positive, got {self.lr}")
        for option, value in (("--mode-seeking", self.mode_seeking), ("--class-weight-g", self.class_weight_g)):
            if not (math.isfinite(value) and value >= 0):
                raise AmpganError(f"{option} must be 0 or more, got {value}")
        if not 0 < self.real_label <= 1:
            raise AmpganError(f"--real-label must be in (0, 1], got {self.real_label}")
        for name, beta in (("beta1", self.beta1), ("beta2", self.beta2)):
            if not 0 <= beta < 1:
                raise AmpganError(f"Adam {name} must be in [0, 1), got {beta}")

    def _refuse_options_that_do_not_apply(self) -> None:
        """A data option the chosen dataset ignores is refused, not silently dropped."""
        if self.classes is not None and not any(c.strip() for c in self.classes.split(",")):
            raise AmpganError("--classes needs at least one class name, e.g. apple,eye,fish")
        applies_to = {"classes": ("quickdraw",), "max_per_class": ("quickdraw",),
                      "data_dir": ("cifar10", "quickdraw", "mnist"), "download": ("cifar10", "quickdraw")}
        for field_name, datasets in applies_to.items():
            if getattr(self, field_name) not in (None, False) and self.dataset not in datasets:
                option = "--" + field_name.replace("_", "-")
                raise AmpganError(f"{option} applies to {' and '.join(datasets)} only, not to {self.dataset}: drop it")
        if self.cache and not self.dataset.startswith("folder:"):
            raise AmpganError(f"--cache applies to folder:PATH datasets only, not to {self.dataset}: drop it")

    def data_request(self, split: str = "train"):
        from ampgan.data import DataRequest

        classes = tuple(c.strip() for c in self.classes.split(",") if c.strip()) if self.classes else None
        return DataRequest(image_size=self.image_size, channels=self.channels, data_dir=self.data_dir,
                           seed=self.seed, split=split, classes=classes, max_per_class=self.max_per_class,
                           download=self.download, cache=self.cache)

    @property
    def budget_is_set(self) -> bool:
        return self.steps is not None or self.time_budget_s is not None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise AmpganError(
                f"config has unknown keys {unknown}: it was written by another ampgan version"
            )
        return cls(**(_BEFORE_EACH_FIELD | dict(values)))


# What training did before each of these fields existed: the published AC-GAN's losses and D.
# A field added later with a new default must be listed here, or older runs would change on resume.
_BEFORE_EACH_FIELD = {"mode_seeking": 0.0, "class_loss_on_fakes": True, "real_label": 1.0,
                      "class_weight_g": 1.0, "spectral_norm_d": False}


def _require_positive(option: str, value: int) -> None:
    if not (isinstance(value, int) and value >= 1):
        raise AmpganError(f"{option} must be a whole number of at least 1, got {value}")


# Options that may differ when a run is resumed: they change how long it runs and what it writes,
# not what it computes. Anything else would make the resumed run a different experiment.
SAFE_TO_CHANGE_ON_RESUME = frozenset({
    "steps", "time_budget_s", "sample_every", "log_every", "checkpoint_every_steps", "checkpoint_every_s",
    "keep", "tensorboard", "samples_per_class", "download", "cache",
})

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([hms])")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(text: str) -> float:
    """'7m' -> 420.0, '1h30m' -> 5400.0, '90s' or '90' -> 90.0 (seconds)."""
    cleaned = text.strip().lower()
    try:
        return float(cleaned)
    except ValueError:
        pass
    parts = _DURATION_PART.findall(cleaned)
    if not parts or "".join(number + unit for number, unit in parts) != cleaned:
        raise AmpganError(
            f"cannot read the duration {text!r}: write it like 90s, 7m or 1h30m"
        )
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def parse_loss_scale(text: str) -> float | None:
    """'dynamic' -> None (GradScaler decides); '128' -> 128.0 (a fixed scale, as in the study)."""
    if text.strip().lower() == "dynamic":
        return None
    try:
        return float(text)
    except ValueError:
        raise AmpganError(
            f"--loss-scale must be 'dynamic' or a number such as 128, got {text!r}"
        ) from None
