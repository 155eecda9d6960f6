"""The study's project stage: its step projected onto GPUs this machine does not have (projection/), at the
study's batch size and at 2048. A projection that fails costs the study nothing but its section."""

from __future__ import annotations

from pathlib import Path

from ampgan.bench.op_tables import trace_op_tables, untraced
from ampgan.bench.ops import OpTable
from ampgan.bench.spec import BenchSpec
from ampgan.cost.catalog import load_catalog
from ampgan.errors import first_words
from ampgan.files.atomic import write_json_atomically
from ampgan.projection.assumptions import launch_assumption, measure_dispatch_seconds
from ampgan.projection.document import DEFAULT_DEVICES, build_projection, summary_line
from ampgan.projection.output import write_projection
from ampgan.projection.tables import traced_step
from ampgan.study.progress import or_note
from ampgan.study.spec import CompareSpec
from ampgan.system.environment import environment_stamp
from ampgan.system.gpus import gpu_spec

PROJECTED_BATCH_SIZES = (2048,)  # besides the study's own: the batch of the published study's T4 result


def project_elsewhere(spec: CompareSpec, dataset, bench_results: dict | None, out_dir: Path, device) -> dict:
    """projection/ of the study: its step projected onto the table's GPUs at the study's batch size and
    at 2048 (the kernel model over the bench's op tables, or over a trace made here when there is no bench).
    {"path": ..} when written, {"note": why not} otherwise: a projection that fails costs the study
    nothing but its section."""
    return or_note(
        lambda: _project_elsewhere(spec, dataset, bench_results, out_dir, device),
        lambda error: {"note": f"not projected: {type(error).__name__}: {first_words(str(error), 200)}"},
    )


def _project_elsewhere(spec: CompareSpec, dataset, bench_results: dict | None, out_dir: Path, device) -> dict:
    environment = environment_stamp(device)
    if bench_results is None:
        traced = trace_op_tables(BenchSpec(base=spec.base), dataset, device)
        bench_results = traced_step(
            {
                "model": spec.base.model.name,
                "model_options": dict(spec.base.model.options),
                "dataset": spec.base.data.dataset,
                "batch_sizes": [spec.batch_size],
            },
            environment,
            traced,
        )
        if traced.get("op_tables"):  # what `ampgan project` reads for other GPUs and batch sizes
            write_json_atomically(out_dir / "projection" / "op_tables.json", bench_results)
    stored = bench_results.get("op_tables") or {}
    if not stored:
        return {
            "note": f"not projected: no op table of the step ({untraced(bench_results) or 'the bench predates them'})"
        }
    try:
        tables = {name: OpTable.from_dict(table) for name, table in stored.items()}
    except ValueError as error:
        return {"note": f"not projected: {error}"}
    sizes = sorted({spec.batch_size, *PROJECTED_BATCH_SIZES})
    projection = build_projection(
        bench_results,
        tables,
        [gpu_spec(name) for name in DEFAULT_DEVICES],
        sizes,
        launch_assumption(measure_dispatch_seconds(), environment["hardware_summary"]),
        load_catalog(),
        "ampgan's built-in catalog (src/ampgan/cost/prices.csv)",
    )
    write_projection(projection, out_dir / "projection")
    return {
        "path": "projection/projection.json",
        "batch_sizes": sizes,
        "devices": list(DEFAULT_DEVICES),
        "line": summary_line(projection),
    }
