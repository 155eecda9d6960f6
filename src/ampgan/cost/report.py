"""`ampgan cost`: bench results + a price -> the cost table, cost.json, cost.csv, Figure 3."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from ampgan.bench.output import load_results, speedup_estimate, stamp_text
from ampgan.cost.arithmetic import cheapest_per_sample, cost_of_batches, cost_of_samples, saving
from ampgan.cost.catalog import Instance, staleness_warning
from ampgan.errors import AmpganError, one_line
from ampgan.files.atomic import write_csv_atomically, write_json_atomically
from ampgan.plotting import precision_colour, save_figure, subplots
from ampgan.precisions import BASELINE, in_order
from ampgan.speed.intervals import answers


def measured_device(results: dict) -> str:
    hardware = results["hardware"]
    return hardware["name"] if hardware["device_type"] == "cuda" else hardware["cpu_model"]


def load_same_hardware(paths: list[Path]) -> tuple[list[dict], str]:
    """Every results file, refusing a mix of machines (their times are not one cost curve)."""
    documents = [load_results(p) for p in paths]
    devices = {measured_device(d) for d in documents}
    if len(devices) > 1:
        raise AmpganError(
            f"the results were measured on different hardware ({', '.join(sorted(devices))}): cost one machine "
            f"at a time"
        )
    return documents, devices.pop()


def price_basis(
    instance: Instance | None,
    price_per_hour: float | None,
    device: str,
    assume_same_speed: bool,
    projected: str | None = None,
) -> dict:
    """The hourly price to charge one measured device, and what it rests on. `projected`: the times
    are a kernel-model projection onto the instance's GPU, and this says how they were made."""
    if price_per_hour is not None:
        if not price_per_hour > 0:
            raise AmpganError(f"--price-per-hour must be positive, got {price_per_hour}")
        return {
            "price_per_hour": price_per_hour,
            "currency": "USD",
            "label": f"{price_per_hour:g} USD/h (--price-per-hour)",
            "projection": False,
            "explanation": f"{price_per_hour:g} USD/h as given",
        }
    # Without a price, an instance (each caller gives one of the two).
    projection = bool(projected) or not instance.matches_hardware(device)
    if projection and not assume_same_speed and not projected:
        raise AmpganError(
            f"{instance.label} runs on {instance.hardware}, but these times were measured on {device}: "
            "add --assume-same-speed to project them onto its price (labelled as a projection), or bench on "
            "that hardware"
        )
    devices = max(1, instance.gpu_count)
    checked = f"checked: {instance.checked}" if instance.verified else "UNVERIFIED: no public catalog confirmed it"
    explanation = (
        f"{instance.label} {instance.price_per_hour:g} {instance.currency}/h ({instance.source}, "
        f"{instance.date}; {checked})"
    )
    if devices > 1:
        explanation += f", per GPU: 1/{devices} of the instance, assuming its other GPUs do equal work"
    if projected:
        explanation += f"; PROJECTED times, not measured: {projected}"
    elif projection:
        explanation += f"; PROJECTION: times measured on {device}, not on {instance.hardware}"
    return {
        "price_per_hour": instance.price_per_hour / devices,
        "currency": instance.currency,
        "label": instance.label,
        "projection": projection,
        "times_projected": bool(projected),
        "explanation": explanation,
        "instance": asdict(instance),
        "verified": instance.verified,
        "price_date": instance.date,
        "stale": staleness_warning(instance.date),
    }


