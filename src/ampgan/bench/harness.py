"""The bench: the very `train_step` that `ampgan train` runs, timed on resident batches at each batch size
in each precision, into the results document (results.json).

First the decisions (which precisions, each one's memory format: speed/plan.py) and the compiled
precisions' compile times; then batch size after batch size, each within its --max-seconds
(bench/measure.py, bench/deadline.py); then the step's operations for `ampgan project`
(bench/op_tables.py). A signal stops it between steps, and what was measured is kept.
"""

from __future__ import annotations

import signal
from dataclasses import asdict, replace

import torch

from ampgan.bench.attainable import attainable_rows
from ampgan.bench.deadline import DECISION_SHARE, TRACE_SHARE, TooSlowAhead, budget_s
from ampgan.bench.measure import StopRequested, measure_batch_size, stage, stop_check
from ampgan.bench.op_tables import foreseen_cycles, trace_op_tables
from ampgan.bench.results import ConfigResult, speedups
from ampgan.bench.spec import BenchSpec
from ampgan.data import load_dataset
from ampgan.files.signals import stop_on_signals
from ampgan.precisions import BASELINE
from ampgan.speed.compile_time import measure_compile_times
from ampgan.speed.plan import EVERY_USEFUL, Asked, RunPlan, plan_run
from ampgan.system.environment import environment_stamp
from ampgan.system.hardware import Hardware, detect_hardware, peak_tflops
from ampgan.training.distributed import world
from ampgan.training.memory import check_batch_shapes
from ampgan.training.prepared import resolve_config


def _refuse_a_g_not_of_the_data_s_shape(spec: BenchSpec, dataset) -> None:
    """One line before anything runs, traced on meta (costs nothing; a G that cannot be built there is left to
    the real step). At the largest batch size: a smaller one that cannot train (batch norm at 1) is that
    configuration's error row, not the whole bench's."""
    _, _, gan, data = resolve_config(spec.train_config(BASELINE, spec.batch_sizes[0]), dataset)
    if any(parameter.is_meta for parameter in gan.generator.parameters()):
        check_batch_shapes(gan, data, max(spec.batch_sizes))


def run_bench(
    spec: BenchSpec, device: torch.device, on_config=lambda result: None, log=lambda line: None, dataset=None
) -> dict:
    """Measure every (batch size, precision) and return the results document. `log`: progress lines
    (the speed decision's, when the precisions are chosen here); `dataset`: one already loaded
    (a comparison's), else loaded from the spec."""
    hardware = detect_hardware(device)
    dataset = dataset if dataset is not None else load_dataset(spec.base.data, seed=spec.seed)
    _refuse_a_g_not_of_the_data_s_shape(spec, dataset)
    spent = {}  # seconds per stage, printed beside the budget (output.time_spent_text)
    with stage(spent, "decisions"):
        plan = _decisions(spec, dataset, device, log)
    spec = replace(spec, channels_last=plan.channels_last)
    with stage(spent, "compile_times"):
        compile_times = _compile_times(spec, plan.precisions)
    peaks = _peaks(spec, hardware, plan.precisions)
    with stop_on_signals() as stop_request:
        with stage(spent, "measuring"):
            results, measurements, incomplete = _measure(
                spec, plan.precisions, dataset, device, on_config, stop_request, spent, log
            )
        # Building the configurations (model building) and --attainable's operations alone are not measuring:
        # both are said apart, outside its share.
        spent["measuring"] -= spent.get("building", 0.0) + spent.get("attainable", 0.0)
        # The op tables, inside the same guard: a signal now stops them (between precisions), never the
        # process, so what was measured is written.
        with stage(spent, "trace"):
            tracing = incomplete is None and not stop_request and spec.trace_ops and world().is_main
            traced = (
                trace_op_tables(
                    spec, dataset, device, log, lambda: bool(stop_request), cycle_s=foreseen_cycles(results)
                )
                if tracing
                else {}
            )
        if incomplete is None and stop_request:  # after the last check: everything measured, but asked to stop
            incomplete = _stopped(stop_request, spec.batch_sizes, ())
    rows = _rows(spec, results, peaks, device)
    pairs = speedups(measurements)
    return {
        "format": "ampgan-bench/1",
        "environment": environment_stamp(device),
        "processes": world().size,
        "spec": spec.to_dict()
        | {"precisions": list(plan.precisions), "decision_share": DECISION_SHARE, "trace_share": TRACE_SHARE},
        "hardware": asdict(hardware),
        "peaks": peaks,
        "left_out": plan.left_out,
        "layouts": plan.layouts,
        "threads": plan.threads,  # the thread count measured with, and why (speed/threads.py)
        # per compiled precision at the first batch size: {cold_s, warm_s, compiled_step_s}
        "compile_times": compile_times,
        "configs": rows,
        "measurements": measurements,
        "speedups": pairs,
        "attainable": attainable_rows(rows, pairs),
        "incomplete": incomplete,
        "seconds": {stage: round(value, 2) for stage, value in spent.items()},
        **traced,
    }


