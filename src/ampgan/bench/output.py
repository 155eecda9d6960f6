"""Bench results on disk and on screen: results.json, results.csv, Figures 1 and 2, the table.

Reads only the results document, so `ampgan bench --from results.json` re-renders everything
without measuring again.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ampgan.bench.results import STATUS_WORDS, ConfigResult
from ampgan.data.registry import DATASET_NAME
from ampgan.errors import one_line
from ampgan.files.atomic import write_csv_atomically, write_json_atomically
from ampgan.files.jsonfile import read_json
from ampgan.files.records import shape_of
from ampgan.files.schema import BATCH_SIZE, COUNT, POSITIVE, Between, OrNull, check_format
from ampgan.gan.registry import MODEL_NAME
from ampgan.plotting import precision_colour, save_figure, subplots
from ampgan.precisions import in_order
from ampgan.speed.intervals import UNSETTLED, answers, speedup_band, unsettled_text
from ampgan.training.precision import PRECISION_NAME

CSV_COLUMNS = [
    "batch_size",
    "precision",
    "status",
    "median_ms",
    "q1_ms",
    "q3_ms",
    "iqr_ms",
    "min_ms",
    "noisy",
    "images_per_s",
    "s_per_1000_samples",
    "gflops_per_step",
    "matmul_share",
    "achieved_tflops",
    "percent_of_peak",
    "peak_memory_mib",
    "skipped_steps",
    "speedup_vs_baseline",
    "speedup_ci_low",
    "speedup_ci_high",
    "rounds",
    "settled",
    "load_changed",
    "processes",
    "scaling_efficiency",
    "reason",
    "measured_on",
]


def speedup_estimate(pair: dict) -> float:
    """A speedup entry's estimate (results written before intervals stored the median ratio)."""
    return pair["estimate"] if "estimate" in pair else pair["median"]


def speedup_text(pair: dict) -> str:
    """'1.84x (95% CI 1.79-1.90, 14 rounds)', with 'not settled to +-5%' inside when the rounds' time ran out first
    ('unsettled' alone is the word for an interval that answers nothing: intervals.unsettled_text)."""
    if "low" not in pair:
        return f"{speedup_estimate(pair):.2f}x (median of {pair.get('rounds', '?')} rounds, no interval)"
    if not answers(pair["low"], pair["high"]):
        return unsettled_text(pair["rounds"])
    unsettled = "" if pair.get("settled", True) else ", not settled to +-5%"
    return f"{pair['estimate']:.2f}x (95% CI {pair['low']:.2f}-{pair['high']:.2f}, {pair['rounds']} rounds{unsettled})"


# What the readers need of a configuration's timing statistics: the median and quartiles (files written by hand or
# by other tools may leave the rest out; the table shows a missing IQR as 0).
STATS_READ = {
    "median_s": POSITIVE,
    "q1_s": POSITIVE,
    "q3_s": POSITIVE,
    "?iqr_s": Between(0.0, math.inf),
    "?min_s": POSITIVE,
    "?noisy": bool,
}
# What the table, the figures, cost and compare read of results.json (a configuration as its record says).
RESULTS_SHAPE = {
    "format": str,
    "environment": {"?hardware_summary": str, "?versions": dict, "?date": str},
    "spec": {
        "precisions": [PRECISION_NAME],
        "?batch_sizes": [BATCH_SIZE],
        "?model": MODEL_NAME,  # the step's model and data, as a projection names them
        "?dataset": DATASET_NAME,
    },
    "hardware": {"name": str, "device_type": str, "?cpu_model": str},
    "peaks": {"*": {"tflops": (int, float, None), "source": str}},
    # a configuration's row: its record's fields (bench/results.py), with what follows from its timings
    "configs": [shape_of(ConfigResult) | {"status": str, "?stats": OrNull(STATS_READ), "?images_per_s": POSITIVE}],
    "speedups": [
        {
            "batch_size": BATCH_SIZE,
            "precision": PRECISION_NAME,
            "baseline": PRECISION_NAME,
            "?estimate": POSITIVE,
            "?low": POSITIVE,
            "?high": POSITIVE,
            "?rounds": COUNT,
        }
    ],
    "?left_out": [{"precision": PRECISION_NAME, "reason": str}],
    "?incomplete": (dict, None),
    # null when the model could not be traced on the meta device (op_tables.step_memory)
    "?step_memory": OrNull({"?parameters_bytes": (int, float), "?activation_bytes_per_sample": {"*": (int, float)}}),
}


