"""`ampgan project`: bench results -> projected ms per step and cost per GPU, precision and batch size.

Measure (the op tables, traced with the bench) -> step model (pure: calibrated kernels, bandwidth, host)
-> this document -> render. Every row says it is projected, what bounds it, its band, which calibration
and datasheet row and op table it rests on; on a TF32 GPU its speedup over PyTorch's default (TF32
convolutions) comes before the one over strict fp32; the measured rows of this machine sit beside it.
"""

from __future__ import annotations

import math

from ampgan.bench.ops import OpTable
from ampgan.cost.arithmetic import cost_of_batches
from ampgan.cost.catalog import Instance, cheapest_instance
from ampgan.errors import AmpganError, one_line
from ampgan.precisions import BASELINE, FP16, FP32, NAMES, PRECISIONS, TF32, in_order
from ampgan.precisions import precision as precision_mode
from ampgan.projection.assumptions import all_assumptions, host_seconds_per_op
from ampgan.projection.composition import ComposedStep, composed_speedup, composed_step
from ampgan.projection.kernel_model import calibration_for
from ampgan.projection.step_model import DEFAULT, UNCALIBRATED_WIDENING, step_estimate
from ampgan.system.gpus import GpuSpec, gpu_table

FORMAT = "ampgan-projection/1"
DEFAULT_DEVICES = ("T4", "P100", "V100", "A100", "L4", "H100", "H200")
PROJECTED_PRECISIONS = NAMES
BATCHES_COSTED = 1e6  # the study's
_NUMBER = (int, float)
# What a reader of projection.json relies on (files/schema.py): the report's section reads these.
ROW_SHAPE = {
    "device": str,
    "precision": str,
    "batch_size": int,
    "status": str,
    "projected": bool,
    "?ms_per_step": _NUMBER,
    "?ms_low": _NUMBER,
    "?ms_high": _NUMBER,
    "?speedup": _NUMBER,
    "?speedup_low": _NUMBER,
    "?speedup_high": _NUMBER,
    "?bound": str,
    "?cost": {"fast": _NUMBER, "mid": _NUMBER, "slow": _NUMBER},
    "?fits": bool,
    "?memory_gib_at_least": _NUMBER,
    "?speedup_over_default": _NUMBER,
    "?speedup_over_default_low": _NUMBER,
    "?speedup_over_default_high": _NUMBER,
    "?calibrated": bool,
}
DOCUMENT_SHAPE = {"format": str, "model": (str, None), "traced_on": (str, None), "rows": [ROW_SHAPE]}


def table_for(precision: str, tables: dict[str, OpTable]) -> tuple[OpTable | None, str]:
    """The op table that describes `precision`'s step, and how: tf32 runs fp32's operations (only the
    matrix unit differs); fp16 and bf16 move the same bytes, so one stands in for the other."""
    if precision in tables:
        return tables[precision], f"op table traced in {precision}"
    stand_in = precision_mode(precision).stand_in
    if stand_in in tables:
        return tables[stand_in], f"{stand_in}'s op table (the same operations and bytes as {precision})"
    return None, f"no op table for {precision} or a stand-in"


def memory_at_least(memory: dict | None, precision: str, batch_size: int) -> float | None:
    """The lower bound on one step's memory in bytes (bench's step_memory), or None without one."""
    if not isinstance(memory, dict):
        return None
    per_sample = memory.get("activation_bytes_per_sample") or {}
    stand_in = precision_mode(precision).stand_in
    value = per_sample.get(precision, per_sample.get(stand_in))
    parameters = memory.get("parameters_bytes")
    if not isinstance(value, (int, float)) or not isinstance(parameters, (int, float)):
        return None
    return float(parameters) + float(value) * batch_size


