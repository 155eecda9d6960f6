"""The study's evaluate stage: the evaluator that judges every run, and each run's quality curve (quality.jsonl),
evaluated at regular points of its budget while it trains and once at its end."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from ampgan.files.atomic import open_for_append, write_jsonl_atomically
from ampgan.files.jsonfile import read_jsonl
from ampgan.files.paths import file_in
from ampgan.files.schema import COUNT, Between
from ampgan.quality.evaluator import evaluator_for, generate_evenly, quality_of_images
from ampgan.seeds import evaluation_noise_seed
from ampgan.study.spec import CompareSpec
from ampgan.training.loop import DEFAULT_STEPS


def load_evaluator(spec: CompareSpec, dataset, log):
    """The dataset's classifier (trained once and cached): every precision and seed is judged by the same one."""
    log(f"evaluator: training or loading the {spec.base.data.dataset} classifier ...")
    evaluator = evaluator_for(dataset, cache_dir=spec.evaluator_cache, seed=spec.seed)
    log(f"evaluator: held-out accuracy {evaluator.held_out_accuracy:.3f} ({evaluator.info['cache']})")
    return evaluator


class QualityTracker:
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
        self.interval = (
            budget.time_budget_s if budget.time_budget_s is not None else budget.steps or DEFAULT_STEPS
        ) / spec.eval_points
        self.next_at = 0.0
        self.curve: list[dict] = []
        self.eval_seconds = 0.0

    @property
    def path(self) -> Path:
        return file_in(self.run_dir, "quality.jsonl")

    def evaluate(self, state, record: dict, final: bool = False) -> dict:
        started = time.perf_counter()
        images, labels = generate_evenly(
            state.gan,
            self.num_classes,
            self.spec.eval_samples,
            seed=evaluation_noise_seed(self.seed),
            device=state.policy.device,
            autocast=self.autocast,
            real=self.evaluator.held_out_images,
        )
        translated = state.gan.translates(self.evaluator.held_out_images.shape[1:])
        quality = quality_of_images(self.evaluator, images, labels, translated)
        spent = time.perf_counter() - started
        self.eval_seconds += spent
        point = {
            "step": record["step"],
            "train_seconds": record["train_seconds"],
            # The wall clock beside a charged training clock (study/race.py): the race's check.
            **({"wall_seconds": record["wall_seconds"]} if "wall_seconds" in record else {}),
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
        write_jsonl_atomically(self.path, self.curve)
        self.eval_seconds = sum(point.get("eval_seconds", 0.0) for point in self.curve)
        for point in self.curve:
            self._advance(point[self.clock])


# What a curve's reader draws and interpolates: a step below 0, a time below 0 or an accuracy above 1 was drawn.
_CURVE_POINT = {
    "step": COUNT,
    "train_seconds": Between(0.0, math.inf),
    "?evaluator_accuracy": Between(0.0, 1.0, or_null=True),
    "frechet_distance": (int, float),
}


def read_quality_curve(path: Path) -> list[dict]:
    """A run's quality.jsonl: its evaluations in order; a line cut short by a crash is skipped, a record
    without the fields a curve needs is one error line naming the file."""
    return read_jsonl(
        path,
        shape=_CURVE_POINT,
        fix="delete the run's folder to train it again, or start the study again with --overwrite",
        rising="step",
    )
