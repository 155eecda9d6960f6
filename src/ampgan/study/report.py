"""The comparison report: one list of sections, rendered to report.md and to a self-contained
report.html (images embedded) through the Jinja2 templates beside this file.

`ampgan report DIR` re-renders both from compare.json, the run folders and the bench/cost files,
so a report can be rebuilt (or restyled) without training again.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import numpy as np
from PIL import Image

from ampgan.bench.output import load_results, speedup_text
from ampgan.errors import AmpganError
from ampgan.files.atomic import write_atomically
from ampgan.files.jsonfile import read_json, read_jsonl
from ampgan.plotting import PRECISION_COLOURS, pyplot, save_figure
from ampgan.study.verdict import verdict


def load_compare(out_dir: Path) -> dict:
    path = Path(out_dir) / "compare.json"
    document = read_json(path, missing=f"{out_dir} has no compare.json: give the --out folder of an 'ampgan compare' run",
                         damaged=f"{path} is damaged (not valid JSON): run 'ampgan compare' again")
    if not isinstance(document, dict) or document.get("format") != "ampgan-compare/1":
        raise AmpganError(f"{path} is not an ampgan comparison (format ampgan-compare/1)")
    return document


def _latest_samples(run_dir: Path) -> Path | None:
    grids = sorted((run_dir / "samples").glob("step-*.png"))
    return grids[-1] if grids else None


def figure_samples(document: dict, out_dir: Path, footer: str) -> Path:
    """Figure 4: each precision's final samples side by side (same noise, one row per class)."""
    plt = pyplot()
    runs = document["runs"]
    figure, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 5.2), dpi=120, squeeze=False)
    for axis, (precision, run) in zip(axes[0], runs.items()):
        grid_path = _latest_samples(out_dir / run["run_dir"])
        if grid_path is not None:
            grid = np.asarray(Image.open(grid_path))
            axis.imshow(grid, cmap="gray" if grid.ndim == 2 else None, interpolation="nearest")
        final = run["final"]
        axis.set_title(f"{precision}: {run['steps']} steps in {run['train_seconds']:.0f} s\n"
                       f"evaluator acc. {final['evaluator_accuracy']:.2f}, FD {final['frechet_distance']:.1f}", fontsize=9)
        axis.axis("off")
    figure.suptitle("Figure 4: samples after the same training time (same noise, one row per class)", fontsize=10)
    return save_figure(figure, out_dir / "fig4_samples.png", footer)


def figure_quality(document: dict, out_dir: Path, footer: str) -> Path:
    plt = pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4), dpi=120)
    for precision, run in document["runs"].items():
        curve = read_jsonl(out_dir / run["run_dir"] / "quality.jsonl")
        seconds = [p["train_seconds"] for p in curve]
        colour = PRECISION_COLOURS.get(precision)
        left.plot(seconds, [p["evaluator_accuracy"] for p in curve], marker="o", label=precision, color=colour)
        right.plot(seconds, [p["frechet_distance"] for p in curve], marker="o", label=precision, color=colour)
    floor = document["floor"]
    left.axhline(floor["evaluator_accuracy"], ls="--", color="#888", label="real held-out images")
    right.axhline(floor["frechet_distance"], ls="--", color="#888", label="real vs real")
    target = (document.get("cost") or {}).get("target_accuracy")
    if target:
        left.axhline(target, ls=":", color="#d62728", label=f"target {target:.2f}")
    left.set(xlabel="training time (s)", ylabel="evaluator accuracy", title="Quality vs wall time: accuracy")
    right.set(xlabel="training time (s)", ylabel="Fréchet distance (evaluator features)", title="... and Fréchet distance")
    right.set_yscale("log")
    for axis in (left, right):
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    return save_figure(figure, out_dir / "fig5_quality_vs_time.png", footer)


