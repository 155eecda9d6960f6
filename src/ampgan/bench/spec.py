"""What a bench is asked: the run to time, and the bench's own settings (which precisions and batch
sizes, its warm-up, its rounds, its budget, what else it reports)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ampgan.config import TrainConfig
from ampgan.data import DataConfig
from ampgan.precisions import check_names
from ampgan.sections import check_kinds, setting


@dataclass(frozen=True, kw_only=True)
class BenchSpec:
    # The run being timed: data, model and its options, optimizer, device, seed (its precision, batch
    # size, budget, memory format and compile setting are the bench's to vary). Synthetic data by
    # default, so data never limits.
    base: TrainConfig = field(default_factory=lambda: TrainConfig(data=DataConfig(dataset="synthetic")))
    batch_sizes: tuple[int, ...] = setting((16, 64, 256, 1024, 2048), "Batch sizes to time.", True, "int_list")
    precisions: tuple[str, ...] = setting(
        (), "Comma-separated; default: every precision this device runs at useful speed.", True, "precision_list"
    )
    warmup: int = setting(2, "Discarded steps per configuration.", kind="whole")
    steps: int = setting(
        5,
        "The fewest timed rounds per batch size; more run until every speedup's 95% CI is within +-5%.",
        True,
        "whole2",
    )
    max_seconds: float = setting(
        60.0,
        "Cap on each batch size's warm-ups and measured rounds together (a round that would not fit is not "
        "started; the speedup is then marked not settled to +-5%); the decisions before and the op trace after "
        "have shares of it on top (docs/speed.md). A configuration shown not to fit it (its steps, or one call, "
        "beyond it) is recorded as too slow; one it ran out on before it could be judged, as out of time.",
        True,
        "positive",
    )
    # Per batch size, measure at least this long: neighbours' load on a shared machine shifts over
    # tens of seconds, and an answer drawn from a few seconds describes one such state only.
    min_seconds: float = setting(
        20.0,
        "Measure each batch size at least this long (a shared machine's load shifts over tens of seconds).",
        kind="nonnegative",
    )
    compile: tuple[str, ...] = ()  # the precisions whose step is torch.compile'd (compile time reported apart)
    # Measure the compiled precisions' compile time, cold and warm, in fresh processes (a minute or
    # more each); a comparison has its compile decisions' numbers already and skips it.
    measure_compile_times: bool = True
    # The precisions whose step runs channels-last (NHWC); None: measured per precision at the first
    # batch size, on this machine (speed/layout.py).
    channels_last: tuple[str, ...] | None = None
    peak_tflops: float | None = setting(
        None, "Override the device's peak (TFLOP/s) for the % of peak column.", kind="positive"
    )
    # Trace the step's operations in fp32, bf16 and fp16 (a few steps at batch 8 and 16) for
    # `ampgan project`; a bench whose tables are not wanted (the speed decisions' own) skips it.
    trace_ops: bool = True
    # Time every operation of each configuration's real step alone, in each precision, and report the
    # attainable speedup (their sums' ratio) beside the measured one (bench/attainable.py).
    attainable: bool = setting(
        False,
        "Also time every operation of each configuration's step alone: the "
        "attainable speedup (what these kernels allow) beside the measured one.",
        True,
        "flag",
    )

    NAME = "bench"  # its settings' paths: bench.steps (compare's bench: compare.bench.steps)

    def __post_init__(self) -> None:
        check_kinds(self)
        check_names(self.precisions, f"{self.NAME}.precisions")  # one line, from the API as from --precisions

    @property
    def seed(self) -> int:
        return self.base.seed

    def train_config(self, precision: str, batch_size: int) -> TrainConfig:
        return self.base.with_fields(
            {
                "precision.name": precision,
                "precision.loss_scale": None,
                "budget.batch_size": batch_size,
                "budget.steps": 1,
                "budget.time_budget_s": None,
                "compute.compile": precision in self.compile,
                "compute.channels_last": precision in (self.channels_last or ()),
            }
        )

    def to_dict(self) -> dict:
        """What results.json records of the spec: the bench's own settings beside the base config."""
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "base"}
        return {
            "dataset": self.base.data.dataset,
            "model": self.base.model.name,
            "model_options": dict(self.base.model.options),
            "seed": self.seed,
            "config": self.base.to_dict(),
            **{k: list(v) if isinstance(v, tuple) else v for k, v in own.items()},
        }
