"""The study's race stage: the bench of its step (measured once), then every precision's run at every seed,
each read back when finished, continued from its latest checkpoint when stopped, trained otherwise."""

from __future__ import annotations

from pathlib import Path

from ampgan.bench.harness import BenchSpec, run_bench
from ampgan.bench.output import load_results, write_results
from ampgan.errors import AmpganError, one_line
from ampgan.files.atomic import write_json_atomically
from ampgan.runs.checkpoint import list_checkpoints, load_checkpoint
from ampgan.runs.claim import remove_written
from ampgan.study.evaluate import QualityTracker, read_quality_curve
from ampgan.study.progress import StudyInterrupted, StudyProgress
from ampgan.study.spec import COMPARE_BENCH_MAX_FACTOR, CompareSpec, budget_text
from ampgan.training.interruption import TrainingInterrupted
from ampgan.training.loop import run_training
from ampgan.training.start import check_checkpoint_belongs


def bench_once(spec: CompareSpec, dataset, precisions, device, log, out_dir: Path, progress: StudyProgress) -> dict:
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


def run_once(
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
    tracker = QualityTracker(
        evaluator, run_dir, spec, prepared.policy.autocast, dataset.num_classes, seed, prepared.config.logging.log_every
    )
    resume_from = None
    if checkpoints:
        resume_from = load_checkpoint(checkpoints[-1], map_location="cpu")
        check_checkpoint_belongs(resume_from, checkpoints[-1], run_dir, prepared.config)
        tracker.restore(resume_from["step"])
        log(f"train: {precision}, seed {seed}: continuing from step {resume_from['step']} ...")
    else:
        # A start cut short before its first checkpoint: nothing of it to keep, and only what ampgan can
        # show it wrote is deleted (runs/claim.py); anything else stops the study, named.
        kept = remove_written(run_dir) if run_dir.is_dir() else []
        if kept:
            raise AmpganError(
                f"{one_line(run_dir)} holds {one_line(kept[0])}, which ampgan did not write: move it out, "
                "then continue the study"
            )
        run_dir.mkdir(parents=True)
        budget = prepared.config.budget
        log(f"train: {precision}, seed {seed}, for {budget_text(budget.time_budget_s, budget.steps)} ...")
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


def say_what_the_bench_left_unmeasured(bench_results: dict, log) -> None:
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
