"""The comparison's verdict in plain language: which precision reached the quality target, how
much sooner and cheaper, and how sure the numbers are."""

from __future__ import annotations


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
        noise = (f" The step-time speedup at batch {batch} was {pair['median']:.2f}x "
                 f"(interquartile range {pair['q1']:.2f}-{pair['q3']:.2f} over {pair['rounds']} interleaved rounds)."
                 if pair else "")
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