def cost_rows(documents: list[dict], price_per_hour: float, batches: float | None, samples: float | None) -> list[dict]:
    rows = []
    for document in documents:
        for config in document["configs"]:
            if not config.get("stats"):
                continue
            seconds = config["stats"]["median_s"]
            amount = (
                cost_of_samples(seconds, config["batch_size"], samples, price_per_hour)
                if samples is not None
                else cost_of_batches(seconds, batches, price_per_hour)
            )
            rows.append(
                {
                    "batch_size": config["batch_size"],
                    "precision": config["precision"],
                    "seconds_per_batch": seconds,
                    "hours": amount["hours"],
                    "cost": amount["cost"],
                }
            )
            # a projection's band: its time's, and the hours and the cost scale with the time
            for key in ("seconds_per_batch", "hours", "cost"):
                for end, t in zip(("low", "high"), config["stats"].get("band_s", ()), strict=False):
                    rows[-1][f"{key}_{end}"] = rows[-1][key] * t / seconds
    baseline = {r["batch_size"]: r["cost"] for r in rows if r["precision"] == BASELINE}
    intervals = {(p["batch_size"], p["precision"]): p for d in documents for p in d.get("speedups", []) if "low" in p}
    for row in rows:
        if row["precision"] != BASELINE and row["batch_size"] in baseline:
            pair = intervals.get((row["batch_size"], row["precision"]))
            # A speedup s saves 1 - 1/s of the cost: with an interval, the saving's point and interval both come
            # from the bench's paired speedup (its speedup column); the two medians' ratio can lie outside that
            # interval when the load changed ('-12% [-7% to +7%]' beside a bench's '1.00x [0.93-1.08]').
            base = baseline[row["batch_size"]]
            found = saving(base, base / speedup_estimate(pair) if pair else row["cost"])
            row["saving_vs_fp32"], row["saving_percent"] = found["amount"], found["percent"]
            # which figure the saving comes from: a spreadsheet subtracting the cost columns is told why it differs
            row["saving_from"] = f"paired speedup {speedup_estimate(pair):.3f}x" if pair else "the two costs"
            # A speedup interval that is no answer (0.01x-95x from two rounds under load) would be a saving of
            # -9900% to +99%: said to be unsettled instead (speed/intervals.py answers()).
            if pair and not answers(pair["low"], pair["high"]):
                row["saving_unsettled"] = True
            elif pair:
                row.update(
                    saving_percent_low=100.0 * (1 - 1 / pair["low"]), saving_percent_high=100.0 * (1 - 1 / pair["high"])
                )
    order = in_order({r["precision"] for r in rows})
    return sorted(rows, key=lambda r: (r["batch_size"], order.index(r["precision"])))


def build_cost_document(
    documents: list[dict],
    device: str,
    basis: dict,
    batches: float | None,
    samples: float | None,
    catalog_date: str | None,
    catalog_source: str | None = None,
) -> dict:
    rows = cost_rows(documents, basis["price_per_hour"], batches, samples)
    if not rows:
        raise AmpganError("the results hold no finished configuration to cost: re-run 'ampgan bench'")
    return {
        "format": "ampgan-cost/1",
        "measured_on": device,
        "environment": documents[0].get("environment", {}),
        "stamp": stamp_text(documents[0]),  # hardware, data, model, versions, date: what every figure says
        "basis": basis,
        "catalog_date": catalog_date,
        "catalog_source": catalog_source,
        "workload": {"batches": batches} if samples is None else {"samples": samples},
        "rows": rows,
        "cheapest_per_sample": cheapest_per_sample(rows, basis["price_per_hour"]),
    }


def write_cost(document: dict, out_dir: Path) -> str:
    write_json_atomically(out_dir / "cost.json", document)
    columns = [
        "batch_size",
        "precision",
        "seconds_per_batch",
        "seconds_per_batch_low",
        "seconds_per_batch_high",
        "hours",
        "hours_low",
        "hours_high",
        "cost",
        "cost_low",
        "cost_high",
        "currency",
        "saving_vs_fp32",
        "saving_percent",
        "saving_percent_low",
        "saving_percent_high",
        "saving_from",
        "saving_unsettled",  # true where the table says 'unsettled': its speedup's band decides nothing
        "times",
    ]
    # each row says its currency and where its times come from (measured on a machine, or PROJECTED onto a
    # GPU): a CSV read without its cost.json still says which; the _low/_high columns are a projection's band
    extra = {"currency": document["basis"]["currency"], "times": origin_text(document)}
    write_csv_atomically(
        out_dir / "cost.csv", columns, [row | extra for row in document["rows"]], extrasaction="ignore"
    )
    _figure(document, out_dir / "fig3_cost.png")
    return cost_table(document)


def _workload_text(document: dict) -> str:
    workload = document["workload"]
    return f"{workload['samples']:,.0f} samples" if "samples" in workload else f"{workload['batches']:,.0f} batches"