def _calibration_note(gpu: GpuSpec) -> dict:
    calibration, own = calibration_for(gpu)
    tables = "; ".join(
        f"{t['file']} (CUDA {t['software'].get('cuda')}, cuDNN {t['software'].get('cudnn')})"
        for t in calibration.document.get("tables", [])
    )
    error = calibration.residuals.get("speedup_fp32_to_fp16", {})
    measured = (
        f"cross-validated on {calibration.document.get('gpu')}: fp32->fp16 kernel speedups off by "
        f"{error.get('median_speedup_error', float('nan')):.2f}x in the median, band holds "
        f"{error.get('band_coverage', float('nan')):.0%}"
    )
    if own:
        note = f"calibrated on {gpu.key}'s architecture ({calibration.architecture}: {tables}); {measured}"
    else:
        note = (
            f"NO calibration for this architecture (capability {gpu.cuda_capability[0]}.{gpu.cuda_capability[1]}): "
            f"{calibration.architecture}'s ({tables}) with this GPU's datasheet, band widened "
            f"x{UNCALIBRATED_WIDENING} each way; {measured}"
        )
    return {"architecture": calibration.architecture, "own": own, "note": note}


def has_tf32_default(gpu: GpuSpec) -> bool:
    """PyTorch runs convolutions in TF32 by default (torch.backends.cudnn.allow_tf32) where the GPU has TF32."""
    return gpu.cannot_run(TF32) is None


def project(
    tables: dict[str, OpTable],
    gpus: list[GpuSpec],
    batch_sizes: list[int],
    launch,
    *,
    precisions: tuple[str, ...] = PROJECTED_PRECISIONS,
    catalog: list[Instance] | None = None,
    memory: dict | None = None,
) -> list[dict]:
    """One row per GPU x precision x batch size: the projected ms per step with its band, its bound, its
    speedup over strict fp32 and (on a TF32 GPU) over PyTorch's default, and the cost of the study's 1M
    batches. The model: projection/step_model.py."""
    dispatch_s = host_seconds_per_op(launch)
    rows = []
    for gpu in gpus:
        instance = cheapest_instance(catalog, gpu.name)
        price = instance.price_per_hour / max(1, instance.gpu_count) if instance else None
        calibration = _calibration_note(gpu)
        for batch_size in batch_sizes:
            composed: dict[str, ComposedStep] = {}
            fp32_table, _ = table_for(BASELINE, tables)
            default = None
            if has_tf32_default(gpu) and fp32_table is not None:
                default = composed_step(fp32_table.on_cuda(), batch_size, gpu, DEFAULT)
            for name in precisions:
                row = {"device": gpu.key, "precision": name, "batch_size": batch_size, "projected": True}
                table, table_note = table_for(name, tables)
                reason = gpu.cannot_run(name) or (None if table else table_note)
                if reason:
                    rows.append({**row, "status": "not projected", "reason": reason})
                    continue
                # The kernels' own view (what bounds them, how much runs on tensor cores); the time and its band
                # come from the composition fitted end to end (composition.py).
                estimate = step_estimate(table.on_cuda(), batch_size, gpu, name, dispatch_s)
                step = composed[name] = composed_step(table.on_cuda(), batch_size, gpu, name)
                ms = {"fast": step.low * 1e3, "mid": step.seconds * 1e3, "slow": step.high * 1e3}
                row.update(
                    {
                        "status": "ok",
                        "ms_per_step": ms["mid"],
                        "ms_low": ms["fast"],
                        "ms_high": ms["slow"],
                        "bound": step.bound,
                        "seconds_by_part": {k: v for k, v in step.parts.items() if k != "seconds"},
                        "tensor_flops_share": estimate.tensor_flops_share,
                        "kernels": estimate.kernels,
                        "host_ms": step.parts["host_s"] * 1e3,
                        "flops_per_step": table.flops_at(batch_size),
                        "bytes_per_step": sum(r.bytes_at(batch_size) * r.weight for r in table.on_cuda()),
                        "calibration": f"{calibration['note']}; step composition fitted end to end, band from "
                        f"{step.note}",
                        # Calibrated: the step's generation has published end-to-end rows the composition was
                        # fitted and checked on (its kernels may still borrow another architecture's model).
                        "calibrated": step.calibrated,
                        "source": f"kernel model ({calibration['architecture']} calibration) on the {gpu.key} "
                        f"datasheet row "
                        f"({gpu.source}), composed into a step by the fit on published end-to-end training rows "
                        f"(calibration/composition.json); {table_note}, traced on {table.device} at batch "
                        f"{table.traced_at[0]} and {table.traced_at[1]}"
                        + (
                            f"; {estimate.guessed_kernels} matrix ops without recorded shapes (an older trace) "
                            "taken as square products"
                            if estimate.guessed_kernels
                            else ""
                        ),
                    }
                )
                needed = memory_at_least(memory, name, batch_size)
                if needed is not None:
                    # A lower bound: a row that does not fit cannot; one that fits may still not.
                    row["memory_gib_at_least"] = needed / 2**30
                    row["fits"] = needed <= gpu.memory_gib * 2**30
                if BASELINE in composed:
                    mid, low, high = composed_speedup(composed[BASELINE], step)
                    row.update({"speedup": mid, "speedup_low": low, "speedup_high": high})
                if default is not None:
                    if name == BASELINE:
                        row.update(
                            {
                                "default_ms_per_step": default.seconds * 1e3,
                                "default_ms_low": default.low * 1e3,
                                "default_ms_high": default.high * 1e3,
                            }
                        )
                    else:
                        mid, low, high = composed_speedup(default, step)
                        row.update(
                            {
                                "speedup_over_default": mid,
                                "speedup_over_default_low": low,
                                "speedup_over_default_high": high,
                            }
                        )
                if price is not None:
                    row["cost"] = {
                        point: cost_of_batches(ms[point] / 1e3, BATCHES_COSTED, price)["cost"]
                        for point in ("fast", "mid", "slow")
                    }
                    row["instance"] = (
                        f"{instance.label} ({instance.price_per_hour:g} {instance.currency}/h, "
                        f"{instance.date}, {instance.source})"
                    )
                rows.append(row)
    return rows


