"""`ampgan project`: bench results -> projected ms per step and cost per GPU, precision and batch size.

Measure (the op tables, traced with the bench) -> step model (pure: calibrated kernels, bandwidth, host)
-> this document -> render. Every row says it is projected, what bounds it, its band, which calibration
and datasheet row and op table it rests on; on a TF32 GPU its speedup over PyTorch's default (TF32
convolutions) comes before the one over strict fp32; the measured rows of this machine sit beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, is_dataclass, replace

from ampgan.bench.ops import OpTable
from ampgan.cost.arithmetic import cost_of_batches
from ampgan.cost.catalog import Instance, cheapest_instance
from ampgan.data.registry import DATASET_NAME
from ampgan.errors import AmpganError, one_line
from ampgan.files.records import shape_of, to_json
from ampgan.files.schema import OneOf, OrNull, check_shape
from ampgan.gan.registry import MODEL_NAME
from ampgan.precisions import BASELINE, FP16, FP32, NAMES, PRECISIONS, TF32, in_order
from ampgan.projection.assumptions import BANDWIDTH_FRACTION, LAUNCH_GAP, Assumption
from ampgan.projection.composition import ComposedStep, composed_speedup, composed_step, load_composition
from ampgan.projection.kernel_model import calibration_for, load_calibration
from ampgan.projection.step_model import DEFAULT, UNCALIBRATED_WIDENING, step_estimate
from ampgan.system.gpus import GpuSpec, gpu_table
from ampgan.system.hardware import gpu_table_key
from ampgan.training.precision import PRECISION_NAME

FORMAT = "ampgan-projection/1"
DEFAULT_DEVICES = ("T4", "P100", "V100", "A100", "L4", "H100", "H200")
BATCHES_COSTED = 1e6  # the study's


@dataclass(frozen=True)
class Cost:
    """The cost of the study's 1M batches at the band's fast end, its mid and its slow end, in its catalog's
    currency (a projection written before it said one: USD, the only one the catalogs held then)."""

    fast: float
    mid: float
    slow: float
    currency: str = "USD"


@dataclass(frozen=True, kw_only=True)
class Row:
    """One GPU x precision x batch size of projection.json, as it is written and read back (a field left at
    None is not written: a row that was not projected has a reason instead of times)."""

    device: str
    precision: str = field(metadata={"shape": PRECISION_NAME})
    batch_size: int
    projected: bool
    status: str
    reason: str | None = None
    ms_per_step: float | None = None
    ms_low: float | None = None
    ms_high: float | None = None
    bound: str | None = None
    seconds_by_part: dict[str, float] | None = None
    tensor_flops_share: float | None = None
    kernels: float | None = None
    host_ms: float | None = None
    flops_per_step: float | None = None
    bytes_per_step: float | None = None
    calibration: str | None = None
    # Calibrated: the step's generation has published end-to-end rows the composition was fitted and checked
    # on (its kernels may still borrow another architecture's model: kernels_calibrated says).
    calibrated: bool | None = None
    kernels_calibrated: bool | None = None
    source: str | None = None
    # A lower bound: a row that does not fit cannot; one that fits may still not.
    memory_gib_at_least: float | None = None
    fits: bool | None = None
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    default_ms_per_step: float | None = None  # fp32's row on a TF32 GPU: PyTorch's default (TF32 convolutions)
    default_ms_low: float | None = None
    default_ms_high: float | None = None
    speedup_over_default: float | None = None
    speedup_over_default_low: float | None = None
    speedup_over_default_high: float | None = None
    cost: Cost | None = None
    instance: str | None = None


@dataclass(frozen=True, kw_only=True)
class Measured:
    """One of this machine's measured configurations (the bench's median), and, measured on a GPU of the table,
    the projection for it: the check of the model against a measurement (nothing is scaled by it)."""

    device: str | None
    precision: str = field(metadata={"shape": PRECISION_NAME})
    batch_size: int
    projected: bool
    ms_per_step: float
    source: str
    projected_for_it_ms: float | None = None
    projected_low_ms: float | None = None
    projected_high_ms: float | None = None
    measured_over_projected: float | None = None


@dataclass(frozen=True, kw_only=True)
class Projection:
    """projection.json: what a reader relies on is declared here and checked when read (files/records.py)."""

    format: str
    what: str = ""
    calibration_error: list[str] | None = None  # projections before the step composition have none
    model: str | None = field(metadata={"shape": OrNull(MODEL_NAME)})
    model_options: dict = field(default_factory=dict)
    dataset: str | None = field(default=None, metadata={"shape": OrNull(DATASET_NAME)})
    traced_on: str | None
    software: dict = field(default_factory=dict)
    batches_costed: float = BATCHES_COSTED
    price_catalog: str | None = None
    devices: list[dict] = field(default_factory=list)
    assumptions: list[Assumption] = field(default_factory=list)
    op_tables: dict = field(default_factory=dict)
    rows: list[Row]
    measured_here: list[Measured] = field(default_factory=list)


def as_written(value):
    """A record as projection.json holds it (its records as tables); a field at its None default is left out."""
    if is_dataclass(value):
        return {
            f.name: as_written(getattr(value, f.name))
            for f in fields(value)
            if getattr(value, f.name) is not None or f.default is not None
        }
    return [as_written(item) for item in value] if isinstance(value, list) else value


# A projected figure and the band it is never shown without: a row that has one and lacks the other is damaged
# (the report read ms_low of an 'ok' row and ended in a KeyError traceback).
_BANDS = {
    "ms_per_step": ("ms_low", "ms_high"),
    "speedup": ("speedup_low", "speedup_high"),
    "default_ms_per_step": ("default_ms_low", "default_ms_high"),
    "speedup_over_default": ("speedup_over_default_low", "speedup_over_default_high"),
}


def check_projection(document, origin: str, fix: str) -> dict:
    """A projection.json read back, checked against the records above (one error line naming the field), and
    every projected row's figures against their bands: an 'ok' row has its step time, each figure its band."""
    check_shape(document, shape_of(Projection), origin, fix)
    # A row is of a GPU the document describes (a user's --gpus row included): another name has no datasheet here.
    described = OneOf("a GPU of its devices", {str(device.get("key")) for device in document["devices"]})
    check_shape(document, {"rows": [{"device": described}]}, origin, fix)
    for index, row in enumerate(document["rows"]):
        wanted = ["ms_per_step"] if row["status"] == "ok" else []
        wanted += [end for key, ends in _BANDS.items() if key in row for end in ends]
        missing = next((key for key in wanted if not isinstance(row.get(key), (int, float))), None)
        if missing is not None:
            raise AmpganError(f"{origin} is damaged or foreign (rows[{index}].{missing} is missing): {fix}")
    return document


