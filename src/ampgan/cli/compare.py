"""`ampgan compare`: FP32 vs mixed precision, same start, same budget; speed, quality, cost, report."""

from __future__ import annotations

from pathlib import Path

import click

from ampgan.cli.options import (
    DATA_FLAGS,
    MODEL_FLAGS,
    Fraction,
    IntList,
    PositiveNumber,
    PrecisionList,
    WholeNumber,
    config_flags,
    config_from_cli,
    default_out,
    out_options,
    precisions_given,
)
from ampgan.errors import AmpganError


@click.command("compare")
@config_flags(*DATA_FLAGS, *MODEL_FLAGS, "batch_size", "time_budget", "steps", "seed", "device", "channels_last",
              "compile")
@click.option("--precisions", type=PrecisionList(), default=None,
              help="Comma-separated; default fp32 and this device's best mixed mode.")
@click.option("--seeds", type=WholeNumber(), default=3, show_default=True,
              help="Seeds per precision (--seed, --seed + 1, ...), each an identical start for every precision; "
                   "the verdict pairs them.")
@click.option("--eval-points", type=WholeNumber(), default=4, show_default=True, help="Evaluations during training.")
@click.option("--eval-samples", type=WholeNumber(2), default=1000, show_default=True,
              help="Generated samples per evaluation.")
@click.option("--bench", "bench_file", type=click.Path(path_type=Path), default=None,
              help="Reuse these bench results instead of measuring.")
@click.option("--bench-batch-sizes", type=IntList(), default="16,64,256", show_default=True)
@click.option("--bench-seconds", type=PositiveNumber(), default=10.0, show_default=True,
              help="Measure the bench at least this long per batch size (at most three times as long).")
@click.option("--instance", default=None, help="Price the runs on this catalog instance.")
@click.option("--price-per-hour", type=PositiveNumber(), default=None)
@click.option("--target-accuracy", type=Fraction(), default=None, help="Quality target (default: 80% of the best final).")
@out_options("compare")
@click.option("--resume", type=click.Path(path_type=Path), default=None,
              help="Continue the interrupted study in this folder, with the options it was started with.")
@click.option("--doctor", "with_doctor", is_flag=True, help="Also run 'ampgan doctor' and put its summary in the report.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the answer as one JSON object on stdout (verdict, speedups, final quality, cost to the "
                   "target) instead of the verdict's sentences; the log stays on stderr.")
@click.pass_context
def command(ctx: click.Context, **options) -> None:
    """FP32 vs mixed precision on any GAN: same start, same budget; speed, quality, cost and a report.
    Every run trains the config `train` would (--set reaches any field or model option); the default
    budget is 40 s of training per precision and seed. An interrupted study keeps what it finished:
    --resume DIR, or the same command again, continues it."""
    from ampgan.study.compare import CompareSpec
    from ampgan.study.progress import has_study, load_progress

    resume = options["resume"]
    if resume is not None:
        given = sorted(name for name in ctx.params if name not in _RESUME_MAY_GIVE and
                       ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE)
        progress = load_progress(resume)
        try:
            spec = CompareSpec.from_document(progress.spec)
        except (AmpganError, KeyError, TypeError, ValueError) as error:
            raise AmpganError(f"{progress.path} is damaged or foreign (its spec: {error}): start the study again "
                              "with --overwrite") from None
        if "model" in given and options["model"] == spec.base.model.name:
            given.remove("model")  # naming the study's own model: consent to import it (gan/registry.py)
        if given:
            raise AmpganError(f"--resume continues the study with the options it was started with: drop "
                              f"{', '.join('--' + name.replace('_', '-') for name in given)}")
        _study(spec, resume, options, reopen=True)
        return
    base = config_from_cli(ctx, options, defaults={"budget.time_budget_s": 40.0})
    if base.budget.steps is not None and "budget.time_budget_s" not in _given_paths(ctx, options):
        base = base.with_fields({"budget.time_budget_s": None})  # --steps alone: a step budget
    spec = CompareSpec(
        base=base, precisions=options["precisions"] or (), seeds=options["seeds"],
        eval_points=options["eval_points"], eval_samples=options["eval_samples"],
        bench=options["bench_file"], bench_batch_sizes=options["bench_batch_sizes"],
        bench_seconds=options["bench_seconds"], instance=options["instance"],
        price_per_hour=options["price_per_hour"], target_accuracy=options["target_accuracy"],
        channels_last=precisions_given(options["channels_last"]),
        compile=precisions_given(options["compile"]),
    )
    out = options["out"] or default_out("compare")
    # The same command again on a folder it was interrupted in continues there (study.json says so).
    _study(spec, out, options, reopen=has_study(out) and not options["overwrite"])


_RESUME_MAY_GIVE = {"resume", "quiet", "with_doctor", "as_json"}


def _study(spec, out: Path, options: dict, reopen: bool) -> None:
    from ampgan.study.session import run_study

    document, md_path, html_path = run_study(spec, out, overwrite=options["overwrite"], reopen=reopen,
                                             show_progress=not options["quiet"],
                                             log=lambda line: click.echo(line, err=True),
                                             with_doctor=options["with_doctor"])
    if options.get("as_json"):
        import json

        from ampgan.study.answer import study_of

        click.echo(json.dumps(study_of(document, out, html_path).to_dict()))
        return
    for line in document["verdict"]:
        click.echo(line)
    click.echo(f"report: {html_path} (and {md_path.name})")


def _given_paths(ctx, options) -> set[str]:
    from ampgan.cli.options import given_changes

    return set(given_changes(ctx, options))