def cost_table(document: dict) -> str:
    basis, currency = document["basis"], document["basis"]["currency"]
    unverified = "" if basis.get("verified", True) else " (unverified price)"
    # a projection's interval is its model's band (its error on whole steps), not a measurement's 95% CI
    band = " [band]" if basis.get("times_projected") else ""
    header = ("batch", "precision", "s/batch" + band, "hours" + band, f"cost {currency}" + band)
    header += ("saving vs fp32" + (band or " [95% CI]"),)
    cells = [header] + [
        (
            str(row["batch_size"]),
            row["precision"],
            _banded(row, "seconds_per_batch", ".4f"),
            _banded(row, "hours", ",.1f"),
            _banded(row, "cost", ",.2f"),
            _saving_text(row),
        )
        for row in document["rows"]
    ]
    # each column as wide as its longest cell (a band widens it), never narrower than the plain table's
    widths = [max([minimum] + [len(line[column]) for line in cells]) for column, minimum in enumerate(_WIDTHS)]
    lines = [f"cost of {_workload_text(document)} at {basis['price_per_hour']:.4g} {currency}/h per device{unverified}"]
    lines += [" ".join(f"{cell:>{width}}" for cell, width in zip(line, widths, strict=True)) for line in cells]
    best = document["cheapest_per_sample"]
    if any("saving_percent_low" in row for row in document["rows"]):
        lines.append(
            "saving vs fp32: 1 - 1/s of "
            + (
                "the projected speedup s, its band likewise"
                if band
                else "the bench's speedup s over paired rounds, its 95% CI likewise; each cost comes from its median "
                "step, so a saving need not equal the two costs' difference (cost.csv: saving_from)"
            )
        )
    lines += [
        f"cheapest per sample: {best['precision']} at batch {best['batch_size']} "
        f"({_banded(best, 'cost', '.3g', 1e6 * best['cost_per_sample'] / best['cost'])} {currency} per million "
        f"samples{', PROJECTED' if band else ''})",
        f"price: {basis['explanation']}",
    ]
    if basis.get("stale"):
        lines.append(f"warning: {basis['stale']}")
    if document.get("catalog_source"):
        lines.append(f"catalog: {document['catalog_source']}")
    lines.append(origin_text(document))
    return "\n".join(map(one_line, lines))  # a name holding a newline stays inside its row


_WIDTHS = (6, 9, 9, 10, 20, 28)  # batch, precision, s/batch, hours, cost, saving


def _saving_text(row: dict) -> str:
    """'0.80 (24% [+23% to +24%])': the saving, its percentage and its interval (signed: '[-11-1%]' reads as one
    number); empty for the baseline."""
    if "saving_vs_fp32" not in row:
        return ""
    if row.get("saving_unsettled"):
        return "unsettled"
    interval = (
        f" [{row['saving_percent_low']:+.0f}% to {row['saving_percent_high']:+.0f}%]"
        if "saving_percent_low" in row
        else ""
    )
    return f"{row['saving_vs_fp32']:,.2f} ({row['saving_percent']:.0f}%{interval})"


def _banded(row: dict, key: str, spec: str, scale: float = 1.0) -> str:
    """A row's value, and after it a projection's band: '0.72 [0.45-1.59]'."""
    low, value, high = (row.get(name, 0.0) * scale for name in (f"{key}_low", key, f"{key}_high"))
    return f"{value:{spec}}" + (f" [{low:{spec}}-{high:{spec}}]" if f"{key}_low" in row else "")


def _figure(document: dict, path: Path) -> None:
    rows = document["rows"]
    batch_sizes = sorted({r["batch_size"] for r in rows})
    precisions = in_order({r["precision"] for r in rows})
    width = 0.8 / len(precisions)
    figure, axes = subplots(figsize=(7, 4.5), dpi=120)
    for index, precision in enumerate(precisions):
        mine = [r for r in rows if r["precision"] == precision]  # by batch size: cost_rows sorts them
        xs = [batch_sizes.index(r["batch_size"]) + (index - (len(precisions) - 1) / 2) * width for r in mine]
        ys = [r["cost"] for r in mine]
        errors = (
            [[r["cost"] - r["cost_low"] for r in mine], [r["cost_high"] - r["cost"] for r in mine]]
            if all("cost_low" in r for r in mine)
            else None
        )
        bars = axes.bar(xs, ys, width, yerr=errors, capsize=3, label=precision, color=precision_colour(precision))
        axes.bar_label(  # with a band, inside the bar: above it the label would float at the band's top
            bars,
            labels=[f"{y:,.0f}" if y >= 10 else f"{y:.2f}" for y in ys],
            fontsize=7,
            **({"label_type": "center", "bbox": {"fc": "white", "ec": "none", "pad": 1}} if errors else {}),
        )
    axes.set_xticks(range(len(batch_sizes)), [str(b) for b in batch_sizes])
    axes.set(xlabel="batch size", ylabel=f"cost ({document['basis']['currency']})")
    projection = " (PROJECTION)" if document["basis"]["projection"] else ""
    axes.set_title(f"Cost of {_workload_text(document)} on {document['basis']['label']}{projection}", fontsize=10)
    axes.legend()
    axes.grid(True, axis="y", alpha=0.3)
    save_figure(figure, path, f"{origin_text(document)} | {document['basis']['explanation']}")


def origin_text(document: dict) -> str:
    """Where the times come from: measured on a machine, or PROJECTED onto a GPU (never "measured on" it),
    with the bench's stamp (an older cost.json without one: its device and torch)."""
    device, versions = document["measured_on"], document["environment"].get("versions", {})
    stamp = document.get("stamp") or f"{device} | torch {versions.get('torch', '?')}"
    return (
        f"PROJECTED onto {device.removesuffix(' (projected)')}, not measured; op tables traced on {stamp}"
        if document["basis"].get("times_projected")
        else f"measured on {stamp}"
    )
