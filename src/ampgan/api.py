"""ampgan from Python: the commands `ampgan train`, `bench`, `project` and `compare` as functions, on a
model given by name or as a function, each returning its answer as data.

    run = ampgan.train("acgan", "runs/one", settings={"precision.name": "bf16", "budget.steps": 300})
    run.run_dir, run.steps, run.loss_d      # the run folder and its last numbers
    bench = ampgan.bench("acgan", "runs/bench", batch_sizes=[64, 256], precisions=["fp32", "bf16"])
    bench.speedups                          # each precision's speedup over fp32 per batch size, with its interval
    projected = ampgan.project("runs/bench", devices="T4,A100")
    projected.rows                          # projected ms per step and cost per GPU, precision and batch size

    import ampgan

    def my_gan(data: ampgan.DataSpec, *, width: int = 32) -> ampgan.GAN:
        ...

    study = ampgan.compare(my_gan, "runs/mine", settings={"budget.steps": 300}, precisions=["fp32", "bf16"])
    study.verdict            # the sentences `ampgan compare` prints
    study.speedup["bf16"]    # {'estimate': 1.49, 'low': 1.41, 'high': 1.57, ...} at the study's batch size
    study.final["bf16"]      # final quality, means over seeds: {'frechet_distance': ..., 'coverage': ...}

The folder it writes is the one the command writes (compare.json, report.html, runs/...), and a model
function defined in a .py file is recorded as `path.py:NAME`, so the command line can train it again.
A function defined in a notebook is known to this process only (`python:NAME`): its study cannot be
continued from another one. A call given no `log` logs nothing: a function's answer is its return value.
A call leaves the process as it found it: torch's thread count, backend switches and random generators, and
pyplot's backend (a notebook's inline plots), whether it returns, raises or is interrupted.
"""

from __future__ import annotations

import functools
import os
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy
import torch

from ampgan.config import TrainConfig, build_config
from ampgan.runs.claim import default_out, release_unused_defaults
from ampgan.sections import with_settings
from ampgan.study.answer import Study, study_of
from ampgan.training.compile_cache import ENV as COMPILE_CACHE_ENV
from ampgan.training.precision import resolve_device, restore_backend_switches, snapshot_backend_switches

# What a run sets in os.environ for the libraries it drives (training/compile_cache.py, training/precision.py).
_SET_FOR_LIBRARIES = (COMPILE_CACHE_ENV, "CUBLAS_WORKSPACE_CONFIG")


def _recompile_limits(values: dict | None = None) -> dict:
    """dynamo's recompile limits as they are (values None), or set back to `values`; nothing when dynamo was
    never imported (its import alone takes seconds)."""
    if "torch._dynamo" not in sys.modules:
        return {}
    config = sys.modules["torch._dynamo"].config
    names = [name for name in ("recompile_limit", "cache_size_limit") if hasattr(config, name)]
    if values is None:
        return {name: getattr(config, name) for name in names}
    for name, value in values.items():
        setattr(config, name, value)
    return values


def _leaves_the_process_as_found(command: Callable) -> Callable:
    """What the commands set for the whole process, put back as the caller had it after the call: in a notebook
    it would outlive the call. The thread count (fitted to this moment's load, speed/threads.py: 2 threads
    became 1 for the cells after), the backend switches (a run sets strict FP32 matrix products, and cuDNN's
    autotuner on CUDA: a caller's `set_float32_matmul_precision("medium")` became "highest"), and torch's
    random generators, numpy's and Python's among them (a run seeds them all from its seed, training/loop.py:
    the caller's streams restarted at the run's seed), the environment variables a run sets for the libraries it
    drives (the caller's own torch.compile cached into ampgan's folder after a compiled call), and dynamo's
    recompile limit (raised for a compiled step's variants; where the caller had loaded dynamo before)."""

    @functools.wraps(command)
    def call(*args, **kwargs):
        threads, switches = torch.get_num_threads(), snapshot_backend_switches()
        streams = numpy.random.get_state(), random.getstate()
        variables = {name: os.environ.get(name) for name in _SET_FOR_LIBRARIES}
        limits = _recompile_limits()
        try:
            with torch.random.fork_rng(devices=range(torch.cuda.device_count())):
                return command(*args, **kwargs)
        finally:
            release_unused_defaults()  # a default folder the call made and never wrote in (it failed first)
            torch.set_num_threads(threads)
            restore_backend_switches(switches)
            numpy.random.set_state(streams[0])
            random.setstate(streams[1])
            for name, value in variables.items():
                os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)
            _recompile_limits(limits)

    return call


