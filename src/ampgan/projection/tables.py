"""The op tables a projection rests on: read back from bench results and checked, or traced here from
the results' own config when the results predate them."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from ampgan.bench.op_tables import trace_op_tables, untraced
from ampgan.bench.ops import TRACE_BATCH_SIZES, OpTable
from ampgan.bench.spec import BenchSpec
from ampgan.config import config_from_document
from ampgan.data import load_dataset
from ampgan.data.synthetic import make_synthetic
from ampgan.errors import AmpganError, ConfigError
from ampgan.files.atomic import write_json_atomically
from ampgan.files.jsonfile import read_json
from ampgan.files.schema import check_format
from ampgan.precisions import FP32
from ampgan.runs.claim import claimed_folder
from ampgan.system.environment import environment_stamp

TRACED_FORMAT = "ampgan-traced-step/1"
# What a traced step's figures rest on when `ampgan bench --trace-only` traced it: said beside each of them.
TRACED_ON_META = "the meta device (the step traced, neither run nor timed)"
_TRACED = {"format": str, "spec": {"model": str, "batch_sizes": [int]}, "environment": dict, "op_tables": dict}


def traced_step(spec: dict, environment: dict, traced: dict) -> dict:
    """The document of a step traced without a bench's timings (a study that ran none, `bench --trace-only`): what
    load_traced_step and `ampgan project` read."""
    return {"format": TRACED_FORMAT, "spec": spec, "environment": environment, "configs": [], **traced}


def trace_to_folder(spec: BenchSpec, out: Path, overwrite: bool) -> dict:
    """The step's op tables traced on the meta device (bench/op_tables.py) into OUT/op_tables.json, the traced-step
    document `ampgan project` reads, as `ampgan bench --trace-only` and `ampgan.bench(trace_only=True)` make it; no
    configuration is run or timed. The data only gives shapes: a synthetic dataset is made with the trace's batch
    of images. Returns {op_tables: its path, traced: the precisions, failed: [{precision, reason}], seconds, what}."""
    if not spec.trace_ops:
        raise AmpganError("a trace-only bench is its trace: give it without switching the trace off (--no-trace)")
    for name in spec.precisions or (FP32,):  # a batch size the model refuses: before any trace
        for size in spec.batch_sizes:
            spec.train_config(name, size)
    data = spec.base.data
    with claimed_folder(out, overwrite, "bench", data=data.folders_read):  # claimed first: refused before the trace
        if data.dataset == "synthetic":
            dataset = make_synthetic(
                count=max(TRACE_BATCH_SIZES),
                channels=data.channels or 3,
                image_size=data.image_size or 32,
                seed=spec.seed,
            )
        else:
            dataset = load_dataset(data, seed=spec.seed)
        started = time.perf_counter()
        traced = trace_op_tables(spec, dataset, torch.device("meta"))
        seconds = time.perf_counter() - started
        failed = traced["op_tables_failed"]
        if not traced["op_tables"]:  # every precision for the same reason (the meta device's limit): said once
            reasons = {f["reason"] for f in failed}
            raise AmpganError(
                "; ".join(reasons if len(reasons) == 1 else (f"{f['precision']}: {f['reason']}" for f in failed))
            )
        environment = environment_stamp(torch.device("cpu"))
        environment["hardware_summary"] = f"{TRACED_ON_META} on {environment['hardware_summary']}"
        document = traced_step(spec.to_dict() | {"traced_only": True}, environment, traced)
        write_json_atomically(out / "op_tables.json", document)
    return {
        "op_tables": str(out / "op_tables.json"),
        "traced": list(traced["op_tables"]),
        "failed": failed,
        "seconds": round(seconds, 1),
        "what": TRACED_ON_META,
    }


def load_traced_step(path: Path) -> dict:
    """A study's projection/op_tables.json (the step traced when no bench ran), checked."""
    document = read_json(
        path,
        missing=f"no traced step at {path}",
        damaged=f"{path} is not valid JSON: run the study again or 'ampgan bench' for this model",
    )
    fix = "run the study again or 'ampgan bench' for this model"
    return check_format(document, TRACED_FORMAT, str(path), "a traced step", fix, shape=_TRACED)


def op_tables_of(results: dict, path: Path, log=lambda line: None) -> dict[str, OpTable]:
    """{precision: OpTable} of a bench results document; one error line for a damaged table."""
    stored = results.get("op_tables")
    if stored is None:
        log(
            f"{path} has no op tables (a bench from before ampgan traced the step's operations): tracing the "
            "step here from the results' config"
        )
        stored = _trace_from_config(results, path, log)
    if not isinstance(stored, dict):
        raise AmpganError(f"{path}: op_tables is not a mapping: re-run 'ampgan bench'")
    if not stored:
        why = untraced(results) or "no reason recorded"
        raise AmpganError(f"{path} has no op tables to project from (tracing failed: {why})")
    tables = {}
    for name, table in stored.items():
        try:
            tables[name] = OpTable.from_dict(table)
        except ValueError as error:
            raise AmpganError(f"{path}: the {name} op table is damaged ({error}): re-run 'ampgan bench'") from None
    return tables


def _trace_from_config(results: dict, path: Path, log) -> dict:
    try:
        config = config_from_document(results["spec"]["config"])  # never downloads where the file says
    except (KeyError, TypeError, ConfigError) as error:
        raise AmpganError(
            f"{path} has neither op tables nor a config to trace them from ({error}): re-run 'ampgan bench'"
        ) from None
    traced = trace_op_tables(
        BenchSpec(base=config), load_dataset(config.data, seed=config.seed), torch.device("cpu"), log
    )
    results["step_memory"] = traced.get("step_memory")  # for the memory check, as a bench would have stored it
    if not traced["op_tables"]:
        reasons = "; ".join(f"{f['precision']}: {f['reason']}" for f in traced["op_tables_failed"])
        raise AmpganError(f"cannot trace the step of {path}'s model ({reasons})")
    return traced["op_tables"]
