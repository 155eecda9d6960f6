"""`ampgan bench`: time per batch vs batch size for each precision (the study's Figures 1 and 2)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import click

from ampgan import STARTED_AT
from ampgan.bench.output import incomplete_text, load_results, render, table, time_spent_text
from ampgan.bench.spec import BenchSpec
from ampgan.bench.to_folder import bench_summary, bench_to_folder, check_bench, refuse_what_measured_nothing
from ampgan.cli.options import (
    DATA_AND_MODEL,
    ShellPath,
    default_out,
    given_changes,
    out_options,
    own_values,
    precisions_given,
    spec_options,
)
from ampgan.config import build_config
from ampgan.errors import AmpganError, say, say_json
from ampgan.precisions import NAMES as PRECISION_NAMES
from ampgan.projection.from_results import results_path
from ampgan.sections import with_settings
from ampgan.training.distributed import join_process_group, refuse_unless_ranks_agree, world
from ampgan.training.interruption import Interrupted
from ampgan.training.precision import resolve_device
from ampgan.training.start import claimed_on_main_rank, reopened_on_main_rank


@click.command("bench")
@spec_options(BenchSpec(), "bench.", parts=(*DATA_AND_MODEL, "compute.device", "seed", "compute.channels_last"))
@click.option("--compile", "compile_", is_flag=True, help="torch.compile the networks (compile time reported apart).")
@click.option(
    "--sweep",
    "sweeps",
    multiple=True,
    metavar="PATH=V1,V2,...",
    help="Bench every value of a model or data setting (repeat for a grid), e.g. --sweep model.width=16,32,64 "
    "--sweep model.name=acgan,acgan-2019: one bench folder per cell and a speedup map per precision.",
)
@click.option(
    "--no-trace",
    "no_trace",
    is_flag=True,
    help="Do not trace the step's operations for 'ampgan project' (otherwise at most half the budget).",
)
@click.option(
    "--trace-only",
    "trace_only",
    is_flag=True,
    help="Trace one step per precision on the meta device at the asked image size, neither run nor timed (seconds, "
    "where the CPU step can take hours): OUT/op_tables.json for 'ampgan project OUT' (docs/projection.md).",
)
@out_options("bench")
@click.option(
    "--from",
    "from_",
    type=ShellPath(),
    default=None,
    callback=lambda _ctx, _param, given: given and results_path(given),  # a bench folder too, as project takes
    help="Re-draw figures and table from an existing results.json (or the bench folder); measures nothing.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object (each configuration's median step and each speedup with its interval) "
    "instead of the table.",
)
@click.pass_context
def command(ctx: click.Context, **options) -> None:
    """Time per batch vs batch size for each precision (the study's Figures 1 and 2), for any GAN."""
    if options["from_"]:
        results = load_results(options["from_"])
        out = options["out"] or Path(options["from_"]).parent
        say(*render(results, out).splitlines(), f"figures and results.csv re-drawn in {out}")
        return
    # Synthetic data by default (BenchSpec's base), so data never limits the step.
    base = build_config({"data.dataset": "synthetic"}, given_changes(ctx, options, BenchSpec(), "bench."))
    spec = with_settings(
        BenchSpec(
            base=base,
            compile=tuple(PRECISION_NAMES) if options["compile_"] else (),
            channels_last=precisions_given(options["channels_last"]),
            trace_ops=not options["no_trace"],
        ),
        own_values(BenchSpec(), "bench.", options),
        "bench",
    )
    if options["trace_only"]:
        if options["sweeps"]:  # --no-trace: refused with the API's line (projection/tables.trace_to_folder)
            raise AmpganError("--trace-only traces one step and runs nothing: give it without --sweep")
        _trace_only(spec, options["out"] or default_out("bench"), options["overwrite"], options["as_json"])
        return
    device = join_process_group(base.compute.device) or resolve_device(base.compute.device)
    refuse_unless_ranks_agree(dataclasses.asdict(spec))
    check_bench(spec, device)
    out = options["out"] or default_out("bench")
    if options["sweeps"]:
        _sweep(spec, options, out, device)
        return
    results = bench_to_folder(spec, out, options["overwrite"], device, on_config=_report_config, log=_progress)
    if results is None:  # a rank other than 0
        return
    if options["as_json"]:  # bench_to_folder drew the figures and results.csv either way
        say_json(bench_summary(results, out))
    else:
        say(*table(results).splitlines(), f"results: {out / 'results.json'}")
    say(time_spent_text(results, time.perf_counter() - STARTED_AT), err=True)
    _raise_if_stopped(results, f"what finished is in {out / 'results.json'}, marked incomplete")


def _trace_only(spec: BenchSpec, out: Path, overwrite: bool, as_json: bool) -> None:
    from ampgan.projection.tables import TRACED_ON_META, trace_to_folder

    traced = trace_to_folder(spec, out, overwrite)
    if as_json:
        say_json(traced)
        return
    say(
        f"op tables of {', '.join(traced['traced'])} in {traced['seconds']:.1f} s, on {TRACED_ON_META}",
        *(f"  not traced: {f['precision']}: {f['reason']}" for f in traced["failed"]),
        f"traced step: {out / 'op_tables.json'}; project it: ampgan project {out} --batch-sizes ... (PROJECTED)",
    )


def _sweep(spec, options: dict, out: Path, device) -> None:
    from ampgan.bench.sweep import draw_maps, parse_axes, read_sweep, run_sweep, sweep_table

    axes = parse_axes(options["sweeps"])
    # The same command again on a folder where it was interrupted continues there (sweep.json says so).
    previous = None
    if (out / "sweep.json").is_file() and not options["overwrite"]:
        previous = read_sweep(out, spec, axes)
        say(f"continuing the sweep in {out}", err=True)
    with (
        reopened_on_main_rank(out)
        if previous is not None
        else claimed_on_main_rank(out, options["overwrite"], device, "bench", data=spec.base.data.folders_read)
    ):
        document = run_sweep(spec, axes, out, device, log=_progress, on_config=_report_config, previous=previous)
        if not world().is_main:
            return
        maps = draw_maps(document, out)
    if options["as_json"]:
        say_json({"sweep": str(out / "sweep.json"), "cells": document["cells"], "maps": [str(p) for p in maps]})
    else:
        say(
            *sweep_table(document, out).splitlines(),
            f"sweep: {out / 'sweep.json'}; maps: "
            f"{', '.join(p.name for p in maps) or 'none (no mixed precision measured)'}",
        )
    _raise_if_stopped(document, f"the cells that finished are in {out / 'sweep.json'}")
    refuse_what_measured_nothing(_sweep_rows(document, out), f"the cells' results are in {out / 'sweep.json'}")


def _sweep_rows(document: dict, out: Path) -> list[dict]:
    """Every configuration of every cell, named by its cell; a cell the model refused is one failed row."""
    from ampgan.bench.sweep import load_cells

    rows = []
    for cell, results in load_cells(document, out):
        if results is None:
            rows.append({"label": cell["label"], "status": cell["status"], "reason": cell.get("reason", "")})
            continue
        rows += [c | {"label": f"{cell['label']} {c['precision']}@{c['batch_size']}"} for c in results["configs"]]
    return rows


def _raise_if_stopped(document: dict, kept: str) -> None:
    """Exit as a signal asks (130/143) when the bench or sweep was stopped, saying what was kept."""
    if document.get("incomplete"):
        stopped = document["incomplete"]
        raise Interrupted(stopped["signum"], f"{incomplete_text(stopped)}; {kept}")


def _progress(line: str) -> None:
    if world().is_main:
        say(line, err=True)


def _report_config(result) -> None:
    """One line per finished configuration, as it finishes (rank 0 only)."""
    if world().is_main:
        samples = sorted(result.samples_s)
        shown = f"{samples[len(samples) // 2] * 1e3:9.2f} ms/step" if samples else f"{result.status} ({result.reason})"
        say(f"  batch {result.batch_size:>5} {result.precision:>5}: {shown}", err=True)