def table_for(precision: str, tables: dict[str, OpTable]) -> tuple[OpTable | None, str]:
    """The op table that describes `precision`'s step, and how: tf32 runs fp32's operations (only the
    matrix unit differs); fp16 and bf16 move the same bytes, so one stands in for the other."""
    if precision in tables:
        return tables[precision], f"op table traced in {precision}"
    stand_in = PRECISIONS[precision].stand_in
    if stand_in in tables:
        return tables[stand_in], f"{stand_in}'s op table (the same operations and bytes as {precision})"
    return None, f"no op table for {precision} or a stand-in"


def memory_at_least(memory: dict | None, precision: str, batch_size: int) -> float | None:
    """The lower bound on one step's memory in bytes (bench's step_memory), or None without one."""
    memory = memory if isinstance(memory, dict) else {}
    per_sample = memory.get("activation_bytes_per_sample") or {}
    value = per_sample.get(precision, per_sample.get(PRECISIONS[precision].stand_in))
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
    return {
        "architecture": calibration.architecture,
        "own": own,
        "note": f"kernels: calibrated on {gpu.key}'s architecture ({calibration.architecture}: {tables}); {measured}"
        if own
        else f"kernels: NO calibration for this architecture (capability "
        f"{gpu.cuda_capability[0]}.{gpu.cuda_capability[1]}): "
        f"{calibration.architecture}'s ({tables}) with this GPU's datasheet, band widened "
        f"x{UNCALIBRATED_WIDENING} each way; {measured}",
    }


