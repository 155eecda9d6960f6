"""The study's race stage: the bench of its step (measured once), then every precision's run at every seed,
each read back when finished, continued from its latest checkpoint when stopped, trained otherwise.

The race's clock is the bench's: each step of a run is charged its precision's settled bench step time (the
median of interleaved rounds), so "the same training time" is the same number of bench-timed steps whatever
else the machine ran meanwhile. Each run's wall clock is kept as the check: its pace against the bench's is
recorded per run, and a seed whose wall-clock speedup leaves the bench's interval is flagged in the verdict
with what timing it on the wall clock would have done to the answer (docs/study.md, "The race's clock": why
this and not interleaved slices, with the measurements).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ampgan.bench.harness import run_bench
from ampgan.bench.output import load_results, unmeasured, write_results
from ampgan.bench.to_folder import refuse_what_measured_nothing
from ampgan.cost.arithmetic import time_to_quality
from ampgan.errors import AmpganError, one_line
from ampgan.files.atomic import write_json_atomically
from ampgan.files.paths import file_in
from ampgan.runs.checkpoint import list_checkpoints, load_checkpoint
from ampgan.runs.claim import remove_written
from ampgan.study.evaluate import QualityTracker, read_quality_curve
from ampgan.study.progress import StudyInterrupted, StudyProgress
from ampgan.study.spec import CompareSpec, budget_text
from ampgan.training.interruption import TrainingInterrupted
from ampgan.training.loop import run_training
from ampgan.training.start import check_checkpoint_belongs


def bench_once(spec: CompareSpec, dataset, precisions, device, log, out_dir: Path, progress: StudyProgress) -> dict:
    """The bench of the study's step (or the one --bench gave), measured once: a resumed study reads it back.
    Interrupted, it is measured again on resume (a bench cut short compares too few rounds)."""
    if progress.bench_done:
        bench = file_in(out_dir, "bench", "results.json")
        if not bench.exists():  # its races' clock: measured again, the runs already raced would be on another
            raise AmpganError(
                f"{one_line(bench)} is gone since the study measured it, and the study's runs race on its step "
                "times: put it back, or run the study again with --overwrite"
            )
        return load_results(bench)
    if spec.bench_results is not None:
        results = load_results(spec.bench_results)
    else:
        sizes = tuple(sorted(set(spec.bench.batch_sizes) | {spec.batch_size}))
        log(f"bench: batch sizes {', '.join(map(str, sizes))} x {', '.join(precisions)} ...")
        # The spec's own bench, of the study's step: its base, precisions, memory format and compile setting.
        results = run_bench(
            replace(
                spec.bench,
                base=spec.base,
                batch_sizes=sizes,
                precisions=precisions,
                channels_last=spec.channels_last,
                compile=spec.compile or (),
            ),
            device,
            dataset=dataset,
        )
        if results.get("incomplete"):
            raise StudyInterrupted(results["incomplete"]["signum"], out_dir, progress)
    write_results(results, out_dir / "bench")
    # A bench that measured nothing because its configurations failed (a broken step) would race runs no
    # speedup or cost can be drawn from: the study stops here, its bench kept for inspection and not marked
    # done, so the same command benches again (too_slow rows alone: it trains on, and says so below).
    refuse_what_measured_nothing(results["configs"], f"the study stopped before training; see {out_dir / 'bench'}")
    progress.bench_done = True
    progress.save()
    return results


BENCH_CLOCK, WALL_CLOCK = "bench step time", "wall clock"
# A seed's wall-clock speedup is off the bench's pace outside its interval widened by this factor each way.
PACE_TOLERANCE = 1.1


def race_clock(bench_results: dict, precisions, batch_size: int) -> dict:
    """{"clock", "step_s": {precision: seconds charged per step} or None, "reason"}: each precision's settled
    bench step at the study's batch size; the wall clock for every run when one precision has none (a race
    on two clocks would be no race)."""
    configs = bench_results.get("configs") or []
    settled = {
        c["precision"]: float(c["stats"]["median_s"])
        for c in configs
        if c["batch_size"] == batch_size and c["status"] == "ok" and (c.get("stats") or {}).get("median_s")
    }
    missing = next((precision for precision in precisions if precision not in settled), None)
    if missing is not None:
        return {
            "clock": WALL_CLOCK,
            "step_s": None,
            "reason": f"the bench has no settled {missing} step at batch {batch_size} "
            f"({unmeasured(configs).get((missing, batch_size), 'not measured')}): every run is timed on its wall "
            "clock, which other work on the machine can tilt",
        }
    return {
        "clock": BENCH_CLOCK,
        "step_s": {precision: settled[precision] for precision in precisions},
        "reason": "each step is charged its precision's settled bench step time, so other work on the machine "
        "during a run changes its wall time, not its place in the race",
    }


def run_once(
    spec,
    prepared,
    evaluator,
    dataset,
    out_dir: Path,
    seed: int,
    show_progress,
    log,
    progress: StudyProgress,
    charge_s: float | None = None,
) -> tuple[dict, list[dict]]:
    """A run of the study: read back when finished, continued from its latest checkpoint when it was
    stopped, trained otherwise. `charge_s`: the training clock's seconds per step (race_clock; None: wall)."""
    precision = prepared.config.precision.name
    key = f"{precision}-seed{seed}"
    run_dir = file_in(out_dir, "runs", key)  # a run folder linked out of the study is refused, never written
    finished = progress.run_done(key)
    if finished is not None:
        log(f"train: {precision}, seed {seed}: finished before, read back")
        return finished, read_quality_curve(file_in(run_dir, "quality.jsonl"))
    checkpoints = list_checkpoints(run_dir)
    tracker = QualityTracker(
        evaluator, run_dir, spec, prepared.policy.autocast, dataset.num_classes, seed, prepared.config.logging.log_every
    )
    resume_from = None
    if checkpoints:
        resume_from = load_checkpoint(checkpoints[-1], map_location="cpu")
        check_checkpoint_belongs(resume_from, checkpoints[-1], run_dir, prepared.config, lambda: dataset)
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
        result = run_training(
            prepared,
            run_dir,
            show_progress=show_progress,
            on_log=tracker,
            resume_from=resume_from,
            step_charge_s=charge_s,
        )
    except TrainingInterrupted as stopped:
        raise StudyInterrupted(stopped.signum, out_dir, progress) from None
    run, curve = _finish_run(result, tracker, evaluator, out_dir, run_dir, precision, seed, log, charge_s)
    progress.mark_run(key, "done", run)
    return run, curve