def gpu_of_instance(instance: Instance, gpus: list[GpuSpec]) -> GpuSpec | None:
    """The table's row for an instance's GPU: the row its hardware names exactly, else the first whose
    device name it matches ('A100-40GB' -> the A100 SXM 40 GB row)."""
    exact = [gpu for gpu in gpus if gpu.key.lower() == instance.hardware.lower()]
    return (exact or [gpu for gpu in gpus if instance.matches_hardware(gpu.name)] or [None])[0]


def as_bench_document(results: dict, tables: dict[str, OpTable], gpu: GpuSpec, launch) -> tuple[dict, str]:
    """The projection onto one GPU at the results' batch sizes, shaped as bench results (each
    precision's mid time as its median, the band as the speedup's interval) for `ampgan cost`; and
    one line saying how it was made."""
    sizes = sorted({c["batch_size"] for c in results.get("configs", [])}) or list(results["spec"]["batch_sizes"])
    rows = [r for r in project(tables, [gpu], sizes, launch) if r["status"] == "ok"]
    if not rows:
        raise AmpganError(f"nothing of these results can be projected onto {gpu.key}")
    configs = [
        {
            "batch_size": r["batch_size"],
            "precision": r["precision"],
            "status": "ok",
            "stats": {"median_s": r["ms_per_step"] / 1e3},
        }
        for r in rows
    ]
    speedups = [
        {
            "batch_size": r["batch_size"],
            "precision": r["precision"],
            "baseline": BASELINE,
            "estimate": r["speedup"],
            "low": r["speedup_low"],
            "high": r["speedup_high"],
        }
        for r in rows
        if r["precision"] != BASELINE and "speedup" in r
    ]
    traced = next(iter(tables.values()))
    how = (
        f"a kernel model calibrated on measured GPU kernels, over the step's operations, onto {gpu.name} "
        f"(datasheet row {gpu.key}), op tables traced on "
        f"{results.get('environment', {}).get('hardware_summary', traced.device)}; see 'ampgan project' for the band"
    )
    return {**results, "configs": configs, "speedups": speedups}, how


def measured_gpu(results: dict, gpus: dict[str, GpuSpec]) -> GpuSpec | None:
    """The table's row for the GPU that measured these results (None for a CPU or an unknown GPU)."""
    hardware = results.get("hardware") or {}
    if hardware.get("device_type") != "cuda" or not isinstance(hardware.get("name"), str):
        return None
    from ampgan.system.hardware import gpu_table_key  # noqa: PLC0415 - beside its one use

    key = gpu_table_key(hardware["name"])
    return gpus.get(key) if key else None