def projected_rows(
    tables: dict[str, OpTable],
    gpus: list[GpuSpec],
    batch_sizes: list[int],
    launch: Assumption,
    precisions: tuple[str, ...] = NAMES,
    catalog: list[Instance] | None = None,
    memory: dict | None = None,
) -> list[Row]:
    """One row per GPU x precision x batch size (projection.json holds each as_written): the projected ms per step
    with its band, its bound, its speedup over strict fp32 and (on a TF32 GPU) over PyTorch's default, and the cost
    of the study's 1M batches. The model: projection/step_model.py."""
    rows = []
    for gpu in gpus:
        instance = cheapest_instance(catalog, gpu.name)
        calibration = _calibration_note(gpu)
        # PyTorch runs convolutions in TF32 by default (torch.backends.cudnn.allow_tf32) where the GPU has TF32.
        fp32_table = tables.get(BASELINE) if gpu.cannot_run(TF32) is None else None
        for batch_size in batch_sizes:
            composed: dict[str, ComposedStep] = {}
            default = composed_step(fp32_table.on_cuda(), batch_size, gpu, DEFAULT) if fp32_table else None
            for name in precisions:
                row = Row(device=gpu.key, precision=name, batch_size=batch_size, projected=True, status="ok")
                table, table_note = table_for(name, tables)
                reason = gpu.cannot_run(name) or (None if table else table_note)
                if reason:
                    rows.append(replace(row, status="not projected", reason=reason))
                    continue
                step = composed[name] = composed_step(table.on_cuda(), batch_size, gpu, name)
                estimate = step_estimate(table.on_cuda(), batch_size, gpu, name, launch.mid)
                needed = memory_at_least(memory, name, batch_size)
                row = replace(
                    row,
                    **_kernel_view(step, estimate, table, table_note, batch_size, gpu, calibration),
                    memory_gib_at_least=None if needed is None else needed / 2**30,
                    fits=None if needed is None else needed <= gpu.memory_gib * 2**30,
                    **_speedups(step, composed.get(BASELINE), default, name == BASELINE),
                )
                rows.append(_priced(row, instance))
    return rows


def _kernel_view(step, estimate, table, table_note, batch_size, gpu, calibration) -> dict:
    """A projected row's time and band (from the composition fitted end to end: composition.py) and the
    kernels' own view: what bounds them, how much runs on tensor cores, what the projection rests on."""
    guessed = (
        f"; {estimate.guessed_kernels} matrix ops whose kernels are not described (a grouped convolution, an older "
        "trace) taken as square products"
        if estimate.guessed_kernels
        else ""
    )
    return {
        **_band_fields("ms_per_step", (step.seconds * 1e3, step.low * 1e3, step.high * 1e3)),
        "bound": step.bound,
        "seconds_by_part": {k: v for k, v in step.parts.items() if k != "seconds"},
        "tensor_flops_share": estimate.tensor_flops_share,
        "kernels": estimate.kernels,
        "host_ms": step.parts["host_s"] * 1e3,
        "flops_per_step": table.flops_at(batch_size),
        "bytes_per_step": sum(r.bytes_at(batch_size) * r.weight for r in table.on_cuda()),
        "calibration": f"{calibration['note']}; whole steps: composition fitted end to end, band from {step.note}",
        "calibrated": step.calibrated,
        "kernels_calibrated": calibration["own"],
        "source": f"kernel model ({calibration['architecture']} calibration) on the {gpu.key} datasheet row "
        f"({gpu.source}), composed into a step by the fit on published end-to-end training rows "
        f"(calibration/composition.json); {table_note}, traced on {table.device} at batch "
        f"{table.traced_at[0]} and {table.traced_at[1]}{guessed}",
    }


def _speedups(step: ComposedStep, baseline: ComposedStep | None, default: ComposedStep | None, is_fp32: bool) -> dict:
    """The speedup over strict fp32 (its band), and on a TF32 GPU fp32's row holds PyTorch's default's time
    and every other row its speedup over that default."""
    out = _band_fields("speedup", composed_speedup(baseline, step)) if baseline is not None else {}
    if default is not None and is_fp32:
        return out | _band_fields("default_ms_per_step", (default.seconds * 1e3, default.low * 1e3, default.high * 1e3))
    return out | (_band_fields("speedup_over_default", composed_speedup(default, step)) if default else {})


def _band_fields(name: str, band: tuple) -> dict:
    """(mid, low, high) as a row's NAME and the ends of its band, as _BANDS names them."""
    return dict(zip((name, *_BANDS[name]), band))


