"""The comparison report: one list of sections, rendered to report.md and to a self-contained
report.html (images embedded) through the Jinja2 templates beside this file.

`ampgan report DIR` re-renders both from compare.json, the run folders and the bench/cost files,
so a report can be rebuilt (or restyled) without training again.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import numpy as np
from PIL import Image

from ampgan.bench.output import load_results, model_text, speedup_text
from ampgan.files.atomic import write_text_atomically
from ampgan.files.jsonfile import not_a_regular_file, read_json
from ampgan.files.paths import file_in, inside, leads_out, left_out
from ampgan.files.schema import check_shape
from ampgan.gan.ema import G_OWN_WEIGHTS
from ampgan.plotting import precision_colour, save_figure, subplots
from ampgan.precisions import FP32
from ampgan.projection import document as projection
from ampgan.quality.registry import format_value, table_metrics
from ampgan.runs.run_folder import read_metrics
from ampgan.speed.intervals import speedup_band
from ampgan.study.document import CompareDocument, CostSection, RunSummary, StudySpecRecord, load_compare
from ampgan.study.evaluate import read_quality_curve
from ampgan.study.spec import budget_text
from ampgan.study.verdict import verdict, with_interval


def _run_folder(out_dir: Path, recorded: str) -> Path:
    """A run folder compare.json names: inside the study, or the document is refused (files/paths.py)."""
    return inside(out_dir, recorded, Path(out_dir) / "compare.json", "run 'ampgan compare' again")


# A sample grid is a few hundred pixels a side; anything far larger is not ampgan's and is not decoded.
MAX_GRID_PIXELS = 4096 * 4096


def _latest_grid(out_dir: Path, run_dir: Path) -> tuple[np.ndarray | None, str]:
    """(the pixels of the run's last sample grid, "") or (None, why it is not shown): a grid that is a link
    leading out of the study (the grid itself, its samples/ folder, a `../` link) is left out with a warning,
    and a damaged or oversized PNG costs its panel, never the report."""
    grids = sorted((run_dir / "samples").glob("step-*.png"))
    if not grids:
        return None, "no sample grid"
    if left_out(out_dir, grids[-1], "the report"):
        return None, "a link leading outside the study"
    if not_a_regular_file(grids[-1]):  # a FIFO's open would block the report forever
        return None, f"{grids[-1].name} is {not_a_regular_file(grids[-1])}"
    try:
        with Image.open(grids[-1]) as image:
            if image.width * image.height > MAX_GRID_PIXELS:
                return None, f"{grids[-1].name} is {image.width}x{image.height} px, not a sample grid"
            return np.asarray(image.convert("RGB") if image.mode not in ("L", "RGB") else image), ""
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as error:
        return None, f"{grids[-1].name} cannot be read ({type(error).__name__})"


def figure_4_title(document: CompareDocument) -> str:
    """A race on time shows the samples after the same training time; one on steps (--steps), after as many steps."""
    same = "training time" if document.spec.time_budget_s is not None else "number of steps"
    return f"Figure 4: samples after the same {same}"


def figure_samples(document: CompareDocument, out_dir: Path, footer: str) -> Path:
    """Figure 4: each precision's final samples side by side (same noise, one row per class)."""
    runs = document.runs
    figure, axes = subplots(1, len(runs), figsize=(4.2 * len(runs), 5.2), dpi=120, squeeze=False)
    for axis, (precision, run) in zip(axes[0], runs.items()):
        grid, problem = _latest_grid(out_dir, _run_folder(out_dir, run.run_dir))
        if grid is not None:
            axis.imshow(grid, cmap="gray" if grid.ndim == 2 else None, interpolation="nearest")
        else:
            axis.text(0.5, 0.5, f"samples not shown:\n{problem}", ha="center", va="center", fontsize=8, wrap=True)
        seed = run.seeds[0] if run.seeds is not None else ""
        first = run.first.final
        quality = (
            f"evaluator acc. {first['evaluator_accuracy']:.2f}"
            if "evaluator_accuracy" in first
            else f"Fréchet distance {first['frechet_distance']:.2f}"
        )
        axis.set_title(
            f"{precision}, seed {seed}: {run.first.steps} steps in {run.train_seconds:.0f} s\n"
            f"{quality}, recall {first.get('recall', float('nan')):.2f}",
            fontsize=9,
        )
        axis.axis("off")
    rows = "one row per class" if document.headline.higher_is_better else "unconditional: no class per row"
    figure.suptitle(f"{figure_4_title(document)} (same noise, {rows})", fontsize=10)
    return save_figure(figure, out_dir / "fig4_samples.png", footer)


def _curves_over_seeds(document: CompareDocument, out_dir: Path, precision: str, metric: str):
    """(mean seconds, mean value, lowest, highest) per evaluation index over the precision's seeds
    (every seed evaluates at the same training-time marks, so index k is the same moment)."""
    curves = [
        read_quality_curve(file_in(_run_folder(out_dir, run.run_dir), "quality.jsonl"))
        for run in document.runs[precision].seed_runs
    ]
    length = min(len(c) for c in curves)  # the evaluations every seed has
    seconds = np.mean([[p["train_seconds"] for p in c[:length]] for c in curves], axis=0)
    values = np.array([[p.get(metric, np.nan) for p in c[:length]] for c in curves], dtype=float)
    return seconds, values.mean(0), values.min(0), values.max(0), len(curves)


def figure_quality(document: CompareDocument, out_dir: Path, footer: str) -> Path:
    panels = [
        ("evaluator_accuracy", "evaluator accuracy (intended class)")
        if document.headline.higher_is_better
        else ("coverage", "coverage (share of real covered, k=5)"),
        ("recall", "recall (share of real covered)"),
        ("frechet_distance", "Fréchet distance (evaluator features)"),
    ]
    figure, axes = subplots(1, 3, figsize=(13, 4), dpi=120)
    seeds = 1
    for axis, (metric, label) in zip(axes, panels):
        for precision in document.runs:
            seconds, mean, low, high, seeds = _curves_over_seeds(document, out_dir, precision, metric)
            colour = precision_colour(precision)
            axis.plot(seconds, mean, marker="o", label=precision, color=colour)
            if seeds > 1:
                axis.fill_between(seconds, low, high, color=colour, alpha=0.2)
        if document.floor.get(metric) is not None:
            axis.axhline(document.floor[metric], ls="--", color="#888", label="real images")
        axis.set(xlabel="training time (s)", ylabel=label)
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    if document.target:
        target_axis = axes[0] if document.headline.higher_is_better else axes[2]
        target_axis.axhline(document.target, ls=":", color="#d62728", label=f"target {document.target:.2f}")
        target_axis.legend(fontsize=8)
    axes[2].set_yscale("log")
    band = f"mean of {seeds} seeds, band: lowest to highest seed" if seeds > 1 else "one seed"
    figure.suptitle(f"Quality vs training time ({band})", fontsize=10)
    return save_figure(figure, out_dir / "fig5_quality_vs_time.png", footer)


def figure_losses(document: CompareDocument, out_dir: Path, footer: str) -> tuple[Path, Path | None]:
    figure, axis = subplots(figsize=(7, 4), dpi=120)
    scaled = {}
    for precision, run in document.runs.items():
        metrics = [
            m for m in read_metrics(file_in(_run_folder(out_dir, run.run_dir), "metrics.jsonl")) if "loss_d" in m
        ]
        seconds = [m["train_seconds"] for m in metrics]
        colour = precision_colour(precision)
        axis.plot(seconds, [m["loss_d"] for m in metrics], color=colour, label=f"{precision} D")
        axis.plot(seconds, [m.get("loss_g") for m in metrics], color=colour, ls="--", label=f"{precision} G")
        if metrics and "loss_scale_d" in metrics[0]:
            scaled[precision] = metrics
    axis.set(xlabel="training time (s)", ylabel="loss", title="Losses per precision")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8)
    losses = save_figure(figure, out_dir / "fig6_losses.png", footer)
    if not scaled:
        return losses, None
    figure, axis = subplots(figsize=(7, 3.5), dpi=120)
    for precision, metrics in scaled.items():
        steps = [m["step"] for m in metrics]
        scales = [key for key in metrics[-1] if key.startswith("loss_scale_")]  # D's, G's and each extra update's
        for key, style in zip(scales, ("-", "--", ":", "-.") * len(scales)):
            name = key.removeprefix("loss_scale_")  # D and G by their letters, an extra update by its name
            name = name.upper() if len(name) == 1 else name
            axis.plot(steps, [m.get(key) for m in metrics], ls=style, label=f"{precision} scale {name}")
        skipped = sum(v for k, v in metrics[-1].items() if k.startswith("skipped_") and k.endswith("_total"))
        axis.set_title(f"fp16 loss scale ({skipped} skipped updates in all)")  # D's, G's and each extra update's
    axis.set(xlabel="step", ylabel="loss scale")
    axis.set_yscale("log", base=2)
    axis.legend(fontsize=8)
    return losses, save_figure(figure, out_dir / "fig7_loss_scale.png", footer)