@_leaves_the_process_as_found
def compare(
    model: str | Callable = "acgan",
    out: str | Path | None = None,
    *,
    settings: dict[str, Any] | None = None,
    overwrite: bool = False,
    show_progress: bool = False,
    log: Callable[[str], None] | None = None,
    **study_settings,
) -> Study:
    """FP32 against mixed precision for `model` (a built-in name, "path.py:FUNCTION", "package.module:
    FUNCTION", or a model function), as `ampgan compare` runs it. `settings`: config paths and values
    (`{"data.dataset": "digits", "budget.steps": 300, "model.width": 16}`; the model's options are
    `model.NAME`); the budget is the command's (CompareSpec's base) unless `budget.steps` or
    `budget.time_budget_s` says otherwise. `study_settings`: the study's own settings, the fields of
    study.spec.CompareSpec with the command's defaults (`precisions=["fp32", "bf16"]`, `seeds=3`,
    `eval_points`, `eval_samples`, `bench_results`, ...), its bench's as a dict (`bench={"batch_sizes": [8],
    "min_seconds": 1.0, "max_seconds": 3.0}`: the `compare.bench.*` rows of `ampgan config --list`); an
    unknown one is one error line naming the closest.
    `out`: the folder, runs/compare-<time> when None (as the command). The same call on a folder holding an
    interrupted study continues it."""
    from ampgan.study.progress import has_study
    from ampgan.study.session import run_study
    from ampgan.study.spec import CompareSpec, compare_base

    bench = study_settings.pop("bench", {})  # compare's bench, as a dict: its settings over the study's defaults
    nested = {f"bench.{name}": value for name, value in bench.items()} if isinstance(bench, dict) else {"bench": bench}
    base = compare_base(_with_model(model, settings))
    spec = with_settings(CompareSpec(), study_settings | nested, "ampgan.compare", base=base)
    out = Path(out) if out is not None else default_out("compare")
    document, _, html = run_study(
        spec,
        out,
        overwrite=overwrite,
        reopen=has_study(out) and not overwrite,
        show_progress=show_progress,
        log=log or (lambda line: None),
    )
    return study_of(document, out, html)


@dataclass(frozen=True)
class Trained:
    """What `ampgan.train` trained: its folder and its last numbers."""

    run_dir: Path
    precision: str
    steps: int
    train_seconds: float
    images_per_second: float | None
    loss_d: float | None
    loss_g: float | None
    config: TrainConfig = field(repr=False)  # as the run's config.json records it (memory format, compile chosen)


@_leaves_the_process_as_found
def train(
    model: str | Callable = "acgan",
    out: str | Path | None = None,
    *,
    settings: dict[str, Any] | None = None,
    overwrite: bool = False,
    show_progress: bool = False,
    log: Callable[[str], None] | None = None,
) -> Trained:
    """One run in one precision, as `ampgan train` trains it: `settings` are config paths and values
    (`{"precision.name": "bf16", "budget.steps": 300, "model.width": 16}`; `ampgan config --list`), and
    the memory format and compile setting the user leaves out are measured as the command measures them."""
    from ampgan.runs.run_folder import read_run_config
    from ampgan.speed.planned_run import train_planned
    from ampgan.training.start import new_run

    explicit = _with_model(model, settings)
    config = build_config(explicit)
    out = Path(out) if out is not None else default_out(f"{config.data.dataset}-{config.precision.name}")
    result, _ = train_planned(
        new_run(config, out, overwrite, resolve_device(config.compute.device)),
        explicit,
        show_progress=show_progress,
        log=log or (lambda line: None),
    )
    last = result.last_record
    return Trained(
        run_dir=Path(result.run_dir),
        precision=config.precision.name,
        steps=result.steps,
        train_seconds=result.train_seconds,
        images_per_second=last.get("images_per_second"),
        loss_d=last.get("loss_d"),
        loss_g=last.get("loss_g"),
        config=TrainConfig.from_dict(read_run_config(result.run_dir)["config"]),
    )


@dataclass(frozen=True)
class Benched:
    """What `ampgan.bench` measured: its folder and each configuration's and speedup's numbers (the
    summary `ampgan bench --json` prints); with `trace_only`, the traced step alone."""

    out_dir: Path
    results: Path  # results.json; op_tables.json, the traced step, with trace_only
    device: str | None
    configs: list[dict]  # {batch_size, precision, status, median_ms, [reason]} per configuration
    speedups: list[dict]  # {batch_size, precision, baseline, estimate, low, high, verdict} per pair
    incomplete: bool = False  # stopped by a signal: what finished is in results.json

    def speedup(self, precision: str, batch_size: int) -> dict | None:
        return next((s for s in self.speedups if s["precision"] == precision and s["batch_size"] == batch_size), None)


