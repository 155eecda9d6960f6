"""Model size as an axis: the bench over a grid of model settings, and the speedup map it draws.

`ampgan bench --sweep model.width=16,32,64 [--sweep model.name=acgan,acgan-2019]` runs the bench once
per cell of the grid (the product of the axes), each into its own folder, and draws, per precision, the
speedup over fp32 as a map of model setting x batch size: each cell with its 95% interval, the FLOPs of
one step, and (with --attainable) the achieved share of the attainable speedup. sweep.json indexes the
cells and is rewritten after each one, so an interrupted sweep keeps what finished.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

from ampgan.bench.harness import run_bench
from ampgan.bench.output import load_results, write_results
from ampgan.bench.results import STATUS_WORDS
from ampgan.bench.spec import BenchSpec
from ampgan.config import parse_set
from ampgan.data import load_dataset
from ampgan.errors import AmpganError, ConfigError, one_line, warn
from ampgan.files.atomic import write_json_atomically
from ampgan.files.jsonfile import read_json
from ampgan.files.paths import file_in, inside
from ampgan.files.schema import RelativePath, check_format
from ampgan.plotting import save_figure, subplots
from ampgan.precisions import BASELINE, in_order
from ampgan.speed.intervals import speedup_band
from ampgan.system.environment import environment_stamp
from ampgan.training.prepared import prepare_run

FORMAT = "ampgan-sweep/1"


def parse_axes(texts: tuple[str, ...]) -> dict[str, list]:
    """('model.width=16,32',) -> {"model.width": [16, 32]}; one error line for a malformed axis."""
    axes: dict[str, list] = {}
    for text in texts:
        path, equals, raw = text.partition("=")
        values = [part for part in raw.split(",") if part.strip()]
        if not equals or not path.strip() or not values:
            raise AmpganError(
                f"--sweep takes section.field=V1,V2,... (e.g. --sweep model.width=16,32,64), got {text!r}"
            )
        if path.strip() in axes:
            raise AmpganError(f"--sweep {path.strip()} is given twice: give its values once, comma-separated")
        axes[path.strip()] = [parse_set(f"{path.strip()}={value.strip()}")[1] for value in values]
    return axes


def cells(axes: dict[str, list]) -> list[dict]:
    """Every combination of the axes' values, in the order given."""
    return [dict(zip(axes, combination)) for combination in itertools.product(*axes.values())]


def cell_label(values: dict) -> str:
    return ",".join(f"{path}={value}" for path, value in values.items())


def run_sweep(
    spec: BenchSpec,
    axes: dict[str, list],
    out: Path,
    device,
    log=lambda line: None,
    on_config=lambda result: None,
    previous: dict | None = None,
) -> dict:
    """Bench every cell into out/cells/<cell>/, rewriting out/sweep.json after each. A cell whose
    settings the model refuses is recorded with the reason; an interrupted cell ends the sweep.
    `previous`: the sweep.json of an interrupted run of this very sweep (read_sweep): its finished cells
    are kept as they are, the rest are benched."""
    document = {
        "format": FORMAT,
        "axes": axes,
        "environment": environment_stamp(device),
        "spec": spec.to_dict(),
        "cells": [],
    }
    finished = _finished_cells(previous, out, spec)
    datasets = {}  # one load per data setting the cells share
    for values in cells(axes):
        label = cell_label(values)
        log(f"sweep: {label}" + (" (finished before, kept)" if label in finished else ""))
        cell, incomplete = finished.get(label), None
        if cell is None:
            cell, incomplete = _benched(spec, values, out, device, datasets, log, on_config)
        document["cells"].append(cell)
        if incomplete:
            document["incomplete"] = incomplete
        write_json_atomically(out / "sweep.json", document)
        if incomplete:
            break
    return document


