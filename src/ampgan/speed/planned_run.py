"""One training run as `ampgan train` and `ampgan.train` make it: a new run planned (memory format and
compile as measured faster here, speed/plan.py), warned when its mode is not faster than fp32, trained."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ampgan.errors import warn
from ampgan.precisions import FP32
from ampgan.speed.decision import decide_for_run
from ampgan.speed.plan import Asked, plan_run
from ampgan.training.distributed import refuse_unless_ranks_agree, world
from ampgan.training.loop import RunResult, run_training
from ampgan.training.start import RunStart


def train_planned(starting, explicit: dict | None, show_progress: bool, log) -> tuple[RunResult, Path | None]:
    """Train the run `starting` (training/start.py new_run or resumed_run) opens: (its result, the checkpoint
    it resumed from). `explicit`: the config paths the user set, for a new run (its plan leaves those alone);
    None for a resumed one, which keeps the plan in its config.json."""
    with starting as start:
        refuse_unless_ranks_agree(_what_ranks_share(start))  # before any collective
        if explicit is not None:
            start = planned(start, explicit, log)
        warn_if_not_faster(start, log)
        result = run_training(
            start.prepared,
            start.run_dir,
            show_progress=show_progress,
            resume_from=start.resume_from,
            refuse_spent_budget=True,
        )
    return result, start.checkpoint


def _what_ranks_share(start: RunStart) -> dict:
    """What every rank of one run must agree on: its config and its data's content. Where the content has a
    digest, the places that name where the data lives are left out: nodes may keep the same images under other
    local paths (a folder dataset's path, data.data_dir)."""
    config, data = start.prepared.config.to_dict(), start.prepared.dataset.source.get("sha256")
    if data is not None:
        config["data"] |= {"dataset": config["data"]["dataset"].partition(":")[0], "data_dir": None}
    return {"config": config, "data": data}


def planned(start: RunStart, explicit: dict, log) -> RunStart:
    """A new run's memory format and compile setting, where the user set neither, as measured faster for
    its precision and batch size on this machine (speed/plan.py; cached after the first time). The choice
    goes into config.json, so a resumed run keeps it."""
    prepared = start.prepared
    config, name = prepared.config, prepared.config.precision.name
    plan = plan_run(
        Asked(
            lambda precision: config,
            precisions=(name,),
            channels_last=None
            if "compute.channels_last" not in explicit
            else ((name,) if config.compute.channels_last else ()),
            compile=None if "compute.compile" not in explicit else ((name,) if config.compute.compile else ()),
        ),
        prepared.dataset,
        prepared.policy.device,
        log,
    )
    chosen = config.with_fields(
        {"compute.channels_last": name in plan.channels_last, "compute.compile": name in plan.compile}
    )
    return dataclasses.replace(start, prepared=dataclasses.replace(prepared, config=chosen))


def warn_if_not_faster(start: RunStart, log) -> None:
    """A new mixed-precision run learns (once per machine and model: cached) whether its mode is
    faster than fp32 here, and is warned when it is not. The run goes on either way."""
    config, prepared = start.prepared.config, start.prepared
    if config.precision.name == FP32 or start.resume_from is not None or not world().is_main:
        return
    # Whether the precision is faster is asked of the eager step: answered (and cached) without a compile.
    decisions, _ = decide_for_run(
        config.with_fields({"compute.compile": False}),
        prepared.dataset,
        prepared.policy.device,
        precisions=[config.precision.name],
        log=log,
    )
    decision = decisions[config.precision.name]
    if not decision.useful:
        warn(f"{decision.describe()}: fp32 would train at least as fast on this machine")
