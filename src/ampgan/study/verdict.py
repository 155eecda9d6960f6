"""The comparison's verdict in plain language: which precision reached the quality target, how
much sooner and cheaper, whether the difference is larger than the seed-to-seed spread, and how
sure the speed numbers are."""

from __future__ import annotations

import math

from ampgan.bench.output import speedup_estimate, speedup_text
from ampgan.precisions import FP32
from ampgan.quality.registry import EVALUATOR_ACCURACY, METRICS
from ampgan.study.document import (
    CompareDocument,
    CostSection,
    Interval,
    RaceRecord,
    RunSummary,
    SeedComparison,
    SpeedDecision,
)

# Why there is no quality target (by whether the headline metric is higher-is-better): what the runs lacked.
_NO_TARGET = {
    True: "Neither precision's samples were recognised clearly above chance on average (the target is set only "
    "when the best mean final accuracy is at least twice chance): train longer before comparing time to quality.",
    False: "Neither precision brought the Fréchet distance below half of its first evaluation's (the target is set "
    "only then): train longer before comparing time to quality.",
}


def verdict(document: CompareDocument, bench_speedups: list[dict]) -> list[str]:
    """Plain-language conclusions from a comparison document and its bench's speedups, each with
    its uncertainty. Computed once by `ampgan compare` and stored in compare.json."""
    cost, runs, spec = document.cost or CostSection(), document.runs, document.spec
    comparison = document.seed_comparison or {}
    speedups = {(s["batch_size"], s["precision"]): s for s in bench_speedups}
    batch = spec.batch_size
    headline = document.headline
    lines = []
    for precision, run in runs.items():
        if precision == FP32:
            continue
        over_seeds = comparison.get(precision) or SeedComparison()  # its comparison with fp32, seed by seed
        # per mixed precision: its speed, its pace off the bench's, its quality, its time to the target
        lines += [
            _speed_line(
                precision,
                run,
                document.baseline,
                speedups.get((batch, precision)),
                batch,
                document.environment.hardware,
                (document.bench_notes or {}).get(f"{precision}@{batch}"),
                document.race,
                on_steps=spec.time_budget_s is None,  # a budget of steps, as Figure 4 tells it
            ),
            *_off_pace_lines(precision, document.race),
            _quality_line(
                precision, run, document.baseline, over_seeds, len(spec.seeds), document.floor or {}, headline
            ),
            _target_line(precision, cost, over_seeds, cost.target, len(spec.seeds), headline)
            if cost.target is not None
            else _NO_TARGET[headline.higher_is_better],
        ]
    flags = [f"{precision}, {flag}" for precision, run in runs.items() for flag in run.flags]
    if flags:
        lines.append(
            "Flags at the end of training: " + "; ".join(flags[:8]) + ("; ..." if len(flags) > 8 else "") + "."
        )
    apart = (
        f"{spec.time_budget_s / spec.eval_points:.0f} s of training apart"
        if spec.time_budget_s
        else f"{(spec.steps or 0) / spec.eval_points:.0f} steps apart"
    )
    lines.append(
        f"Times to the target are interpolated between evaluations {apart}; GAN "
        "quality curves are not monotonic (see the quality figure)."
    )
    return lines + _projection_line(document)


def no_faster_mode_verdict(document: CompareDocument) -> list[str]:
    """The verdict of a study on a machine where every mixed-precision mode is slower than fp32 (or not
    clearly faster): the measurements, what it means, what would change it."""
    hardware = document.environment.hardware_summary
    decisions = document.decisions or {}
    cannot = "; ".join(
        f"{item['precision']}: {item['reason']}" for item in document.left_out if item["precision"] not in decisions
    )
    lines = [
        f"On this machine ({hardware}) no mixed-precision mode trains model {document.spec.model_name} faster "
        f"than fp32 at batch {document.spec.batch_size}, so mixed precision would make training slower and dearer "
        "here, not faster: train in fp32 on it. Measured on the real training step: "
        f"{'; '.join(_slower_text(name, decision) for name, decision in decisions.items())}."
    ]
    if cannot:
        lines.append(f"Not available here: {cannot}.")
    if not any(flag in hardware for flag in ("avx512_bf16", "amx_bf16", "sm_")):
        lines.append(
            "This CPU has no bf16 or fp16 matrix instructions (AVX512_BF16, AMX): its bf16 and fp16 run "
            "through conversions to fp32. Mixed precision gains on CPUs that have them and on NVIDIA GPUs "
            "with tensor cores."
        )
    lines.append(
        "No quality race was trained: with no speed to gain, there is no trade-off to measure. To race "
        "them anyway (each mode gets the same training time): ampgan compare --precisions fp32,bf16."
    )
    return lines + _projection_line(document)


