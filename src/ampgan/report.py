"""The comparison report: report.md and a self-contained report.html, from the files alone.

`ampgan report DIR` re-renders both from compare.json, the run folders and the bench/cost
files, so a report can be rebuilt (or restyled) without training again.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

import numpy as np
from PIL import Image

from ampgan.atomic import write_atomically
from ampgan.bench_output import PRECISION_COLOURS
from ampgan.errors import AmpganError
from ampgan.jsonfile import read_json
from ampgan.runs import read_jsonl


def load_compare(out_dir: Path) -> dict:
    path = Path(out_dir) / "compare.json"
    document = read_json(path, missing=f"{out_dir} has no compare.json: give the --out folder of an 'ampgan compare' run",
                         damaged=f"{path} is damaged (not valid JSON): run 'ampgan compare' again")
    if not isinstance(document, dict) or document.get("format") != "ampgan-compare/1":
        raise AmpganError(f"{path} is not an ampgan comparison (format ampgan-compare/1)")
    return document


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(figure, path: Path, footer: str) -> Path:
    figure.text(0.01, 0.005, footer[:200], fontsize=5.5, color="#555555")
    figure.tight_layout(rect=(0, 0.03, 1, 1))
    write_atomically(path, lambda stream: figure.savefig(stream, format="png"))
    _plt().close(figure)
    return path


def _latest_samples(run_dir: Path) -> Path | None:
    grids = sorted((run_dir / "samples").glob("step-*.png"))
    return grids[-1] if grids else None


def figure_samples(document: dict, out_dir: Path, footer: str) -> Path:
    """Figure 4: each precision's final samples side by side (same noise, one row per class)."""
    plt = _plt()
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
    return _save(figure, out_dir / "fig4_samples.png", footer)


def figure_quality(document: dict, out_dir: Path, footer: str) -> Path:
    plt = _plt()
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
    return _save(figure, out_dir / "fig5_quality_vs_time.png", footer)


def figure_losses(document: dict, out_dir: Path, footer: str) -> tuple[Path, Path | None]:
    plt = _plt()
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
    losses = _save(figure, out_dir / "fig6_losses.png", footer)
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
    return losses, _save(figure, out_dir / "fig7_loss_scale.png", footer)


def verdict(document: dict) -> list[str]:
    """Plain-language conclusions, each with its uncertainty."""
    cost, runs = document.get("cost") or {}, document["runs"]
    hardware = document["environment"]["hardware_summary"].split(",")[0]
    lines = []
    target = cost.get("target_accuracy")
    to_target = cost.get("to_target") or {}
    baseline = to_target.get("fp32")
    speedups = {(s["batch_size"], s["precision"]): s for s in document.get("bench_speedups", [])}
    batch = document["spec"]["batch_size"]
    for precision, run in runs.items():
        if precision == "fp32":
            continue
        reached = to_target.get(precision)
        pair = speedups.get((batch, precision))
        noise = (f" The step-time speedup at batch {batch} was {pair['median']:.2f}x "
                 f"(interquartile range {pair['q1']:.2f}-{pair['q3']:.2f} over {pair['rounds']} interleaved rounds)."
                 if pair else "")
        if target is None:
            lines.append(f"On this {hardware}, neither precision's samples were recognised clearly above chance "
                         f"(final evaluator accuracy: {precision} {run['final']['evaluator_accuracy']:.2f}, fp32 "
                         f"{runs['fp32']['final']['evaluator_accuracy']:.2f}): train longer before comparing quality.{noise}")
            continue
        if reached is None:
            lines.append(f"On this {hardware}, {precision} did not reach the target evaluator accuracy within the "
                         f"budget; its final accuracy was {run['final']['evaluator_accuracy']:.2f} against fp32's "
                         f"{runs['fp32']['final']['evaluator_accuracy']:.2f}.{noise}")
            continue
        text = f"On this {hardware}, {precision} reached evaluator accuracy {target:.2f} in {reached['seconds']:.0f} s of training"
        if baseline:
            text += (f", {baseline['seconds'] / reached['seconds']:.1f}x sooner than fp32 ({baseline['seconds']:.0f} s), "
                     f"at {100 * reached['cost'] / baseline['cost']:.0f}% of the cost")
        else:
            text += ", while fp32 did not reach it within the same budget"
        lines.append(text + "." + noise)
    spec = document["spec"]
    interval = spec["time_budget_s"] / spec["eval_points"]
    lines.append(f"Times to the target are interpolated between evaluations {interval:.0f} s of training apart, and GAN "
                 "quality curves are not monotonic (see the quality figure). Quality numbers come from one training "
                 "run per precision: differences of a few hundredths in accuracy are within run-to-run noise; repeat "
                 "with other --seed values (and more --eval-points) before relying on them.")
    return lines


