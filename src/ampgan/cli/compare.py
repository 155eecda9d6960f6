"""`ampgan compare`: FP32 vs mixed precision, same start, same budget; speed, quality, cost, report."""

from __future__ import annotations

import warnings
from pathlib import Path

import click

from ampgan.cli.options import (Duration, Fraction, IntList, PositiveNumber, PrecisionList, WholeNumber,
                                channels_last_option, compile_option, precisions_given,
                                data_source_options, dataset_option, default_out, device_option, model_options,
                                out_options, seed_option)
from ampgan.errors import AmpganWarning


@click.command("compare")
@dataset_option()
@click.option("--precisions", type=PrecisionList(), default=None,
              help="Comma-separated; default fp32 and this device's best mixed mode.")
@click.option("--time-budget", type=Duration(), default="40s", show_default=True,
              help="Training wall time per precision and seed (the study: 7m).")
@click.option("--batch-size", type=WholeNumber(), default=64, show_default=True)
@seed_option
@click.option("--seeds", type=WholeNumber(), default=3, show_default=True,
              help="Seeds per precision (--seed, --seed + 1, ...), each an identical start for every precision; "
                   "the verdict pairs them.")
@device_option
@model_options
@channels_last_option
@compile_option
@click.option("--eval-points", type=WholeNumber(), default=4, show_default=True, help="Evaluations during training.")
@click.option("--eval-samples", type=WholeNumber(2), default=1000, show_default=True,
              help="Generated samples per evaluation.")
@click.option("--bench", "bench_file", type=click.Path(path_type=Path), default=None,
              help="Reuse these bench results instead of measuring.")
@click.option("--bench-batch-sizes", type=IntList(), default="16,64,256", show_default=True)
@click.option("--instance", default=None, help="Price the runs on this catalog instance.")
@click.option("--price-per-hour", type=PositiveNumber(), default=None)
@click.option("--target-accuracy", type=Fraction(), default=None, help="Quality target (default: 80% of the best final).")
@data_source_options
@out_options("compare")
@click.option("--doctor", "with_doctor", is_flag=True, help="Also run 'ampgan doctor' and put its summary in the report.")
@click.option("--quiet", is_flag=True)
def command(**options) -> None:
    """FP32 vs mixed precision: same start, same budget; speed, quality, cost and a report."""
    from ampgan.runs.claim import claimed_folder
    from ampgan.study.compare import CompareSpec, run_compare
    from ampgan.study.report import render_report

    spec = CompareSpec(
        dataset=options["dataset"], precisions=options["precisions"] or (), time_budget_s=options["time_budget"],
        batch_size=options["batch_size"], seed=options["seed"], seeds=options["seeds"], device=options["device"],
        width=options["width"],
        z_dim=options["z_dim"], eval_points=options["eval_points"], eval_samples=options["eval_samples"],
        bench=options["bench_file"], bench_batch_sizes=options["bench_batch_sizes"],
        instance=options["instance"], price_per_hour=options["price_per_hour"],
        target_accuracy=options["target_accuracy"], data_dir=options["data_dir"], classes=options["classes"],
        max_per_class=options["max_per_class"],
        channels_last=precisions_given(options["channels_last"]),
        compile=precisions_given(options["compile"]),
    )
    spec.train_config(spec.precisions[0] if spec.precisions else "fp32")  # validates the shared options
    out = options["out"] or default_out("compare")
    with claimed_folder(out, options["overwrite"]):
        document = run_compare(spec, out, show_progress=not options["quiet"], log=lambda line: click.echo(line, err=True))
        if options["with_doctor"]:
            _add_doctor(spec, out)
        md_path, html_path = render_report(out)
    for line in document["verdict"]:
        click.echo(line)
    click.echo(f"report: {html_path} (and {md_path.name})")


def _add_doctor(spec, out: Path) -> None:
    from ampgan.doctor.run import diagnose_gan, write_doctor
    from ampgan.training.precision import resolve_device

    click.echo("doctor: recording ranges over 3 fp32 steps ...", err=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AmpganWarning)
        fp16_steps = 0 if resolve_device(spec.device).type == "cpu" else 30
        report = diagnose_gan(spec.train_config("fp32"), steps=3, fp16_steps=fp16_steps)
    write_doctor(report, out / "doctor")
