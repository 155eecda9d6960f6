"""`ampgan compare`: FP32 vs mixed precision, same start, same budget; speed, quality, cost, report."""

from __future__ import annotations

from pathlib import Path

import click

from ampgan.cli.options import (
    DATA_AND_MODEL,
    ShellPath,
    default_out,
    given_changes,
    out_options,
    own_values,
    precisions_given,
    spec_options,
)
from ampgan.errors import AmpganError, say, say_json
from ampgan.sections import with_settings
from ampgan.study.spec import DEFAULT_BUDGET_S, CompareSpec, compare_base


# The help reads the default budget from its one declaration (study/spec.py DEFAULT_BUDGET_S).
@click.command(
    "compare",
    help="FP32 vs mixed precision on any GAN: same start, same budget; speed, quality, cost and a report. Every "
    "run trains the config `train` would (--set reaches any field or model option, --set compare.FIELD=VALUE the "
    f"study's own settings); the default budget is {DEFAULT_BUDGET_S:g} s of training per precision and seed. An "
    "interrupted study keeps what it finished: --resume DIR, or the same command again, continues it.",
)
@spec_options(CompareSpec(), "compare.", parts=(*DATA_AND_MODEL, "budget.", "compute.", "seed"))
@out_options("compare")
@click.option(
    "--resume",
    type=ShellPath(),
    default=None,
    help="Continue the interrupted study in this folder, with the options it was started with.",
)
@click.option(
    "--doctor", "with_doctor", is_flag=True, help="Also run 'ampgan doctor' and put its summary in the report."
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the answer as one JSON object on stdout (verdict, speedups, final quality, cost to the "
    "target) instead of the verdict's sentences; the log stays on stderr.",
)
@click.pass_context
def command(ctx: click.Context, **options) -> None:
    from ampgan.study.progress import has_study, load_progress, with_its_data

    resume = options["resume"]
    if resume is not None:
        given = sorted(
            name
            for name in ctx.params
            if name not in _RESUME_MAY_GIVE and ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
        )
        progress = load_progress(resume)
        try:
            spec = CompareSpec.from_document(progress.spec, resume, progress.path)
        except (AmpganError, KeyError, TypeError, ValueError) as error:
            raise AmpganError(
                f"{progress.path} is damaged or foreign (its spec: {error}): start the study again with --overwrite"
            ) from None
        places = {"dataset": "data.dataset", "data_dir": "data.data_dir", "model": "model.name"}
        # where its files are now (the study's own model named again: consent to import it, gan/registry.py)
        moved = {places[name]: str(options[name]) for name in given if name in places}
        given = [name for name in given if name not in places]  # (with_its_data)
        if given:
            raise AmpganError(
                f"--resume continues the study with the options it was started with: drop "
                f"{', '.join('--' + name.replace('_', '-') for name in given)}"
            )
        spec, dataset = with_its_data(spec, progress, moved)
        _study(spec, resume, options, reopen=True, dataset=dataset)
    else:
        spec = with_settings(
            CompareSpec(),
            own_values(CompareSpec(), "compare.", options),
            "compare",
            base=compare_base(given_changes(ctx, options, CompareSpec(), "compare.")),
            channels_last=precisions_given(options["channels_last"]),
            compile=precisions_given(options["compile"]),
        )
        out = options["out"] or default_out("compare")
        # The same command again on a folder it was interrupted in continues there (study.json says so).
        _study(spec, out, options, reopen=has_study(out) and not options["overwrite"])


_RESUME_MAY_GIVE = {"resume", "quiet", "with_doctor", "as_json"}


def _study(spec, out: Path, options: dict, reopen: bool, dataset=None) -> None:
    from ampgan.study.session import run_study

    document, md_path, html_path = run_study(
        spec,
        out,
        overwrite=options["overwrite"],
        reopen=reopen,
        show_progress=not options["quiet"],
        log=lambda line: say(line, err=True),
        with_doctor=options["with_doctor"],
        dataset=dataset,
    )
    if options.get("as_json"):
        from ampgan.study.answer import study_of

        say_json(study_of(document, out, html_path).to_dict())
        return
    say(*document.verdict, f"report: {html_path} (and {md_path.name})")
