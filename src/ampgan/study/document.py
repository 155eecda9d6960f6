"""compare.json as typed records: what a study found, read by attribute (the report, the verdict, the
Python API), validated when read back, and written in the format every earlier study has.

The format is versioned by its `format` field ("ampgan-compare/1"); a reader takes every version in
READABLE_FORMATS. A record keeps the fields no reader uses (`extra`) as they were written, so a document
read and written again loses nothing. A damaged or foreign compare.json is one error line naming the file
and the field (files/schema.py), never a KeyError in the report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ampgan.data.registry import DATASET_NAME
from ampgan.files.atomic import write_json_atomically
from ampgan.files.paths import read_json_in
from ampgan.files.records import Record, part, shape_of
from ampgan.files.schema import BATCH_SIZE, COUNT, Between, Number, OrNull, RelativePath, check_format, check_shape
from ampgan.gan.registry import MODEL_NAME
from ampgan.precisions import FP32
from ampgan.quality.registry import EVALUATOR_ACCURACY, FRECHET_DISTANCE, METRIC_NAME, METRICS, Metric
from ampgan.study.progress import has_study
from ampgan.training.precision import PRECISION_NAME
from ampgan.trust import command_line

FORMAT = "ampgan-compare/1"
READABLE_FORMATS = (FORMAT,)
NO_FASTER_MODE = "no faster mode"  # the outcome of a study that found no mode faster than fp32 (nothing raced)
RACED = "raced"

_SHARE = Between(0.0, 1.0)
# A run's final quality figures (quality/registry.py names the metrics): what a reader relies on of them.
_FINAL = {
    "?evaluator_accuracy": Between(0.0, 1.0, or_null=True),
    "frechet_distance": Number,
    "?recall": _SHARE,
    "?precision": _SHARE,
    "?coverage": _SHARE,
    "?kid": Number,
    "?flags": [str],
    "?per_class": list,
    "?confusion": list,
}
# A raced study has been evaluated: these too (a study that found no faster mode has no evaluator, no floor),
# and has fp32's run, which every other is compared with (CompareDocument.baseline).
_RACED_SHAPE = {
    "evaluator": dict,
    "floor": dict,
    "spec": {"eval_samples": int, "eval_points": int},
    "runs": {FP32: dict},
}


def _by_precision(record) -> OrNull:
    """A table of `record`s by precision, or null: a key no registry has ("fp12") is one line, not a row of its own."""
    return OrNull({PRECISION_NAME: shape_of(record)})


@dataclass(frozen=True, kw_only=True)
class StudySpecRecord(Record):
    """The spec as the document records it (study/spec.py CompareSpec.to_document): the study's own
    settings, the shared config, and the fields a reader wants at hand."""

    batch_size: int = part(default=0, required=True, shape=BATCH_SIZE)
    seed: int = 0
    seed_list: list[int] | None = None  # documents from before several seeds have `seed` alone
    precisions: list[str] = part(default=[], shape=[PRECISION_NAME])
    eval_samples: int | None = None
    eval_points: int | None = None
    model: str | None = part(shape=OrNull(MODEL_NAME))
    dataset: str | None = part(shape=OrNull(DATASET_NAME))
    model_options: dict = part(default={})
    time_budget_s: float | None = None
    steps: int | None = None
    channels_last: list[str] | None = None
    compile: list[str] | None = None
    target_accuracy: float | None = None
    price_per_hour: float | None = None
    instance: str | None = None

    @property
    def seeds(self) -> list[int]:
        return self.seed_list or [self.seed]

    @property
    def model_name(self) -> str:
        return self.model or "acgan"  # documents from before the model was a setting trained the AC-GAN


@dataclass(frozen=True, kw_only=True)
class Environment(Record):
    hardware_summary: str = part(default="", required=True)
    versions: dict = part(default={}, required=True, shape={"torch": str, "ampgan": str, "python": str})
    date: str = part(default="", required=True)
    git_commit: str | None = None

    @property
    def hardware(self) -> str:
        """The machine's first words ('NVIDIA T4' of 'NVIDIA T4, 16 GB, ...')."""
        return self.hardware_summary.split(",")[0]


@dataclass(frozen=True, kw_only=True)
class DatasetRecord(Record):
    name: str = part(default="", required=True, shape=DATASET_NAME)
    class_names: list[str] = part(default=[], required=True)
    images: int | None = None
    source: Any = None