def load_results(path: Path) -> dict:
    path = Path(path)
    results = read_json(
        path,
        missing=f"no bench results at {path}: run 'ampgan bench' first or give the path to its results.json",
        damaged=f"{path} is not valid JSON: re-run 'ampgan bench'",
    )
    fix = "re-run 'ampgan bench' (or the comparison) to measure again"
    return check_format(results, "ampgan-bench/1", str(path), "an ampgan bench results file", fix, shape=RESULTS_SHAPE)


def unmeasured(configs: list[dict]) -> dict[tuple[str, int], str]:
    """{(precision, batch size): why} of each bench configuration with no settled step (too slow, failed): its
    reason, else its status: why a row is unfinished, as the study's race clock, its log and its answer read it."""
    return {(c["precision"], c["batch_size"]): c.get("reason") or c["status"] for c in configs if c["status"] != "ok"}


def csv_rows(results: dict) -> list[dict]:
    speedup = {(s["batch_size"], s["precision"]): s for s in results["speedups"]}
    rows = []
    for config in results["configs"]:
        stats, pair = config.get("stats") or {}, speedup.get((config["batch_size"], config["precision"])) or {}
        ms = lambda key: round(stats[key] * 1e3, 3) if key in stats else ""  # noqa: E731
        rows.append(
            {
                "batch_size": config["batch_size"],
                "precision": config["precision"],
                "status": config["status"],
                "median_ms": ms("median_s"),
                "q1_ms": ms("q1_s"),
                "q3_ms": ms("q3_s"),
                "iqr_ms": ms("iqr_s"),
                "min_ms": ms("min_s"),
                "noisy": stats.get("noisy", ""),
                "images_per_s": _round(config.get("images_per_s"), 1),
                "s_per_1000_samples": _round(config.get("s_per_1000_samples"), 4),
                "gflops_per_step": _round(config["flops_per_step"] / 1e9 if config.get("flops_per_step") else None, 3),
                "matmul_share": _round(config.get("matmul_share"), 3),
                "achieved_tflops": _round(config.get("achieved_tflops"), 4),
                "percent_of_peak": _round(config.get("percent_of_peak"), 1),
                "peak_memory_mib": _round(
                    config["peak_memory_bytes"] / 2**20 if config.get("peak_memory_bytes") is not None else None, 1
                ),
                "skipped_steps": config.get("skipped_steps", ""),
                "speedup_vs_baseline": round(speedup_estimate(pair), 3) if pair else "",
                "speedup_ci_low": _round(pair.get("low"), 3),
                "speedup_ci_high": _round(pair.get("high"), 3),
                "rounds": pair.get("rounds", ""),
                "settled": pair.get("settled", ""),
                "load_changed": pair.get("load_changed", ""),
                "processes": config.get("processes", 1),
                "scaling_efficiency": _round(config.get("scaling_efficiency"), 3),
                "reason": config.get("reason", ""),
                # each row says where and with what it was measured: a CSV read without its results.json
                "measured_on": f"measured on {stamp_text(results)}",
            }
        )
    return rows


def _round(value, digits):
    return "" if value is None else round(value, digits)


def write_results(results: dict, out_dir: Path) -> None:
    """results.json, results.csv and the figures."""
    write_json_atomically(Path(out_dir) / "results.json", results)
    render(results, out_dir)


def render(results: dict, out_dir: Path) -> str:
    """Writes results.csv and both figures; returns the console table."""
    out_dir = Path(out_dir)
    write_csv_atomically(out_dir / "results.csv", CSV_COLUMNS, csv_rows(results))
    _figure(results, out_dir / "fig1_time_per_batch.png", per_sample=False)
    _figure(results, out_dir / "fig2_time_per_1000_samples.png", per_sample=True)
    if any(row.get("attainable_speedup") for row in results.get("attainable") or []):
        _attainable_figure(results, out_dir / "fig_attainable.png")
    return table(results)


