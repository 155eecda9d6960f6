"""Commands on finished runs: `ampgan evaluate`, `generate` and `report`."""

from __future__ import annotations

import click

from ampgan.cli.options import ShellPath, WholeNumber, each_once, moved_files_options, seed_option, trust_model_option
from ampgan.errors import AmpganError, say


@click.command("evaluate")
@click.argument("run_dirs", nargs=-1, required=True, type=ShellPath(), callback=each_once)
@click.option(
    "--samples",
    type=WholeNumber(2),
    default=1000,
    show_default=True,
    help="Generated samples, classes in equal shares.",
)
@seed_option
@click.option("--evaluator-cache", type=ShellPath(), default=None)
@moved_files_options
@trust_model_option
def evaluate(run_dirs, samples, seed, evaluator_cache, dataset, data_dir, model) -> None:
    """Quality of trained generators: evaluator accuracy, Fréchet distance, KID -> quality.json."""
    from ampgan.quality.assess import evaluate_runs
    from ampgan.quality.registry import format_value, table_metrics

    results = evaluate_runs(
        list(run_dirs),
        samples,
        seed,
        evaluator_cache,
        {"data.dataset": dataset, "data.data_dir": data_dir, "model.name": model},
    )
    shown = table_metrics(conditional=any("evaluator_accuracy" in item.quality for item in results))
    width = {m.key: max(9, len(m.label)) for m in shown}
    say(f"{'run':<40} {'precision':>9} {'step':>7} " + " ".join(f"{m.label:>{width[m.key]}}" for m in shown))
    for item in results:
        values = " ".join(f"{format_value(m, item.quality.get(m.key)):>{width[m.key]}}" for m in shown)
        say(f"{str(item.run_dir)[-40:]:<40} {item.precision:>9} {item.step:>7} {values}")
    say(
        f"{samples} samples each | evaluator held-out accuracy {results[0].evaluator.held_out_accuracy:.3f}",
        *(f"sampled from {weights}" for weights in sorted({item.sampled_from for item in results})),
    )


@click.command("generate")
@click.argument("run_dir", type=ShellPath())
@click.option(
    "--class",
    "class_",
    default=None,
    help="Class name or index: a conditional GAN draws that class (it needs one), an image-to-image G translates "
    "that class's images; a G drawing from noise alone takes none.",
)
@click.option("--n", type=WholeNumber(), default=64, show_default=True)
@seed_option
@click.option(
    "--out",
    type=ShellPath(),
    required=True,
    help="A .png file (an image grid) or a .npz file (images, labels, class name).",
)
@click.option(
    "--format",
    "format_",
    type=click.Choice(["png", "npz"]),
    default=None,
    help="Checked against --out's ending, which decides the format when this is not given.",
)
@click.option("--overwrite", is_flag=True, help="Replace --out if it exists.")
@moved_files_options
@trust_model_option
def generate(run_dir, class_, n, seed, out, format_, overwrite, dataset, data_dir, model) -> None:
    """Samples of a trained generator (of one class: a conditional GAN's drawn, an image-to-image G's translated);
    the same seed gives the same images."""
    from ampgan.runs.claim import output_file, outside_data
    from ampgan.training.trained import (
        class_index,
        class_samples,
        load_trained_run,
        write_class_samples,
    )

    out = output_file(out, (f".{format_}",) if format_ else (".png", ".npz"), overwrite)
    run = load_trained_run(run_dir, moved={"data.dataset": dataset, "data.data_dir": data_dir, "model.name": model})
    outside_data(out, run.config.data.folders_read, "generate")  # an image there would be read as training data
    # An unconditional image-to-image G translates the images of the class named, if one is.
    shape = run.document["dataset"]["image_shape"]
    if not run.gan.conditional and not (class_ is not None and run.gan.translates(shape)):
        if class_ is not None:
            raise AmpganError(
                f"model {run.gan.name} of {run_dir} is unconditional: it draws no class; leave out --class"
            )
        what = f"{n} samples from step {run.step} of {run_dir} ({run.gan.sampling_weights})"
        write_class_samples(class_samples(run, None, n, seed), -1, "", out, f"{what} | {run.document.get('stamp')}")
        say(f"wrote {out}: {what}")
        return
    if class_ is None:
        raise AmpganError(
            f"model {run.gan.name} of {run_dir} is conditional: name the class with --class "
            f"(one of {', '.join(run.class_names[:10])}{', ...' if len(run.class_names) > 10 else ''})"
        )
    label = class_index(run.class_names, class_)
    what = (
        f"{n} samples of class {run.class_names[label]!r} from step {run.step} of {run_dir} "
        f"({run.gan.sampling_weights})"
    )
    write_class_samples(
        class_samples(run, label, n, seed), label, run.class_names[label], out, f"{what} | {run.document.get('stamp')}"
    )
    say(f"wrote {out}: {what}")


@click.command("report")
@click.argument("out_dir", type=ShellPath())
def report(out_dir) -> None:
    """Re-render report.md and report.html of a comparison from its files."""
    from ampgan.runs.claim import FolderLock
    from ampgan.study.document import load_compare
    from ampgan.study.report import render_report

    load_compare(out_dir)  # a study's folder (checked, nothing written in it) before its lock is taken
    lock = FolderLock(out_dir)  # not while `compare` still writes it: its report would be replaced by an older one
    try:
        md_path, html_path = render_report(out_dir)
    finally:
        lock.release()
    say(f"report: {html_path} (and {md_path.name})")


commands = (evaluate, generate, report)