def measured_rows(results: dict, tables: dict[str, OpTable] | None = None, launch=None) -> list[dict]:
    """This machine's measured ms per step (the bench's medians), labelled measured. Measured on a GPU of
    the table, each row also holds the projection for that GPU and measured / projected: the check of the
    model against a measurement (nothing is scaled by it)."""
    from ampgan.system.gpus import gpu_table  # noqa: PLC0415

    device = results.get("environment", {}).get("hardware_summary") or results.get("hardware", {}).get("name")
    gpu = measured_gpu(results, gpu_table()) if tables and launch else None
    rows = []
    for config in results.get("configs", []):
        if not config.get("stats"):
            continue
        row = {
            "device": device,
            "precision": config["precision"],
            "batch_size": config["batch_size"],
            "projected": False,
            "ms_per_step": config["stats"]["median_s"] * 1e3,
            "source": "measured by ampgan bench on this machine",
        }
        if gpu is not None:
            (projected,) = project(tables, [gpu], [config["batch_size"]], launch, precisions=(config["precision"],))
            if projected["status"] == "ok":
                row.update(
                    {
                        "projected_for_it_ms": projected["ms_per_step"],
                        "projected_low_ms": projected["ms_low"],
                        "projected_high_ms": projected["ms_high"],
                        "measured_over_projected": row["ms_per_step"] / projected["ms_per_step"],
                    }
                )
        rows.append(row)
    return rows


def build_projection(
    results: dict,
    tables: dict[str, OpTable],
    gpus: list[GpuSpec],
    batch_sizes: list[int],
    launch,
    catalog: list[Instance] | None,
    catalog_source: str | None,
) -> dict:
    if not tables:
        raise AmpganError("no op table to project from: re-run 'ampgan bench' (it traces the step's operations)")
    rows = project(tables, gpus, batch_sizes, launch, catalog=catalog, memory=results.get("step_memory"))
    spec = results.get("spec", {})
    return {
        "format": FORMAT,
        "what": "PROJECTED times and costs (a kernel model calibrated on measured GPU kernels, over the step's "
        "operations), not measurements",
        "calibration_error": calibration_error_lines(),
        "model": spec.get("model"),
        "model_options": spec.get("model_options", {}),
        "dataset": spec.get("dataset"),
        "traced_on": results.get("environment", {}).get("hardware_summary"),
        "software": results.get("environment", {}).get("versions", {}),
        "batches_costed": BATCHES_COSTED,
        "price_catalog": catalog_source,
        "devices": [gpu.to_dict() for gpu in gpus],
        "assumptions": all_assumptions(launch) + fitted_quantities(),
        "op_tables": {
            name: {"kernels": t.kernels(), "traced_at": list(t.traced_at), "rows": len(t.rows)}
            for name, t in tables.items()
        },
        "rows": rows,
        "measured_here": measured_rows(results, tables, launch),
    }


def _band(low: float, mid: float, high: float, digits: int = 0) -> str:
    return f"{mid:.{digits}f} [{low:.{digits}f}-{high:.{digits}f}]"


def speedup_text(row: dict) -> str:
    """'2.10x [1.40-3.00] over the default (TF32 convolutions), 4.20x [..] over strict fp32' on a TF32 GPU,
    '2.10x [1.40-3.00] over fp32' elsewhere: PyTorch's default first, since a user who changes nothing runs it."""
    parts = []
    if "speedup_over_default" in row:
        parts.append(
            _band(row["speedup_over_default_low"], row["speedup_over_default"], row["speedup_over_default_high"], 2)
            + "x over the default (TF32 convolutions)"
        )
    if "speedup" in row:
        parts.append(
            _band(row["speedup_low"], row["speedup"], row["speedup_high"], 2)
            + "x over "
            + ("strict fp32" if parts else FP32)
        )
    return ", ".join(parts) or "-"


def fitted_quantities() -> list[dict]:
    """The step composition's fitted quantities, as assumptions are listed (the ones above them describe the
    kernel view: what bounds the step, how much of it runs on tensor cores)."""
    from ampgan.projection.composition import load_composition  # noqa: PLC0415

    composition = load_composition().document
    source = (
        f"fitted on {composition['fitted_on']['rows']} published end-to-end training rows "
        f"({composition['script']}, {composition['date']})"
    )
    units = {"launch_gap_s": "seconds", "host_per_op_s": "seconds", "watts_per_sm": "watts"}
    out = []
    for name, value in composition["parameters"]["global"].items():
        number = math.exp(value)
        out.append(
            {
                "name": f"step composition: {name}",
                "low": number,
                "mid": number,
                "high": number,
                "unit": units.get(name, "factor"),
                "source": source,
            }
        )
    return out