def _attainable_figure(results: dict, path: Path) -> None:
    """Per batch size and mixed precision: the measured speedup (with its interval) beside the
    attainable one (every operation of the step timed alone, summed)."""
    rows = [r for r in results["attainable"] if r.get("attainable_speedup")]
    sizes = sorted({r["batch_size"] for r in rows})
    names = in_order({r["precision"] for r in rows})
    pairs = {(s["batch_size"], s["precision"]): s for s in results["speedups"]}
    figure, axes = subplots(figsize=(7, 4.2), dpi=120)
    width = 0.8 / (2 * len(names))
    for index, name in enumerate(names):
        for x, size in enumerate(sizes):
            row = next((r for r in rows if r["batch_size"] == size and r["precision"] == name), None)
            if row is None:
                continue
            left = x + (2 * index - len(names)) * width + width / 2
            pair = pairs.get((size, name))
            if pair:
                axes.bar(
                    left,
                    pair["estimate"],
                    width,
                    color=precision_colour(name),
                    yerr=[[pair["estimate"] - pair["low"]], [pair["high"] - pair["estimate"]]],
                    capsize=2,
                    label=f"{name} measured" if x == 0 else None,
                )
            axes.bar(
                left + width,
                row["attainable_speedup"],
                width,
                color=precision_colour(name),
                alpha=0.35,
                hatch="//",
                label=f"{name} attainable (each op alone)" if x == 0 else None,
            )
            if row.get("achieved_of_attainable") is not None:
                axes.annotate(
                    f"{row['achieved_of_attainable']:.0%}",
                    (left + width / 2, max(row["attainable_speedup"], pair["estimate"] if pair else 0)),
                    textcoords="offset points",
                    xytext=(0, 3),
                    ha="center",
                    fontsize=7,
                )
    axes.axhline(1.0, color="#444444", linewidth=0.8)
    axes.set_xticks(range(len(sizes)), [str(b) for b in sizes])
    axes.set(xlabel="batch size", ylabel="speedup over fp32")
    axes.set_title(
        "Measured speedup against the attainable one (every operation of the step alone)\nlabel: measured / attainable",
        fontsize=9,
    )
    axes.legend(fontsize=7)
    save_figure(figure, path, stamp_text(results))


def stamp_text(results: dict) -> str:
    env = results.get("environment", {})
    versions = env.get("versions", {})
    spec = results["spec"]
    text = (
        f"{env.get('hardware_summary', results['hardware'].get('name'))} | {spec.get('dataset', '?')}, "
        f"{model_text(spec)}{compile_text(spec)}{layout_text(spec)} | torch {versions.get('torch', '?')}, "
        f"ampgan {versions.get('ampgan', '?')} | {env.get('date', '')}"
    )
    if results.get("incomplete"):
        text += f" | INCOMPLETE: {incomplete_text(results['incomplete'])}"
    return text


def model_text(spec: dict) -> str:
    """'model acgan (width 64, z_dim 128)': the model and the options that size it (results from before the
    model seam name a width only: the AC-GAN)."""
    if "model" not in spec:
        return f"model acgan (width {spec.get('width', '?')})"
    options = spec.get("model_options") or {}
    sizes = [f"{name} {options[name]}" for name in ("width", "z_dim") if name in options]
    return f"model {spec['model']}" + (f" ({', '.join(sizes)})" if sizes else "")


def layout_text(spec: dict) -> str:
    """', channels-last: bf16' when some precisions ran NHWC (results from before the option: NCHW)."""
    channels_last = spec.get("channels_last") or []
    return f", channels-last: {', '.join(channels_last)}" if channels_last else ""


def compile_text(spec: dict) -> str:
    """', compiled' when every precision's step was compiled, ', compiled: bf16' when some were
    (results from before per-precision compiling hold true or false)."""
    compiled = spec.get("compile")
    if compiled is True or (compiled and set(spec.get("precisions", [])) <= set(compiled)):
        return ", compiled"
    named = [p for p in spec.get("precisions", []) if p in (compiled or [])]
    return f", compiled: {', '.join(named)}" if named else ""