# Below this many seeds a mean over seeds has no interval: with two, t's one degree of freedom stretches their
# distance 12.7x each way, a band that says nothing (study/over_seeds.py).
MIN_SEEDS_FOR_INTERVAL = 3


@dataclass(frozen=True, kw_only=True)
class Interval(Record):
    """A mean over seeds with its 95% t-interval (study/over_seeds.py): of a final metric, of the paired
    differences of a metric between two precisions, or of the paired ratios of their times to the target.
    `low`/`high` are None below three seeds (two give no meaningful interval), and inside the quantity's values."""

    mean: float | None = None
    low: float | None = None
    high: float | None = None
    n: int = 0
    per_seed: dict | None = None  # paired ones: seed -> difference or ratio
    beyond_seed_spread: bool | None = None  # paired ones: the interval excludes no change (None: no interval)

    @property
    def known(self) -> bool:
        """Three seeds or more and the interval has ends: a document written before over_seeds stopped giving two
        seeds an interval holds one (t = 12.7: 0.01x-95x), which no reader shows."""
        return self.n >= MIN_SEEDS_FOR_INTERVAL and self.low is not None and self.high is not None


@dataclass(frozen=True, kw_only=True)
class SeedRun(Record):
    """One precision's run at one seed."""

    run_dir: str = part(default="", required=True, shape=RelativePath)
    steps: int = part(default=0, required=True, shape=COUNT)
    train_seconds: float = part(default=0.0, required=True, shape=Between(0.0, math.inf))
    seconds_per_step: float | None = part(omit_none=True)
    final: dict = part(
        default={}, required=True, shape=_FINAL
    )  # metric -> value, and its flags (quality/registry.py names the metrics)
    eval_seconds_total: float | None = part(omit_none=True)
    stamp: Any = part(omit_none=True)
    # The race's clock and its check (study/race.py): "bench step time" (each step charged the bench's) or
    # "wall clock"; the steps' wall time; the pace on the wall clock and the bench's, in steps per second; what
    # the thread watch changed while it trained (system/cpu_tuning.py). Absent in studies before them.
    clock: str | None = part(omit_none=True)
    wall_seconds: float | None = part(omit_none=True, shape=Between(0.0, math.inf, or_null=True))
    steps_per_s: float | None = part(omit_none=True)
    bench_steps_per_s: float | None = part(omit_none=True)
    thread_changes: list[str] | None = part(omit_none=True)

    @property
    def flags(self) -> list[str]:
        return self.final.get("flags", [])


@dataclass(frozen=True, kw_only=True)
class RunSummary(SeedRun):
    """One precision over its seeds (study/over_seeds.py summarize_seeds): the means in a single run's
    shape, each seed's run and each final metric's interval. Documents from before several seeds hold a
    single run: no seeds, no per_seed."""

    seeds: list[int] | None = part(omit_none=True)
    per_seed: dict[str, SeedRun] | None = part(omit_none=True)
    final_interval: dict[str, Interval] | None = part(omit_none=True)

    @property
    def seed_runs(self) -> list[SeedRun]:
        """Every seed's run (a single-run document: the run itself)."""
        return list(self.per_seed.values()) if self.per_seed is not None else [self]

    @property
    def first(self) -> SeedRun:
        """The first seed's run (Figure 4 shows it)."""
        return self.per_seed[str(self.seeds[0])] if self.per_seed is not None and self.seeds else self

    def interval(self, metric: str) -> Interval | None:
        """The final metric's mean and 95% interval over seeds, when there are some."""
        interval = (self.final_interval or {}).get(metric)
        return interval if interval is not None and interval.known else None


@dataclass(frozen=True, kw_only=True)
class ToTarget(Record):
    """One precision's time and cost to the quality target: per seed, and the means over the seeds that
    reached it."""

    per_seed: dict = part(default={})
    reached: int = 0
    seeds: int | None = None
    by_first_evaluation: int = 0
    seconds: float | None = None
    cost: float | None = None


