"""`ampgan compare`: the study in one command.

Same start (one seed: identical initial weights, data order and sample noise for every precision),
same wall-clock training budget per precision (evaluation time excluded and reported), quality
measured during and after training, times from a bench of the same step, costs from the cost
model, and a report that puts it together.

    OUT/
      compare.json           everything the report needs, in one document
      bench/                 results.json, Figures 1-2 (a short bench, or the one given)
      cost/                  cost.json/csv, Figure 3
      runs/<precision>-seed<N>/  a run folder per precision and seed, with quality.json and quality.jsonl
      study.json             what is finished (study/progress.py): an interrupted study resumes from it
      report.md, report.html
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch

from ampgan.bench.harness import BenchSpec, run_bench
from ampgan.bench.output import load_results, write_results
from ampgan.config import BudgetConfig, TrainConfig, build_config
from ampgan.config.flags import spec_field
from ampgan.cost.arithmetic import cost_of_seconds, cost_to_quality
from ampgan.data import load_dataset
from ampgan.doctor.preflight import check_before_training
from ampgan.errors import AmpganError
from ampgan.files.atomic import open_for_append, write_atomically, write_json_atomically
from ampgan.quality.evaluator import check_evaluable, evaluator_for, generate_evenly, quality_of_images, reference_floor
from ampgan.quality.headline import default_target, headline_for, headline_of
from ampgan.runs.checkpoint import list_checkpoints, load_checkpoint
from ampgan.seeds import evaluation_noise_seed
from ampgan.speed.plan import FASTEST_MIXED, plan_run
from ampgan.study.over_seeds import compare_seeds, summarize_seeds
from ampgan.study.progress import StudyProgress, open_progress
from ampgan.study.verdict import no_faster_mode_verdict, verdict
from ampgan.system.environment import environment_stamp
from ampgan.training.interruption import Interrupted, TrainingInterrupted, stop_on_signals
from ampgan.training.loop import DEFAULT_STEPS, prepare_run, run_training
from ampgan.training.precision import resolve_device
from ampgan.training.start import check_checkpoint_belongs

# The comparison's own bench is shorter than `ampgan bench`'s default (it has three batch sizes
# and two training runs to fit in a few minutes); its intervals say how settled it got.
COMPARE_BENCH_MIN_SECONDS = 10.0
COMPARE_BENCH_MAX_FACTOR = 3.0  # measured at most this many times --bench-seconds per batch size
# A study's runs save a checkpoint this often (training time), so a crash or kill -9 loses at most this
# much of a run: the rest continues from it (checkpoints cost no training time: the clock excludes them).
STUDY_CHECKPOINT_EVERY_S = 30.0


# A study's training budget when it names none: this much training time per precision and seed.
DEFAULT_BUDGET_S = 40.0


def _compare_defaults() -> TrainConfig:
    return TrainConfig(budget=BudgetConfig(time_budget_s=DEFAULT_BUDGET_S))


def compare_base(changes: dict) -> TrainConfig:
    """The config every run of a study trains, from {config path: value}: DEFAULT_BUDGET_S of training
    unless the changes give a time budget, and a step budget alone when they give only steps."""
    changes = dict(changes)
    if "budget.time_budget_s" not in changes:
        changes["budget.time_budget_s"] = None if changes.get("budget.steps") is not None else DEFAULT_BUDGET_S
    return build_config(changes)


@dataclass(frozen=True, kw_only=True)
class CompareSpec:
    """What `ampgan compare` (and `ampgan.compare`) is given besides the config, declared once: each field's
    default, help and command-line option (config/flags.py spec_field; `--set compare.FIELD=VALUE` reaches
    every one)."""

    # What every run trains: data, model and its options, optimizer, device, batch size, budget, seed
    # (the first seed). Each run takes it whole, in its own precision: `compare` studies whatever
    # `train` would train.
    base: TrainConfig = field(default_factory=_compare_defaults)
    precisions: tuple[str, ...] = spec_field(
        (), "Comma-separated; default fp32 and this device's best mixed mode.", "precision_list"
    )
    seeds: int = spec_field(
        3,
        "Seeds per precision (--seed, --seed + 1, ...), each an identical start for every "
        "precision; the verdict pairs them.",
        "whole",
    )
    eval_points: int = spec_field(4, "Evaluations during training.", "whole", common=False)
    eval_samples: int = spec_field(1000, "Generated samples per evaluation.", "whole2", common=False)
    bench: Path | None = spec_field(None, "Reuse these bench results instead of measuring.", "path", common=False)
    bench_batch_sizes: tuple[int, ...] = spec_field(
        (16, 64, 256), "Batch sizes the bench measures.", "int_list", common=False
    )
    bench_steps: int = 5
    bench_seconds: float = spec_field(
        COMPARE_BENCH_MIN_SECONDS,
        "Measure the bench at least this long per batch size (at most three times as long).",
        "positive",
        common=False,
    )
    instance: str | None = spec_field(None, "Price the runs on this catalog instance.")
    price_per_hour: float | None = spec_field(None, "Price the runs at this hourly price.", "positive", common=False)
    target_accuracy: float | None = spec_field(
        None, "Quality target (default: 80% of the best final).", "fraction", common=False
    )
    evaluator_cache: Path | None = None
    # The precisions trained (and benched) channels-last; None: measured per precision at the
    # comparison's batch size (speed/layout.py).
    channels_last: tuple[str, ...] | None = None
    # The precisions whose runs (and bench steps) are torch.compile'd; None: decided per precision,
    # where compiling pays for itself over the time budget on this machine (speed/compilation.py).
    compile: tuple[str, ...] | None = None

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
    def from_document(cls, document: dict) -> CompareSpec:
        """The spec a study.json or compare.json recorded (to_document's inverse)."""
        own = {}
        for declared in fields(cls):
            if declared.name == "base" or declared.name not in document:
                continue
            value = document[declared.name]
            if isinstance(value, list):
                value = tuple(value)
            if declared.name in ("bench", "evaluator_cache") and value is not None:
                value = Path(value)
            own[declared.name] = value
        return cls(base=TrainConfig.from_dict(document["config"]), **own)

    def to_document(self, precisions) -> dict:
        """What compare.json records of the spec: the comparison's own settings, the shared config, and
        the fields the report reads at the top level."""
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "base"}
        return {
            **_jsonable(own),
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


class _QualityTracker:
    """Evaluates the generator at log points, every 1/eval_points of the budget: of its training time
    when it has a time budget, else of its steps (a step budget makes the evaluation points, and so the
    whole comparison, repeat exactly). Only the regular log points count (steps that are multiples of
    --log-every): the extra ones a stop or a timed checkpoint adds would move the evaluations of a study
    that was interrupted and resumed."""

    def __init__(
        self, evaluator, run_dir: Path, spec: CompareSpec, autocast, num_classes: int, seed: int, log_every: int
    ):
        self.evaluator, self.run_dir, self.spec, self.seed = evaluator, run_dir, spec, seed
        self.autocast, self.num_classes, self.log_every = autocast, num_classes, log_every
        budget = spec.base.budget
        self.clock = "train_seconds" if budget.time_budget_s is not None else "step"
        total = budget.time_budget_s if budget.time_budget_s is not None else budget.steps or DEFAULT_STEPS
        self.interval = total / spec.eval_points
        self.next_at = 0.0
        self.curve: list[dict] = []
        self.eval_seconds = 0.0

    @property
    def path(self) -> Path:
        return self.run_dir / "quality.jsonl"

    def evaluate(self, state, record: dict, final: bool = False) -> dict:
        started = time.perf_counter()
        images, labels = generate_evenly(
            state.gan,
            self.num_classes,
            self.spec.eval_samples,
            seed=evaluation_noise_seed(self.seed),
            device=state.policy.device,
            autocast=self.autocast,
        )
        quality = quality_of_images(self.evaluator, images, labels)
        spent = time.perf_counter() - started
        self.eval_seconds += spent
        point = {
            "step": record["step"],
            "train_seconds": record["train_seconds"],
            "eval_seconds": round(spent, 3),
            **({"final": True} if final else {}),
            **quality,
        }
        self.curve.append(point)
        with open_for_append(self.path) as handle:
            handle.write(json.dumps(point) + "\n")
        return point

    def __call__(self, state, record: dict) -> None:
        if record["step"] % self.log_every == 0 and record[self.clock] >= self.next_at:
            self.evaluate(state, record)
            self._advance(record[self.clock])

    def _advance(self, at: float) -> None:
        while self.next_at <= at:
            self.next_at += self.interval

    def restore(self, step: int) -> None:
        """Continue the curve of a run resumed from its checkpoint at `step`: the evaluations made up to
        it stay (rewritten without any made later, or at the end), the schedule goes on after them."""
        self.curve = [
            point for point in read_quality_curve(self.path) if point["step"] <= step and not point.get("final")
        ]
        text = "".join(json.dumps(point) + "\n" for point in self.curve)
        write_atomically(self.path, lambda stream: stream.write(text.encode("utf-8")))
        self.eval_seconds = sum(point.get("eval_seconds", 0.0) for point in self.curve)
        for point in self.curve:
            self._advance(point[self.clock])


class StudyInterrupted(Interrupted):
    """SIGINT/SIGTERM during a comparison: what finished is kept, and how to continue."""

    def __init__(self, signum: int, out_dir: Path, progress: StudyProgress):
        super().__init__(
            signum,
            f"the study is kept in {out_dir}: {progress.describe()}; continue with: "
            f"ampgan compare --resume {out_dir} (or the same command again)",
        )


def run_compare(spec: CompareSpec, out_dir: Path, show_progress: bool = True, log=print) -> dict:
    """The study, resumed where its study.json says it stopped (a new one when the folder has none).
    Interrupted by SIGINT/SIGTERM, it keeps what finished and raises StudyInterrupted."""
    out_dir = Path(out_dir)
    device = resolve_device(spec.base.compute.device)
    if spec.precisions and "fp32" not in spec.precisions:
        raise AmpganError("a comparison needs fp32 as its baseline: add it to --precisions")
    dataset = load_dataset(spec.base.data, seed=spec.seed)
    first = prepare_run(spec.train_config("fp32"), dataset)  # validates the options before any measuring
    if spec.target_accuracy is not None and not first.conditional:
        raise AmpganError(
            f"compare.target_accuracy needs a conditional GAN: model {spec.base.model.name} draws no class, so "
            "its study races on the Fréchet distance (its target is set from the runs); leave it out"
        )
    check_evaluable(dataset)  # one class, or too few images per class: no evaluator could judge the runs
    check_before_training(spec.train_config("fp32"), dataset, log=log)  # before anything is measured or trained
    progress = open_progress(out_dir, spec.to_document(spec.precisions))
    with stop_on_signals() as stop:

        def stop_here() -> None:
            if stop:
                raise StudyInterrupted(stop.signum, out_dir, progress)

        if progress.decided is None:
            progress.decided = _decide(spec, dataset, device, log)
            progress.save()
        decided = progress.decided
        spec = dataclasses.replace(
            spec, channels_last=tuple(decided["channels_last"]), compile=tuple(decided["compile"])
        )
        precisions = tuple(decided["precisions"])
        if precisions == ("fp32",) and not spec.precisions:
            return _no_faster_mode(spec, out_dir, device, dataset, decided["left_out"], decided["decisions"])
        stop_here()
        prepared = {
            (p, seed): prepare_run(spec.train_config(p, seed), dataset)  # validates all first
            for seed in spec.seed_list
            for p in precisions
        }
        log(f"evaluator: training or loading the {spec.base.data.dataset} classifier ...")
        evaluator = evaluator_for(dataset, cache_dir=spec.evaluator_cache, seed=spec.seed)
        log(f"evaluator: held-out accuracy {evaluator.held_out_accuracy:.3f} ({evaluator.info['cache']})")
        log(f"quality: samples drawn from {first.sampling_weights}")
        stop_here()
        bench_results = _bench_once(spec, dataset, precisions, device, log, out_dir, progress)
        _say_what_the_bench_left_unmeasured(bench_results, log)
        stop_here()
        per_seed: dict[str, dict[int, dict]] = {p: {} for p in precisions}
        curves: dict[str, dict[int, list[dict]]] = {p: {} for p in precisions}
        for seed in spec.seed_list:
            for precision in precisions:  # one seed at a time: a change of the machine's load hits both alike
                run, curve = _run_once(
                    spec, prepared[(precision, seed)], evaluator, dataset, out_dir, seed, show_progress, log, progress
                )
                per_seed[precision][seed], curves[precision][seed] = run, curve
                stop_here()

    floor = reference_floor(evaluator, spec.eval_samples)
    document = {
        "format": "ampgan-compare/1",
        "spec": spec.to_document(precisions),
        "environment": environment_stamp(device),
        "left_out": decided["left_out"],
        "layouts": decided["layouts"],  # the memory-format decisions measured for this comparison (none when given)
        "compile_decisions": decided["compile_decisions"],  # compiled or eager, per precision (none when given)
        "dataset": {
            "name": spec.base.data.dataset,
            "images": len(dataset),
            "class_names": list(dataset.class_names),
            "source": dataset.source,
        },
        "evaluator": evaluator.info,
        "sampled_from": first.sampling_weights,  # the EMA of G when the model declares one, else G itself
        "floor": floor,
        # Why a bench configuration has no speedup (left out as hopeless, too slow, failed): the verdict says so.
        "bench_notes": {
            f"{c['precision']}@{c['batch_size']}": c["reason"] for c in bench_results["configs"] if c.get("reason")
        },
        # What the study races on: accuracy for a conditional GAN, the Fréchet distance otherwise.
        "headline": headline_for(
            prepared[("fp32" if "fp32" in precisions else precisions[0], spec.seed)].conditional
        ).as_dict(),
        "runs": {p: summarize_seeds(per_seed[p]) for p in precisions},
    }
    # The runs are finished: a stage after them that cannot run is reported in its section and the verdict,
    # and never takes the study down with it.
    document["cost"] = _stage_or_note("cost", lambda: _costs(document, bench_results, curves, out_dir))
    document["projection"] = project_elsewhere(spec, dataset, bench_results, out_dir, device)
    document["seed_comparison"] = compare_seeds(document)
    document["verdict"] = verdict(document, bench_results["speedups"]) + _stages_not_run(document)
    write_json_atomically(out_dir / "compare.json", document)
    return document


def _stage_or_note(stage: str, run) -> dict:
    """The stage's result, or {"basis": None, "note": why it could not run} (the shape a cost without a
    price basis already has, which the report and the verdict read)."""
    try:
        return run()
    except (KeyboardInterrupt, Interrupted):
        raise
    except Exception as error:  # noqa: BLE001 - finished runs must not be lost to a later stage
        reason = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
        return {"basis": None, "note": f"the {stage} stage could not run: {reason}"}


def _stages_not_run(document: dict) -> list[str]:
    """A verdict line per stage that could not run, saying why (its section is otherwise just absent)."""
    lines = []
    cost = document.get("cost") or {}
    if cost.get("basis") is None and cost.get("note"):
        lines.append(f"Cost: not computed ({cost['note']}).")
    projection = document.get("projection") or {}
    if projection.get("note"):
        lines.append(f"On other hardware: {projection['note']}.")
    return lines


def _say_what_the_bench_left_unmeasured(bench_results: dict, log) -> None:
    """Before training: when no bench configuration finished, the study will have no speedup and no cost;
    say so now, not after the runs."""
    configs = bench_results.get("configs") or []
    if configs and not any(c.get("status") == "ok" for c in configs):
        reasons = "; ".join(
            f"{c['precision']}@{c['batch_size']}: {c.get('reason') or c.get('status')}" for c in configs[:3]
        )
        log(
            f"bench: no configuration finished ({reasons}); the runs train anyway, but the study will have no "
            "measured speedup and no cost: give a larger --bench-seconds for them"
        )


def _decide(spec: CompareSpec, dataset, device: torch.device, log) -> dict:
    """The precisions to race and how each runs (memory format, compile), with the measurements: the
    study's first stage (speed/plan.py), kept in study.json so a resumed study races what it began with.
    With no mode faster than fp32 there is nothing to race, and no format or compile is decided."""
    plan = plan_run(
        spec.train_config,
        dataset,
        device,
        precisions=spec.precisions,
        choose=FASTEST_MIXED,
        channels_last=spec.channels_last,
        compile=spec.compile,
        decide_layout_and_compile_alone=False,
        log=log,
    )
    return {
        "precisions": list(plan.precisions),
        "left_out": plan.left_out,
        "decisions": plan.precision_decisions,
        "channels_last": list(plan.channels_last),
        "compile": list(plan.compile),
        "layouts": plan.layouts,
        "compile_decisions": plan.compile_decisions,
    }


def _no_faster_mode(
    spec: CompareSpec, out_dir: Path, device: torch.device, dataset, left_out: list[dict], decisions: dict
) -> dict:
    """The study's answer on a machine where no mixed-precision mode trains faster than fp32: there is no
    speed to gain, so no race is trained (a mode several times slower would make a handful of steps in the
    budget); the measurements behind the answer, and how to race anyway."""
    document = {
        "format": "ampgan-compare/1",
        "outcome": "no faster mode",
        "spec": spec.to_document(("fp32",)),
        "environment": environment_stamp(device),
        "left_out": left_out,
        "decisions": decisions,
        "dataset": {
            "name": spec.base.data.dataset,
            "images": len(dataset),
            "class_names": list(dataset.class_names),
            "source": dataset.source,
        },
        "runs": {},
    }
    # No mode pays here; what would one pay on a GPU? The step is traced (a few steps at batch 8 and 16).
    document["projection"] = project_elsewhere(spec, dataset, None, out_dir, device)
    document["verdict"] = no_faster_mode_verdict(document)
    write_json_atomically(out_dir / "compare.json", document)
    return document


PROJECTED_BATCH_SIZES = (2048,)  # besides the study's own: the batch of the published study's T4 result


def project_elsewhere(spec: CompareSpec, dataset, bench_results: dict | None, out_dir: Path, device) -> dict:
    """projection/ of the study: its step projected onto the table's GPUs at the study's batch size and
    at 2048 (the kernel model over the bench's op tables, or over a trace made here when there is no bench).
    {"path": ..} when written, {"note": why not} otherwise: a projection that fails costs the study
    nothing but its section."""
    try:
        return _project_elsewhere(spec, dataset, bench_results, out_dir, device)
    except (KeyboardInterrupt, Interrupted):
        raise
    except Exception as error:  # noqa: BLE001 - the study's measured answer must not depend on it
        return {
            "note": f"not projected: {type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
        }


def _project_elsewhere(spec: CompareSpec, dataset, bench_results: dict | None, out_dir: Path, device) -> dict:
    from ampgan.bench.harness import trace_op_tables
    from ampgan.bench.ops import OpTable
    from ampgan.cost.catalog import load_catalog
    from ampgan.projection.assumptions import launch_assumption, measure_dispatch_seconds
    from ampgan.projection.document import DEFAULT_DEVICES, build_projection, summary_line
    from ampgan.projection.output import write_projection
    from ampgan.projection.tables import TRACED_FORMAT
    from ampgan.system.gpus import gpu_spec

    environment = environment_stamp(device)
    if bench_results is None:
        traced = trace_op_tables(BenchSpec(base=spec.base), dataset, device)
        bench_results = {
            "format": TRACED_FORMAT,
            "spec": {
                "model": spec.base.model.name,
                "model_options": dict(spec.base.model.options),
                "dataset": spec.base.data.dataset,
                "batch_sizes": [spec.batch_size],
            },
            "environment": environment,
            "configs": [],
            **traced,
        }
        if traced.get("op_tables"):  # what `ampgan project` reads for other GPUs and batch sizes
            write_json_atomically(out_dir / "projection" / "op_tables.json", bench_results)
    stored = bench_results.get("op_tables") or {}
    if not stored:
        reasons = "; ".join(f"{f['precision']}: {f['reason']}" for f in bench_results.get("op_tables_failed") or [])
        return {"note": f"not projected: no op table of the step ({reasons or 'the bench predates them'})"}
    try:
        tables = {name: OpTable.from_dict(table) for name, table in stored.items()}
    except ValueError as error:
        return {"note": f"not projected: {error}"}
    launch = launch_assumption(measure_dispatch_seconds(), environment["hardware_summary"])
    sizes = sorted({spec.batch_size, *PROJECTED_BATCH_SIZES})
    projection = build_projection(
        bench_results,
        tables,
        [gpu_spec(name) for name in DEFAULT_DEVICES],
        sizes,
        launch,
        load_catalog(),
        "ampgan's built-in catalog (src/ampgan/cost/prices.csv)",
    )
    write_projection(projection, out_dir / "projection")
    return {
        "path": "projection/projection.json",
        "batch_sizes": sizes,
        "devices": list(DEFAULT_DEVICES),
        "line": summary_line(projection),
    }


def _bench_once(spec: CompareSpec, dataset, precisions, device, log, out_dir: Path, progress: StudyProgress) -> dict:
    """The bench of the study's step (or the one --bench gave), measured once: a resumed study reads it back.
    Interrupted, it is measured again on resume (a bench cut short compares too few rounds)."""
    if progress.bench_done:
        return load_results(out_dir / "bench" / "results.json")
    if spec.bench is not None:
        results = load_results(spec.bench)
    else:
        sizes = tuple(sorted(set(spec.bench_batch_sizes) | {spec.batch_size}))
        log(f"bench: batch sizes {', '.join(map(str, sizes))} x {', '.join(precisions)} ...")
        bench_spec = BenchSpec(
            base=spec.base,
            batch_sizes=sizes,
            precisions=precisions,
            warmup=1,
            steps=spec.bench_steps,
            channels_last=spec.channels_last,
            compile=spec.compile or (),
            measure_compile_times=False,
            min_seconds=spec.bench_seconds,
            max_seconds=COMPARE_BENCH_MAX_FACTOR * spec.bench_seconds,
        )
        results = run_bench(bench_spec, device, dataset=dataset)
        if results.get("incomplete"):
            raise StudyInterrupted(results["incomplete"]["signum"], out_dir, progress)
    write_results(results, out_dir / "bench")
    progress.bench_done = True
    progress.save()
    return results


def _run_once(
    spec, prepared, evaluator, dataset, out_dir: Path, seed: int, show_progress, log, progress: StudyProgress
) -> tuple[dict, list[dict]]:
    """A run of the study: read back when finished, continued from its latest checkpoint when it was
    stopped, trained otherwise."""
    precision = prepared.config.precision.name
    key = f"{precision}-seed{seed}"
    run_dir = out_dir / "runs" / key
    finished = progress.run_done(key)
    if finished is not None:
        log(f"train: {precision}, seed {seed}: finished before, read back")
        return finished, read_quality_curve(run_dir / "quality.jsonl")
    checkpoints = list_checkpoints(run_dir)
    tracker = _QualityTracker(
        evaluator, run_dir, spec, prepared.policy.autocast, dataset.num_classes, seed, prepared.config.logging.log_every
    )
    resume_from = None
    if checkpoints:
        resume_from = load_checkpoint(checkpoints[-1], map_location="cpu")
        check_checkpoint_belongs(resume_from, checkpoints[-1], run_dir, prepared.config)
        tracker.restore(resume_from["step"])
        log(f"train: {precision}, seed {seed}: continuing from step {resume_from['step']} ...")
    else:
        shutil.rmtree(run_dir, ignore_errors=True)  # a start cut short before its first checkpoint: nothing to keep
        run_dir.mkdir(parents=True)
        log(f"train: {precision}, seed {seed}, for {_budget_text(prepared.config)} ...")
    progress.mark_run(key, "started")
    try:
        result = run_training(prepared, run_dir, show_progress=show_progress, on_log=tracker, resume_from=resume_from)
    except TrainingInterrupted as stopped:
        raise StudyInterrupted(stopped.signum, out_dir, progress) from None
    run, curve = _finish_run(spec, result, tracker, evaluator, out_dir, run_dir, precision, seed, log)
    progress.mark_run(key, "done", run)
    return run, curve


def _finish_run(spec, result, tracker, evaluator, out_dir: Path, run_dir: Path, precision: str, seed: int, log):
    # The final state is still in memory: evaluate its generator as it ended, no reload from disk.
    final = tracker.evaluate(
        result.state.train, {"step": result.steps, "train_seconds": result.train_seconds}, final=True
    )
    quality = {
        "final": final,
        "curve": tracker.curve,
        "eval_seconds_total": round(tracker.eval_seconds, 2),
        "evaluator": evaluator.info,
    }
    write_json_atomically(run_dir / "quality.json", quality)
    run = {
        "run_dir": str(run_dir.relative_to(out_dir)),
        "steps": result.steps,
        "train_seconds": result.train_seconds,
        # The training clock only (evaluation and checkpoints excluded): what the report sets
        # beside the bench's step time.
        "seconds_per_step": result.train_seconds / max(1, result.steps),
        "final": final,
        "eval_seconds_total": quality["eval_seconds_total"],
        "stamp": result.stamp,
    }
    flags = "; ".join(final.get("flags", [])) or "no class collapsed, dropped or drawn as another"
    accuracy = f"evaluator accuracy {final['evaluator_accuracy']:.3f}, " if "evaluator_accuracy" in final else ""
    log(
        f"  {precision} seed {seed}: {result.steps} steps, {accuracy}recall {final.get('recall', float('nan')):.2f}, "
        f"Fréchet distance {final['frechet_distance']:.2f}; {flags}"
    )
    return run, tracker.curve


_CURVE_POINT = {
    "step": int,
    "train_seconds": (int, float),
    "?evaluator_accuracy": (int, float, None),
    "frechet_distance": (int, float),
}


def read_quality_curve(path: Path) -> list[dict]:
    """A run's quality.jsonl: its evaluations in order; a line cut short by a crash is skipped, a record
    without the fields a curve needs is one error line naming the file."""
    from ampgan.files.jsonfile import read_jsonl
    from ampgan.files.schema import check_shape

    records = read_jsonl(path)
    for record in records:
        check_shape(
            record,
            _CURVE_POINT,
            str(path),
            "delete the run's folder to train it again, or start the study again with --overwrite",
        )
    return records


def _budget_text(config: TrainConfig) -> str:
    parts = []
    if config.budget.time_budget_s is not None:
        parts.append(f"{config.budget.time_budget_s:g} s of training")
    if config.budget.steps is not None:
        parts.append(f"{config.budget.steps} steps")
    return " or ".join(parts) or "the default budget"


def _jsonable(values: dict) -> dict:
    return {k: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v for k, v in values.items()}


def _costs(document: dict, bench_results: dict, curves: dict[str, dict[int, list[dict]]], out_dir: Path) -> dict:
    """Cost tables from the bench, and time/cost to the quality target per precision and seed."""
    from ampgan.cost.catalog import catalog_date, find_instance, load_catalog
    from ampgan.cost.report import build_cost_document, measured_device, price_basis, write_cost

    spec = document["spec"]
    device_name = measured_device(bench_results)
    catalog = load_catalog()
    if spec["price_per_hour"] is not None or spec["instance"] is not None:
        instance = find_instance(catalog, spec["instance"]) if spec["instance"] else None
        basis = price_basis(instance, spec["price_per_hour"], device_name, assume_same_speed=False)
    else:
        matching = [i for i in catalog if i.matches_hardware(device_name)]
        if not matching:
            return {
                "basis": None,
                "note": f"no catalog instance runs on {device_name}: give --instance or --set "
                f"compare.price_per_hour=PRICE",
            }
        cheapest = min(matching, key=lambda i: i.price_per_hour / max(1, i.gpu_count))
        basis = price_basis(cheapest, None, device_name, assume_same_speed=False)
    cost_document = build_cost_document([bench_results], device_name, basis, 1e6, None, catalog_date(catalog))
    write_cost(cost_document, out_dir / "cost")
    runs = document["runs"]
    headline = headline_of(document)
    metric = headline.metric
    target = spec["target_accuracy"] if headline.higher_is_better else None
    if target is None:
        finals = [r["final"][metric] for r in runs.values()]
        starts = [
            points[0][metric]
            for per_seed in curves.values()
            for points in per_seed.values()
            if points and points[0].get(metric) is not None
        ]  # each run's first evaluation
        target = default_target(headline, finals, starts, len(document["dataset"]["class_names"]))
    to_target = {}
    for precision in runs:
        per_seed = {}
        for seed, points in curves[precision].items():
            curve = [(p["train_seconds"], p[metric]) for p in points if p.get(metric) is not None]
            reached_at = (
                cost_to_quality(curve, target, basis["price_per_hour"], headline.higher_is_better) if target else None
            )
            if reached_at:
                # Past the target at the first evaluation after the start: the time is interpolated
                # from the start and says only "before that evaluation".
                first_past = next(i for i, (_, value) in enumerate(curve) if headline.reached(value, target))
                reached_at = reached_at | {"by_first_evaluation": first_past <= 1}
            per_seed[str(seed)] = reached_at
        reached = [r for r in per_seed.values() if r]
        to_target[precision] = (
            {
                "per_seed": per_seed,
                "reached": len(reached),
                "seeds": len(per_seed),
                "by_first_evaluation": sum(bool(r.get("by_first_evaluation")) for r in reached),
                # Means over the seeds that reached the target (how many did is beside them).
                "seconds": float(sum(r["seconds"] for r in reached) / len(reached)) if reached else None,
                "cost": float(sum(r["cost"] for r in reached) / len(reached)) if reached else None,
            }
            if target
            else None
        )
    budget = {p: cost_of_seconds(r["train_seconds"], basis["price_per_hour"]) for p, r in runs.items()}
    return {
        "basis": basis,
        "target": target,
        "target_metric": metric,
        "target_accuracy": target if headline.higher_is_better else None,
        "to_target": to_target,
        "budget": budget,
        "table": cost_document["rows"],
        "catalog_date": cost_document["catalog_date"],
    }