@dataclass
class Section:
    """One part of the report; exactly one of lines, table, paragraph or figure is its content."""

    title: str
    lines: list[str] = field(default_factory=list)
    table: list[list[str]] | None = None
    paragraph: str = ""
    figure: Path | None = None
    folded: bool = False  # HTML: inside <details>, open on a click (per-class tables, confusion matrices)


def _no_faster_mode_sections(document: CompareDocument, out_dir: Path) -> list[Section]:
    """The report of a study that found no mode faster than fp32: the verdict, the machine, the decisions."""
    rows = [["precision", "ms per step", "fp32 ms per step", "speedup [95% CI]", "rounds", "verdict"]] + [
        [
            name,
            _ms(decision.step_s),
            _ms(decision.fp32_step_s),
            speedup_band(bounds.estimate, bounds.low, bounds.high) if (bounds := decision.interval) else "-",
            "" if decision.rounds is None else str(decision.rounds),
            decision.verdict + (f" ({decision.note})" if decision.note else ""),
        ]
        for name, decision in (document.decisions or {}).items()
    ]
    return [
        Section("Verdict", lines=document.verdict or []),
        *projection_sections(out_dir),
        Section(
            "Environment",
            lines=_machine_lines(document)
            + [f"model {document.spec.model_name} on {document.dataset.name}, batch {document.spec.batch_size}"],
        ),
        Section(
            "Speed decisions: the real training step against fp32",
            table=rows,
            paragraph="Each mode's training step timed in interleaved rounds against fp32's until the 95% "
            "interval of the speedup says faster, slower or no clear difference (speed/decision.py).",
        ),
    ]


