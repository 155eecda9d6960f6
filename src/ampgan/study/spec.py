"""What a study is given, declared once: CompareSpec (the comparison's own settings, each with its default, help
and option: sections.py setting) over the TrainConfig every run trains, and how the spec is recorded in
study.json and compare.json."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from ampgan.bench.spec import BenchSpec
from ampgan.config import TrainConfig, build_config, config_from_document
from ampgan.cost.catalog import MOST_PER_HOUR
from ampgan.errors import AmpganError
from ampgan.files.paths import recorded_place
from ampgan.precisions import check_names
from ampgan.sections import as_tuples, check_kinds, setting, settings
from ampgan.seeds import MAX_SEED

# The comparison's own bench (`--set compare.bench.FIELD=VALUE`), shorter than `ampgan bench`'s default: it
# has three batch sizes and two training runs to fit in a few minutes; its intervals say how settled it got.
# Its base, precisions, memory format and compile setting are the study's (study/race.py bench_once).
COMPARE_BENCH = BenchSpec(
    batch_sizes=(16, 64, 256), warmup=1, min_seconds=10.0, max_seconds=30.0, measure_compile_times=False
)
# A study's runs save a checkpoint this often (training time), so a crash or kill -9 loses at most this
# much of a run: the rest continues from it (checkpoints cost no training time: the clock excludes them).
STUDY_CHECKPOINT_EVERY_S = 30.0


# A study's training budget when it names none: this much training time per precision and seed.
DEFAULT_BUDGET_S = 40.0


def compare_base(changes: dict) -> TrainConfig:
    """The config every run of a study trains, from {config path: value}: DEFAULT_BUDGET_S of training
    unless the changes give a time budget, and a step budget alone when they give only steps."""
    return build_config(
        {"budget.time_budget_s": None if changes.get("budget.steps") is not None else DEFAULT_BUDGET_S}, changes
    )


@dataclass(frozen=True, kw_only=True)
class CompareSpec:
    """What `ampgan compare` (and `ampgan.compare`) is given besides the config, declared once: each field's
    default, help and command-line option (sections.py setting; `--set compare.FIELD=VALUE` reaches
    every one)."""

    # What every run trains: data, model and its options, optimizer, device, batch size, budget, seed
    # (the first seed). Each run takes it whole, in its own precision: `compare` studies whatever
    # `train` would train.
    base: TrainConfig = field(default_factory=lambda: compare_base({}))
    precisions: tuple[str, ...] = setting(
        (), "Comma-separated; default fp32 and this device's best mixed mode.", True, "precision_list"
    )
    seeds: int = setting(
        3,
        "Seeds per precision (--seed, --seed + 1, ...), each an identical start for every "
        "precision; the verdict pairs them.",
        True,
        "whole",
    )
    eval_points: int = setting(4, "Evaluations during training.", kind="whole")
    eval_samples: int = setting(1000, "Generated samples per evaluation.", kind="whole2")
    bench_results: Path | None = setting(None, "Reuse these bench results instead of measuring.", kind="path")
    # The bench of the study's step: every setting of `ampgan bench` but its base and precisions (the study's).
    bench: BenchSpec = setting(COMPARE_BENCH, "The study's bench.", skip=("base", "precisions"))
    instance: str | None = setting(None, "Price the runs on this catalog instance.", True)
    price_per_hour: float | None = setting(
        None, "Price the runs at this hourly price.", kind="positive", most=MOST_PER_HOUR
    )
    target_accuracy: float | None = setting(None, "Quality target (default: 80% of the best final).", kind="fraction")
    evaluator_cache: Path | None = None
    # The precisions trained (and benched) channels-last; None: measured per precision at the
    # comparison's batch size (speed/layout.py).
    channels_last: tuple[str, ...] | None = None
    # The precisions whose runs (and bench steps) are torch.compile'd; None: decided per precision,
    # where compiling pays for itself over the time budget on this machine (speed/compilation.py).
    compile: tuple[str, ...] | None = None

    NAME = "compare"  # its settings' paths: compare.seeds
    # Settings that moved: {old name: its path now}; given, each is one error line naming the new one.
    MOVED = {
        "bench": "bench_results",
        "bench_batch_sizes": "bench.batch_sizes",
        "bench_seconds": "bench.min_seconds (and bench.max_seconds)",
        "bench_steps": "bench.steps",
    }

    def __post_init__(self) -> None:
        if not isinstance(self.bench, BenchSpec):
            raise AmpganError(
                f"compare's bench is its settings (bench.batch_sizes, ...), not {self.bench!r}: reuse bench "
                "results with bench_results=PATH"
            )
        check_kinds(self)
        check_names(self.precisions, f"{self.NAME}.precisions")  # one line, from the API as from --precisions
        if self.seed + self.seeds - 1 > MAX_SEED:  # built whole (with_settings' base=): the seed given, not a default
            raise AmpganError(f"--seed {self.seed} with --seeds {self.seeds} passes the largest seed, {MAX_SEED}")

    @property
    def seed(self) -> int:
        return self.base.seed

    @property
    def batch_size(self) -> int:
        return self.base.budget.batch_size

    @property
    def time_budget_s(self) -> float | None:
        return self.base.budget.time_budget_s

    @property
    def seed_list(self) -> list[int]:
        return [self.seed + index for index in range(self.seeds)]

    def train_config(self, precision: str, seed: int | None = None) -> TrainConfig:
        return self.base.with_fields(
            {
                "precision.name": precision,
                "precision.loss_scale": None,
                "seed": self.seed if seed is None else seed,
                "logging.sample_every": 10**9,
                "checkpoints.every_steps": None,
                "checkpoints.every_s": STUDY_CHECKPOINT_EVERY_S,
                "checkpoints.keep": 2,
                "compute.channels_last": precision in (self.channels_last or ()),
                "compute.compile": precision in (self.compile or ()),
            }
        )

    @classmethod
    def from_document(cls, document: dict, folder: Path, path: Path) -> CompareSpec:
        """The spec a study.json or compare.json (`path`, in the study `folder`) recorded (to_document's inverse),
        also as versions before the bench was a BenchSpec wrote it (`bench` the results reused; bench_batch_sizes,
        bench_steps, bench_seconds measured at least that long and at most three times as long). What it
        records is input: its paths are used only inside the study or ampgan's own cache (files/paths.py), and
        its config never makes ampgan write where the data lives (config_from_document)."""
        document = dict(document)
        if not isinstance(document.get("bench", {}), dict):
            document["bench_results"] = document.pop("bench")
        seconds = document.pop("bench_seconds", None)
        bench = {
            **document.get("bench", {}),
            **{name: document.pop(f"bench_{name}") for name in ("batch_sizes", "steps") if f"bench_{name}" in document},
            **({"min_seconds": seconds, "max_seconds": 3 * seconds} if seconds is not None else {}),
        }
        own = {f.name: document[f.name] for f in fields(cls) if f.name not in ("base", "bench") and f.name in document}
        own |= {name: recorded_place(folder, own[name], path, *place) for name, place in _PLACES.items() if name in own}
        return cls(
            base=config_from_document(document["config"]),
            bench=replace(COMPARE_BENCH, **as_tuples(bench)),
            **as_tuples(own),
        )

    def to_document(self, precisions) -> dict:
        """What compare.json records of the spec: the comparison's own settings, the shared config, and
        the fields the report reads at the top level."""
        return {
            **_jsonable({f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("base", "bench")}),
            # The bench's settings (its base, precisions, memory format and compile setting are the study's).
            "bench": _jsonable({s.path: s.default for s in settings(self.bench, skip=("base",))}),
            "config": self.base.to_dict(),
            "dataset": self.base.data.dataset,
            "model": self.base.model.name,
            "model_options": dict(self.base.model.options),
            "batch_size": self.batch_size,
            "time_budget_s": self.time_budget_s,
            "steps": self.base.budget.steps,
            "seed": self.seed,
            "precisions": list(precisions),
            "seed_list": self.seed_list,
        }


# The places a spec records, each with what is done instead when a document names one outside the study.
_PLACES = {
    "bench_results": ("the bench results", "the study measures its own bench"),
    "evaluator_cache": ("the evaluator cache", "the evaluator is cached in ampgan's own cache folder"),
}


def budget_text(time_budget_s: float | None, steps: int | None) -> str:
    """How long each run trains: '90 s of training', '300 steps', both ('... or ...'), or the default."""
    parts = []
    if time_budget_s is not None:
        parts.append(f"{time_budget_s:g} s of training")
    if steps is not None:
        parts.append(f"{steps} steps")
    return " or ".join(parts) or "the default budget"


def _jsonable(values: dict) -> dict:
    return {k: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v for k, v in values.items()}