def composition_error_lines() -> list[str]:
    """Per GPU generation: the step composition's leave-one-model-out error on published end-to-end
    training rows (calibration/composition.json)."""
    from ampgan.projection.composition import load_composition  # noqa: PLC0415

    validation = load_composition().document["validation"]
    lines = []
    for name in [*validation["generations"], "overall"]:
        s = validation[name]
        lines.append(
            f"whole steps, {name} ({s['rows']} published rows, {s['models']} models, each predicted by a fit "
            f"without its model): AMP speedup off by {s['median_speedup_error']:.2f}x in the median, "
            f"{s['p90_speedup_error']:.2f}x at the 90th percentile; the band holds {s['coverage']:.0%} "
            f"(median width {s['median_band_width']:.2f}x); step time off by {s['median_time_error']:.2f}x"
        )
    return lines


def calibration_error_lines() -> list[str]:
    """The step composition's end-to-end error per generation, then per calibrated architecture the
    cross-validated error of the kernel model (calibration/*.json)."""
    from ampgan.projection.kernel_model import load_calibration  # noqa: PLC0415

    lines = composition_error_lines()
    for architecture in sorted({gpu.calibration for gpu in gpu_table().values() if gpu.calibration}, reverse=True):
        calibration = load_calibration(architecture)
        error = calibration.residuals["speedup_fp32_to_fp16"]
        times = calibration.residuals["time_error"]
        steps = calibration.residuals["pseudo_steps"]
        lines.append(
            f"{architecture} ({calibration.document['gpu']}, DeepBench, {error['kernels']} kernels, "
            f"{calibration.residuals['folds']}-fold cross-validated): fp32->fp16 speedup off by "
            f"{error['median_speedup_error']:.2f}x in the median, {error['p90_speedup_error']:.2f}x at the "
            f"90th percentile; its band holds {error['band_coverage']:.0%} of the measured speedups "
            f"(median width {error['median_band_ratio']:.2f}x); kernel times off by "
            f"{times[FP32]['median']:.2f}x (fp32) and {times[FP16]['median']:.2f}x (fp16) in the median; "
            f"a step's composed speedup band holds {steps['composed']['band_holds']:.0%} of "
            f"{steps['pseudo_steps']} pseudo-steps of whole DeepBench layers no fit saw (median width "
            f"{steps['composed']['median_band_ratio']:.2f}x)"
        )
    return lines