def _ms(seconds: float | None) -> str:
    return f"{seconds * 1e3:.1f}" if seconds else "-"


def report_sections(document: CompareDocument, out_dir: Path) -> list[Section]:
    """What a reader looks at first comes first: the verdict, the pictures (Figure 4, then quality against
    time, then speed and cost), the final metrics; the environment, the per-class tables, the doctor's
    summary and the losses after them."""
    if not document.raced:
        return _no_faster_mode_sections(document, out_dir)
    footer = figure_footer(document)
    losses, scale = figure_losses(document, out_dir, footer)
    pictures = [
        (figure_4_title(document), figure_samples(document, out_dir, footer)),
        ("Quality vs training time", figure_quality(document, out_dir, footer)),
        ("Figure 1: time per batch vs batch size", out_dir / "bench" / "fig1_time_per_batch.png"),
        ("Figure 2: time per 1000 samples", out_dir / "bench" / "fig2_time_per_1000_samples.png"),
        ("Figure 3: cost of 1M batches", out_dir / "cost" / "fig3_cost.png"),
    ]
    path = out_dir / "bench" / "results.json"
    bench = load_results(path) if _shown(out_dir, path) else {"configs": [], "speedups": []}
    sections = [
        Section("Verdict", lines=document.verdict or verdict(document, bench["speedups"])),
        *(Section(title, figure=path) for title, path in pictures if _shown(out_dir, path)),
        Section(
            "Final metrics",
            table=_metrics_table(document),
            paragraph=_price_note(document),
        ),
        Section(
            "Speed: the bench against the budgeted runs", table=_speed_rows(document, bench), paragraph=_SPEED_NOTE
        ),
        *projection_sections(out_dir),
        Section("Environment", lines=_environment_lines(document)),
        *_class_sections(document),
    ]
    doctor = next(
        (p for p in (out_dir / "doctor.json", out_dir / "doctor" / "doctor.json") if _shown(out_dir, p)), None
    )
    doctor_lines = (
        check_shape(
            read_json(doctor, missing="", damaged=f"{doctor} is damaged: run 'ampgan doctor' again"),
            {"?summary_lines": [str]},
            str(doctor),
            "run 'ampgan doctor' again",
        ).get("summary_lines", [])
        if doctor
        else []
    )
    if doctor_lines:
        sections.append(Section("Precision doctor", lines=doctor_lines))
    sections += [
        Section(title, figure=path)
        for title, path in (("Losses", losses), ("fp16 loss scale and skipped steps", scale))
        if _shown(out_dir, path)
    ]
    return sections