def time_spent_text(results: dict, total_s: float) -> str:
    """Where a bench's wall time went, each stage against its share: --max-seconds x batch sizes bounds measuring
    (warm-ups, counting, rounds); the decisions before it and the op trace after it have shares of that on top;
    the rest is the overhead no budget bounds (imports, data, building the model, writing results and figures)."""
    spec, spent = results["spec"], results.get("seconds", {})
    asked = spec["max_seconds"] * len(spec["batch_sizes"])
    building = spent.get("building", 0.0)  # each configuration's networks: part of the overhead
    overhead = max(total_s - sum(v for k, v in spent.items() if k != "building"), 0.0)
    shares = {"decisions": spec.get("decision_share", 0), "measuring": 1.0, "trace": spec.get("trace_share", 0)}

    def against(stage: str) -> str:
        share, used = shares[stage] * asked, spent.get(stage, 0.0)
        over = f", {used - share:.1f} s over" if used > share + 0.5 else ""  # a clock's half second is not over
        return f"{used:.1f} s of its {share:.3g} s{over}"

    parts = [
        # the thread count is measured among the decisions on a crowded CPU (speed/threads.py): a user's GAN whose step
        # takes seconds spends minutes there, and only OMP_NUM_THREADS skips it
        f"decisions {against('decisions')} (skip: --precisions, --channels-last/--no-channels-last, "
        "OMP_NUM_THREADS=N for the thread count)",
        f"measuring {against('measuring')} (warm-ups and rounds)",
        f"op trace {against('trace')} (skip: --no-trace)",
    ]
    if spent.get("compile_times"):
        parts.append(f"compile times {spent['compile_times']:.1f} s (fresh processes; skip: no --compile)")
    if spent.get("attainable"):
        parts.append(f"operations alone {spent['attainable']:.1f} s (what --attainable adds, no share)")
    return (
        f"bench: {total_s:.1f} s in all; --max-seconds {spec['max_seconds']:g} x {len(spec['batch_sizes'])} batch "
        f"size(s) = {asked:g} s of measuring, and shares of it on top for the decisions and the op trace "
        f"({sum(shares.values()) * asked:.3g} s in all): {', '.join(parts)}; overhead {overhead:.1f} s (imports, "
        f"data, building each configuration's networks: {building:.1f} s, writing results and figures)"
    )


def incomplete_text(incomplete: dict) -> str:
    """What a benchmark stopped by a signal kept and left out."""
    finished = ", ".join(map(str, incomplete["finished_batch_sizes"])) or "none"
    missing = ", ".join(map(str, incomplete["not_measured"]))
    if not missing:
        return (
            f"stopped by {incomplete['signal']} after every batch size was measured ({finished}); op tables not traced"
        )
    return f"stopped by {incomplete['signal']}; finished batch sizes {finished}; not measured {missing}"


def plain_tick_text(tick: float) -> str:
    """A tick as a reader writes it: '3,000,000' and '900,000', never '3e+06' beside '900000'."""
    return f"{tick:,.0f}" if tick >= 1000 else f"{tick:g}"


def plain_log_ticks(low: float, high: float) -> list[float]:
    """At least three ticks covering [low, high] for a log axis labelled in plain numbers a reader
    can read a time off: 1-2-5 x 10^k, else every digit x 10^k, else evenly spaced round values."""
    span = range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
    for mantissas in ((1, 2, 5), range(1, 10)):
        ticks = [
            float(f"{m * 10.0**e:.6g}") for e in span for m in mantissas if low / 1.15 <= m * 10.0**e <= high * 1.15
        ]
        if len(ticks) >= 3:
            return ticks
    step = 10 ** math.floor(math.log10((high - low) / 3 or high))
    return sorted({float(f"{round(v / step) * step:.6g}") for v in np.linspace(low, high, 4)})