def figure_losses(document: dict, out_dir: Path, footer: str) -> tuple[Path, Path | None]:
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(7, 4), dpi=120)
    scaled = {}
    for precision, run in document["runs"].items():
        metrics = read_jsonl(out_dir / run["run_dir"] / "metrics.jsonl")
        seconds = [m["train_seconds"] for m in metrics]
        colour = PRECISION_COLOURS.get(precision)
        axis.plot(seconds, [m["loss_d"] for m in metrics], color=colour, label=f"{precision} D")
        axis.plot(seconds, [m["loss_g"] for m in metrics], color=colour, ls="--", label=f"{precision} G")
        if metrics and "loss_scale_d" in metrics[0]:
            scaled[precision] = metrics
    axis.set(xlabel="training time (s)", ylabel="loss", title="Losses per precision")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8)
    losses = save_figure(figure, out_dir / "fig6_losses.png", footer)
    if not scaled:
        return losses, None
    figure, axis = plt.subplots(figsize=(7, 3.5), dpi=120)
    for precision, metrics in scaled.items():
        steps = [m["step"] for m in metrics]
        axis.plot(steps, [m["loss_scale_d"] for m in metrics], label=f"{precision} scale D")
        axis.plot(steps, [m["loss_scale_g"] for m in metrics], ls="--", label=f"{precision} scale G")
        skipped = metrics[-1]["skipped_d_total"] + metrics[-1]["skipped_g_total"]
        axis.set_title(f"fp16 loss scale ({skipped} skipped updates in all)")
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


def report_sections(document: dict, out_dir: Path) -> list[Section]:
    """Verdict, environment, final metrics, the doctor's summary (if any), then every figure."""
    environment = document["environment"]
    versions = environment["versions"]
    footer = (f"{environment['hardware_summary']} | batch {document['spec']['batch_size']} | "
              f"torch {versions['torch']}, ampgan {versions['ampgan']} | {environment['date']}")
    sections = [
        Section("Verdict", lines=document.get("verdict") or verdict(document, _bench_speedups(out_dir))),
        Section("Environment", lines=_environment_lines(document)),
        Section("Final metrics", table=[_TABLE_HEADER, *_metrics_rows(document)], paragraph=_price_note(document)),
        Section("Speed: the bench against the budgeted runs", table=_speed_rows(document, out_dir),
                paragraph=_SPEED_NOTE),
    ]
    doctor = next((p for p in (out_dir / "doctor.json", out_dir / "doctor" / "doctor.json") if p.is_file()), None)
    doctor_lines = read_json(doctor, missing="", damaged=f"{doctor} is damaged: run 'ampgan doctor' again").get(
        "summary_lines", []) if doctor else []
    if doctor_lines:
        sections.append(Section("Precision doctor", lines=doctor_lines))
    losses, scale = figure_losses(document, out_dir, footer)
    figures = [
        ("Figure 1: time per batch vs batch size", out_dir / "bench" / "fig1_time_per_batch.png"),
        ("Figure 2: time per 1000 samples", out_dir / "bench" / "fig2_time_per_1000_samples.png"),
        ("Figure 3: cost of 1M batches", out_dir / "cost" / "fig3_cost.png"),
        ("Figure 4: samples after the same training time", figure_samples(document, out_dir, footer)),
        ("Quality vs training time", figure_quality(document, out_dir, footer)),
        ("Losses", losses),
        ("fp16 loss scale and skipped steps", scale),
    ]
    sections += [Section(title, figure=path) for title, path in figures if path is not None and path.is_file()]
    return sections


def _bench_speedups(out_dir: Path) -> list[dict]:
    path = out_dir / "bench" / "results.json"
    return load_results(path)["speedups"] if path.is_file() else []


def _environment_lines(document: dict) -> list[str]:
    environment, spec = document["environment"], document["spec"]
    versions = environment["versions"]
    return [
        f"hardware: {environment['hardware_summary']}",
        f"software: torch {versions['torch']}, ampgan {versions['ampgan']}, python {versions['python']}",
        f"date: {environment['date']}; commit {environment.get('git_commit')}",
        f"protocol: same seed ({spec['seed']}) and initial weights for every precision, {spec['time_budget_s']:g} s of "
        f"training each at batch {spec['batch_size']}, evaluation excluded; {spec['eval_samples']} samples per evaluation",
        f"evaluator: held-out real accuracy {document['evaluator']['held_out_accuracy']:.3f} "
        f"(refused below {document['evaluator'].get('min_accuracy', 0.5):.2f})",
    ] + [f"left out {item['precision']}: {item['reason']}" for item in document.get("left_out", [])]


