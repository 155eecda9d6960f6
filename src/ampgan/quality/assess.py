"""`ampgan evaluate`: the quality of finished runs, one evaluator per dataset, quality.json per run."""

from __future__ import annotations

import functools
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from ampgan.data import load_dataset
from ampgan.errors import AmpganError, one_line, warn
from ampgan.files.atomic import write_json_atomically
from ampgan.gan.ema import G_OWN_WEIGHTS
from ampgan.quality.evaluator import (
    TrainedEvaluator,
    evaluator_for,
    generate_evenly,
    quality_of_images,
    reference_floor,
    refuse_samples_that_cannot_fit,
)
from ampgan.runs.claim import FolderLock, owning_folder
from ampgan.seeds import evaluation_noise_seed
from ampgan.training.start import run_data
from ampgan.training.trained import load_trained_run


@dataclass(frozen=True)
class RunQuality:
    run_dir: Path
    precision: str
    step: int
    quality: dict
    evaluator: TrainedEvaluator
    sampled_from: str = G_OWN_WEIGHTS  # the EMA of G when the model declares one


def _names(names) -> str:
    shown = ", ".join(names[:5]) + (f", ... ({len(names)} in all)" if len(names) > 5 else "")
    return f"[{shown}]"


def evaluate_runs(
    run_dirs: list[Path], samples: int, seed: int, evaluator_cache: Path | None, moved: dict | None = None
) -> list[RunQuality]:
    """Every run's final generator against the evaluator of its dataset (trained once per dataset);
    writes RUN_DIR/quality.json with the metrics, the evaluator and the real-image floor (not in a study's run,
    whose quality.json is the study's). `moved`: where the runs' data is now (load_trained_run)."""
    loaded = [load_trained_run(run_dir, moved=moved) for run_dir in run_dirs]  # all readable before any work
    # Held from here to the last quality.json: a run a training process still writes is refused now, not after
    # minutes of evaluator training (its step-0 generator was scored and written as the final one once the
    # run had finished), and no `train --resume` changes a run while it is scored. A run inside a study is the
    # study's: its lock is the one a racing `compare` holds (two runs of one study, or a run named twice: once).
    with ExitStack() as held:
        owners = {(owning_folder(run.run_dir) or run.run_dir).resolve() for run in loaded}
        for folder in sorted(owners):
            held.callback(FolderLock(folder).release)
        loaded = [
            load_trained_run(run.run_dir, moved=moved) for run in loaded
        ]  # as they stand now that none can change
        return _evaluated(loaded, samples, seed, evaluator_cache)


def _evaluated(loaded: list, samples: int, seed: int, evaluator_cache: Path | None) -> list[RunQuality]:
    """Each loaded run scored, its quality.json written (its folder held by the caller)."""
    for run in loaded:
        refuse_samples_that_cannot_fit(samples, tuple(run.document["dataset"]["image_shape"]), "--samples")
    # One evaluator per dataset (its data and seed), trained or loaded once; each run's data checked to be its own.
    data_of = functools.cache(lambda data, data_seed: load_dataset(data, seed=data_seed))
    evaluator_of = functools.cache(
        lambda data, data_seed: evaluator_for(data_of(data, data_seed), cache_dir=evaluator_cache, seed=seed)
    )
    results = []
    for run in loaded:
        config = run.config
        run_data(run.document, run.run_dir, config, lambda: data_of(config.data, config.seed))
        evaluator = evaluator_of(config.data, config.seed)
        if tuple(run.class_names) != evaluator.class_names:
            raise AmpganError(
                f"{run.run_dir}/config.json names the classes {_names(run.class_names)} but its dataset "
                f"has {_names(evaluator.class_names)}: the file is damaged, or the data changed since "
                "the run; scores against other classes would be wrong"
            )
        seeded = evaluation_noise_seed(seed)
        images, labels = generate_evenly(
            run.gan, len(run.class_names), samples, seeded, "cpu", real=evaluator.held_out_images
        )
        quality = quality_of_images(evaluator, images, labels, run.gan.translates(evaluator.held_out_images.shape[1:]))
        if (study := owning_folder(run.run_dir)) is not None:
            # The study's own record of the run (its curve, its evaluations' settings) is the study's to write.
            warn(
                f"{one_line(run.run_dir)} is a run of {one_line(study)}: its quality.json, that folder's record of "
                "the run, is kept; these scores are printed, not written (copy the run out to keep its own)"
            )
        else:
            write_json_atomically(
                run.run_dir / "quality.json",
                {
                    "final": quality | {"step": run.step},
                    "sampled_from": run.gan.sampling_weights,
                    "evaluator": evaluator.info,
                    "floor": reference_floor(evaluator, samples),
                },
            )
        results.append(
            RunQuality(run.run_dir, config.precision.name, run.step, quality, evaluator, run.gan.sampling_weights)
        )
    return results