def _priced(row: Row, instance: Instance | None) -> Row:
    """The row with the cost of the study's batches at the cheapest catalog price per GPU, if there is one."""
    if instance is None:
        return row
    price = instance.price_per_hour / max(1, instance.gpu_count)
    fast, mid, slow = (
        cost_of_batches(ms / 1e3, BATCHES_COSTED, price)["cost"] for ms in (row.ms_low, row.ms_per_step, row.ms_high)
    )
    return replace(
        row,
        cost=Cost(fast, mid, slow, instance.currency),
        instance=f"{instance.label} ({instance.price_per_hour:g} {instance.currency}/h, {instance.date}, "
        f"{instance.source})",
    )


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
    rows = [r for r in projected_rows(tables, [gpu], sizes, launch) if r.status == "ok"]
    if not rows:
        raise AmpganError(f"nothing of these results can be projected onto {gpu.key}")
    configs = [
        {
            "batch_size": r.batch_size,
            "precision": r.precision,
            "status": "ok",
            "stats": {"median_s": r.ms_per_step / 1e3, "band_s": [r.ms_low / 1e3, r.ms_high / 1e3]},
        }
        for r in rows
    ]
    speedups = [
        {
            "batch_size": r.batch_size,
            "precision": r.precision,
            "baseline": BASELINE,
            "estimate": r.speedup,
            "low": r.speedup_low,
            "high": r.speedup_high,
        }
        for r in rows
        if r.precision != BASELINE and r.speedup is not None
    ]
    traced_on = results.get("environment", {}).get("hardware_summary", next(iter(tables.values())).device)
    how = (
        f"a kernel model calibrated on measured GPU kernels, over the step's operations, onto {gpu.name} "
        f"(datasheet row {gpu.key}), op tables traced on {traced_on}; see 'ampgan project' for the band"
    )
    return {**results, "configs": configs, "speedups": speedups}, how


def measured_gpu(results: dict, gpus: dict[str, GpuSpec]) -> GpuSpec | None:
    """The table's row for the GPU that measured these results (None for a CPU or an unknown GPU)."""
    hardware = results.get("hardware") or {}
    if hardware.get("device_type") != "cuda" or not isinstance(hardware.get("name"), str):
        return None
    return gpus.get(gpu_table_key(hardware["name"]))  # None: a GPU the table does not know


def measured_rows(results: dict, tables: dict[str, OpTable] | None = None, launch=None) -> list[Measured]:
    """This machine's measured ms per step (the bench's medians), labelled measured. Measured on a GPU of
    the table, each row also holds the projection for that GPU and measured / projected: the check of the
    model against a measurement (nothing is scaled by it)."""
    device = results.get("environment", {}).get("hardware_summary") or results.get("hardware", {}).get("name")
    gpu = measured_gpu(results, gpu_table()) if tables and launch else None
    rows = []
    for config in results.get("configs", []):
        if not config.get("stats"):
            continue
        row = Measured(
            device=device,
            precision=config["precision"],
            batch_size=config["batch_size"],
            projected=False,
            ms_per_step=config["stats"]["median_s"] * 1e3,
            source="measured by ampgan bench on this machine",
        )
        if gpu is not None:
            (projected,) = projected_rows(tables, [gpu], [config["batch_size"]], launch, (config["precision"],))
            if projected.status == "ok":
                row = replace(
                    row,
                    projected_for_it_ms=projected.ms_per_step,
                    projected_low_ms=projected.ms_low,
                    projected_high_ms=projected.ms_high,
                    measured_over_projected=row.ms_per_step / projected.ms_per_step,
                )
        rows.append(row)
    return rows


def build_projection(
    results: dict,
    tables: dict[str, OpTable],
    gpus: list[GpuSpec],
    batch_sizes: list[int],
    launch: Assumption,
    catalog: list[Instance] | None,
    catalog_source: str | None,
) -> dict:
    """projection.json's content: every row, what it rests on, and this machine's measured rows."""
    if not tables:
        raise AmpganError("no op table to project from: re-run 'ampgan bench' (it traces the step's operations)")
    spec, environment = results.get("spec", {}), results.get("environment", {})
    return as_written(
        Projection(
            format=FORMAT,
            what="PROJECTED times and costs (a kernel model calibrated on measured GPU kernels, over the step's "
            "operations), not measurements",
            calibration_error=calibration_error_lines(),
            model=spec.get("model"),
            model_options=spec.get("model_options", {}),
            dataset=spec.get("dataset"),
            traced_on=environment.get("hardware_summary"),
            software=environment.get("versions", {}),
            price_catalog=catalog_source,
            devices=[to_json(gpu) for gpu in gpus],  # as the datasheet row has it (gpus.csv)
            assumptions=[BANDWIDTH_FRACTION, LAUNCH_GAP, launch, *fitted_quantities()],
            op_tables={
                name: {"kernels": t.kernels(), "traced_at": list(t.traced_at), "rows": len(t.rows)}
                for name, t in tables.items()
            },
            rows=projected_rows(tables, gpus, batch_sizes, launch, catalog=catalog, memory=results.get("step_memory")),
            measured_here=measured_rows(results, tables, launch),
        )
    )