def _benched(
    spec: BenchSpec, values: dict, out: Path, device, datasets: dict, log, on_config
) -> tuple[dict, dict | None]:
    """(the cell benched into out/cells/<cell>/, or refused by the model with the reason; what a signal left
    unmeasured, None when nothing)."""
    label = cell_label(values)
    folder = Path("cells") / "".join(c if c.isalnum() or c in "._=-" else "_" for c in label.replace(",", "+"))
    try:
        cell_spec = replace(spec, base=spec.base.with_fields(values))
        config = cell_spec.train_config(BASELINE, spec.batch_sizes[0])
        key = repr(config.data.to_dict())
        if key not in datasets:
            datasets[key] = load_dataset(config.data, seed=config.seed)
        prepare_run(config, datasets[key], device)  # the model's own checks, before anything is measured
    except (AmpganError, ConfigError) as error:
        return {"values": values, "label": label, "status": "error", "reason": str(error)}, None
    results = run_bench(cell_spec, device, on_config=on_config, log=log, dataset=datasets[key])
    write_results(results, out / folder)
    return {
        "values": values,
        "label": label,
        "status": "incomplete" if results.get("incomplete") else "ok",
        "results": str(folder / "results.json"),
    }, results.get("incomplete")


_SWEEP_SHAPE = {
    "format": str,
    "axes": {"*": list},
    "spec": dict,
    "cells": [{"values": dict, "label": str, "status": str, "?results": RelativePath, "?reason": str}],
}


def read_sweep(out: Path, spec: BenchSpec, axes: dict[str, list]) -> dict:
    """The sweep.json of an interrupted sweep in `out`, checked: its shape, and that it is this sweep (the
    same settings and axes); one error line otherwise."""
    path = file_in(out, "sweep.json")
    fix = "run this sweep in a new --out (or add --overwrite to replace that one)"
    document = read_json(path, missing=f"{out} holds no sweep.json: {fix}", damaged=f"{path} is damaged: {fix}")
    check_format(document, FORMAT, str(path), "an ampgan sweep", fix, shape=_SWEEP_SHAPE)
    given = json.loads(json.dumps({"spec": spec.to_dict(), "axes": axes}, default=str))
    for part in ("spec", "axes"):
        if document[part] != given[part]:
            differing = sorted(
                k for k in set(document[part]) | set(given[part]) if document[part].get(k) != given[part].get(k)
            )
            raise AmpganError(
                f"{out} holds a sweep with other settings ({part} {', '.join(differing)[:200]}): "
                f"continue it with the command that started it, or {fix}"
            )
    return document


def _finished_cells(previous: dict | None, out: Path, spec: BenchSpec) -> dict[str, dict]:
    """{label: cell} of the previous document's cells that finished: refused by the model, or benched
    with readable results of that very cell. A cell whose results are missing, damaged or another's (another
    cell's copied over it, other batch sizes) is benched again, said in a warning when they were there."""
    kept = {}
    for cell in (previous or {}).get("cells", []):
        if cell["status"] == "error":
            kept[cell["label"]] = cell
        elif cell["status"] == "ok" and cell.get("results"):
            path = inside(out, cell["results"], out / "sweep.json")
            try:
                wrong = _not_of(load_results(path)["spec"], cell["values"], spec)
                wrong = wrong and f"{one_line(path)}: {wrong}"
            except AmpganError as error:
                if not path.exists() and not path.is_symlink():
                    continue
                wrong = str(error)
            if wrong:
                warn(f"{wrong[:300]}; {one_line(cell['label'])} is benched again, replacing that file")
                continue
            kept[cell["label"]] = cell
    return kept


def _not_of(found: dict, values: dict, spec: BenchSpec) -> str | None:
    """Why bench results (their spec) are not those of the cell `values` of this sweep, or None."""
    for path, value in values.items():
        recorded = found.get("config")
        for key in path.split("."):
            recorded = recorded.get(key) if isinstance(recorded, dict) else None
        if recorded != value:
            return f"its {path} is {recorded!r}, not this cell's {value!r} (another cell's results)"
    if found.get("batch_sizes") != list(spec.batch_sizes):
        return f"its batch sizes are {found.get('batch_sizes')!r}, not the sweep's {list(spec.batch_sizes)!r}"
    return None


