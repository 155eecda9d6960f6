"""`ampgan train`: one precision, one run folder (or `--resume` one)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click

from ampgan.cli.options import (Duration, LossScale, StepsOrDuration, WholeNumber, channels_last_option, compile_option,
                                compose,
                                data_source_options,
                                dataset_option, default_out, device_option, fetch_options, image_shape_options,
                                model_options, seed_option)
from ampgan.config import PRECISIONS, TrainConfig
from ampgan.errors import AmpganError
from ampgan.training.distributed import join_process_group, world
from ampgan.training.loop import DEFAULT_STEPS, run_training
from ampgan.training.start import RunStart, new_run, resumed_config, resumed_run

# Options whose TrainConfig field has another name; the rest map one to one.
_FIELD_OF_OPTION = {"time_budget": "time_budget_s"}

_options = compose(
    dataset_option(),
    click.option("--precision", type=click.Choice(PRECISIONS), default="fp32", show_default=True),
    click.option("--loss-scale", type=LossScale(), default="dynamic", show_default=True,
                 help="fp16 only: 'dynamic' (GradScaler) or a fixed number such as 128."),
    click.option("--batch-size", type=WholeNumber(), default=64, show_default=True, help="Per process."),
    click.option("--steps", type=WholeNumber(), default=None, help=f"Stop after this many steps ({DEFAULT_STEPS} if no --time-budget)."),
    click.option("--time-budget", type=Duration(), default=None, help="Stop after this much training wall time, e.g. 7m, 90s, 1h."),
    seed_option, device_option,
    click.option("--out", type=click.Path(path_type=Path), default=None,
                 help="Run folder (default runs/<dataset>-<precision>-<time>)."),
    click.option("--overwrite", is_flag=True, help="Replace an existing, non-empty run folder."),
    click.option("--resume", type=click.Path(path_type=Path), default=None,
                 help="Continue the run in this folder from its last checkpoint."),
    click.option("--checkpoint-every", type=StepsOrDuration(), default="500", show_default=True,
                 help="Steps (500) or training time (10m) between checkpoints."),
    click.option("--keep", type=WholeNumber(), default=3, show_default=True, help="How many recent checkpoints to keep."),
    click.option("--sample-every", type=WholeNumber(), default=500, show_default=True, help="Steps between sample grids."),
    click.option("--log-every", type=WholeNumber(), default=10, show_default=True, help="Steps between metric records."),
    image_shape_options, data_source_options, fetch_options, model_options,
    click.option("--lr", type=float, default=2e-4, show_default=True),
    click.option("--mode-seeking", type=float, default=0.3, show_default=True,
                 help="Weight of G's mode-seeking term (0: off; samples of a class may then collapse to one image)."),
    click.option("--class-loss-on-fakes", is_flag=True,
                 help="Train D's class head on generated images too (the original AC-GAN; invites permuted classes)."),
    click.option("--real-label", type=float, default=0.9, show_default=True,
                 help="D's target for real images; below 1 is one-sided label smoothing (1: none)."),
    click.option("--class-weight-g", type=float, default=1.0, show_default=True,
                 help="Weight of the class loss in G's update."),
    click.option("--spectral-norm-d/--no-spectral-norm-d", default=True, show_default=True,
                 help="Spectrally normalise D's convolutions and real/fake head."),
    channels_last_option,
    compile_option,
    click.option("--nproc", type=WholeNumber(), default=1, show_default=True,
                 help="Data-parallel processes on this machine (launches them); --batch-size is per process."),
    click.option("--sync-bn", is_flag=True, help="With several processes: SyncBatchNorm (CUDA only)."),
    click.option("--tensorboard", is_flag=True, help="Also write TensorBoard event files."),
    click.option("--dry-run", is_flag=True, help="Print the resolved config and exit."),
    click.option("--quiet", is_flag=True, help="No progress bar."),
)


def config_values(options: dict) -> dict:
    """TrainConfig fields from the parsed options."""
    fields = set(TrainConfig.__dataclass_fields__)
    values = {_FIELD_OF_OPTION.get(name, name): value for name, value in options.items()
              if _FIELD_OF_OPTION.get(name, name) in fields}
    values["channels_last"] = bool(options["channels_last"])  # not given: NCHW until measured (_decide_layout)
    values["compile"] = bool(options["compile"])  # not given: eager until decided (_decide_compile)
    unit, every = options["checkpoint_every"]
    values["checkpoint_every_steps"] = every if unit == "steps" else None
    values["checkpoint_every_s"] = every if unit == "seconds" else None
    return values


def given_fields(ctx: click.Context) -> set[str]:
    """The TrainConfig fields the user set on the command line (not left at their defaults)."""
    given = {name for name in ctx.params if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE}
    fields = {_FIELD_OF_OPTION.get(name, name) for name in given}
    if "checkpoint_every" in given:
        fields |= {"checkpoint_every_steps", "checkpoint_every_s"}
    return fields


@click.command("train")
@_options
@click.pass_context
def command(ctx: click.Context, **options) -> None:
    """Train an AC-GAN in one precision and write a run folder."""
    if options["nproc"] != 1:
        from ampgan.training.launcher import launch_on_this_machine

        argv = _without_nproc(ctx.obj["argv"])
        sys.exit(launch_on_this_machine(options["nproc"], argv))
    device = join_process_group(options["device"])  # under torchrun: this rank's device
    resume_dir = options["resume"]
    if resume_dir is not None:
        if options["out"] is not None and Path(options["out"]) != resume_dir:
            raise AmpganError("--resume continues the run in its own folder: drop --out")
        option_names = {field: name for name, field in _FIELD_OF_OPTION.items()}
        config = resumed_config(resume_dir, config_values(options), given_fields(ctx), option_names)
    else:
        config = TrainConfig(**config_values(options))
    out = resume_dir or options["out"] or default_out(f"{config.dataset}-{config.precision}")
    if options["dry_run"]:
        _print_dry_run(config, out, resume_dir, device)
        return
    starting = resumed_run(config, out, device) if resume_dir else new_run(config, out, options["overwrite"], device)
    with starting as start:
        if resume_dir is None and options["channels_last"] is None:
            start = _decide_layout(start, options["quiet"])
        if resume_dir is None and options["compile"] is None:
            start = _decide_compile(start, options["quiet"])
        _train_and_report(start, quiet=options["quiet"])


def _decide_layout(start: RunStart, quiet: bool) -> RunStart:
    """A new run without --channels-last/--no-channels-last trains in the memory format measured faster
    for its precision and batch size on this machine (cached after the first time; speed/layout.py)."""
    from ampgan.speed.layout import channels_last_precisions

    return _decided(start, "channels_last", channels_last_precisions, quiet)


def _decide_compile(start: RunStart, quiet: bool) -> RunStart:
    """A new run without --compile/--no-compile compiles when compiling was measured to pay for itself
    over the run's length on this machine (speed/compilation.py; after the memory format, which the
    compiled step depends on)."""
    from ampgan.speed.compilation import compiled_precisions

    return _decided(start, "compile", compiled_precisions, quiet)


def _decided(start: RunStart, field: str, decide, quiet: bool) -> RunStart:
    """The run with config field `field` set by `decide` (channels_last_precisions or
    compiled_precisions: the precisions, of those asked, where the setting is measured to pay). The
    choice goes into config.json, so a resumed run keeps it."""
    prepared = start.prepared
    chosen, _ = decide(lambda precision: prepared.config, [prepared.config.precision], prepared.dataset,
                       prepared.policy.device, _log(quiet))
    config = dataclasses.replace(prepared.config, **{field: bool(chosen)})
    return dataclasses.replace(start, prepared=dataclasses.replace(prepared, config=config))


def _log(quiet: bool):
    """Where the speed decisions say what they measured: stderr, or nowhere with --quiet."""
    return (lambda line: None) if quiet else (lambda line: click.echo(line, err=True))


def _warn_if_not_faster(start: RunStart, quiet: bool) -> None:
    """A new mixed-precision run learns (once per machine and model: cached) whether its mode is
    faster than fp32 here, and is warned when it is not. The run goes on either way."""
    from ampgan.errors import warn
    from ampgan.speed.decision import decide_for_run

    config, prepared = start.prepared.config, start.prepared
    if config.precision == "fp32" or start.resume_from is not None or not world().is_main:
        return
    # Whether the precision is faster is asked of the eager step: answered (and cached) without a compile.
    decisions, _ = decide_for_run(dataclasses.replace(config, compile=False), prepared.dataset, prepared.policy.device,
                                  precisions=[config.precision], log=_log(quiet))
    decision = decisions[config.precision]
    if not decision.useful:
        warn(f"{decision.describe()}: fp32 would train at least as fast on this machine")


def _train_and_report(start: RunStart, quiet: bool) -> None:
    _warn_if_not_faster(start, quiet)
    result = run_training(start.prepared, start.run_dir, show_progress=not quiet, resume_from=start.resume_from)
    if not world().is_main:
        return
    last = result.last_record
    click.echo(f"trained {result.steps} steps in {result.train_seconds:.1f} s "
               f"({last.get('images_per_second', 0):.0f} img/s); D class accuracy on fakes "
               f"{last.get('class_acc_fake', float('nan')):.2f} | {result.stamp}")
    resumed = f" (resumed from {start.checkpoint.name})" if start.checkpoint is not None else ""
    click.echo(f"run folder: {result.run_dir}{resumed}")


def _print_dry_run(config: TrainConfig, out: Path, resume_dir: Path | None, device) -> None:
    from ampgan.training.loop import prepare_run

    prepared = prepare_run(config, device=device)
    resolved = config.to_dict()
    if not config.budget_is_set:
        resolved["steps"] = DEFAULT_STEPS
    dataset = prepared.dataset
    click.echo(json.dumps({
        "config": resolved, "precision": prepared.policy.describe(), "device": str(prepared.policy.device),
        "dataset": {"images": len(dataset), "classes": list(dataset.class_names),
                    "image_shape": [dataset.channels, dataset.image_size, dataset.image_size]},
        "out": str(out), "resume": str(resume_dir) if resume_dir else None,
    }, indent=2))


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
