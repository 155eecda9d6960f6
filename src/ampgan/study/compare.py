"""`ampgan compare`: the study in one command, stage by stage.

Same start (one seed: identical initial weights, data order and sample noise for every precision),
same wall-clock training budget per precision (evaluation time excluded and reported), quality
measured during and after training, times from a bench of the same step, costs from the cost
model, and a report that puts it together. The stages, each a module of this package:

    decide    compare.py   the precisions to race, each one's memory format and compile (speed/plan.py)
    race      race.py      the bench of the step, then every precision's run at every seed
    evaluate  evaluate.py  the evaluator, and each run's quality curve while it trains
    project   project.py   the step projected onto GPUs this machine does not have
    cost      cost.py      cost tables, the quality target, the time and cost to reach it
    report    report.py    report.md and report.html from compare.json (document.py)

    OUT/
      compare.json           everything the report needs, in one document (study/document.py)
      bench/                 results.json, Figures 1-2 (a short bench, or the one given)
      cost/                  cost.json/csv, Figure 3
      runs/<precision>-seed<N>/  a run folder per precision and seed, with quality.json and quality.jsonl
      study.json             what is finished (study/progress.py): an interrupted study resumes from it
      report.md, report.html
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from ampgan.data import load_dataset
from ampgan.doctor.preflight import check_before_training
from ampgan.errors import AmpganError, first_words, say
from ampgan.files.paths import file_in
from ampgan.files.records import as_records
from ampgan.files.signals import stop_on_signals
from ampgan.precisions import FP32
from ampgan.quality.evaluator import check_evaluable, reference_floor, refuse_samples_that_cannot_fit
from ampgan.quality.headline import headline_for
from ampgan.speed.plan import FASTEST_MIXED, Asked, RunPlan, plan_run
from ampgan.speed.threads import apply_threads
from ampgan.study.cost import cost_stage
from ampgan.study.document import (
    NO_FASTER_MODE,
    CompareDocument,
    CostSection,
    DatasetRecord,
    Environment,
    MeasuredChoice,
    RaceRecord,
    RunSummary,
    SeedComparison,
    SpeedDecision,
    StudySpecRecord,
)
from ampgan.study.evaluate import load_evaluator
from ampgan.study.over_seeds import compare_seeds, summarize_seeds
from ampgan.study.progress import StudyInterrupted, open_progress, or_note
from ampgan.study.project import project_elsewhere
from ampgan.study.race import (
    bench_once,
    pace_of_seeds,
    race_clock,
    run_once,
    say_what_the_bench_left_unmeasured,
)
from ampgan.study.spec import CompareSpec
from ampgan.study.verdict import no_faster_mode_verdict, stages_not_run, verdict
from ampgan.system.environment import environment_stamp
from ampgan.training.loop import prepare_run
from ampgan.training.precision import resolve_device


def run_compare(spec: CompareSpec, out_dir: Path, show_progress: bool = True, log=say, dataset=None) -> CompareDocument:
    """The study, resumed where its study.json says it stopped (a new one when the folder has none).
    Interrupted by SIGINT/SIGTERM, it keeps what finished and raises StudyInterrupted. `dataset`: its data, when
    loaded already (None: loaded here)."""
    device = resolve_device(spec.base.compute.device)
    dataset, first = _refuse_before_measuring(spec, log, dataset)
    progress = open_progress(out_dir, spec.to_document(spec.precisions))
    for name in ("runs", "bench", "projection", "cost", "doctor"):  # a subfolder linked out is never written into
        file_in(out_dir, name)
    # Decided before the handlers that defer a signal to the next stage's end: deciding measures for minutes
    # on a busy machine, and nothing of it is kept until it ends, so a signal then stops the study at once.
    spec, decided = _decided(spec, progress, dataset, device, log)
    with stop_on_signals() as stop:

        def stop_here() -> None:
            if stop:
                raise StudyInterrupted(stop.signum, out_dir, progress)

        precisions = tuple(decided.precisions)
        if precisions == (FP32,) and not spec.precisions:
            return _no_faster_mode(spec, out_dir, device, dataset, decided.left_out, decided.decisions)
        stop_here()
        prepared = {
            (p, seed): prepare_run(spec.train_config(p, seed), dataset)  # validates all first
            for seed in spec.seed_list
            for p in precisions
        }
        evaluator = load_evaluator(spec, dataset, log)
        log(f"quality: samples drawn from {first.sampling_weights}")
        stop_here()
        bench_results = bench_once(spec, dataset, precisions, device, log, out_dir, progress)
        say_what_the_bench_left_unmeasured(bench_results, log)
        clock = race_clock(bench_results, precisions, spec.batch_size)
        log(_clock_line(clock))
        stop_here()
        per_seed: dict[str, dict[int, dict]] = {p: {} for p in precisions}
        curves: dict[str, dict[int, list[dict]]] = {p: {} for p in precisions}
        for seed in spec.seed_list:
            for precision in precisions:  # one seed at a time: a change of the machine's load hits both alike
                per_seed[precision][seed], curves[precision][seed] = run_once(
                    spec,
                    prepared[(precision, seed)],
                    evaluator,
                    dataset,
                    out_dir,
                    seed,
                    show_progress,
                    log,
                    progress,
                    charge_s=(clock["step_s"] or {}).get(precision),
                )
                stop_here()

    document = _raced_document(spec, device, dataset, decided, first, evaluator, bench_results, per_seed)
    race = clock | {"threads": decided.threads}
    return _after_the_runs(document, spec, dataset, bench_results, per_seed, curves, race, out_dir, device)


def _decided(spec: CompareSpec, progress, dataset, device, log) -> tuple[CompareSpec, RunPlan]:
    """The decide stage (once: a resumed study races what it began with), its threads applied, and the spec
    with the memory formats and compile it decided (speed/plan.py, kept in study.json). With no mode faster
    than fp32 there is nothing to race, and no format or compile is decided."""
    if progress.decided is None:
        progress.decided = plan_run(
            Asked(spec.train_config, FASTEST_MIXED, spec.precisions, spec.channels_last, spec.compile),
            dataset,
            device,
            log,
        )
        progress.save()
    decided = progress.decided
    apply_threads(decided.threads)  # a resumed study: the threads its bench and runs were measured on
    spec = dataclasses.replace(spec, channels_last=tuple(decided.channels_last), compile=tuple(decided.compile))
    return spec, decided


def _clock_line(clock: dict) -> str:
    """'race: timed on the bench step time (fp32 12.0 ms per step, bf16 8.1 ms per step; why)'."""
    charged = clock["step_s"] or {}
    return (
        f"race: timed on the {clock['clock']} ("
        + (", ".join(f"{p} {s * 1e3:.1f} ms per step" for p, s in charged.items()) + "; " if charged else "")
        + f"{clock['reason']})"
    )


def _raced_document(spec, device, dataset, decided: RunPlan, first, evaluator, bench_results: dict, per_seed):
    """compare.json of a raced study as its runs leave it: the later stages add to it (_after_the_runs)."""
    precisions = tuple(per_seed)
    return CompareDocument(
        spec=StudySpecRecord.from_dict(spec.to_document(precisions)),
        environment=Environment.from_dict(environment_stamp(device)),
        left_out=decided.left_out,
        layouts=as_records(dict[str, MeasuredChoice], decided.layouts),
        compile_decisions=as_records(dict[str, MeasuredChoice], decided.compile_decisions),
        dataset=_dataset_record(spec, dataset),
        evaluator=evaluator.info,
        sampled_from=first.sampling_weights,  # the EMA of G when the model declares one, else G itself
        floor=reference_floor(evaluator, spec.eval_samples),
        bench_notes={
            f"{c['precision']}@{c['batch_size']}": c["reason"] for c in bench_results["configs"] if c.get("reason")
        },
        # What the study races on: accuracy for a conditional GAN, the Fréchet distance otherwise.
        stored_headline=headline_for(first.conditional),
        runs={p: RunSummary.from_dict(summarize_seeds(per_seed[p])) for p in precisions},
    )


def _refuse_before_measuring(spec: CompareSpec, log, dataset=None):
    """(the dataset, fp32's prepared run) once every option is valid, the data can be judged and the GAN passes
    preflight: a study that cannot finish is refused before anything is measured or trained."""
    if spec.precisions and FP32 not in spec.precisions:
        raise AmpganError("a comparison needs fp32 as its baseline: add it to --precisions")
    dataset = load_dataset(spec.base.data, seed=spec.seed) if dataset is None else dataset
    first = prepare_run(spec.train_config(FP32), dataset)  # validates the options before any measuring
    if spec.target_accuracy is not None and not first.conditional:
        raise AmpganError(
            f"compare.target_accuracy needs a conditional GAN: model {spec.base.model.name} draws no class, so "
            "its study races on the Fréchet distance (its target is set from the runs); leave it out"
        )
    check_evaluable(dataset)  # one class, or too few images per class: no evaluator could judge the runs
    refuse_samples_that_cannot_fit(spec.eval_samples, tuple(dataset.images.shape[1:]), "--set compare.eval_samples=")
    check_before_training(spec.train_config(FP32), dataset, log=log)  # before anything is measured or trained
    return dataset, first


def _after_the_runs(
    document: CompareDocument, spec, dataset, bench_results: dict, per_seed, curves, race: dict, out_dir, device
) -> CompareDocument:
    """The stages after the runs (cost, projection, the seeds compared, the race's pace, the verdict), then
    compare.json. The runs are finished: a stage that cannot run is reported in its section and the verdict,
    and never takes the study down with it."""
    document = document.with_fields(
        # A cost stage that cannot run is a section with no basis and a note saying why (the shape a cost without
        # a price basis already has, which the report and the verdict read).
        cost=or_note(
            lambda: cost_stage(document, bench_results, curves, out_dir),
            lambda error: CostSection(
                basis=None, note=f"the cost stage could not run: {first_words(str(error)) or type(error).__name__}"
            ),
        ),
        projection=project_elsewhere(spec, dataset, bench_results, out_dir, device),
    )
    document = document.with_fields(seed_comparison=as_records(dict[str, SeedComparison], compare_seeds(document)))
    pace = pace_of_seeds(
        per_seed,
        curves,
        bench_results["speedups"],
        FP32,
        spec.batch_size,
        document.target,
        document.headline.key,
        document.headline.higher_is_better,
    )
    document = document.with_fields(race=RaceRecord.from_dict(race | {"pace": pace}))
    document = document.with_fields(verdict=verdict(document, bench_results["speedups"]) + stages_not_run(document))
    document.write(out_dir)
    return document


def _dataset_record(spec: CompareSpec, dataset) -> DatasetRecord:
    return DatasetRecord(
        name=spec.base.data.dataset,
        images=len(dataset),
        class_names=list(dataset.class_names),
        source=dataset.source,
    )


def _no_faster_mode(
    spec: CompareSpec, out_dir: Path, device: torch.device, dataset, left_out: list[dict], decisions: dict
) -> CompareDocument:
    """The study's answer on a machine where no mixed-precision mode trains faster than fp32: there is no
    speed to gain, so no race is trained (a mode several times slower would make a handful of steps in the
    budget); the measurements behind the answer, and how to race anyway."""
    document = CompareDocument(
        outcome=NO_FASTER_MODE,
        spec=StudySpecRecord.from_dict(spec.to_document((FP32,))),
        environment=Environment.from_dict(environment_stamp(device)),
        left_out=left_out,
        decisions=as_records(dict[str, SpeedDecision], decisions),
        dataset=_dataset_record(spec, dataset),
        runs={},
        # No mode pays here; what would one pay on a GPU? The step is traced (a few steps at batch 8 and 16).
        projection=project_elsewhere(spec, dataset, None, out_dir, device),
    )
    document = document.with_fields(verdict=no_faster_mode_verdict(document))
    document.write(out_dir)
    return document