def load_cells(document: dict, out: Path) -> list[tuple[dict, dict | None]]:
    """(cell, its bench results or None) for every cell of a sweep document."""
    return [
        (cell, load_results(inside(out, cell["results"], out / "sweep.json")) if cell.get("results") else None)
        for cell in document["cells"]
    ]


def map_rows(loaded: list[tuple[dict, dict | None]], precision: str) -> list[dict]:
    """One row per cell: per batch size, the speedup over fp32 with its interval, the FLOPs per step,
    and the achieved share of the attainable speedup when it was measured."""
    rows = []
    for cell, results in loaded:
        row = {"label": cell["label"], "status": cell["status"], "reason": cell.get("reason", ""), "cells": {}}
        if results is not None:
            pairs = {(s["batch_size"], s["precision"]): s for s in results["speedups"]}
            configs = {(c["batch_size"], c["precision"]): c for c in results["configs"]}
            attained = {(a["batch_size"], a["precision"]): a for a in results.get("attainable") or []}
            for batch_size in results["spec"]["batch_sizes"]:
                pair = pairs.get((batch_size, precision)) or {}
                found = attained.get((batch_size, precision), {})
                mixed, fp32 = configs.get((batch_size, precision), {}), configs.get((batch_size, BASELINE), {})
                row["cells"][batch_size] = {
                    "speedup": pair.get("estimate"),
                    "low": pair.get("low"),
                    "high": pair.get("high"),
                    "flops": fp32.get("flops_per_step"),
                    "attainable": found.get("attainable_speedup"),
                    "achieved_of_attainable": found.get("achieved_of_attainable"),
                    "status": mixed.get("status", "not run"),
                    # Left out after a round or two (far slower than fp32): the medians' ratio, no interval.
                    "median_ratio": (
                        fp32["stats"]["median_s"] / mixed["stats"]["median_s"]
                        if not pair and mixed.get("stats") and fp32.get("stats")
                        else None
                    ),
                }
        rows.append(row)
    return rows


def sweep_precisions(loaded: list[tuple[dict, dict | None]]) -> list[str]:
    return in_order({c["precision"] for _, results in loaded if results for c in results["configs"]} - {BASELINE})


def sweep_table(document: dict, out: Path) -> str:
    loaded = load_cells(document, out)
    lines = []
    for precision in sweep_precisions(loaded):
        rows = map_rows(loaded, precision)
        sizes = sorted({b for row in rows for b in row["cells"]})
        lines += [
            f"{precision} over fp32, speedup [95% CI] (GFLOP per step; achieved share of the attainable "
            "speedup when measured)",
            f"{'cell':<32}" + "".join(f"  {'batch ' + str(b):>32}" for b in sizes),
        ]
        for row in rows:
            if row["status"] == "error":
                lines.append(f"{row['label']:<32}  {row['reason']}")
                continue
            texts = [f"  {_table_cell_text(row['cells'].get(size) or {}):>32}" for size in sizes]
            lines.append(f"{row['label']:<32}" + "".join(texts))
        lines.append("")
    lines.append(sweep_footer(document, next((results for _, results in loaded if results), None)))
    return "\n".join(map(one_line, lines))  # a name holding a newline stays inside its row


def _table_cell_text(item: dict) -> str:
    """A table cell: the speedup with its interval (or the medians' ratio of a precision left out, or why
    nothing was measured), the GFLOP per step, the achieved share of the attainable speedup."""
    text = (
        speedup_band(item["speedup"], item["low"], item["high"])
        if item.get("speedup")
        else f"~{item['median_ratio']:.2f} left out"
        if item.get("median_ratio")
        else STATUS_WORDS.get(item.get("status"), "-")
    )
    flops = f" ({item['flops'] / 1e9:.3g})" if item.get("flops") else ""
    achieved, attainable = item.get("achieved_of_attainable"), item.get("attainable")
    share = f" {achieved:.0%}" if achieved is not None else f" att. {attainable:.2f}" if attainable else ""
    return text + flops + share