def _shown(out_dir: Path, path: Path | None) -> bool:
    """Whether the report shows this file of the study: it exists, and lies inside the study (a link leading
    out is left out with one warning line: files/paths.py)."""
    return path is not None and path.is_file() and not left_out(out_dir, path, "the report")


def projection_sections(out_dir: Path) -> list[Section]:
    """ "On other hardware": per GPU and batch size, fp32 against the fastest mixed mode the model
    projects (projection/projection.json), and its figure. Nothing when the study made no projection."""
    path = out_dir / "projection" / "projection.json"
    if not _shown(out_dir, path):
        return []
    document = read_json(path, missing="", damaged=f"{path} is damaged: run 'ampgan project' on the bench results")
    projection.check_projection(document, str(path), "run 'ampgan project' on the study's bench/results.json")
    ok = [r for r in document["rows"] if r.get("status") == "ok"]
    pairs = (
        projection.fastest_mixed(ok, device, batch)
        for device, batch in dict.fromkeys((r["device"], r["batch_size"]) for r in ok)
    )
    rows = [_projection_row(base, best) for base, best in filter(None, pairs)]
    if not rows:
        return []
    paragraph = (
        f"PROJECTED, not measured: a kernel model calibrated on measured GPU kernels (DeepBench V100 and P100) "
        f"over this step's operations (traced on {document['traced_on']}), with NVIDIA's datasheet peaks and "
        "bandwidths, composed into a step by quantities fitted on published end-to-end training throughput "
        "(NVIDIA DeepLearningExamples, Lambda); on GPUs with TF32 the speedup is first over PyTorch's default "
        "(TF32 convolutions), then over strict fp32. Cost of 1M batches at the cheapest catalog price per GPU. "
        "The model's error on whole training steps and kernels it was not fitted to: "
        + "; ".join(document.get("calibration_error") or projection.calibration_error_lines())
        + ". Every precision, the bands and the sources: projection/projection.md; any GPU or batch size: "
        "ampgan project bench/results.json."
    )
    figure = out_dir / "projection" / "fig_projection.png"
    return [
        Section("On other hardware (PROJECTED, not measured)", table=[_PROJECTION_HEADER, *rows], paragraph=paragraph),
        *([Section("Projected time and speedup on other GPUs", figure=figure)] if _shown(out_dir, figure) else []),
    ]


_PROJECTION_HEADER = [
    "GPU",
    "batch",
    "fp32 ms [band]",
    "fastest mixed mode",
    "its ms [band]",
    "speedup [band]: over the TF32 default first",
    "bound",
    "cost [band] of 1M batches, fp32 to mixed",
    "calibration",
]