def _image_tag(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}" style="max-width:100%">'


def render_report(out_dir: Path) -> tuple[Path, Path]:
    out_dir = Path(out_dir)
    document = load_compare(out_dir)
    bench_path = out_dir / "bench" / "results.json"
    if bench_path.is_file():
        document["bench_speedups"] = json.loads(bench_path.read_text())["speedups"]
    environment = document["environment"]
    versions = environment["versions"]
    footer = (f"{environment['hardware_summary']} | batch {document['spec']['batch_size']} | "
              f"torch {versions['torch']}, ampgan {versions['ampgan']} | {environment['date']}")
    figures = [
        ("Figure 1: time per batch vs batch size", out_dir / "bench" / "fig1_time_per_batch.png"),
        ("Figure 2: time per 1000 samples", out_dir / "bench" / "fig2_time_per_1000_samples.png"),
        ("Figure 3: cost of 1M batches", out_dir / "cost" / "fig3_cost.png"),
        ("Figure 4: samples after the same training time", figure_samples(document, out_dir, footer)),
        ("Quality vs training time", figure_quality(document, out_dir, footer)),
    ]
    losses, scale = figure_losses(document, out_dir, footer)
    figures.append(("Losses", losses))
    if scale:
        figures.append(("fp16 loss scale and skipped steps", scale))
    figures = [(title, path) for title, path in figures if path.is_file()]

    conclusions = verdict(document)
    rows = _metrics_rows(document)
    cost = document.get("cost") or {}
    spec = document["spec"]
    environment_lines = [
        f"hardware: {environment['hardware_summary']}",
        f"software: torch {versions['torch']}, ampgan {versions['ampgan']}, python {versions['python']}",
        f"date: {environment['date']}; commit {environment.get('git_commit')}",
        f"protocol: same seed ({spec['seed']}) and initial weights for every precision, {spec['time_budget_s']:g} s of "
        f"training each at batch {spec['batch_size']}, evaluation excluded; {spec['eval_samples']} samples per evaluation",
        f"evaluator: held-out real accuracy {document['evaluator']['held_out_accuracy']:.3f} "
        f"(refused below {document['evaluator'].get('min_accuracy', 0.5):.2f})",
    ] + [f"left out {item['precision']}: {item['reason']}" for item in document.get("left_out", [])]
    price_note = (f"Target accuracy: {cost.get('target_accuracy')} (80% of the way from chance to the best final "
                  f"accuracy unless --target-accuracy; none when no precision reached twice chance). Price: {(cost.get('basis') or {}).get('explanation', cost.get('note', 'none'))}.")
    markdown = [f"# ampgan comparison: {', '.join(document['runs'])} on {document['dataset']['name']}", "",
                "## Verdict", "", *[f"- {line}" for line in conclusions], "",
                "## Environment", "", *[f"- {line}" for line in environment_lines], "",
                "## Final metrics", "", "| " + " | ".join(_TABLE_HEADER) + " |",
                "|---|" + "---:|" * (len(_TABLE_HEADER) - 1), *["| " + " | ".join(r) + " |" for r in rows], "",
                price_note, ""]
    doctor = next((p for p in (out_dir / "doctor.json", out_dir / "doctor" / "doctor.json") if p.is_file()), out_dir / "doctor.json")
    doctor_lines = json.loads(doctor.read_text()).get("summary_lines", []) if doctor.is_file() else []
    if doctor_lines:
        markdown += ["## Precision doctor", "", *[f"- {line}" for line in doctor_lines], ""]
    for title, path in figures:
        markdown += [f"## {title}", "", f"![{title}]({path.relative_to(out_dir)})", ""]
    md_path = out_dir / "report.md"
    write_atomically(md_path, lambda stream: stream.write("\n".join(markdown).encode()))

    body = [f"<h1>{html.escape(markdown[0][2:])}</h1>", "<h2>Verdict</h2>", _html_list(conclusions),
            "<h2>Environment</h2>", _html_list(environment_lines), "<h2>Final metrics</h2>", _html_table(rows),
            f"<p>{html.escape(price_note)}</p>"]
    if doctor_lines:
        body += ["<h2>Precision doctor</h2>", _html_list(doctor_lines)]
    for title, path in figures:
        body += [f"<h2>{html.escape(title)}</h2>", _image_tag(path, title)]
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>ampgan comparison</title>"
            "<style>body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}"
            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}</style>"
            "</head><body>" + "\n".join(body) + "</body></html>")
    html_path = out_dir / "report.html"
    write_atomically(html_path, lambda stream: stream.write(page.encode()))
    return md_path, html_path


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


def _html_list(lines: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"


def _html_table(rows: list[list[str]]) -> str:
    header = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in _TABLE_HEADER) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{header}{body}</table>"