@_leaves_the_process_as_found
def bench(
    model: str | Callable = "acgan",
    out: str | Path | None = None,
    *,
    settings: dict[str, Any] | None = None,
    overwrite: bool = False,
    log: Callable[[str], None] | None = None,
    trace_only: bool = False,
    **bench_settings,
) -> Benched:
    """Time per batch against batch size for each precision, as `ampgan bench` measures it (synthetic data
    unless `settings` name a dataset). `bench_settings`: the bench's own, the fields of bench.spec.BenchSpec
    with the command's defaults (`batch_sizes=[64, 256]`, `precisions=["fp32", "bf16"]`, `steps`,
    `max_seconds`, `min_seconds`, ...; `ampgan config --list`), and `compile` / `channels_last` (the
    precisions to compile or run channels-last) and `trace_ops`; an unknown one is one error line.
    `trace_only`: as `ampgan bench --trace-only`, the step traced on the meta device at its size, neither run
    nor timed: `results` is then the traced step (op_tables.json) that `ampgan.project` reads, device "meta",
    no configs or speedups, and a precision that could not be traced is said to `log`, with why."""
    from ampgan.bench.spec import BenchSpec
    from ampgan.bench.to_folder import bench_summary, bench_to_folder, check_bench
    from ampgan.projection.tables import trace_to_folder

    base = build_config({"data.dataset": "synthetic"}, _with_model(model, settings))
    spec = with_settings(BenchSpec(base=base), bench_settings, "ampgan.bench")
    if trace_only:
        out = Path(out) if out is not None else default_out("bench")
        traced = trace_to_folder(spec, out, overwrite)
        for failed in traced["failed"]:
            (log or (lambda line: None))(f"not traced: {failed['precision']}: {failed['reason']}")
        return Benched(out_dir=out, results=Path(traced["op_tables"]), device="meta", configs=[], speedups=[])
    device = resolve_device(base.compute.device)
    check_bench(spec, device)
    out = Path(out) if out is not None else default_out("bench")
    results = bench_to_folder(
        spec, out, overwrite, device, on_config=lambda result: None, log=log or (lambda line: None)
    )
    summary = bench_summary(results, out)
    return Benched(
        out_dir=out,
        results=Path(summary["results"]),
        device=summary["device"],
        configs=summary["configs"],
        speedups=summary["speedups"],
        incomplete=bool(results.get("incomplete")),
    )


@dataclass(frozen=True)
class Projected:
    """What `ampgan.project` projected: its folder and its rows (PROJECTED, never measured)."""

    out_dir: Path
    projection: Path  # projection.json
    rows: list[dict] = field(repr=False)  # per GPU x precision x batch size: ms per step, band, bound, cost

    def row(self, device: str, precision: str, batch_size: int) -> dict | None:
        return next(
            (
                r
                for r in self.rows
                if r["device"] == device and r["precision"] == precision and r["batch_size"] == batch_size
            ),
            None,
        )


def project(
    results: str | Path, out: str | Path | None = None, *, overwrite: bool = False, log=None, **project_settings
) -> Projected:
    """A bench's step projected onto GPUs this machine does not have, as `ampgan project RESULTS` does it:
    `results` is a results.json, a bench folder or a study folder; `project_settings` the fields of
    projection.from_results.ProjectSpec (`devices="T4,A100"`, `batch_sizes=[64, 2048]`, `prices=PATH`, `gpus=PATH`:
    your own GPU rows)."""
    from ampgan.projection.from_results import ProjectSpec, project_results

    projection, target, _ = project_results(
        Path(results),
        with_settings(ProjectSpec(), project_settings, "ampgan.project"),
        Path(out) if out is not None else None,
        overwrite,
        log=log or (lambda line: None),
    )
    return Projected(out_dir=target, projection=target / "projection.json", rows=projection["rows"])


def _with_model(model: str | Callable, settings: dict | None) -> dict:
    """The config changes of `settings` with the model named (a function gets its importable name), and
    consent to import it: the caller named it (the model trust rule, ampgan/trust.py)."""
    from ampgan.gan.registry import consent_to_import, model_name_for

    name = model if isinstance(model, str) else model_name_for(model)
    consent_to_import(name)
    return {**{k: v for k, v in (settings or {}).items() if k != "model.name"}, "model.name": name}