def _projection_row(base: dict, best: dict) -> list[str]:
    """One GPU and batch size: fp32's projected row against the fastest mixed mode's, each time and cost with
    its band (a projected number is never shown without it)."""
    return [
        best["device"],
        str(best["batch_size"]),
        projection.ms_text(base),
        best["precision"],
        projection.ms_text(best),
        projection.speedup_text(best),
        best["bound"] + (" (does not fit)" if best.get("fits") is False else ""),
        f"{projection.cost_text(base['cost'])} to {projection.cost_text(best['cost'])} "
        f"{best['cost'].get('currency', 'USD')}"
        if "cost" in base and "cost" in best
        else "no price",
        projection.calibration_cell(best),
    ]


def _machine_lines(document: CompareDocument) -> list[str]:
    environment = document.environment
    versions = environment.versions
    return [
        f"hardware: {environment.hardware_summary}",
        f"software: torch {versions['torch']}, ampgan {versions['ampgan']}, python {versions['python']}",
        f"date: {environment.date}; commit {environment.git_commit}",
    ]


def _environment_lines(document: CompareDocument) -> list[str]:
    spec = document.spec
    return (
        _machine_lines(document)
        + [
            f"protocol: seeds {', '.join(map(str, spec.seeds))}, each an identical start "
            "(weights, data order, noise) for every precision; "
            f"{budget_text(spec.time_budget_s, spec.steps)} per precision and seed at batch {spec.batch_size}, "
            f"evaluation excluded; {spec.eval_samples} samples per evaluation",
            f"model: {spec.model_name}"
            + (f" ({', '.join(f'{k}={v}' for k, v in spec.model_options.items())})" if spec.model_options else ""),
            f"evaluator: held-out real accuracy {document.evaluator['held_out_accuracy']:.3f} "
            f"(refused below {document.evaluator.get('min_accuracy', 0.5):.2f})",
            # studies from before GAN.ema: drawn from G itself
            f"samples and quality: drawn from {document.sampled_from or G_OWN_WEIGHTS}",
        ]
        + _setup_lines(
            document,
            "memory format",
            document.spec.channels_last,
            ("channels-last", "NCHW"),
            document.layouts,
            measured_as="memory format measured",
            given=" (as given)",
        )
        + _setup_lines(
            document,
            "torch.compile",
            document.spec.compile,
            ("compiled", "eager"),
            document.compile_decisions,
            measured_as="compile measured",
            given=" (as given, or not measured for a run this short)",
        )
        + [f"left out {item['precision']}: {item['reason']}" for item in document.left_out]
    )


def figure_footer(document: CompareDocument) -> str:
    """What made the study's figures: hardware, data, model, batch, each precision's setup, versions, date."""
    environment, spec = document.environment, document.spec
    return (
        f"{environment.hardware_summary} | {document.dataset.name}, "
        f"{model_text({'model': spec.model_name, 'model_options': spec.model_options})} | "
        f"batch {spec.batch_size}, {_setup_text(spec)} | "
        f"torch {environment.versions['torch']}, ampgan {environment.versions['ampgan']} | {environment.date}"
    )


def _setup_text(spec: StudySpecRecord) -> str:
    """'fp32 NCHW, bf16 channels-last compiled': how each precision's step ran (for figure footers)."""
    channels_last, compiled = spec.channels_last or [], spec.compile or []
    return ", ".join(
        f"{p} {'channels-last' if p in channels_last else 'NCHW'}{' compiled' if p in compiled else ''}"
        for p in spec.precisions
    )


def _setup_lines(
    document: CompareDocument,
    what: str,
    chosen: list[str] | None,
    words: tuple[str, str],
    decisions: dict | None,
    *,
    measured_as: str,
    given: str,
) -> list[str]:
    """Which memory format each precision trained in, or which ran compiled (comparisons from before the
    option: none), and the measurements behind it (`given` when there were none)."""
    modes = ", ".join(f"{p} {words[0] if p in (chosen or []) else words[1]}" for p in document.spec.precisions)
    measured = [f"{measured_as}: {decision.description}" for decision in (decisions or {}).values()]
    return [f"{what}: {modes}" + ("" if measured else given)] + measured