def _decisions(spec: BenchSpec, dataset, device: torch.device, log) -> RunPlan:
    """The decisions made before anything is measured (speed/plan.py: timed and said, with how to skip each):
    every precision not measured slower at the first batch size (a bench charts where a mode starts to
    gain), and each one's memory format; whether to compile is the user's (--compile)."""
    return plan_run(
        Asked(
            lambda precision: spec.train_config(precision, spec.batch_sizes[0]),
            EVERY_USEFUL,
            spec.precisions,
            spec.channels_last,
            spec.compile,
            decision_seconds=DECISION_SHARE * budget_s(spec),
        ),
        dataset,
        device,
        log,
    )


def _compile_times(spec: BenchSpec, precisions) -> dict:
    """Compile time as the next run meets it (fresh processes, cold then warm cache): rank 0 alone."""
    if not (spec.measure_compile_times and world().is_main):
        return {}
    return {
        name: measure_compile_times(spec.train_config(name, spec.batch_sizes[0]))
        for name in precisions
        if name in spec.compile
    }


def _peaks(spec: BenchSpec, hardware: Hardware, precisions) -> dict:
    """Each precision's peak (TFLOP/s) and its source: the device's, or --peak-tflops for every precision."""
    found = {
        name: (spec.peak_tflops, "bench.peak_tflops") if spec.peak_tflops else peak_tflops(hardware, name)
        for name in precisions
    }
    return {name: {"tflops": value, "source": source} for name, (value, source) in found.items()}


def _measure(
    spec: BenchSpec, precisions, dataset, device, on_config, stop_request, spent: dict, log
) -> tuple[list[ConfigResult], list[dict], dict | None]:
    """Batch size after batch size: every result, each batch size's rounds, and what a signal left
    unmeasured (None when nothing)."""
    results, measurements = [], []  # every ConfigResult; each batch size's rounds, as a dict
    ahead = TooSlowAhead()
    for index, batch_size in enumerate(spec.batch_sizes):
        try:
            finished, rounds = measure_batch_size(
                spec, precisions, batch_size, dataset, device, stop_check(stop_request), ahead, spent, log
            )
        except StopRequested:
            # The batch size being measured has too few rounds to be compared: it is left out.
            return results, measurements, _stopped(stop_request, spec.batch_sizes[:index], spec.batch_sizes[index:])
        for result in finished:
            on_config(result)
        results += finished
        ahead.learn(finished)
        if rounds is not None:
            measurements.append({"batch_size": batch_size, **rounds.to_dict()})
    return results, measurements, None


def _stopped(stop_request, finished, not_measured) -> dict:
    return {
        "signal": signal.Signals(stop_request.signum or signal.SIGTERM).name,
        "signum": stop_request.signum or signal.SIGTERM,
        "finished_batch_sizes": list(finished),
        "not_measured": list(not_measured),
    }


def _rows(spec: BenchSpec, results: list[ConfigResult], peaks: dict, device: torch.device) -> list[dict]:
    sharing = world().local_size if device.type == "cpu" else 1
    rows = [r.to_dict(peaks[r.precision]["tflops"], sharing) for r in results]
    for row in rows:  # the first warm-up step of a compiled step is mostly compilation
        if row["precision"] in spec.compile:
            row["compile_s"] = row["warmup_s"][0] if row["warmup_s"] else None
    return rows
