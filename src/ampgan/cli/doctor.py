"""`ampgan doctor`: will this model train in fp16 or bf16? Ranges per layer, a loss scale, alignment."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import click

from ampgan.cli.options import (WholeNumber, data_source_options, dataset_option, default_out, device_option,
                                model_options, out_options, seed_option)
from ampgan.config import TrainConfig
from ampgan.errors import AmpganWarning


@click.command("doctor")
@dataset_option()
@click.option("--run", "run_dir", type=click.Path(path_type=Path), default=None,
              help="Diagnose this run's model (its config and latest weights).")
@click.option("--steps", type=WholeNumber(), default=5, show_default=True, help="FP32 steps recorded.")
@click.option("--fp16-steps", type=WholeNumber(0), default=None,
              help="Real fp16 steps to see where dynamic scaling settles (default 50 on CUDA, 8 on CPU; 0: skip).")
@click.option("--batch-size", type=WholeNumber(), default=32, show_default=True)
@model_options
@device_option
@data_source_options
@seed_option
@out_options("doctor")
def command(**options) -> None:
    """Will this model train in fp16 or bf16? Ranges per layer, a loss scale, alignment, hardware."""
    from ampgan.doctor.run import diagnose_gan, write_doctor
    from ampgan.runs.claim import claimed_folder
    from ampgan.runs.run_folder import read_run_config
    from ampgan.training.precision import resolve_device

    if options["run_dir"] is not None:
        config = TrainConfig.from_dict(read_run_config(options["run_dir"])["config"])
        config = dataclasses.replace(config, batch_size=options["batch_size"], device=options["device"])
    else:
        config = TrainConfig(dataset=options["dataset"], batch_size=options["batch_size"], width=options["width"],
                             z_dim=options["z_dim"], device=options["device"], data_dir=options["data_dir"],
                             classes=options["classes"], max_per_class=options["max_per_class"], seed=options["seed"])
    device = resolve_device(config.device)
    fp16_steps = options["fp16_steps"]
    if fp16_steps is None:
        fp16_steps = 50 if device.type == "cuda" else 8
    out = options["out"] or default_out("doctor")
    with claimed_folder(out, options["overwrite"]), warnings.catch_warnings():
        warnings.simplefilter("ignore", AmpganWarning)  # fp16-on-CPU speed is part of the report itself
        report = diagnose_gan(config, options["steps"], fp16_steps, options["run_dir"])
        write_doctor(report, out)
    for line in report["summary_lines"]:
        click.echo(f"- {line}")
    click.echo(f"{report['environment']['hardware_summary']} | batch {config.batch_size} | "
               f"torch {report['environment']['versions']['torch']}")
    click.echo(f"doctor: {out / 'doctor.json'} (figures doctor_gradients.png, doctor_layers.png)")