def _figure(results: dict, path: Path, per_sample: bool) -> None:
    figure, axes = subplots(figsize=(7, 4.5), dpi=120)
    speedups = {(s["batch_size"], s["precision"]): s for s in results["speedups"]}
    plotted: list[float] = []
    for precision in results["spec"]["precisions"]:
        rows = [c for c in results["configs"] if c["precision"] == precision and c.get("stats")]
        if not rows:
            continue
        scale = [1000.0 / r["batch_size"] if per_sample else 1.0 for r in rows]
        median = [r["stats"]["median_s"] * s * 1e3 for r, s in zip(rows, scale)]
        low = [(r["stats"]["median_s"] - r["stats"]["q1_s"]) * s * 1e3 for r, s in zip(rows, scale)]
        high = [(r["stats"]["q3_s"] - r["stats"]["median_s"]) * s * 1e3 for r, s in zip(rows, scale)]
        axes.errorbar(
            [r["batch_size"] for r in rows],
            median,
            yerr=[low, high],
            marker="o",
            capsize=3,
            label=precision,
            color=precision_colour(precision),
        )
        for row, y in zip(rows, median):
            pair = speedups.get((row["batch_size"], precision))
            if pair and "low" in pair:  # the speedup over the baseline, with its interval, beside the point
                axes.annotate(
                    point_label(pair),
                    (row["batch_size"], y),
                    textcoords="offset points",
                    xytext=(6, -10),
                    fontsize=6.5,
                    color=precision_colour(precision),
                )
        plotted += median
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    batch_sizes = sorted({c["batch_size"] for c in results["configs"]}) or list(results["spec"].get("batch_sizes", [1]))
    axes.set_xticks(batch_sizes, [str(b) for b in batch_sizes])
    axes.set_xlim(min(batch_sizes) / 1.4, max(batch_sizes) * 2.2)  # room for the speedup labels
    axes.minorticks_off()
    if plotted:
        ticks = plain_log_ticks(min(plotted), max(plotted))
        axes.set_yticks(ticks, [plain_tick_text(t) for t in ticks])
    axes.set(xlabel="batch size", ylabel="ms per 1000 samples" if per_sample else "ms per batch (D + G step)")
    axes.set_title(
        ("Time per 1000 samples" if per_sample else "Average time per batch")
        + " (median, IQR bars)\nlabels: speedup vs fp32 [95% CI], ? = not settled to +-5%,\n"
        "unsettled = a CI that decides nothing and spans over 2x",
        fontsize=9,
    )
    axes.grid(True, which="both", alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend()
    else:
        axes.text(0.5, 0.5, "no configuration finished", transform=axes.transAxes, ha="center")
    unplotted = _not_plotted(results)
    if unplotted:
        axes.text(0.02, 0.98, "\n".join(unplotted), transform=axes.transAxes, va="top", fontsize=7, color="#555")
    save_figure(figure, path, stamp_text(results))


def point_label(pair: dict) -> str:
    """A figure point's speedup: '1.84x [1.79-1.90]', '?' after a band wider than +-5%, or 'unsettled' alone
    where the band is no answer (speed/intervals.answers)."""
    shown = answers(pair["low"], pair["high"])
    return speedup_band(pair["estimate"], pair["low"], pair["high"]) + (
        "?" if shown and not pair.get("settled", True) else ""
    )


def _not_plotted(results: dict) -> list[str]:
    """One line per precision with configurations that were not timed, and why ('bf16 not timed at batch
    1024: too slow, one step took 159 s'): a figure shows what is missing from it, not just what is there."""
    lines = []
    for precision in results["spec"]["precisions"]:
        missing = [c for c in results["configs"] if c["precision"] == precision and not c.get("stats")]
        if not missing:
            continue
        batches = ", ".join(str(c["batch_size"]) for c in missing)
        firsts = [c["warmup_s"][0] for c in missing if c.get("warmup_s")]
        low, high = (f"{min(firsts):.3g}", f"{max(firsts):.3g}") if firsts else ("", "")
        why = {c["status"] for c in missing}
        detail = (  # one value where they round alike ('7.56 s', not '7.56-7.56 s')
            f"too slow, one step took {low if low == high else f'{low}-{high}'} s"
            if firsts and why == {"too_slow"}
            else ", ".join(sorted(STATUS_WORDS.get(status, status) for status in why))
            + (" (give more --max-seconds)" if "out_of_time" in why else "")
        )
        lines.append(f"{precision} not timed at batch {batches}: {detail}")
    return lines


def _speedup_cell(pair: dict | None) -> str:
    # '1.84x [1.79-1.90]'; results written before intervals have the estimate alone
    if pair is None:
        return ""
    if "low" not in pair:
        return f"{speedup_estimate(pair):.2f}x"
    return speedup_band(pair["estimate"], pair["low"], pair["high"])


def attainable_lines(results: dict) -> list[str]:
    """'attainable at batch 256, bf16: 1.80x with every operation timed alone; achieved 1.52x = 84% ...'."""
    lines = []
    for row in results.get("attainable") or []:
        if row.get("attainable_speedup") is None:
            continue
        text = (
            f"attainable at batch {row['batch_size']}, {row['precision']}: {row['attainable_speedup']:.2f}x over "
            "fp32 with every operation of the step timed alone"
        )
        if row.get("achieved_of_attainable") is not None:
            text += f"; achieved {row['achieved_speedup']:.2f}x = {row['achieved_of_attainable']:.0%} of it"
        gaps = [g for g in row.get("biggest_gaps", []) if g.get("speedup") is not None][:3]
        if gaps:
            text += "; slowest to gain: " + ", ".join(
                f"{g['op'].removeprefix('aten.')} {g['mixed_s'] * 1e3:.1f} ms ({g['speedup']:.2f}x)" for g in gaps
            )
        lines.append(text)
    return lines


def _or_dash(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _config_line(config: dict, pair: dict | None) -> str:
    """One configuration's row of the table: its times, throughput, FLOPs and speedup, and a note saying what
    qualifies them (several processes, noise, skipped steps, an unsettled interval, the load, the reason)."""
    stats = config.get("stats")
    if not stats:
        return (
            f"{config['batch_size']:>6} {config['precision']:>9} {'-':>10} {'':>8} {'':>9} {'':>8} {'':>6} "
            f"{'':>8} {'':>7} {'':>19}  {config['status']}: {config.get('reason', '')}"
        )
    flags = pair or {}
    notes = [
        f"{config['processes']} processes, slowest rank; scaling efficiency {config['scaling_efficiency']:.0%}"
        if "scaling_efficiency" in config
        else "",
        "noisy (IQR > 10% of median)" if stats.get("noisy") else "",
        f"{config['skipped_steps']} skipped steps" if config.get("skipped_steps") else "",
        ""
        if flags.get("settled", True)
        else f"not settled to +-5% after {flags['rounds']} rounds"
        + ("" if answers(flags["low"], flags["high"]) else f" ({UNSETTLED}: a longer --max-seconds)"),
        "the machine's load changed during the measurement" if flags.get("load_changed") else "",
        "measured under load (other processes crowded the cores)" if flags.get("under_load") else "",
        config.get("reason") or "",
    ]
    gflop = config["flops_per_step"] / 1e9 if config.get("flops_per_step") else None
    return (
        f"{config['batch_size']:>6} {config['precision']:>9} {stats['median_s'] * 1e3:>10.2f} "
        f"{stats.get('iqr_s', 0.0) * 1e3:>8.2f} {config.get('images_per_s', 0.0):>9.1f} {_or_dash(gflop, '.2f'):>8} "
        f"{_or_dash(config.get('matmul_share'), '.0%'):>6} {_or_dash(config.get('achieved_tflops'), '.3f'):>8} "
        f"{_or_dash(config.get('percent_of_peak'), '.1f'):>7} {_speedup_cell(pair):>19}  "
        + " ".join(note.strip() for note in notes if note.strip())
    )


def table(results: dict) -> str:
    speedup = {(s["batch_size"], s["precision"]): s for s in results["speedups"]}
    lines = [
        f"{'batch':>6} {'precision':>9} {'median ms':>10} {'IQR ms':>8} {'img/s':>9} {'GFLOP':>8} {'matmul':>6} "
        f"{'TFLOP/s':>8} {'% peak':>7} {'speedup [95% CI]':>19}  note",
        *(
            _config_line(config, speedup.get((config["batch_size"], config["precision"])))
            for config in results["configs"]
        ),
        *(f"left out {item['precision']}: {item['reason']}" for item in results.get("left_out", [])),
        *attainable_lines(results),
    ]
    if results.get("compile_times"):
        batch = results["spec"]["batch_sizes"][0]
        times = "; ".join(
            f"{name} cold {t['cold_s']:.1f} s, warm {t['warm_s']:.1f} s" for name, t in results["compile_times"].items()
        )
        lines.append(f"compile time before the first step (batch {batch}, a fresh process each): {times}")
    if results.get("incomplete"):
        lines.append(f"incomplete: {incomplete_text(results['incomplete'])}")
    peaks = ", ".join(
        f"{name} {p['tflops']:.3g} TFLOP/s ({p['source']})" if p["tflops"] else f"{name}: {p['source']}"
        for name, p in results["peaks"].items()
    )
    lines += [
        f"peaks: {peaks}",
        "GFLOP: counted per training step (torch.utils.flop_counter); matmul: the share of it in matrix "
        "products, the rest convolutions",
    ]
    if results.get("processes", 1) > 1:
        lines.append(f"{results['processes']} processes: batch is per process, img/s is for all of them")
    lines.append(stamp_text(results))
    return "\n".join(map(one_line, lines))  # a name holding a newline stays inside its row
