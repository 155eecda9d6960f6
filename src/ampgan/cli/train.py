"""`ampgan train`: one precision, one run folder (or `--resume` one)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ampgan.cli.options import (
    ShellPath,
    WholeNumber,
    compose,
    config_from_cli,
    default_out,
    given_changes,
    spec_options,
)
from ampgan.config import TrainConfig
from ampgan.errors import AmpganError, say, say_json
from ampgan.speed.planned_run import train_planned
from ampgan.training.distributed import join_process_group, world
from ampgan.training.loop import DEFAULT_STEPS
from ampgan.training.start import new_run, resumed_config, resumed_run

_options = compose(
    spec_options(TrainConfig()),  # every config setting that has a flag
    click.option(
        "--out",
        type=ShellPath(),
        default=None,
        help="Run folder (default runs/<dataset>-<precision>-<time>).",
    ),
    click.option("--overwrite", is_flag=True, help="Replace an existing, non-empty run folder."),
    click.option(
        "--resume",
        type=ShellPath(),
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

        sys.exit(launch_on_this_machine(options["nproc"], _without_nproc(ctx.obj["argv"])))
    resume_dir = options["resume"]
    explicit = given_changes(ctx, options)
    if resume_dir is not None:
        if options["out"] is not None and Path(options["out"]) != resume_dir:
            raise AmpganError("--resume continues the run in its own folder: drop --out")
        config = resumed_config(resume_dir, explicit)
    else:
        config = config_from_cli(ctx, options)
    device = join_process_group(config.compute.device)  # under torchrun: this rank's device
    out = resume_dir or options["out"] or default_out(f"{config.data.dataset}-{config.precision.name}")
    if options["dry_run"]:
        _print_dry_run(config, out, resume_dir, device)
        return
    starting = resumed_run(config, out, device) if resume_dir else new_run(config, out, options["overwrite"], device)
    quiet = options["quiet"]
    result, resumed_from = train_planned(
        starting,
        None if resume_dir else explicit,
        show_progress=not quiet,
        log=(lambda line: None) if quiet else (lambda line: say(line, err=True)),  # what the speed decisions measured
    )
    if world().is_main:
        last = result.last_record
        losses = f"D loss {last['loss_d']:.3f}, G loss {last['loss_g']:.3f}" if "loss_d" in last else "no step logged"
        say(
            f"trained {result.steps} steps in {result.train_seconds:.1f} s "
            f"({last.get('images_per_second', 0):.0f} img/s); {losses} | {result.stamp}",
            f"run folder: {result.run_dir}" + (f" (resumed from {resumed_from.name})" if resumed_from else ""),
        )


def _print_dry_run(config: TrainConfig, out: Path, resume_dir: Path | None, device) -> None:
    from ampgan.training.prepared import prepare_run

    prepared = prepare_run(config, device=device)
    resolved = prepared.config.to_dict()
    if not config.budget_is_set:
        resolved["budget"]["steps"] = DEFAULT_STEPS
    dataset = prepared.dataset
    say_json(
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


def _without_nproc(argv: list[str]) -> list[str]:
    kept, words = [], iter(argv)
    for word in words:
        if word == "--nproc":
            next(words, None)  # and its value
        elif not word.startswith("--nproc="):
            kept.append(word)
    return kept