def _projection_line(document: CompareDocument) -> list[str]:
    line = (document.projection or {}).get("line")
    return [line] if line else []


def stages_not_run(document: CompareDocument) -> list[str]:
    """A verdict line per stage that could not run, saying why (its section is otherwise just absent)."""
    lines = []
    if document.cost is not None and document.cost.basis is None and document.cost.note:
        lines.append(f"Cost: not computed ({document.cost.note}).")
    projection = document.projection or {}
    if projection.get("note"):
        lines.append(f"On other hardware: {projection['note']}.")
    return lines


def _slower_text(name: str, decision: SpeedDecision) -> str:
    """'bf16 6.00 s per step against fp32's 339 ms (17.7x slower)'."""
    step, fp32 = decision.step_s, decision.fp32_step_s
    if not step or not fp32:
        return f"{name}: {decision.verdict}"
    ratio = step / fp32
    relation = f"{ratio:.1f}x slower" if ratio > 1.05 else f"{1 / ratio:.2f}x, {decision.verdict}"
    return f"{name} {_duration(step)} per step against fp32's {_duration(fp32)} ({relation})"


def _duration(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.0f} ms"


def _speed_line(
    precision: str,
    run: RunSummary,
    fp32_run: RunSummary,
    pair: dict | None,
    batch: int,
    hardware: str,
    note: str | None = None,
    race: RaceRecord | None = None,
    on_steps: bool = False,
) -> str:
    text = f"On this {hardware}, "
    if pair:
        text += (
            f"{precision}'s training step was {_speed_relation(pair)} at batch {batch}: "
            f"{speedup_text(pair)} on the bench"
            + (
                " (measured while other processes crowded the cores: that moment's speedup, which the race "
                "charges; rerun the study on a quieter machine to have the machine's)."
                if pair.get("under_load")
                else "."
            )
        )
    else:
        text += f"the bench has no {precision} speedup at batch {batch}" + (
            f" (it measured {precision}: {note})." if note else "."
        )
    if race is not None and race.step_s:
        return text + _charged_text(precision, run, fp32_run, race, on_steps)
    return text + _achieved_text(precision, run, fp32_run, pair)


def _charged_text(precision: str, run: RunSummary, fp32_run: RunSummary, race: RaceRecord, on_steps: bool) -> str:
    """The race on the bench's clock: how many steps each made (`on_steps`: a budget of steps, --steps, which each
    run made in its own time), and the wall clock's pace beside it."""
    charged = ", ".join(f"{name} {_duration(seconds)}" for name, seconds in race.step_s.items())
    wall = ", ".join(f"seed {seed} {pace.wall_speedup:.2f}x" for seed, pace in race.pace.get(precision, {}).items())
    made = f"it made {run.steps} steps to fp32's {fp32_run.steps} in the same training time"
    if on_steps and {precision, FP32} <= set(race.step_s):
        sides = ((run.steps, precision), (fp32_run.steps, FP32))
        mine, theirs = (_duration(n * race.step_s[name]) for n, name in sides)
        made = (
            f"both made {run.steps} steps"
            if run.steps == fp32_run.steps
            else f"{precision} made {run.steps} steps "
            f"and fp32 {fp32_run.steps} (a budget of steps: a run stopped before it)"
        ) + f", {precision} in {mine} of training to fp32's {theirs}"
    return (
        f" In the race {made}, each step "
        f"charged its bench time ({charged}), so other work on the machine could not tilt it"
        + (f"; on the wall clock, kept as the check, it ran {wall} per step" if wall else "")
        + "."
    )


def _off_pace_lines(precision: str, race: RaceRecord | None) -> list[str]:
    """A line per seed whose wall-clock speedup left the bench's interval: which run moved, and what timing the
    race on the wall clock would have done to the answer."""
    if race is None:
        return []
    lines = []
    for seed, pace in race.off_pace(precision).items():
        runs = [
            f"{name} {over:.2f}x its bench step"
            for name, over in ((FP32, pace.baseline_wall_over_bench), (precision, pace.wall_over_bench))
            if over is not None
        ]
        moved = f" ({', '.join(runs)} on the wall clock)" if runs else ""
        threads = f"; the thread watch changed threads {pace.thread_changes} time(s)" if pace.thread_changes else ""
        text = (
            f"Seed {seed} ran off the bench's pace: on the wall clock {precision} was {pace.wall_speedup:.2f}x fp32 "
            f"per step, outside the bench's {pace.bench_estimate:.2f}x (95% CI {pace.bench_low:.2f}-"
            f"{pace.bench_high:.2f}) widened by 10%{moved}{threads}: other work on the machine slowed its runs "
            "unevenly. "
        )
        if race.step_s:
            text += "The race charged each step the bench's time, so this moved nothing in the answer"
            if pace.wall_time_to_target_ratio and pace.time_to_target_ratio:
                text += (
                    f"; timed on the wall clock, {precision} would have reached the target "
                    f"{pace.wall_time_to_target_ratio:.2f}x as soon as fp32 instead of {pace.time_to_target_ratio:.2f}x"
                )
            lines.append(text + ".")
        else:
            lines.append(
                text + "The race was timed on the wall clock (" + race.reason + "), so this seed's time to the "
                "target carries the tilt: rerun the study on a quieter machine, or give it a bench that measured "
                "every precision."
            )
    return lines


