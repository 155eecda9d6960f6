"""The comparison's verdict in plain language: which precision reached the quality target, how
much sooner and cheaper, and how sure the numbers are."""

from __future__ import annotations

from ampgan.bench.output import speedup_estimate, speedup_text


def verdict(document: dict, bench_speedups: list[dict]) -> list[str]:
    """Plain-language conclusions from a comparison document and its bench's speedups, each with
    its uncertainty. Computed once by `ampgan compare` and stored in compare.json."""
    cost, runs = document.get("cost") or {}, document["runs"]
    hardware = document["environment"]["hardware_summary"].split(",")[0]
    lines = []
    target = cost.get("target_accuracy")
    to_target = cost.get("to_target") or {}
    baseline = to_target.get("fp32")
    speedups = {(s["batch_size"], s["precision"]): s for s in bench_speedups}
    batch = document["spec"]["batch_size"]
    for precision, run in runs.items():
        if precision == "fp32":
            continue
        reached = to_target.get(precision)
        pair = speedups.get((batch, precision))
        noise = (f" On the bench, {precision}'s training step was faster than fp32's at batch {batch} by "
                 f"{speedup_text(pair)}." if pair else "")
        noise += _achieved_text(precision, run, runs["fp32"], pair)
        if target is None:
            lines.append(f"On this {hardware}, neither precision's samples were recognised clearly above chance "
                         f"(final evaluator accuracy: {precision} {run['final']['evaluator_accuracy']:.2f}, fp32 "
                         f"{runs['fp32']['final']['evaluator_accuracy']:.2f}): train longer before comparing quality.{noise}")
            continue
        if reached is None:
            lines.append(f"On this {hardware}, {precision} did not reach the target evaluator accuracy within the "
                         f"budget; its final accuracy was {run['final']['evaluator_accuracy']:.2f} against fp32's "
                         f"{runs['fp32']['final']['evaluator_accuracy']:.2f}.{noise}")
            continue
        text = f"On this {hardware}, {precision} reached evaluator accuracy {target:.2f} in {reached['seconds']:.0f} s of training"
        if baseline:
            text += (f", {baseline['seconds'] / reached['seconds']:.1f}x sooner than fp32 ({baseline['seconds']:.0f} s), "
                     f"at {100 * reached['cost'] / baseline['cost']:.0f}% of the cost")
        else:
            text += ", while fp32 did not reach it within the same budget"
        lines.append(text + "." + noise)
    spec = document["spec"]
    interval = spec["time_budget_s"] / spec["eval_points"]
    lines.append(f"Times to the target are interpolated between evaluations {interval:.0f} s of training apart, and GAN "
                 "quality curves are not monotonic (see the quality figure). Quality numbers come from one training "
                 "run per precision: differences of a few hundredths in accuracy are within run-to-run noise; repeat "
                 "with other --seed values (and more --eval-points) before relying on them.")
    return lines


def _achieved_text(precision: str, run: dict, fp32_run: dict, pair: dict | None) -> str:
    """The speedup the budgeted runs actually delivered (training clock per step), and whether it
    agrees with the bench's interval."""
    if "seconds_per_step" not in run or "seconds_per_step" not in fp32_run:
        return ""
    achieved = fp32_run["seconds_per_step"] / run["seconds_per_step"]
    text = (f" In the budgeted runs it made {run['steps']} steps to fp32's {fp32_run['steps']} "
            f"({achieved:.2f}x per step on the training clock")
    if pair and "low" in pair and not pair["low"] / 1.1 <= achieved <= pair["high"] * 1.1:
        text += f", outside the bench's interval{_why_the_runs_differ(precision, run, fp32_run, pair)}"
    elif pair:
        text += f", consistent with the bench's {speedup_estimate(pair):.2f}x"
    return text + ")."


def _why_the_runs_differ(precision: str, run: dict, fp32_run: dict, pair: dict) -> str:
    """Each run's time per step against the bench's, so the reader sees which side moved: a run
    slower than its bench step paid per-step costs the bench does not (fresh batches, logging) or
    ran while the machine was busier."""
    if not pair.get("baseline_step_s") or not pair.get("step_s"):
        return ""
    parts = []
    for name, step, bench in (("fp32", fp32_run["seconds_per_step"], pair["baseline_step_s"]),
                              (precision, run["seconds_per_step"], pair["step_s"])):
        parts.append(f"{name} ran {step * 1e3:.0f} ms per step against the bench's {bench * 1e3:.0f} ms "
                     f"({step / bench - 1:+.0%})")
    return ": " + " and ".join(parts) + (", so the runs met other load or per-step costs than the bench "
                                         "(fresh batches from the data pipeline, logging)")