def _finish_run(
    result, tracker, evaluator, out_dir: Path, run_dir: Path, precision: str, seed: int, log, charge_s=None
):
    # The final state is still in memory: evaluate its generator as it ended, no reload from disk.
    final = tracker.evaluate(
        result.state.train,
        {"step": result.steps, "train_seconds": result.train_seconds, "wall_seconds": result.wall_seconds},
        final=True,
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
        # The check beside the race's clock: what the steps took on the wall clock, and the pace against the
        # bench's (steps per second each).
        "clock": BENCH_CLOCK if charge_s is not None else WALL_CLOCK,
        "wall_seconds": result.wall_seconds,
        "steps_per_s": result.steps / result.wall_seconds if result.wall_seconds > 0 else None,
        "bench_steps_per_s": 1.0 / charge_s if charge_s else None,
        "thread_changes": result.thread_changes,
        "final": final,
        "eval_seconds_total": quality["eval_seconds_total"],
        "stamp": result.stamp,
    }
    if charge_s and result.wall_seconds > 0 and result.steps:
        wall_step = result.wall_seconds / result.steps
        log(
            f"  {precision} seed {seed}: {wall_step * 1e3:.1f} ms per step on the wall clock against the bench's "
            f"{charge_s * 1e3:.1f} ms ({wall_step / charge_s:.2f}x), charged the bench's"
        )
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
        reasons = "; ".join(f"{p}@{batch}: {why}" for (p, batch), why in list(unmeasured(configs).items())[:3])
        log(
            f"bench: no configuration finished ({reasons}); the runs train anyway, but the study will have no "
            "measured speedup and no cost: give a larger --set compare.bench.max_seconds for them"
        )


def pace_of_seeds(
    per_seed: dict[str, dict[int, dict]],
    curves: dict[str, dict[int, list[dict]]],
    bench_speedups: list[dict],
    baseline: str,
    batch_size: int,
    target: float | None,
    metric: str,
    higher_is_better: bool = True,
) -> dict[str, dict[str, dict]]:
    """Per candidate precision and seed: its wall-clock speedup per step over the baseline's run at that seed
    against the bench's interval (widened by PACE_TOLERANCE), each run's wall pace against its bench step, and
    the time-to-target ratio on the race's clock and on the wall clock (pure: the runs, curves and bench)."""
    pairs = {(s["batch_size"], s["precision"]): s for s in bench_speedups}
    out: dict[str, dict[str, dict]] = {}
    for precision, seeds in per_seed.items():
        if precision == baseline:
            continue
        pair = pairs.get((batch_size, precision)) or {}
        low, high = pair.get("low"), pair.get("high")
        out[precision] = {}
        for seed, run in seeds.items():
            theirs = per_seed.get(baseline, {}).get(seed)
            mine_step, their_step = _wall_step(run), _wall_step(theirs or {})
            if mine_step is None or their_step is None:
                continue
            speedup = their_step / mine_step
            entry = {
                "wall_speedup": speedup,
                "bench_estimate": pair.get("estimate"),
                "bench_low": low,
                "bench_high": high,
                # None without an interval
                "within": low / PACE_TOLERANCE <= speedup <= high * PACE_TOLERANCE if None not in (low, high) else None,
                "wall_over_bench": _over_bench(run),
                "baseline_wall_over_bench": _over_bench(theirs),
                "time_to_target_ratio": None,
                "wall_time_to_target_ratio": None,
                "thread_changes": len(run.get("thread_changes") or []) + len(theirs.get("thread_changes") or []),
            }
            if target is not None:
                for key, clock in (
                    ("time_to_target_ratio", "train_seconds"),
                    ("wall_time_to_target_ratio", "wall_seconds"),
                ):
                    mine_t = _time_to(curves.get(precision, {}).get(seed, []), clock, metric, target, higher_is_better)
                    their_t = _time_to(curves.get(baseline, {}).get(seed, []), clock, metric, target, higher_is_better)
                    entry[key] = their_t / mine_t if mine_t and their_t else None
            out[precision][str(seed)] = entry
    return out


def _wall_step(run: dict) -> float | None:
    wall = run.get("wall_seconds", run.get("train_seconds"))
    return wall / run["steps"] if run.get("steps") and wall else None


def _over_bench(run: dict) -> float | None:
    """The run's wall time per step over the bench step it was charged (None on the wall clock)."""
    step, bench = _wall_step(run), run.get("bench_steps_per_s")
    return step * bench if step and bench else None


def _time_to(points: list[dict], clock: str, metric: str, target: float, higher_is_better: bool) -> float | None:
    curve = [(p[clock], p[metric]) for p in points if p.get(clock) is not None and p.get(metric) is not None]
    return time_to_quality(curve, target, higher_is_better)