def _speed_relation(pair: dict) -> str:
    """What the bench's interval says (a named --precisions mode may be slower than fp32 here)."""
    estimate = speedup_estimate(pair)
    low, high = pair.get("low", estimate), pair.get("high", estimate)
    if low > 1:
        return "faster than fp32's"
    if high < 1:
        return "slower than fp32's"
    return "not clearly different from fp32's"


def _quality_line(
    precision: str,
    run: RunSummary,
    fp32_run: RunSummary,
    comparison: SeedComparison,
    seeds: int,
    floor: dict,
    headline=EVALUATOR_ACCURACY,
) -> str:
    metric = headline.key
    if metric == "evaluator_accuracy":
        ceiling = (
            f" (the evaluator's ceiling: {floor['evaluator_accuracy']:.3f} on real held-out images)"
            if "evaluator_accuracy" in floor
            else ""
        )
        text = (
            f"Final evaluator accuracy: {precision} {with_interval(run, metric)}, fp32 "
            f"{with_interval(fp32_run, metric)}{ceiling}"
        )
    else:
        ceiling = (
            f" (real images: {floor['frechet_distance']:.2f}; lower is better)"
            if "frechet_distance" in floor
            else " (lower is better)"
        )
        text = (
            f"Final Fréchet distance (an unconditional GAN: no class to recognise): {precision} "
            f"{with_interval(run, metric)}, fp32 {with_interval(fp32_run, metric)}{ceiling}"
        )
    if "coverage" in run.final and "coverage" in fp32_run.final:
        text += (
            f"; coverage {precision} {with_interval(run, 'coverage')}, fp32 {with_interval(fp32_run, 'coverage')}"
            + (f" (real images: {floor['coverage']:.2f})" if "coverage" in floor else "")
        )
    if seeds < 2:
        return text + (
            ". With one seed per precision the verdict cannot tell a difference from seed-to-seed "
            "spread: run with --seeds 3 or more."
        )
    difference = comparison.differences.get(metric)
    if seeds == 2:
        return text + f". {_TWO_SEEDS.capitalize()} tell a difference from seed-to-seed spread."
    if difference is not None and difference.known:
        judged = (
            "larger than the seed-to-seed spread" if difference.beyond_seed_spread else "within the seed-to-seed spread"
        )
        text += (
            f". Paired by seed, {precision} minus fp32 is {difference.mean:+.3f} in "
            f"{'accuracy' if metric == 'evaluator_accuracy' else 'Fréchet distance'} (95% CI "
            f"{difference.low:+.3f} to {difference.high:+.3f}, {difference.n} seeds): {judged}"
        )
    return text + "."


def _target_line(
    precision: str,
    cost: CostSection,
    comparison: SeedComparison,
    target: float,
    seeds: int,
    headline=EVALUATOR_ACCURACY,
) -> str:
    mine, theirs = cost.reaching(precision), cost.reaching(FP32)
    text = (
        (
            f"Target evaluator accuracy {target:.2f}"
            if headline.higher_is_better
            else f"Target Fréchet distance {target:.2f} or lower"
        )
        + f": {precision} reached it in {mine.reached} of "
        f"{mine.seeds or seeds} seeds"
        + (f" (mean {mine.seconds:.0f} s of training)" if mine.seconds else "")
        + f", fp32 in {theirs.reached} of {theirs.seeds or seeds}"
        + (f" (mean {theirs.seconds:.0f} s)" if theirs.seconds else "")
    )
    ratio = comparison.time_to_target_ratio or Interval()
    if ratio.n >= 2 and ratio.known:
        judged = "beyond the seed-to-seed spread" if ratio.beyond_seed_spread else "within the seed-to-seed spread"
        text += (
            f". Where both reached it, {precision} got there {ratio.mean:.2f}x sooner (95% CI "
            f"{ratio.low:.2f}-{ratio.high:.2f}, {ratio.n} seeds, paired): {judged}"
        )
        if mine.cost and theirs.cost:
            text += f", at {100 * mine.cost / theirs.cost:.0f}% of fp32's cost"
    elif ratio.per_seed:
        each = " and ".join(f"{value:.2f}x" for value in ratio.per_seed.values())
        text += (
            f". In the {_SEEDS.get(ratio.n, f'{ratio.n} seeds')} where both reached it, {precision} was {each} sooner"
            + (f" ({_TWO_SEEDS} say how much sooner)" if ratio.n == 2 else "")
        )
    if all(run.reached and run.by_first_evaluation == run.reached for run in (mine, theirs)):
        text += (
            ". Every run was already past the target at its first evaluation after the start, so these "
            'times only say "before that evaluation" and cannot tell the precisions apart: use more '
            "--set compare.eval_points=N"
            + (" (or a higher --set compare.target_accuracy=X)" if headline.higher_is_better else "")
        )
    return text + "."