def _band(low: float, mid: float, high: float, digits: int = 0) -> str:
    return f"{mid:.{digits}f} [{low:.{digits}f}-{high:.{digits}f}]"


def ms_text(row: dict, prefix: str = "") -> str:
    """A projected step's milliseconds and band, '12.3 [8.1-25.0]' (`prefix` 'default_': PyTorch's default's)."""
    return _band(row[f"{prefix}ms_low"], row[f"{prefix}ms_per_step"], row[f"{prefix}ms_high"], 1)


def cost_text(cost: dict) -> str:
    """A projected cost and its band, '2.69 [1.70-6.01]', '1,234 [800-2,900]': cents below 10 (0.75 printed as
    '1 [0-2]' said nothing), whole units from 10 up."""
    digits = 2 if cost["mid"] < 10 else 0
    return f"{cost['mid']:,.{digits}f} [{cost['fast']:,.{digits}f}-{cost['slow']:,.{digits}f}]"


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


def fitted_quantities() -> list[Assumption]:
    """The step composition's fitted quantities, as assumptions are listed (the ones above them describe the
    kernel view: what bounds the step, how much of it runs on tensor cores)."""
    composition = load_composition().document
    source = (
        f"fitted on {composition['fitted_on']['rows']} published end-to-end training rows "
        f"({composition['script']}, {composition['date']})"
    )
    units = {"launch_gap_s": "seconds", "host_per_op_s": "seconds", "watts_per_sm": "watts"}
    return [
        Assumption(
            name=f"step composition: {name}",
            low=math.exp(value),
            mid=math.exp(value),
            high=math.exp(value),
            unit=units.get(name, "factor"),
            source=source,
        )
        for name, value in composition["parameters"]["global"].items()
    ]


def calibration_error_lines() -> list[str]:
    """Per GPU generation, the step composition's leave-one-model-out error on published end-to-end training
    rows (calibration/composition.json); then per calibrated architecture the cross-validated error of the
    kernel model (calibration/*.json)."""
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


def software_text(document: dict) -> str:
    """The software a projection's step was traced with, as its table and figure say it."""
    software = document.get("software", {})
    return f"torch {software.get('torch', '?')}, ampgan {software.get('ampgan', '?')}"


def table_text(document: dict) -> str:
    """The projection as a Markdown table, measured rows of this machine after it."""
    lines = [
        (
            f"**Projected, not measured** (a kernel model calibrated on measured GPU kernels, over the step's "
            f"operations, composed by a fit on published end-to-end training rows; model {document['model']}, "
            f"traced on {document['traced_on']} with {software_text(document)}). ms per step and cost of "
            f"{document['batches_costed']:,.0f} batches at the cheapest catalog instance with that GPU "
            "(projection.json and projection.csv name it and its price), mid [band]. On a TF32 GPU the speedup "
            "is first over "
            "PyTorch's default (convolutions in TF32, products in fp32), then over strict fp32."
        ),
        "",
        "| GPU | batch | precision | ms per step | speedup | bound | tensor-core share | cost | calibration |",
        "|---|---:|---|---:|---|---|---:|---:|---|",
    ]
    ok = [row for row in document["rows"] if row["status"] == "ok"]
    lines += map(_table_row, ok)
    skipped = sorted(
        {f"{r['device']} {r['precision']}: {r['reason']}" for r in document["rows"] if r["status"] != "ok"}
    )
    if skipped:
        lines += ["", "Not projected: " + "; ".join(skipped) + "."]
    too_big = [
        f"{r['device']} {r['precision']} at batch {r['batch_size']} (at least {r['memory_gib_at_least']:.1f} GiB)"
        for r in ok
        if r.get("fits") is False
    ]
    if too_big:
        lines += [
            "",
            "Does not fit in the GPU's memory (a lower bound on one step; the time is what it would take "
            "if it did): " + "; ".join(too_big) + ".",
        ]
    notes: dict[str, list[str]] = {}  # one line per GPU and basis, not one per row that repeats it
    for r in filter(lambda r: r.get("calibration"), document["rows"]):
        base, _, spans = r["calibration"].partition("; also spans x")
        notes.setdefault(f"{r['device']}: {base}", []).append(spans)
    if notes:
        lines += ["", "Calibration per GPU:"] + [f"- {note}{_widest(spans)}" for note, spans in sorted(notes.items())]
    lines += [
        "",
        "The model's error, measured on whole steps and kernels no fit saw (docs/projection.md):",
        *(f"- {line}" for line in calibration_error_lines()),
        *_measured_lines(document),
        "",
        "Assumptions:",
        *(
            f"- {a['name']}: {a['low']:g}"
            + (f"-{a['high']:g}" if a["high"] != a["low"] else "")  # a fitted value
            + f" {a['unit']} ({a['source']})"
            for a in document["assumptions"]
        ),
    ]
    return "\n".join(map(one_line, lines))  # a name holding a newline stays inside its row


