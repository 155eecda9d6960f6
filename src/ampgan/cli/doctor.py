"""`ampgan doctor`: will this model train in fp16 or bf16? Ranges per layer, a loss scale, alignment."""

from __future__ import annotations

import warnings

import click

from ampgan.cli.options import (
    DATA_AND_MODEL,
    ShellPath,
    WholeNumber,
    config_from_cli,
    default_out,
    given_changes,
    out_options,
    spec_options,
)
from ampgan.config import TrainConfig
from ampgan.errors import AmpganError, AmpganWarning, say

# Doctor records every layer's values at a smaller batch than training's; its options are made from this spec,
# so --help shows the batch it runs (it showed training's 64).
_SPEC = TrainConfig().with_fields({"budget.batch_size": 32})
_RUN_CHANGES = {"budget.batch_size", "compute.device", "seed"}


@click.command("doctor")
@spec_options(_SPEC, parts=(*DATA_AND_MODEL, "budget.batch_size", "compute.device", "seed"))
@click.option(
    "--run",
    "run_dir",
    type=ShellPath(),
    default=None,
    help="Diagnose this run's model (its config and latest weights).",
)
@click.option("--steps", "record_steps", type=WholeNumber(), default=5, show_default=True, help="FP32 steps recorded.")
@click.option(
    "--fp16-steps",
    type=WholeNumber(0),
    default=None,
    help="Real fp16 steps to see where dynamic scaling settles (default 50 on CUDA, 8 on CPU; 0: skip).",
)
@out_options("doctor")
@click.pass_context
def command(ctx: click.Context, **options) -> None:
    """Will this GAN train in fp16 or bf16? Ranges per layer, a loss scale, alignment, hardware."""
    from ampgan.config.sources import absolute_paths
    from ampgan.doctor.run import diagnose_gan, write_doctor
    from ampgan.runs.claim import claimed_folder
    from ampgan.runs.run_folder import read_run_config
    from ampgan.training.precision import resolve_device
    from ampgan.training.start import RECORDED, moved_files, run_data, saved_config

    if options["run_dir"] is not None:
        changes = absolute_paths(given_changes(ctx, options))
        saved = saved_config(options["run_dir"])
        # where its files are now (the run's own model named again: consent to import it, gan/registry.py)
        moved = {path: value for path, value in changes.items() if path in RECORDED}
        foreign = sorted(set(changes) - _RUN_CHANGES - set(moved))
        if foreign:
            raise AmpganError(
                f"--run diagnoses that run's own model and data: drop {', '.join(foreign)} "
                "(only --batch-size, --device and --seed may differ)"
            )
        # its files where they are now (--dataset folder:PATH, --data-dir DIR, --model PATH.py:F): gone, other data
        # or an edited model file is one line
        recorded = read_run_config(options["run_dir"])
        config = moved_files(options["run_dir"], saved, moved, recorded).with_fields(
            {"budget.batch_size": _SPEC.budget.batch_size} | changes
        )
        dataset = run_data(recorded, options["run_dir"], config)  # checked, and loaded once for the preflight
    else:
        config, dataset = config_from_cli(ctx, options, _SPEC), None
    device = resolve_device(config.compute.device)
    fp16_steps = options["fp16_steps"] if options["fp16_steps"] is not None else (50 if device.type == "cuda" else 8)
    out = options["out"] or default_out("doctor")
    from ampgan.doctor.preflight import check_before_training

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AmpganWarning)
        # what cannot work stops here (exit 2), its errors said; the warnings are said once, in the summary
        findings = check_before_training(config, dataset, log=say, said=("error",))
    with claimed_folder(out, options["overwrite"], "doctor", data=config.data.folders_read), warnings.catch_warnings():
        warnings.simplefilter("ignore", AmpganWarning)  # fp16-on-CPU speed is part of the report itself
        report = diagnose_gan(config, options["record_steps"], fp16_steps, options["run_dir"])
        report.update(
            preflight=[{"severity": f.severity, "check": f.check, "text": f.text} for f in findings],
            summary_lines=[f"preflight: {f.line()}" for f in findings] + report["summary_lines"],
        )
        write_doctor(report, out)
    say(
        *(f"- {line}" for line in report["summary_lines"]),
        f"{report['environment']['hardware_summary']} | model {config.model.name} | batch "
        f"{config.budget.batch_size} | torch {report['environment']['versions']['torch']}",
        f"doctor: {out / 'doctor.json'} (figures doctor_gradients.png, doctor_layers.png)",
    )