def _price_note(document: CompareDocument) -> str:
    cost = document.cost or CostSection()
    basis = (cost.basis or {}).get("explanation", cost.note or "none")
    if not document.headline.higher_is_better:
        return (
            f"Target Fréchet distance: {cost.target} (80% of the way from the runs' first evaluations to "
            "the best final distance; none when no precision halved it). An unconditional GAN draws no class: "
            f"accuracy does not apply. Price: {basis}."
        )
    return (
        f"Target accuracy: {cost.target_accuracy} (80% of the way from chance to the best final "
        f"accuracy unless compare.target_accuracy; none when no precision reached twice chance). Price: {basis}."
    )


def _data_uri(out_dir: Path, path: Path) -> str:
    """The figure, embedded; never a file outside the study (every section was checked: this is the last
    gate before bytes enter report.html)."""
    if leads_out(out_dir, path):
        return ""
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def markdown_text(text) -> str:
    """Text as Markdown shows it literally: HTML is escaped (a viewer would render `<img onerror=...>`),
    a line break becomes a space (it would end a list item or a table row)."""
    return html.escape(" ".join(str(text).splitlines()), quote=False)


def markdown_cell(text) -> str:
    """A table cell: markdown_text, with `|` escaped (it would split the cell)."""
    return markdown_text(text).replace("|", "\\|")


_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("ampgan.study", "templates"),
    autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=False),
    keep_trailing_newline=True,
)
_TEMPLATES.filters.update(md=markdown_text, md_cell=markdown_cell)


def render_report(out_dir: Path) -> tuple[Path, Path]:
    """report.md (figures linked) and report.html (figures embedded) from the same sections."""
    document = load_compare(out_dir)
    context = {
        "title": f"ampgan comparison: {', '.join(document.runs) or 'no mode faster than fp32'} on "
        f"{document.dataset.name}",
        "sections": report_sections(document, out_dir),
        "relative": lambda path: path.relative_to(out_dir).as_posix(),
        "data_uri": lambda path: _data_uri(out_dir, path),
    }
    paths = (out_dir / "report.md", out_dir / "report.html")
    for path in paths:
        write_text_atomically(path, _TEMPLATES.get_template(f"{path.name}.j2").render(**context))
    return paths


_SPEED_NOTE = (
    "The bench times the training step alone on a batch kept on the device, in interleaved rounds "
    "until the speedup is known to +-5% (95% interval); the race charges each run's step the bench's time "
    "(docs/study.md), and the runs' time per step here is their wall clock divided by their steps (the check: "
    "data loading, logging and other work on the machine included, evaluation excluded)."
)


def _speed_rows(document: CompareDocument, bench: dict) -> list[list[str]]:
    # The bench's step and speedup at the study's batch size (`bench`: its results.json, or none) beside the runs'.
    batch = document.spec.batch_size
    bench_ms = {
        c["precision"]: c["stats"]["median_s"] * 1e3
        for c in bench["configs"]
        if c["batch_size"] == batch and c.get("stats")
    }
    pairs = {s["precision"]: s for s in bench["speedups"] if s["batch_size"] == batch}
    fp32_step = _wall_step(document.runs[FP32]) if FP32 in document.runs else None
    rows = [
        ["precision", f"bench ms/step (batch {batch})", "bench speedup [95% CI]", "run ms/step (wall)", "run speedup"]
    ]
    for precision, run in document.runs.items():
        step = _wall_step(run)
        pair = pairs.get(precision)
        rows.append(
            [
                precision,
                f"{bench_ms[precision]:.1f}" if precision in bench_ms else "-",
                speedup_text(pair) if pair else ("baseline" if precision == FP32 else "-"),
                f"{step * 1e3:.1f}" if step else "-",
                f"{fp32_step / step:.2f}x"
                if step and fp32_step and precision != FP32
                else ("baseline" if precision == FP32 else "-"),
            ]
        )
    return rows


def _wall_step(run) -> float | None:
    """A precision's mean wall time per step over its seeds (studies before the race's clock: its training
    clock per step, which was the wall clock then)."""
    steps = [
        (seed_run.wall_seconds if seed_run.wall_seconds is not None else seed_run.train_seconds) / seed_run.steps
        for seed_run in run.seed_runs
        if seed_run.steps
    ]
    return float(np.mean(steps)) if steps else run.seconds_per_step