def _price_note(document: dict) -> str:
    cost = document.get("cost") or {}
    basis = (cost.get("basis") or {}).get("explanation", cost.get("note", "none"))
    return (f"Target accuracy: {cost.get('target_accuracy')} (80% of the way from chance to the best final "
            f"accuracy unless --target-accuracy; none when no precision reached twice chance). Price: {basis}.")


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


_TEMPLATES = jinja2.Environment(loader=jinja2.PackageLoader("ampgan.study", "templates"),
                                autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=False), keep_trailing_newline=True)


def render_report(out_dir: Path) -> tuple[Path, Path]:
    """report.md (figures linked) and report.html (figures embedded) from the same sections."""
    out_dir = Path(out_dir)
    document = load_compare(out_dir)
    context = {"title": f"ampgan comparison: {', '.join(document['runs'])} on {document['dataset']['name']}",
               "sections": report_sections(document, out_dir),
               "relative": lambda path: path.relative_to(out_dir).as_posix(), "data_uri": _data_uri}
    paths = []
    for name in ("report.md", "report.html"):
        text = _TEMPLATES.get_template(f"{name}.j2").render(**context)
        write_atomically(out_dir / name, lambda stream, text=text: stream.write(text.encode("utf-8")))
        paths.append(out_dir / name)
    return paths[0], paths[1]


_SPEED_NOTE = ("The bench times the training step alone on a batch kept on the device, in interleaved rounds "
               "until the speedup is known to +-5% (95% interval); the runs' time per step is their training "
               "clock divided by their steps, with data loading and logging included and evaluation excluded.")


def _speed_rows(document: dict, out_dir: Path) -> list[list[str]]:
    batch = document["spec"]["batch_size"]
    path = out_dir / "bench" / "results.json"
    bench = load_results(path) if path.is_file() else {"configs": [], "speedups": []}
    bench_ms = {c["precision"]: c["stats"]["median_s"] * 1e3 for c in bench["configs"]
                if c["batch_size"] == batch and c.get("stats")}
    pairs = {s["precision"]: s for s in bench["speedups"] if s["batch_size"] == batch}
    runs = document["runs"]
    fp32_step = runs.get("fp32", {}).get("seconds_per_step")
    rows = [["precision", f"bench ms/step (batch {batch})", "bench speedup [95% CI]", "run ms/step",
             "run speedup"]]
    for precision, run in runs.items():
        step = run.get("seconds_per_step")
        pair = pairs.get(precision)
        rows.append([precision, f"{bench_ms[precision]:.1f}" if precision in bench_ms else "-",
                     speedup_text(pair) if pair else ("baseline" if precision == "fp32" else "-"),
                     f"{step * 1e3:.1f}" if step else "-",
                     f"{fp32_step / step:.2f}x" if step and fp32_step and precision != "fp32" else
                     ("baseline" if precision == "fp32" else "-")])
    return rows


_TABLE_HEADER = ["precision", "steps", "train s", "eval s", "evaluator acc.", "Fréchet distance", "KID",
                 "time to target", "cost to target"]


def _metrics_rows(document: dict) -> list[list[str]]:
    cost = document.get("cost") or {}
    to_target = cost.get("to_target") or {}
    currency = (cost.get("basis") or {}).get("currency", "")
    rows = []
    for precision, run in document["runs"].items():
        final, reached = run["final"], to_target.get(precision)
        rows.append([precision, str(run["steps"]), f"{run['train_seconds']:.1f}", f"{run['eval_seconds_total']:.1f}",
                     f"{final['evaluator_accuracy']:.3f}", f"{final['frechet_distance']:.2f}", f"{final['kid']:.4f}",
                     f"{reached['seconds']:.0f} s" if reached else "not reached",
                     f"{reached['cost']:.6f} {currency}" if reached else "-"])
    floor = document["floor"]
    rows.append(["real images (floor)", "", "", "", f"{floor['evaluator_accuracy']:.3f}",
                 f"{floor['frechet_distance']:.2f}", f"{floor['kid']:.4f}", "", ""])
    return rows


