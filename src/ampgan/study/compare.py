"""`ampgan compare`: the study in one command.

Same start (one seed: identical initial weights, data order and sample noise for every precision),
same wall-clock training budget per precision (evaluation time excluded and reported), quality
measured during and after training, times from a bench of the same step, costs from the cost
model, and a report that puts it together.

    OUT/
      compare.json           everything the report needs, in one document
      bench/                 results.json, Figures 1-2 (a short bench, or the one given)
      cost/                  cost.json/csv, Figure 3
      runs/<precision>/      a run folder per precision, with quality.json and quality.jsonl
      report.md, report.html
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch

from ampgan.files.atomic import write_json_atomically
from ampgan.bench.harness import BenchSpec, run_bench
from ampgan.bench.output import load_results, write_results
from ampgan.config import BudgetConfig, TrainConfig
from ampgan.cost.arithmetic import cost_of_seconds, cost_to_quality
from ampgan.data import load_dataset
from ampgan.system.environment import environment_stamp
from ampgan.errors import AmpganError
from ampgan.quality.evaluator import evaluator_for, generate_evenly, quality_of_images, reference_floor
from ampgan.seeds import evaluation_noise_seed
from ampgan.speed.decision import choose_for_comparison, decide_for_run, warn_about_named_modes
from ampgan.speed.compilation import compiled_precisions
from ampgan.speed.layout import channels_last_precisions
from ampgan.study.over_seeds import compare_seeds, summarize_seeds
from ampgan.study.verdict import no_faster_mode_verdict, verdict
from ampgan.training.loop import DEFAULT_STEPS, prepare_run, run_training
from ampgan.training.precision import resolve_device


# The comparison's own bench is shorter than `ampgan bench`'s default (it has three batch sizes
# and two training runs to fit in a few minutes); its intervals say how settled it got.
COMPARE_BENCH_MIN_SECONDS = 10.0
COMPARE_BENCH_MAX_SECONDS = 30.0


def _compare_defaults() -> TrainConfig:
    return TrainConfig(budget=BudgetConfig(time_budget_s=40.0))


@dataclass(frozen=True, kw_only=True)
class CompareSpec:
    # What every run trains: data, model and its options, optimizer, device, batch size, budget, seed
    # (the first seed). Each run takes it whole, in its own precision: `compare` studies whatever
    # `train` would train.
    base: TrainConfig = field(default_factory=_compare_defaults)
    precisions: tuple[str, ...] = ()  # empty: fp32 and the best mixed mode of this device
    seeds: int = 3  # seeds base.seed .. base.seed + seeds - 1 for every precision
    eval_points: int = 4
    eval_samples: int = 1000
    bench: Path | None = None  # reuse these bench results instead of measuring
    bench_batch_sizes: tuple[int, ...] = (16, 64, 256)
    bench_steps: int = 5
    instance: str | None = None
    price_per_hour: float | None = None
    target_accuracy: float | None = None  # None: 80% of the best final evaluator accuracy
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
        return self.base.with_fields({
            "precision.name": precision, "precision.loss_scale": None, "seed": self.seed if seed is None else seed,
            "logging.sample_every": 10**9, "checkpoints.every_steps": None, "checkpoints.every_s": None,
            "compute.channels_last": precision in (self.channels_last or ()),
            "compute.compile": precision in (self.compile or ()),
        })

    def to_document(self, precisions) -> dict:
        """What compare.json records of the spec: the comparison's own settings, the shared config, and
        the fields the report reads at the top level."""
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "base"}
        return {**_jsonable(own), "config": self.base.to_dict(), "dataset": self.base.data.dataset,
                "model": self.base.model.name, "model_options": dict(self.base.model.options),
                "batch_size": self.batch_size, "time_budget_s": self.time_budget_s,
                "steps": self.base.budget.steps, "seed": self.seed, "precisions": list(precisions),
                "seed_list": self.seed_list}


def choose_precisions(spec: CompareSpec, dataset, device: torch.device,
                      log=print) -> tuple[tuple[str, ...], list[dict], dict]:
    """fp32 against the fastest mixed mode that is faster than fp32 on this machine, at the comparison's
    own batch size and model (speed.decision), or fp32 alone when none is; the decisions behind it."""
    decisions, cannot_run = decide_for_run(spec.train_config("fp32"), dataset, device, log=log)
    for decision in decisions.values():
        log(f"  {decision.describe()}")
    precisions, left_out = choose_for_comparison(decisions, cannot_run)
    return precisions, left_out, {name: decision.to_dict() for name, decision in decisions.items()}


class _QualityTracker:
    """Evaluates the generator at log points, every 1/eval_points of the budget: of its training time
    when it has a time budget, else of its steps (a step budget makes the evaluation points, and so the
    whole comparison, repeat exactly)."""

    def __init__(self, evaluator, run_dir: Path, spec: CompareSpec, autocast, num_classes: int, seed: int):
        self.evaluator, self.run_dir, self.spec, self.seed = evaluator, run_dir, spec, seed
        self.autocast, self.num_classes = autocast, num_classes
        budget = spec.base.budget
        self.clock = "train_seconds" if budget.time_budget_s is not None else "step"
        total = budget.time_budget_s if budget.time_budget_s is not None else budget.steps or DEFAULT_STEPS
        self.interval = total / spec.eval_points
        self.next_at = 0.0
        self.curve: list[dict] = []
        self.eval_seconds = 0.0

    def evaluate(self, state, record: dict) -> dict:
        started = time.perf_counter()
        images, labels = generate_evenly(state.gan, self.num_classes, self.spec.eval_samples,
                                         seed=evaluation_noise_seed(self.seed), device=state.policy.device,
                                         autocast=self.autocast)
        quality = quality_of_images(self.evaluator, images, labels)
        spent = time.perf_counter() - started
        self.eval_seconds += spent
        point = {"step": record["step"], "train_seconds": record["train_seconds"], "eval_seconds": round(spent, 3),
                 **quality}
        self.curve.append(point)
        with open(self.run_dir / "quality.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(point) + "\n")
        return point

    def __call__(self, state, record: dict) -> None:
        if record[self.clock] >= self.next_at:
            self.evaluate(state, record)
            while self.next_at <= record[self.clock]:
                self.next_at += self.interval


def run_compare(spec: CompareSpec, out_dir: Path, show_progress: bool = True, log=print) -> dict:
    out_dir = Path(out_dir)
    device = resolve_device(spec.base.compute.device)
    if spec.precisions and "fp32" not in spec.precisions:
        raise AmpganError("a comparison needs fp32 as its baseline: add it to --precisions")
    dataset = load_dataset(spec.base.data, seed=spec.seed)
    prepare_run(spec.train_config("fp32"), dataset)  # validates the options before any measuring
    if spec.precisions:
        precisions, left_out = spec.precisions, []
        warn_about_named_modes(spec.train_config("fp32"), device, list(precisions))
    else:
        precisions, left_out, decisions = choose_precisions(spec, dataset, device, log)
        if precisions == ("fp32",):
            return _no_faster_mode(spec, out_dir, device, dataset, left_out, decisions)
    layouts = {}
    if spec.channels_last is None:
        channels_last, layouts = channels_last_precisions(spec.train_config, precisions, dataset, device, log)
        spec = dataclasses.replace(spec, channels_last=channels_last)
    compile_decisions = {}
    if spec.compile is None:  # after the memory format: the compiled step depends on it
        compiled, compile_decisions = compiled_precisions(spec.train_config, precisions, dataset, device, log)
        spec = dataclasses.replace(spec, compile=compiled)
    prepared = {(p, seed): prepare_run(spec.train_config(p, seed), dataset)  # validates all first
                for seed in spec.seed_list for p in precisions}
    log(f"evaluator: training or loading the {spec.base.data.dataset} classifier ...")
    evaluator = evaluator_for(dataset, cache_dir=spec.evaluator_cache, seed=spec.seed)
    log(f"evaluator: held-out accuracy {evaluator.held_out_accuracy:.3f} ({evaluator.info['cache']})")
    bench_results = _bench(spec, dataset, precisions, device, log)
    write_results(bench_results, out_dir / "bench")

    per_seed: dict[str, dict[int, dict]] = {p: {} for p in precisions}
    curves: dict[str, dict[int, list[dict]]] = {p: {} for p in precisions}
    for seed in spec.seed_list:
        for precision in precisions:  # one seed at a time: a change of the machine's load hits both alike
            run, curve = _train_and_evaluate(spec, prepared[(precision, seed)], evaluator, dataset, out_dir,
                                             seed, show_progress, log)
            per_seed[precision][seed], curves[precision][seed] = run, curve

    floor = reference_floor(evaluator, spec.eval_samples)
    document = {
        "format": "ampgan-compare/1",
        "spec": spec.to_document(precisions),
        "environment": environment_stamp(device),
        "left_out": left_out,
        "layouts": layouts,  # the memory-format decisions measured for this comparison (none when given)
        "compile_decisions": compile_decisions,  # compiled or eager, per precision (none when given or not measured)
        "dataset": {"name": spec.base.data.dataset, "images": len(dataset), "class_names": list(dataset.class_names),
                    "source": dataset.source},
        "evaluator": evaluator.info,
        "floor": floor,
        "runs": {p: summarize_seeds(per_seed[p]) for p in precisions},
    }
    document["cost"] = _costs(document, bench_results, curves, out_dir)
    document["seed_comparison"] = compare_seeds(document)
    document["verdict"] = verdict(document, bench_results["speedups"])
    write_json_atomically(out_dir / "compare.json", document)
    return document


def _no_faster_mode(spec: CompareSpec, out_dir: Path, device: torch.device, dataset, left_out: list[dict],
                    decisions: dict) -> dict:
    """The study's answer on a machine where no mixed-precision mode trains faster than fp32: there is no
    speed to gain, so no race is trained (a mode several times slower would make a handful of steps in the
    budget); the measurements behind the answer, and how to race anyway."""
    document = {
        "format": "ampgan-compare/1", "outcome": "no faster mode",
        "spec": spec.to_document(("fp32",)), "environment": environment_stamp(device), "left_out": left_out,
        "decisions": decisions,
        "dataset": {"name": spec.base.data.dataset, "images": len(dataset), "class_names": list(dataset.class_names),
                    "source": dataset.source},
        "runs": {},
    }
    document["verdict"] = no_faster_mode_verdict(document)
    write_json_atomically(out_dir / "compare.json", document)
    return document


def _bench(spec: CompareSpec, dataset, precisions, device, log) -> dict:
    if spec.bench is not None:
        return load_results(spec.bench)
    sizes = tuple(sorted(set(spec.bench_batch_sizes) | {spec.batch_size}))
    log(f"bench: batch sizes {', '.join(map(str, sizes))} x {', '.join(precisions)} ...")
    bench_spec = BenchSpec(base=spec.base, batch_sizes=sizes, precisions=precisions, warmup=1, steps=spec.bench_steps,
                           channels_last=spec.channels_last, compile=spec.compile or (), measure_compile_times=False,
                           min_seconds=COMPARE_BENCH_MIN_SECONDS, max_seconds=COMPARE_BENCH_MAX_SECONDS)
    return run_bench(bench_spec, device, dataset=dataset)


def _train_and_evaluate(spec, prepared, evaluator, dataset, out_dir: Path, seed: int, show_progress, log):
    precision = prepared.config.precision.name
    run_dir = out_dir / "runs" / f"{precision}-seed{seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    log(f"train: {precision}, seed {seed}, for {_budget_text(prepared.config)} ...")
    tracker = _QualityTracker(evaluator, run_dir, spec, prepared.policy.autocast, dataset.num_classes, seed)
    result = run_training(prepared, run_dir, show_progress=show_progress, on_log=tracker)
    # The final state is still in memory: evaluate its generator as it ended, no reload from disk.
    final = tracker.evaluate(result.state.train, {"step": result.steps, "train_seconds": result.train_seconds})
    quality = {"final": final, "curve": tracker.curve, "eval_seconds_total": round(tracker.eval_seconds, 2),
               "evaluator": evaluator.info}
    write_json_atomically(run_dir / "quality.json", quality)
    run = {"run_dir": str(run_dir.relative_to(out_dir)), "steps": result.steps, "train_seconds": result.train_seconds,
           # The training clock only (evaluation and checkpoints excluded): what the report sets
           # beside the bench's step time.
           "seconds_per_step": result.train_seconds / max(1, result.steps), "final": final,
           "eval_seconds_total": quality["eval_seconds_total"], "stamp": result.stamp}
    flags = "; ".join(final.get("flags", [])) or "no class collapsed or drawn as another"
    log(f"  {precision} seed {seed}: {result.steps} steps, evaluator accuracy {final['evaluator_accuracy']:.3f}, "
        f"recall {final.get('recall', float('nan')):.2f}, Fréchet distance {final['frechet_distance']:.2f}; {flags}")
    return run, tracker.curve


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
            return {"basis": None, "note": f"no catalog instance runs on {device_name}: give --instance or --price-per-hour"}
        cheapest = min(matching, key=lambda i: i.price_per_hour / max(1, i.gpu_count))
        basis = price_basis(cheapest, None, device_name, assume_same_speed=False)
    cost_document = build_cost_document([bench_results], device_name, basis, 1e6, None, catalog_date(catalog))
    write_cost(cost_document, out_dir / "cost")
    runs = document["runs"]
    target = spec["target_accuracy"]
    if target is None:
        # 80% of the way from chance to the best mean final accuracy; none when nothing beat chance clearly.
        chance = 1.0 / len(document["dataset"]["class_names"])
        best = max(r["final"]["evaluator_accuracy"] for r in runs.values())
        target = round(chance + 0.8 * (best - chance), 3) if best >= 2 * chance else None
    to_target = {}
    for precision in runs:
        per_seed = {}
        for seed, points in curves[precision].items():
            curve = [(p["train_seconds"], p["evaluator_accuracy"]) for p in points]
            reached_at = cost_to_quality(curve, target, basis["price_per_hour"]) if target else None
            if reached_at:
                # Above the target at the first evaluation after the start: the time is interpolated
                # from the start and says only "before that evaluation".
                first_above = next(i for i, (_, accuracy) in enumerate(curve) if accuracy >= target)
                reached_at = reached_at | {"by_first_evaluation": first_above <= 1}
            per_seed[str(seed)] = reached_at
        reached = [r for r in per_seed.values() if r]
        to_target[precision] = {
            "per_seed": per_seed, "reached": len(reached), "seeds": len(per_seed),
            "by_first_evaluation": sum(bool(r.get("by_first_evaluation")) for r in reached),
            # Means over the seeds that reached the target (how many did is beside them).
            "seconds": float(sum(r["seconds"] for r in reached) / len(reached)) if reached else None,
            "cost": float(sum(r["cost"] for r in reached) / len(reached)) if reached else None,
        } if target else None
    budget = {p: cost_of_seconds(r["train_seconds"], basis["price_per_hour"]) for p, r in runs.items()}
    return {"basis": basis, "target_accuracy": target, "to_target": to_target, "budget": budget,
            "table": cost_document["rows"], "catalog_date": cost_document["catalog_date"]}