def _table_row(row: dict) -> str:
    """One projected row of table_text's table."""
    cost = f"{cost_text(row['cost'])} {row['cost'].get('currency', 'USD')}" if "cost" in row else "no price"
    ms = ms_text(row)
    if "default_ms_per_step" in row:
        ms += f" (default, TF32 convolutions: {ms_text(row, 'default_')})"
    return (
        f"| {row['device']} | {row['batch_size']} | {row['precision']} | {ms} | "
        f"{speedup_text(row) if row['precision'] != BASELINE else '-'} | {row['bound']} | "
        f"{row['tensor_flops_share']:.0%} | {cost} | {calibration_cell(row)} |"
    )


def _widest(spans: list[str]) -> str:
    """Of a GPU's rows whose band also spans an unmeasured kernel term, the widest, and how many they are."""
    widest = max(filter(None, spans), key=lambda text: abs(math.log(float(text.split(" ")[0]))), default="")
    return widest and f"; in {sum(map(bool, spans))} of its {len(spans)} rows also spans, at most, x{widest}"


def calibration_cell(row: dict) -> str:
    """What a row's band rests on, in the words of its note: whole steps of its GPU's generation (the band)
    and, apart, the kernels, which may borrow another architecture's model."""
    return ("calibrated on whole steps" if row.get("calibrated") else "NOT calibrated: band widened") + (
        "" if row.get("kernels_calibrated", True) else "; kernels: another architecture's model"
    )


def _measured_lines(document: dict) -> list[str]:
    """The table of this machine's measured rows, each beside its projection where it has one."""
    if not document["measured_here"]:
        return []
    checked = any("projected_for_it_ms" in row for row in document["measured_here"])
    lines = [
        "",
        f"Measured on this machine ({document['traced_on']}):",
        "",
        "| batch | precision | ms per step (measured) |"
        + (" projected for it | measured / projected |" if checked else ""),
        "|---:|---|---:|" + ("---:|---:|" if checked else ""),
    ]
    for row in sorted(document["measured_here"], key=lambda r: (r["batch_size"], in_order([r["precision"]]))):
        line = f"| {row['batch_size']} | {row['precision']} | {row['ms_per_step']:.1f} |"
        if checked and "projected_for_it_ms" in row:
            line += (
                f" {_band(row['projected_low_ms'], row['projected_for_it_ms'], row['projected_high_ms'], 1)} | "
                f"{row['measured_over_projected']:.2f} |"
            )
        elif checked:
            line += " - | - |"
        lines.append(line)
    return lines


def fastest_mixed(rows: list[dict], device: str, batch_size: int) -> tuple[dict, dict] | None:
    """(fp32's row, the mixed mode's row with the largest projected speedup) of one GPU at one batch
    (its row also holds the speedup over PyTorch's TF32 default where the GPU has one)."""
    mine = {
        r["precision"]: r
        for r in rows
        if r.get("status") == "ok" and r["device"] == device and r["batch_size"] == batch_size
    }
    mixed = [mine[name] for name in NAMES if PRECISIONS[name].mixed and name in mine and "speedup" in mine[name]]
    return (mine[BASELINE], max(mixed, key=lambda r: r["speedup"])) if BASELINE in mine and mixed else None


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
