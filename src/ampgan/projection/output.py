"""Writing a projection: projection.json (one row per GPU x precision x batch), projection.csv,
projection.md and the figure, every one of them saying PROJECTED."""

from __future__ import annotations

from pathlib import Path

from ampgan.bench.output import model_text, plain_log_ticks, plain_tick_text
from ampgan.files.atomic import write_csv_atomically, write_json_atomically, write_text_atomically
from ampgan.plotting import precision_colour, save_figure, subplots
from ampgan.precisions import FP32, in_order
from ampgan.projection.document import fastest_mixed, software_text, table_text
from ampgan.system.gpus import shipped_gpus

CSV_COLUMNS = [
    "device",
    "precision",
    "batch_size",
    "status",
    "ms_per_step",
    "ms_low",
    "ms_high",
    "speedup_over_default",
    "speedup_over_default_low",
    "speedup_over_default_high",
    "speedup",
    "speedup_low",
    "speedup_high",
    "calibrated",
    "kernels_calibrated",
    "bound",
    "tensor_flops_share",
    "fits",
    "memory_gib_at_least",
    "cost_mid",
    "cost_low",
    "cost_high",
    "currency",
    "instance",
    "projected",
    "reason",
    "source",
]


def _csv_row(row: dict) -> dict:
    out = {column: row.get(column, "") for column in CSV_COLUMNS}
    if "cost" in row:
        cost = row["cost"]
        out.update(cost_mid=cost["mid"], cost_low=cost["fast"], cost_high=cost["slow"], currency=cost["currency"])
    return out


def footer(document: dict) -> str:
    # a user's own rows (--gpus FILE) are not NVIDIA's datasheets as ampgan ships them: the shipped file, unmerged
    theirs = [d["key"] for d in document.get("devices", []) if d.get("key") not in shipped_gpus()]
    return (
        f"PROJECTED (DeepBench-calibrated kernels, step composed by an end-to-end fit), not measured | "
        f"{model_text(document)} on {document.get('dataset')} | op tables traced on "  # not a dict's repr
        f"{document['traced_on']} | {software_text(document)} | "
        "peaks and bandwidths: NVIDIA datasheets (src/ampgan/system/gpus.csv)"
        + (
            f"; {', '.join(theirs)}: the user's rows (--gpus or registered; sources in projection.json)"
            if theirs
            else ""
        )
        + "; band: cross-validated error"
    )


def write_projection(document: dict, out: Path) -> str:
    out = Path(out)  # (each write makes the folder)
    write_json_atomically(out / "projection.json", document)
    write_csv_atomically(out / "projection.csv", CSV_COLUMNS, [_csv_row(r) for r in document["rows"]])
    text = table_text(document)
    write_text_atomically(out / "projection.md", text + "\n")
    figure(document, out / "fig_projection.png")
    return text


def figure(document: dict, path: Path) -> Path | None:
    """Left: projected ms per step against batch size, per GPU, fp32 solid and the fastest mixed mode
    dashed, each over its band, faintly shaded (the table gives each band's numbers). Right: the
    projected speedup of each mode over fp32 at the largest batch, with its band."""
    rows = [r for r in document["rows"] if r["status"] == "ok"]
    if not rows:
        return None
    from matplotlib import colormaps  # loaded by the figure's own import (plotting.subplots)

    fig, (left, right) = subplots(1, 2, figsize=(11, 4.6))
    devices = list(dict.fromkeys(r["device"] for r in rows))
    _times(left, rows, devices, colormaps["tab10"])
    _speedups(right, rows, devices)
    fig.suptitle(f"PROJECTED, not measured: {document['model']} on GPUs this machine does not have", fontsize=10)
    return save_figure(fig, path, footer(document))


def _times(axes, rows: list[dict], devices: list[str], colours) -> None:
    """Per GPU: fp32's ms per step against batch size (solid), its fastest mixed mode's (dashed)."""
    for index, device in enumerate(devices):
        mine = [r for r in rows if r["device"] == device]
        pair = fastest_mixed(mine, device, max(r["batch_size"] for r in mine))
        for name, style in ((FP32, "-"), (pair[1]["precision"] if pair else None, "--")):
            line = sorted((r for r in mine if r["precision"] == name), key=lambda r: r["batch_size"])
            if not name or not line:
                continue
            xs, ys = [r["batch_size"] for r in line], [r["ms_per_step"] for r in line]
            axes.plot(xs, ys, style, marker="o", markersize=3, color=colours(index % 10), label=f"{device} {name}")
            # its band, faint: a projected time is never drawn without it
            axes.fill_between(
                xs,
                [r["ms_low"] for r in line],
                [r["ms_high"] for r in line],
                color=colours(index % 10),
                alpha=0.08,
                linewidth=0,
            )
    sizes = sorted({r["batch_size"] for r in rows})
    axes.set(
        xscale="log",
        yscale="log",
        xlabel="batch size",
        ylabel="ms per step (projected: mid, band shaded)",
    )
    # at 9 points the full title fits above its half of the figure
    axes.set_title("Projected time per batch (fp32 solid, fastest mixed mode dashed)", fontsize=9)
    axes.set_xticks(sizes, [str(size) for size in sizes])
    axes.minorticks_off()
    # a log axis inside one decade has no labelled tick: label plain values a reader can read a time off
    ticks = plain_log_ticks(min(r["ms_low"] for r in rows), max(r["ms_high"] for r in rows))
    axes.set_yticks(ticks, [plain_tick_text(t) for t in ticks])
    axes.legend(fontsize=6, ncol=2)


def _speedups(axes, rows: list[dict], devices: list[str]) -> None:
    """At the largest batch: each mode's speedup per GPU with its band, over what the user runs without
    changing anything (TF32 convolutions where the GPU has them, else fp32)."""
    largest = max(r["batch_size"] for r in rows)
    at_largest = [r for r in rows if r["batch_size"] == largest and "speedup" in r and r["precision"] != FP32]
    names = in_order({r["precision"] for r in at_largest})
    width = 0.8 / max(1, len(names))
    for offset, name in enumerate(names):
        xs, ys, errors = [], [], [[], []]
        for index, device in enumerate(devices):
            for r in [r for r in at_largest if r["device"] == device and r["precision"] == name][:1]:
                key = "speedup_over_default" if "speedup_over_default" in r else "speedup"
                xs.append(index + offset * width)
                ys.append(r[key])
                errors[0].append(r[key] - r[f"{key}_low"])
                errors[1].append(r[f"{key}_high"] - r[key])
        axes.bar(xs, ys, width, yerr=errors, capsize=2, color=precision_colour(name), label=name)
    axes.axhline(1.0, color="#444444", linewidth=0.8)
    axes.set_xticks([i + width * (len(names) - 1) / 2 for i in range(len(devices))], devices, fontsize=7)
    axes.set(
        ylabel="speedup over PyTorch's default, projected\n(TF32 convolutions on a TF32 GPU, else fp32)",
        title=f"Projected speedup at batch {largest}",
    )
    axes.legend(fontsize=7)