@dataclass(frozen=True, kw_only=True)
class CostSection(Record):
    """The cost stage: the price basis (None with a note when there is none), the quality target, each
    precision's time and cost to it, and the cost table of the bench."""

    basis: dict | None = None
    note: str | None = part(omit_none=True)
    target: float | None = None
    target_metric: str | None = part(shape=OrNull(METRIC_NAME))
    target_accuracy: float | None = None
    to_target: dict[str, ToTarget | None] = part(default={}, shape={PRECISION_NAME: OrNull(shape_of(ToTarget))})
    budget: dict = part(default={})
    table: list = part(default=[], shape=[{"precision": PRECISION_NAME}])
    catalog_date: str | None = None

    def to_dict(self) -> dict:
        if self.basis is None:  # the stage could not run: why, and nothing else
            return {"basis": None, **({"note": self.note} if self.note else {})} | self.extra
        return super().to_dict()

    @classmethod
    def from_dict(cls, data: dict) -> CostSection:
        section = super().from_dict(data)
        # Documents from before unconditional GANs name it target_accuracy: read so, and written as read.
        return section if "target" in data else replace(section, target=data.get("target_accuracy"))

    @property
    def currency(self) -> str | None:
        return (self.basis or {}).get("currency")

    def reaching(self, precision: str) -> ToTarget:
        """The precision's time to the target (an empty one when it has none)."""
        return (self.to_target or {}).get(precision) or ToTarget()


@dataclass(frozen=True, kw_only=True)
class SpeedupBounds(Record):
    estimate: float = part(default=1.0, required=True)
    low: float = part(default=1.0, required=True)
    high: float = part(default=1.0, required=True)


@dataclass(frozen=True, kw_only=True)
class SpeedDecision(Record):
    """A mode's measured speed against fp32 on the real training step (speed/decision.py), kept by a study
    that found no mode faster."""

    verdict: str = part(default="", required=True)
    step_s: float | None = None
    fp32_step_s: float | None = None
    interval: SpeedupBounds | None = None
    rounds: int | None = None
    note: str | None = part(omit_none=True)


@dataclass(frozen=True, kw_only=True)
class MeasuredChoice(Record):
    """A memory-format or compile decision that was measured (speed/layout.py, speed/compilation.py)."""

    description: str = part(default="", required=True)


@dataclass(frozen=True, kw_only=True)
class SeedComparison(Record):
    """One mixed precision against fp32 over the seeds (study/over_seeds.py compare_seeds): the paired
    difference of each paired metric, written under the metric's own name, and the paired ratio of their
    times to the target."""

    seeds: int = 0
    time_to_target_ratio: Interval | None = part(omit_none=True)
    differences: dict[str, Interval] = part(default={})  # metric -> candidate minus fp32, paired by seed

    @classmethod
    def from_dict(cls, data: dict) -> SeedComparison:
        metrics = {k: Interval.from_dict(v) for k, v in data.items() if k in METRICS and isinstance(v, dict)}
        others = super().from_dict({k: v for k, v in data.items() if k not in metrics})
        return replace(others, differences=metrics, read_keys=tuple(data))

    def to_dict(self) -> dict:
        return self._in_read_order(
            {k: v for k, v in super().to_dict().items() if k != "differences"}
            | {metric: interval.to_dict() for metric, interval in self.differences.items()}
        )


@dataclass(frozen=True, kw_only=True)
class SeedPace(Record):
    """One seed of a mixed precision against fp32's run at that seed, on the wall clock (study/race.py
    pace_of_seeds): its speedup per step there against the bench's interval, each run's wall time per step over
    its bench step, and the time-to-target ratio on the race's clock and on the wall clock."""

    wall_speedup: float = 1.0
    bench_estimate: float | None = None
    bench_low: float | None = None
    bench_high: float | None = None
    within: bool | None = None  # inside the bench's interval widened by 10% each way (None: no interval)
    wall_over_bench: float | None = None
    baseline_wall_over_bench: float | None = None
    time_to_target_ratio: float | None = None
    wall_time_to_target_ratio: float | None = None
    thread_changes: int = 0


@dataclass(frozen=True, kw_only=True)
class RaceRecord(Record):
    """How the race was timed (study/race.py): its clock and why, the seconds each precision's step was charged,
    the threads it ran on, and every seed's pace on the wall clock against the bench."""

    clock: str = part(default="", required=True)
    reason: str = ""
    step_s: dict[str, float] | None = None
    threads: dict | None = None
    pace: dict[str, dict[str, SeedPace]] = part(default={})

    def off_pace(self, precision: str) -> dict[str, SeedPace]:
        """The seeds of `precision` whose wall-clock speedup left the bench's interval."""
        return {seed: pace for seed, pace in (self.pace or {}).get(precision, {}).items() if pace.within is False}


def _headline(stored: dict) -> Metric:
    return FRECHET_DISTANCE if stored.get("metric") == FRECHET_DISTANCE.key else EVALUATOR_ACCURACY