def _metrics_table(document: CompareDocument) -> list[list[str]]:
    """The header, one row per precision (each registered table metric with its interval over seeds), then the
    real images' floor."""
    cost = document.cost or CostSection()
    shown = table_metrics(document.headline.higher_is_better)
    rows = [
        ["precision", "seeds", "steps (mean)"]
        + [f"{m.label} [95% CI]" if m.key == document.headline.key else m.label for m in shown]
        + ["time to target (reached)", "cost to target"]
    ]
    for precision, run in document.runs.items():
        reached = cost.reaching(precision)
        seeds = len(run.seeds if run.seeds is not None else [0])
        rows.append(
            [
                precision,
                str(seeds),
                str(run.steps),
                *(with_interval(run, m.key, m.digits, ci="") for m in shown),
                f"{reached.seconds:.0f} s ({reached.reached}/{reached.seeds})"
                if reached.seconds
                else f"not reached (0/{seeds})",
                f"{reached.cost:.6f} {cost.currency or ''}" if reached.cost else "-",
            ]
        )
    return [
        *rows,
        [
            "real images (floor)",
            "",
            "",
            *(format_value(m, document.floor.get(m.key)) if m.key in document.floor else "" for m in shown),
            "",
            "",
        ],
    ]


def _class_sections(document: CompareDocument) -> list[Section]:
    """Per precision: each class's accuracy, recall, coverage and diversity (mean over seeds), the
    flags, and the confusion matrix summed over seeds (rows: intended class, columns: as read)."""
    names = document.dataset.class_names
    sections = []
    for precision, run in document.runs.items():
        finals = [r.final for r in run.seed_runs]
        if all("class_shares" in f for f in finals):
            sections.append(_shares_section(precision, run, finals, names, document.floor or {}))
            continue
        if not all("per_class" in f for f in finals):
            continue
        rows = [["class", "accuracy", "recall", "coverage", "diversity vs real"]] + [
            [name, *(_class_mean(finals, index, key) for key in ("accuracy", "recall", "coverage", "diversity"))]
            for index, name in enumerate(names)
        ]
        sections += [
            Section(
                f"{precision}: per class (mean of {len(finals)} seeds)",
                table=rows,
                folded=True,
                paragraph=("Flags: " + "; ".join(run.flags))
                if run.flags
                else "No class collapsed (diversity below 25% of real) or drawn as another class (over 50%).",
            ),
            Section(
                f"{precision}: confusion matrix (rows: intended class, columns: evaluator's reading)",
                folded=True,
                table=[["intended \\ read", *names]]
                + [
                    [name, *map(str, row)]
                    for name, row in zip(names, np.sum([f["confusion"] for f in finals], axis=0).tolist())
                ],
            ),
        ]
    return sections


def _class_mean(finals: list[dict], index: int, key: str) -> str:
    """A class's figure (its row in each seed's per_class) as the mean over the seeds that have it."""
    values = [f["per_class"][index].get(key) for f in finals if f["per_class"][index].get(key) is not None]
    return f"{np.mean(values):.2f}" if values else "-"


def _shares_section(precision: str, run: RunSummary, finals: list[dict], names: list[str], floor: dict) -> Section:
    """An unconditional GAN's classes as the evaluator reads its samples (mean over seeds): a class
    drawn far less often than the data has it is a dropped mode."""
    shares = np.mean([f["class_shares"] for f in finals], axis=0)
    rows = [["class", "share of samples", *(["share of real (held out)"] if "class_shares" in floor else [])]]
    for index, name in enumerate(names):
        real = [f"{floor['class_shares'][index]:.1%}"] if "class_shares" in floor else []
        rows.append([name, f"{shares[index]:.1%}", *real])
    return Section(
        f"{precision}: classes the evaluator reads in the samples (mean of {len(finals)} seeds)",
        table=rows,
        folded=True,
        paragraph=("Flags: " + "; ".join(run.flags))
        if run.flags
        else "No collapse (diversity below 25% of real) and no class read under a quarter as often as its real share.",
    )