def draw_maps(document: dict, out: Path) -> list[Path]:
    """fig_speedup_map_<precision>.png for every mixed precision of the sweep."""
    loaded = load_cells(document, out)
    first = next((results for _, results in loaded if results), None)
    paths = []
    for precision in sweep_precisions(loaded):
        rows = [row for row in map_rows(loaded, precision) if row["status"] != "error"]
        sizes = sorted({b for row in rows for b in row["cells"]})
        if not rows or not sizes:
            continue
        figure, axes = subplots(figsize=(1.6 + 1.5 * len(sizes), 1.2 + 0.75 * len(rows)), dpi=120)
        values = [
            [
                (row["cells"].get(b) or {}).get("speedup")
                or (row["cells"].get(b) or {}).get("median_ratio")
                or float("nan")
                for b in sizes
            ]
            for row in rows
        ]
        from matplotlib.colors import TwoSlopeNorm  # matplotlib only when a map is drawn (start-up time)

        present = [v for line in values for v in line if v == v]
        # 1.0 (no gain) in the middle of the scale whatever the range: red slower, green faster.
        norm = TwoSlopeNorm(vcenter=1.0, vmin=min([0.5, *present]) * 0.95, vmax=max([2.0, *present]) * 1.05)
        image = axes.imshow(values, cmap="RdYlGn", norm=norm, aspect="auto")
        for y, row in enumerate(rows):
            for x, size in enumerate(sizes):
                text, colour = _map_cell_text(row["cells"].get(size) or {})
                axes.text(x, y, text, ha="center", va="center", fontsize=6, color=colour)
        axes.set_xticks(range(len(sizes)), [str(b) for b in sizes])
        axes.set_yticks(range(len(rows)), [row["label"] for row in rows], fontsize=7)
        axes.set_xlabel("batch size")
        axes.set_title(f"{precision} speedup over fp32 by model setting and batch size (measured)", fontsize=9)
        figure.colorbar(image, ax=axes, label="speedup over fp32")
        paths.append(save_figure(figure, out / f"fig_speedup_map_{precision}.png", sweep_footer(document, first)))
    return paths


def _map_cell_text(item: dict) -> tuple[str, str | None]:
    """A map cell's text and colour (None: the default): the speedup with its interval, the FLOPs of a step
    and the achieved share of the attainable speedup; for a precision left out after a round or two, the
    medians' ratio; else why nothing was measured, greyed."""
    flops = f"\n{item['flops'] / 1e9:.3g} GFLOP" if item.get("flops") else ""
    if item.get("speedup"):
        achieved = item.get("achieved_of_attainable")
        share = f"\n{achieved:.0%} of {item['attainable']:.2f}x" if achieved is not None else ""
        return speedup_band(item["speedup"], item["low"], item["high"], "\n") + flops + share, None
    if item.get("median_ratio"):
        attainable = f"\nattainable {item['attainable']:.2f}x" if item.get("attainable") else ""
        return f"~{item['median_ratio']:.2f}x\nleft out:\nfar slower{flops}{attainable}", None
    status = item.get("status")
    why = (  # a map's cell is narrow: two short lines
        "too slow\nhere"
        if status == "too_slow"
        else "\n".join(STATUS_WORDS[status].rsplit(" ", 1))
        if status in STATUS_WORDS
        else "no speedup\nmeasured"
    )
    return why + flops, "#555555"


def sweep_footer(document: dict, first: dict | None) -> str:
    environment = document["environment"]
    versions = environment.get("versions", {})
    spec = (first or {}).get("spec", {})
    return (
        f"{environment.get('hardware_summary')} | {spec.get('dataset', '?')}, rows: "
        f"{', '.join(document['axes'])} (the rest of the model as the row says) | measured by ampgan bench, "
        f"interleaved rounds per batch size | torch {versions.get('torch', '?')}, ampgan {versions.get('ampgan', '?')} "
        f"| {environment.get('date', '')} | cell: speedup [95% CI], GFLOP per fp32 step, achieved share of the "
        "attainable speedup (every operation timed alone)"
    )