def table_text(document: dict) -> str:
    """The projection as a Markdown table, measured rows of this machine after it."""
    lines = [
        (
            f"**Projected, not measured** (a kernel model calibrated on measured GPU kernels, over the step's "
            f"operations, composed by a fit on published end-to-end training rows; model {document['model']}, "
            f"traced on {document['traced_on']}). ms per step and cost of "
            f"{document['batches_costed']:.0e} batches, mid [band]. On a TF32 GPU the speedup is first over "
            "PyTorch's default (convolutions in TF32, products in fp32), then over strict fp32."
        ),
        "",
        "| GPU | batch | precision | ms per step | speedup | bound | tensor-core share | cost | calibration |",
        "|---|---:|---|---:|---|---|---:|---:|---|",
    ]
    too_big = []
    for row in document["rows"]:
        if row["status"] != "ok":
            continue
        cost = _band(row["cost"]["fast"], row["cost"]["mid"], row["cost"]["slow"]) if "cost" in row else "no price"
        if row.get("fits") is False:
            too_big.append(
                f"{row['device']} {row['precision']} at batch {row['batch_size']} "
                f"(at least {row['memory_gib_at_least']:.1f} GiB)"
            )
        ms = _band(row["ms_low"], row["ms_per_step"], row["ms_high"], 1)
        if "default_ms_per_step" in row:
            ms += (
                f" (default, TF32 convolutions: "
                f"{_band(row['default_ms_low'], row['default_ms_per_step'], row['default_ms_high'], 1)})"
            )
        lines.append(
            f"| {row['device']} | {row['batch_size']} | {row['precision']} | {ms} | "
            f"{speedup_text(row) if row['precision'] != BASELINE else '-'} | {row['bound']} | "
            f"{row['tensor_flops_share']:.0%} | {cost} | "
            f"{'calibrated' if row.get('calibrated') else 'NOT calibrated: band widened'} |"
        )
    skipped = sorted(
        {f"{r['device']} {r['precision']}: {r['reason']}" for r in document["rows"] if r["status"] != "ok"}
    )
    if skipped:
        lines += ["", "Not projected: " + "; ".join(skipped) + "."]
    if too_big:
        lines += [
            "",
            "Does not fit in the GPU's memory (a lower bound on one step; the time is what it would take "
            "if it did): " + "; ".join(too_big) + ".",
        ]
    notes = sorted({f"{r['device']}: {r['calibration']}" for r in document["rows"] if r.get("calibration")})
    if notes:
        lines += ["", "Calibration per GPU:"] + [f"- {note}" for note in notes]
    lines += ["", "The model's error, measured on whole steps and kernels no fit saw (docs/projection.md):"] + [
        f"- {line}" for line in calibration_error_lines()
    ]
    if document["measured_here"]:
        checked = any("projected_for_it_ms" in row for row in document["measured_here"])
        lines += [
            "",
            f"Measured on this machine ({document['traced_on']}):",
            "",
            "| batch | precision | ms per step (measured) |"
            + (" projected for it | measured / projected |" if checked else ""),
            "|---:|---|---:|" + ("---:|---:|" if checked else ""),
        ]
        for row in sorted(document["measured_here"], key=lambda r: (r["batch_size"], in_order([r["precision"]]))):
            line = f"| {row['batch_size']} | {row['precision']} | {row['ms_per_step']:.1f} |"
            if checked:
                line += (
                    f" {_band(row['projected_low_ms'], row['projected_for_it_ms'], row['projected_high_ms'], 1)} | "
                    f"{row['measured_over_projected']:.2f} |"
                    if "projected_for_it_ms" in row
                    else " - | - |"
                )
            lines.append(line)
    lines += ["", "Assumptions:"] + [
        f"- {a['name']}: {a['low']:g}-{a['high']:g} {a['unit']} ({a['source']})" for a in document["assumptions"]
    ]
    return "\n".join(map(one_line, lines))  # a name holding a newline stays inside its row


def fastest_mixed(rows: list[dict], device: str, batch_size: int) -> tuple[dict, dict] | None:
    """(fp32's row, the mixed mode's row with the largest projected speedup) of one GPU at one batch
    (its row also holds the speedup over PyTorch's TF32 default where the GPU has one)."""
    mine = {
        r["precision"]: r
        for r in rows
        if r.get("status") == "ok" and r["device"] == device and r["batch_size"] == batch_size
    }
    mixed = [mine[name] for name in NAMES if PRECISIONS[name].mixed and name in mine and "speedup" in mine[name]]
    if BASELINE not in mine or not mixed:
        return None
    return mine[BASELINE], max(mixed, key=lambda r: r["speedup"])


def summary_line(document: dict, devices: tuple[str, ...] = ("T4", "V100", "A100", "H100")) -> str | None:
    """One sentence for a verdict: per batch size, each GPU's fastest mixed mode, PROJECTED: over PyTorch's
    default (TF32 convolutions) first on GPUs that have it, then over strict fp32."""
    parts = []
    for batch_size in sorted({r["batch_size"] for r in document["rows"]}):
        found = [(d, fastest_mixed(document["rows"], d, batch_size)) for d in devices]
        cells = [
            f"{d} {best['precision']} {speedup_text(best)}" + ("" if best.get("calibrated") else " (uncalibrated)")
            for d, pair in found
            if pair
            for best in pair[1:]
        ]
        if cells:
            parts.append(f"at batch {batch_size} " + "; ".join(cells))
    if not parts:
        return None
    return (
        "On GPUs this machine does not have, PROJECTED (a kernel model calibrated on DeepBench's V100 and P100 "
        "kernels, composed into this step by a fit on published end-to-end training rows, not measured), the "
        "fastest mixed mode: " + " | ".join(parts) + " (report section 'On other hardware', with the model's error)."
    )
