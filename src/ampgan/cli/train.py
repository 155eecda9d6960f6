"""`ampgan train`: one precision, one run folder (or `--resume` one)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click

from ampgan.cli.options import WholeNumber, compose, config_flags, config_from_cli, default_out, given_changes
from ampgan.config import TrainConfig
from ampgan.config.flags import FLAGS
from ampgan.errors import AmpganError
from ampgan.training.distributed import join_process_group, world
from ampgan.training.loop import DEFAULT_STEPS, run_training
from ampgan.training.start import RunStart, new_run, resumed_config, resumed_run

_options = compose(
    config_flags(
        "dataset",
        "model",
        "precision",
        "loss_scale",
        "batch_size",
        "steps",
        "time_budget",
        "seed",
        "device",
        "checkpoint_every",
        "keep",
        "sample_every",
        "log_every",
        "image_size",
        "channels",
        "data_dir",
        "classes",
        "max_per_class",
        "download",
        "cache",
        "width",
        "z_dim",
        "lr",
        "channels_last",
        "compile",
        "sync_bn",
        "tensorboard",
    ),
    click.option(
        "--out",
        type=click.Path(path_type=Path),
        default=None,
        help="Run folder (default runs/<dataset>-<precision>-<time>).",
    ),
    click.option("--overwrite", is_flag=True, help="Replace an existing, non-empty run folder."),
    click.option(
        "--resume",
        type=click.Path(path_type=Path),
        default=None,
        help="Continue the run in this folder from its last checkpoint.",
    ),
    click.option(
        "--nproc",
        type=WholeNumber(),
        default=1,
        show_default=True,
        help="Data-parallel processes on this machine (launches them); --batch-size is per process.",
    ),
    click.option("--dry-run", is_flag=True, help="Print the resolved config and exit."),
    click.option("--quiet", is_flag=True, help="No progress bar."),
)


@click.command("train")
@_options
@click.pass_context
def command(ctx: click.Context, **options) -> None:
    """Train a GAN in one precision and write a run folder."""
    if options["nproc"] != 1:
        from ampgan.training.launcher import launch_on_this_machine

        argv = _without_nproc(ctx.obj["argv"])
        sys.exit(launch_on_this_machine(options["nproc"], argv))
    resume_dir = options["resume"]
    explicit = given_changes(ctx, options)
    if resume_dir is not None:
        if options["out"] is not None and Path(options["out"]) != resume_dir:
            raise AmpganError("--resume continues the run in its own folder: drop --out")
        option_names = {path: flag.option for flag in FLAGS for path in flag.paths}
        config = resumed_config(resume_dir, explicit, option_names)
    else:
        config = config_from_cli(ctx, options)
    device = join_process_group(config.compute.device)  # under torchrun: this rank's device
    out = resume_dir or options["out"] or default_out(f"{config.data.dataset}-{config.precision.name}")
    if options["dry_run"]:
        _print_dry_run(config, out, resume_dir, device)
        return
    starting = resumed_run(config, out, device) if resume_dir else new_run(config, out, options["overwrite"], device)
    with starting as start:
        if resume_dir is None:
            start = _planned(start, explicit, options["quiet"])
        _train_and_report(start, quiet=options["quiet"])


def _planned(start: RunStart, explicit: dict, quiet: bool) -> RunStart:
    """A new run's memory format and compile setting, where the user set neither, as measured faster for
    its precision and batch size on this machine (speed/plan.py; cached after the first time). The choice
    goes into config.json, so a resumed run keeps it."""
    from ampgan.speed.plan import plan_run

    prepared = start.prepared
    config, name = prepared.config, prepared.config.precision.name
    plan = plan_run(
        lambda precision: config,
        prepared.dataset,
        prepared.policy.device,
        precisions=(name,),
        channels_last=None
        if "compute.channels_last" not in explicit
        else ((name,) if config.compute.channels_last else ()),
        compile=None if "compute.compile" not in explicit else ((name,) if config.compute.compile else ()),
        warn_named=False,
        log=_log(quiet),
    )
    planned = config.with_fields(
        {"compute.channels_last": name in plan.channels_last, "compute.compile": name in plan.compile}
    )
    return dataclasses.replace(start, prepared=dataclasses.replace(prepared, config=planned))


def _log(quiet: bool):
    """Where the speed decisions say what they measured: stderr, or nowhere with --quiet."""
    return (lambda line: None) if quiet else (lambda line: click.echo(line, err=True))


def _warn_if_not_faster(start: RunStart, quiet: bool) -> None:
    """A new mixed-precision run learns (once per machine and model: cached) whether its mode is
    faster than fp32 here, and is warned when it is not. The run goes on either way."""
    from ampgan.errors import warn
    from ampgan.speed.decision import decide_for_run

    config, prepared = start.prepared.config, start.prepared
    if config.precision.name == "fp32" or start.resume_from is not None or not world().is_main:
        return
    # Whether the precision is faster is asked of the eager step: answered (and cached) without a compile.
    decisions, _ = decide_for_run(
        config.with_fields({"compute.compile": False}),
        prepared.dataset,
        prepared.policy.device,
        precisions=[config.precision.name],
        log=_log(quiet),
    )
    decision = decisions[config.precision.name]
    if not decision.useful:
        warn(f"{decision.describe()}: fp32 would train at least as fast on this machine")


def _train_and_report(start: RunStart, quiet: bool) -> None:
    _warn_if_not_faster(start, quiet)
    result = run_training(
        start.prepared, start.run_dir, show_progress=not quiet, resume_from=start.resume_from, refuse_spent_budget=True
    )
    if not world().is_main:
        return
    last = result.last_record
    losses = f"D loss {last['loss_d']:.3f}, G loss {last['loss_g']:.3f}" if "loss_d" in last else "no step logged"
    click.echo(
        f"trained {result.steps} steps in {result.train_seconds:.1f} s "
        f"({last.get('images_per_second', 0):.0f} img/s); {losses} | {result.stamp}"
    )
    resumed = f" (resumed from {start.checkpoint.name})" if start.checkpoint is not None else ""
    click.echo(f"run folder: {result.run_dir}{resumed}")


def _print_dry_run(config: TrainConfig, out: Path, resume_dir: Path | None, device) -> None:
    from ampgan.training.prepared import prepare_run

    prepared = prepare_run(config, device=device)
    resolved = prepared.config.to_dict()
    if not config.budget_is_set:
        resolved["budget"]["steps"] = DEFAULT_STEPS
    dataset = prepared.dataset
    click.echo(
        json.dumps(
            {
                "config": resolved,
                "precision": prepared.policy.describe(),
                "device": str(prepared.policy.device),
                "model": {"name": prepared.model.name, "fingerprint": prepared.fingerprint},
                "dataset": {
                    "images": len(dataset),
                    "classes": list(dataset.class_names),
                    "image_shape": [dataset.channels, dataset.image_size, dataset.image_size],
                },
                "out": str(out),
                "resume": str(resume_dir) if resume_dir else None,
            },
            indent=2,
        )
    )


def _without_nproc(argv: list[str]) -> list[str]:
    kept, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word == "--nproc":
            skip = True
        elif not word.startswith("--nproc="):
            kept.append(word)
    return kept
