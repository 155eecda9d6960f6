"""The study's cost stage: the bench's cost tables (cost/), the quality target, and each precision's time
and cost to reach it, per seed and as means over the seeds that reached it."""

from __future__ import annotations

from pathlib import Path

from ampgan.cost.arithmetic import cost_of_seconds, cost_to_quality
from ampgan.cost.catalog import catalog_date, cheapest_instance, find_instance, load_catalog
from ampgan.cost.report import build_cost_document, measured_device, price_basis, write_cost
from ampgan.quality.headline import default_target
from ampgan.study.document import CompareDocument, CostSection, ToTarget


def cost_stage(
    document: CompareDocument, bench_results: dict, curves: dict[str, dict[int, list[dict]]], out_dir: Path
) -> CostSection:
    """Cost tables from the bench, and time/cost to the quality target per precision and seed."""
    spec = document.spec
    device_name = measured_device(bench_results)
    catalog = load_catalog()
    # A price or an instance given is the basis; else the cheapest instance of the catalog with this device.
    given = spec.price_per_hour is not None or spec.instance is not None
    named = find_instance(catalog, spec.instance) if spec.instance else None
    instance = named if given else cheapest_instance(catalog, device_name)
    if instance is None and not given:
        return CostSection(
            basis=None,
            note=f"no catalog instance runs on {device_name}: give --instance or --set compare.price_per_hour=PRICE",
        )
    basis = price_basis(instance, spec.price_per_hour, device_name, assume_same_speed=False)
    cost_document = build_cost_document([bench_results], device_name, basis, 1e6, None, catalog_date(catalog))
    write_cost(cost_document, out_dir / "cost")
    runs = document.runs
    headline = document.headline
    metric = headline.key
    target = spec.target_accuracy if headline.higher_is_better else None
    if target is None:
        finals = [run.final[metric] for run in runs.values()]
        starts = [
            points[0][metric]
            for per_seed in curves.values()
            for points in per_seed.values()
            if points and points[0].get(metric) is not None
        ]  # each run's first evaluation
        target = default_target(headline, finals, starts, len(document.dataset.class_names))
    return CostSection(
        basis=basis,
        target=target,
        target_metric=metric,
        target_accuracy=target if headline.higher_is_better else None,
        to_target={
            precision: ToTarget.from_dict(_to_target(curves[precision], target, basis["price_per_hour"], headline))
            if target
            else None
            for precision in runs
        },
        budget={p: cost_of_seconds(run.train_seconds, basis["price_per_hour"]) for p, run in runs.items()},
        table=cost_document["rows"],
        catalog_date=cost_document["catalog_date"],
    )


def _to_target(curves: dict[int, list[dict]], target: float, price_per_hour: float, headline) -> dict:
    """One precision's time and cost to the target: per seed (None where it was not reached), and the
    means over the seeds that reached it (how many did is beside them)."""
    per_seed = {}
    for seed, points in curves.items():
        curve = [(p["train_seconds"], p[headline.key]) for p in points if p.get(headline.key) is not None]
        reached_at = cost_to_quality(curve, target, price_per_hour, headline.higher_is_better)
        if reached_at:
            # Past the target at the first evaluation after the start: the time is interpolated
            # from the start and says only "before that evaluation".
            first_past = next(i for i, (_, value) in enumerate(curve) if headline.reached(value, target))
            reached_at = reached_at | {"by_first_evaluation": first_past <= 1}
        per_seed[str(seed)] = reached_at
    reached = [r for r in per_seed.values() if r]
    return {
        "per_seed": per_seed,
        "reached": len(reached),
        "seeds": len(per_seed),
        "by_first_evaluation": sum(bool(r.get("by_first_evaluation")) for r in reached),
        "seconds": float(sum(r["seconds"] for r in reached) / len(reached)) if reached else None,
        "cost": float(sum(r["cost"] for r in reached) / len(reached)) if reached else None,
    }