def _headline_written(metric: Metric) -> dict:
    """The headline as compare.json holds it: the metric's key, how a sentence names it, which way is better."""
    return {"metric": metric.key, "name": metric.name, "higher_is_better": metric.higher_is_better}


@dataclass(frozen=True, kw_only=True)
class CompareDocument(Record):
    """A study's compare.json. A raced study has runs, an evaluator, its floor, a cost and a
    seed comparison; one that found no faster mode has the speed decisions and no runs."""

    format: str = part(default=FORMAT, required=True)
    outcome: str | None = part(omit_none=True)  # absent: raced
    spec: StudySpecRecord = part(required=True)
    environment: Environment = part(required=True)
    left_out: list[dict] = part(default=[], shape=[{"precision": PRECISION_NAME, "reason": str}])
    # Each mode's speed against fp32 (no faster mode); the memory-format and compile decisions measured (none
    # when given).
    decisions: dict[str, SpeedDecision] | None = part(omit_none=True, shape=_by_precision(SpeedDecision))
    layouts: dict[str, MeasuredChoice] | None = part(omit_none=True, shape=_by_precision(MeasuredChoice))
    compile_decisions: dict[str, MeasuredChoice] | None = part(omit_none=True, shape=_by_precision(MeasuredChoice))
    dataset: DatasetRecord = part(required=True)
    evaluator: dict | None = part(omit_none=True, shape=OrNull({"held_out_accuracy": _SHARE, "?min_accuracy": _SHARE}))
    sampled_from: str | None = part(omit_none=True)  # G's own weights or its EMA (absent before GAN.ema)
    floor: dict | None = part(  # the real images' own quality figures, drawn and printed beside the runs'
        omit_none=True, shape=OrNull(_FINAL | {"?class_shares": [_SHARE], "?diversity": [(*Number, None)]})
    )
    # Why a bench configuration has no speedup (left out as hopeless, too slow, failed): the verdict says so.
    bench_notes: dict | None = part(omit_none=True)
    stored_headline: Metric | None = part(
        read=_headline, write=_headline_written, key="headline", omit_none=True, shape={"metric": METRIC_NAME}
    )
    runs: dict[str, RunSummary] = part(default={}, required=True, shape={PRECISION_NAME: shape_of(RunSummary)})
    cost: CostSection | None = part(omit_none=True)
    projection: dict | None = part(omit_none=True)  # {"path", "line", ...} when projected, {"note"} when not
    seed_comparison: dict[str, SeedComparison] | None = part(omit_none=True, shape=_by_precision(SeedComparison))
    race: RaceRecord | None = part(omit_none=True)
    verdict: list[str] | None = part(omit_none=True)

    @property
    def raced(self) -> bool:
        return self.outcome != NO_FASTER_MODE

    @property
    def headline(self) -> Metric:
        """What the study races on (documents from before unconditional GANs: accuracy)."""
        return self.stored_headline or EVALUATOR_ACCURACY

    @property
    def baseline(self) -> RunSummary:
        return self.runs[FP32]

    @property
    def target(self) -> float | None:
        return self.cost.target if self.cost is not None else None

    def write(self, out_dir: Path) -> None:
        write_json_atomically(Path(out_dir) / "compare.json", self.to_dict())

    @classmethod
    def checked(cls, data: Any, origin: str, fix: str) -> CompareDocument:
        """The document of `data`, once it has the shape every reader relies on; else one error line."""
        check_format(data, FORMAT, origin, "an ampgan comparison", fix, readable=READABLE_FORMATS, shape=shape_of(cls))
        if data.get("outcome") != NO_FASTER_MODE:
            check_shape(data, _RACED_SHAPE, origin, fix)
        return cls.from_dict(data)


def load_compare(out_dir: Path) -> CompareDocument:
    """The study's compare.json, validated; a missing, damaged or foreign one is one error line."""
    # A study stopped before its end (or whose compare.json was deleted) has study.json: resuming it writes one.
    stopped = f"continue the study it holds with '{command_line('compare', '--resume', out_dir)}', which writes it"
    path, data = read_json_in(
        out_dir,
        "compare.json",
        missing=f"{out_dir} has no compare.json: "
        + (stopped if has_study(out_dir) else "give the --out folder of an 'ampgan compare' run"),
        fix="run 'ampgan compare' again",
    )
    return CompareDocument.checked(
        data,
        str(path),
        f"continue the study with '{command_line('compare', '--resume', out_dir)}' to write it anew, or run it again",
    )