_TWO_SEEDS = (
    "two seeds give no meaningful 95% interval (t with one degree of freedom stretches their distance 12.7x): "
    "run with --seeds 3 or more to"
)
_SEEDS = {1: "one seed", 2: "two seeds"}


def with_interval(run: RunSummary, metric: str, digits: int = 3, ci: str = "95% CI ") -> str:
    """'0.912 [95% CI 0.897 to 0.989]': a final metric's mean over seeds and its interval; with two seeds, whose
    interval would say nothing (study/over_seeds.py), '0.912 (seeds 0.897 and 0.927)'; '-' without a value."""
    interval = run.interval(metric)
    if interval:
        return f"{interval.mean:.{digits}f} [{ci}{interval_text(metric, interval, digits)}]"
    value = run.final.get(metric)
    seeds = [seed_run.final[metric] for seed_run in run.seed_runs if metric in seed_run.final]
    if value is None or len(seeds) < 2:
        return "-" if value is None else f"{value:.{digits}f}"
    return f"{value:.{digits}f} (seeds {' and '.join(f'{v:.{digits}f}' for v in seeds)})"


def interval_text(metric: str, interval: Interval, digits: int = 3) -> str:
    """'0.897 to 0.989', cut to the metric's values (quality/registry.py bounds): a document written before
    over_seeds cut its intervals may hold an accuracy's above 1 or a Fréchet distance's below 0."""
    bounds = METRICS[metric].bounds if metric in METRICS else (-math.inf, math.inf)
    low, high = max(interval.low, bounds[0]), min(interval.high, bounds[1])
    return f"{low:.{digits}f} to {high:.{digits}f}"


def _achieved_text(precision: str, run: RunSummary, fp32_run: RunSummary, pair: dict | None) -> str:
    """The speedup the budgeted runs actually delivered (training clock per step), and whether it
    agrees with the bench's interval."""
    if run.seconds_per_step is None or fp32_run.seconds_per_step is None:
        return ""
    achieved = fp32_run.seconds_per_step / run.seconds_per_step
    text = (
        f" In the budgeted runs it made {run.steps} steps to fp32's {fp32_run.steps} "
        f"({achieved:.2f}x per step on the training clock"
    )
    if pair and "low" in pair and not pair["low"] / 1.1 <= achieved <= pair["high"] * 1.1:
        text += f", outside the bench's interval{_why_the_runs_differ(precision, run, fp32_run, pair)}"
    elif pair:
        text += f", consistent with the bench's {speedup_estimate(pair):.2f}x"
    return text + ")."


def _why_the_runs_differ(precision: str, run: RunSummary, fp32_run: RunSummary, pair: dict) -> str:
    """Each run's time per step against the bench's, so the reader sees which side moved: a run
    slower than its bench step paid per-step costs the bench does not (fresh batches, logging) or
    ran while the machine was busier."""
    if not pair.get("baseline_step_s") or not pair.get("step_s"):
        return ""
    parts = [
        f"{name} ran {step * 1e3:.0f} ms per step against the bench's {bench * 1e3:.0f} ms ({step / bench - 1:+.0%})"
        for name, step, bench in (
            (FP32, fp32_run.seconds_per_step, pair["baseline_step_s"]),
            (precision, run.seconds_per_step, pair["step_s"]),
        )
    ]
    slower = fp32_run.seconds_per_step / pair["baseline_step_s"] + run.seconds_per_step / pair["step_s"] > 2
    return (
        ": "
        + " and ".join(parts)
        + (
            ", so the runs paid per-step costs the bench does not (fresh batches from the data pipeline, logging) "
            "or met more load from the machine's other tenants"
            if slower
            else ", so the machine was less loaded during the runs than during the bench"
        )
    )
