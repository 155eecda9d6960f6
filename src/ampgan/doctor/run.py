"""Running the doctor on any GAN, and what it writes: doctor.json, figures, a summary."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

import ampgan.precisions as precisions
from ampgan.config import TrainConfig
from ampgan.data.batches import BatchStream
from ampgan.doctor.preflight import PREFLIGHT_BATCH
from ampgan.doctor.ranges import BF16, FORMATS, FP16
from ampgan.doctor.recorder import (
    HIST_LOW,
    KINDS,
    LayerRecorder,
    computed_in_fp32,
    flagged,
    fractions_at_scale,
    gradient_histogram,
    hardware_advice,
    loss_scale_history,
    recommend_loss_scale,
    summarize_layers,
)
from ampgan.files.atomic import write_json_atomically
from ampgan.files.paths import file_in
from ampgan.gan.alignment import misaligned_layers
from ampgan.plotting import save_figure, subplots
from ampgan.runs.checkpoint import check_step_matches_name, latest_checkpoint, load_checkpoint, load_weights
from ampgan.runs.run_folder import read_metrics
from ampgan.speed.decision import candidates_for
from ampgan.speed.intervals import answers
from ampgan.system.environment import environment_stamp
from ampgan.training.precision import PrecisionPolicy, restore_backend_switches, snapshot_backend_switches
from ampgan.training.prepared import prepare_run
from ampgan.training.state import build_train_state
from ampgan.training.step import train_step


def diagnose_gan(config: TrainConfig, steps: int, fp16_steps: int, run_dir: Path | None = None) -> dict:
    """K FP32 steps with recording hooks, plus (optionally) a short real fp16 run for comparison. The
    process's backend switches (TF32, cuDNN autotuning) are as the caller left them afterwards: the
    speed decisions inside set them per precision."""
    saved = snapshot_backend_switches()
    try:
        prepared = prepare_run(config.with_fields({"precision.name": precisions.FP32, "precision.loss_scale": None}))
        config = prepared.config.with_fields(
            {"precision.name": config.precision.name, "precision.loss_scale": config.precision.loss_scale}
        )
        in_fp32 = _computed_in_fp32(prepared)  # before the state the doctor records is seeded
        state = build_train_state(prepared.config, prepared.model, prepared.data, prepared.policy)
        if run_dir is not None:
            _load_run_weights(state, run_dir)
        networks = {"G": state.generator, "D": state.discriminator}
        stream = _stream(prepared, state, config)
        recorder = LayerRecorder(networks, in_fp32)
        # Strict FP32 (no TF32 in cuBLAS or cuDNN) for the reference steps, the caller's switches back after.
        with prepared.policy.backend_settings():
            try:
                recorder.record_weights()
                for _ in range(steps):
                    train_step(state, stream.next_batch)
                    recorder.after_backward()
            finally:
                recorder.close()
        histogram = gradient_histogram(recorder.records)
        rows = summarize_layers(recorder.records)
        report = {
            "format": "ampgan-doctor/1",
            "config": config.to_dict(),
            "steps": steps,
            "environment": environment_stamp(prepared.policy.device),
            "formats": {f.name: dataclasses.asdict(f) for f in (FP16, BF16)},
            "layers": rows,
            "flags": flagged(rows),
            "gradient_histogram": {"low_exponent": HIST_LOW, "counts": histogram},
            "loss_scale": recommend_loss_scale(histogram),
            "scale_table": {str(e): fractions_at_scale(histogram, e) for e in range(0, 25, 2)},
            "alignment": misaligned_layers(networks, prepared.data),
            "hardware": hardware_advice(prepared.config, prepared.dataset, prepared.policy.device),
            "dynamic_scaling": _dynamic_fp16_run(config, prepared, fp16_steps, run_dir),
        }
        return report | {"summary_lines": summary_lines(report)}
    finally:
        restore_backend_switches(saved)


def _computed_in_fp32(prepared) -> dict[str, set[str]]:
    """For each 16-bit mode this device runs, the layers that computed in fp32 in a training step under it
    (recorder.computed_in_fp32): one step per mode on a fresh state, at preflight's batch (a dtype does not depend
    on the batch; fp16 on a CPU is slow)."""
    runs_here, _ = candidates_for(prepared.policy.device)
    found = {}
    for name in (name for name in FORMATS if name in runs_here):
        policy = PrecisionPolicy(name, prepared.policy.device)
        state = build_train_state(prepared.config, prepared.model, prepared.data, policy)
        stream = BatchStream(
            prepared.dataset, PREFLIGHT_BATCH, policy.device, prepared.config.seed, image_range=state.gan.image_range
        )
        with policy.backend_settings():
            found[name] = computed_in_fp32(
                {"G": state.generator, "D": state.discriminator}, lambda: train_step(state, stream.next_batch)
            )
    return found


def _load_run_weights(state, run_dir: Path) -> None:
    checkpoint = latest_checkpoint(run_dir)
    payload = load_checkpoint(checkpoint, map_location="cpu")
    check_step_matches_name(payload, checkpoint)
    load_weights(state.generator, payload["generator"], f"the checkpoint in {run_dir} (generator)")
    load_weights(state.discriminator, payload["discriminator"], f"the checkpoint in {run_dir} (discriminator)")


def _stream(prepared, state, config) -> BatchStream:
    return BatchStream(
        prepared.dataset,
        config.budget.batch_size,
        prepared.policy.device,
        config.seed,
        image_range=state.gan.image_range,
    )


def _dynamic_fp16_run(config, prepared, steps: int, run_dir: Path | None) -> dict:
    """Where GradScaler's dynamic scale settles in a real fp16 run, for each loss scaler (D's, G's, and that of
    each update with an optimizer of its own: TrainState.loss_scalers), by its name: read from an fp16 run
    folder's metrics, or measured over `steps` fresh fp16 steps (slow on CPUs without fp16 kernels)."""
    if run_dir is not None and precisions.precision(config.precision.name).loss_scaling:
        records = read_metrics(file_in(run_dir, "metrics.jsonl"))
        scales = {
            key.removeprefix("loss_scale_"): [m[key] for m in records if isinstance(m.get(key), (int, float))]
            for key in dict.fromkeys(k for m in records for k in m if k.startswith("loss_scale_"))
        }
        return {name: loss_scale_history(found) for name, found in scales.items()} | {
            "source": f"{run_dir}/metrics.jsonl",
            "steps": len(scales.get("d", ())),
        }
    if steps <= 0:
        return {"source": "not measured (--fp16-steps 0)"}
    policy = PrecisionPolicy(precisions.FP16, prepared.policy.device)
    state = build_train_state(prepared.config, prepared.model, prepared.data, policy)
    stream = _stream(prepared, state, config)
    scales = {name: [] for name in state.loss_scalers()}
    with policy.backend_settings():
        for _ in range(steps):
            train_step(state, stream.next_batch)
            for name, scaler in state.loss_scalers().items():
                scales[name].append(scaler.scale())
    return {name: loss_scale_history(found) for name, found in scales.items()} | {
        "source": f"{steps} fresh fp16 steps with dynamic scaling from 2^16",
        "steps": steps,
    }


def summary_lines(report: dict) -> list[str]:
    lines = []
    recommendation = report["loss_scale"]
    flags = report["flags"]
    for fmt in (FP16.name, BF16.name):
        overflow = flags.get(f"{fmt}_overflow", [])
        flush = flags.get(f"{fmt}_flush_to_zero", [])
        if not overflow and not flush:
            lines.append(f"{fmt}: no layer's weights, activations or gradients leave the {fmt} range (unscaled).")
        if overflow:
            lines.append(f"{fmt}: OVERFLOW in {len(overflow)} place(s): {'; '.join(overflow[:4])}")
        if flush:
            lines.append(f"{fmt}: values flush to zero in {len(flush)} place(s) (unscaled): {'; '.join(flush[:4])}")
    # Two numbers for one knob, each said for what it is: a user read 'recommend 8192' beside 'settled at 65536' as
    # a contradiction.
    if "scale" in recommendation and "unscaled" in recommendation:
        scaled, unscaled = recommendation["scaled"], recommendation["unscaled"]
        lines.append(
            f"fp16 loss scale, fixed (--loss-scale {recommendation['scale']:g}): 2^{recommendation['exponent']} = "
            f"{recommendation['scale']:g}, the largest power of 2 that keeps the largest gradient of {report['steps']} "
            f"fp32 steps (~2^{recommendation['largest_gradient_log2']}, every network's) 2x below fp16's overflow; "
            f"scaled by it, gradients flushed to zero {_percent(unscaled['flush_to_zero'])} -> "
            f"{_percent(scaled['flush_to_zero'])}, subnormal {_percent(unscaled['subnormal'])} -> "
            f"{_percent(scaled['subnormal'])}, overflowing {_percent(scaled['overflow'])}."
        )
    dynamic = report.get("dynamic_scaling", {})
    # each scaler apart: one per network, and one per update with an optimizer of its own (step.py)
    settled = [
        f"{history['settled']:g} for {_SCALER_NAMES.get(name, f'update {name!r} (its own scaler)')}"
        for name, history in dynamic.items()
        if isinstance(history, dict) and history.get("settled")
    ]
    if settled:
        lines.append(
            f"fp16 loss scale, dynamic (the default): GradScaler settled at {', '.join(settled)} ({dynamic['source']}),"
            " the scale those steps ran at without overflowing (it halves at each overflow and doubles only after "
            "2000 steps without one); it keeps no headroom and is each network's own, so it need not match the fixed "
            "scale."
        )
    hardware = report["hardware"]
    decisions = hardware.get("decisions", {})
    # a mode whose speedup is unsettled (speed/intervals.py answers()) is not known to be slower: say so
    unsettled = [
        name
        for name, d in decisions.items()
        if d["interval"] and not answers(d["interval"]["low"], d["interval"]["high"])
    ]
    lines += [
        *(f"training step vs fp32 here: {d['description']}" for d in decisions.values()),
        f"use {hardware['recommended_mode']} here (the fastest mode measured faster than fp32 at batch "
        f"{hardware.get('batch_size', '?')}; fp32 when none is)"
        + (
            f"; {' and '.join(unsettled)} unsettled: run ampgan doctor again with fewer other processes running"
            if unsettled
            else ""
        )
        + ".",
    ]
    adjustable = [a for a in report["alignment"] if not a["fixed_by_task"]]
    return lines + [
        "not multiples of 8: "
        + ", ".join(f"{a['layer']} {a['dimension']}={a['value']} (try {a['suggested']})" for a in adjustable[:6])
        if adjustable
        else "alignment: every choosable conv/linear dimension is a multiple of 8."
    ]


_SCALER_NAMES = {"d": "D", "g": "G"}


def _percent(fraction: float) -> str:
    if fraction == 0:
        return "0%"
    return f"{fraction:.3%}" if fraction >= 1e-5 else "<0.001%"


def write_doctor(report: dict, out_dir: Path) -> None:
    write_json_atomically(out_dir / "doctor.json", report)
    _gradient_figure(report, out_dir / "doctor_gradients.png")
    _layer_heatmap(report, out_dir / "doctor_layers.png")


def _footer(report: dict) -> str:
    """The figures' footer, of a report diagnose_gan just made (its config is the config tree's)."""
    env, config = report["environment"], report["config"]
    return (
        f"{env['hardware_summary']} | model {config['model']['name']}, fp32 diagnostic, batch "
        f"{config['budget']['batch_size']}, {report['steps']} steps | "
        f"torch {env['versions']['torch']}, ampgan {env['versions']['ampgan']}"
    )


def _gradient_figure(report: dict, path: Path) -> None:
    counts = np.asarray(report["gradient_histogram"]["counts"], dtype=float)
    exponents = np.arange(len(counts)) + report["gradient_histogram"]["low_exponent"]
    scale_exponent = report["loss_scale"].get("exponent", 0)
    figure, axis = subplots(figsize=(9, 4.5), dpi=120)
    total = counts.sum() or 1
    axis.bar(exponents, counts / total, width=1.0, alpha=0.6, label="gradients (unscaled)", color="#1f77b4")
    axis.bar(
        exponents + scale_exponent,
        counts / total,
        width=1.0,
        alpha=0.5,
        label=f"scaled by 2^{scale_exponent} (recommended)",
        color="#ff7f0e",
    )
    axis.axvspan(-24, 16, color="#2ca02c", alpha=0.08, label="fp16 representable (subnormal from 2^-24)")
    axis.axvspan(-14, 16, color="#2ca02c", alpha=0.12)
    axis.axvline(-25, color="#d62728", ls=":", label="fp16 flush to zero below")
    axis.axvline(16, color="#d62728", ls="--", label="fp16 overflow (65504)")
    occupied = exponents[counts > 0]
    low = min(occupied.min() if occupied.size else -40, -40)
    high = max(occupied.max() + scale_exponent if occupied.size else 20, 20)
    axis.set(
        xlim=(low - 2, high + 2),
        xlabel="log2 |gradient|",
        ylabel="fraction of gradient values",
        # in the title, not on the bars (a text at the top left ran into the unscaled histogram)
        title="Gradient magnitudes against the fp16 range\n(bf16 covers 2^-133 .. 2^127: all of this)",
    )
    # beside the axis, not on it: inside, it hid the top of the scaled histogram (wherever the gradients lie)
    axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save_figure(figure, path, _footer(report))


def _layer_heatmap(report: dict, path: Path) -> None:
    columns = [
        (kind, key)
        for kind in KINDS
        for key in ("fp16_overflow", "fp16_flush_to_zero", "fp16_subnormal", "bf16_overflow", "bf16_flush_to_zero")
    ]
    layers = report["layers"]
    matrix = np.array([[row.get(kind, {}).get(key, 0.0) for kind, key in columns] for row in layers])
    figure, axis = subplots(figsize=(12, 0.32 * len(layers) + 2.5), dpi=120)
    image = axis.imshow(np.log10(matrix + 1e-7), aspect="auto", cmap="magma_r", vmin=-7, vmax=0)
    axis.set_yticks(range(len(layers)), [row["layer"] for row in layers], fontsize=7)
    axis.set_xticks(range(len(columns)), [f"{kind}\n{key}" for kind, key in columns], rotation=90, fontsize=6)
    figure.colorbar(image, label="log10 fraction of values out of range")
    axis.set_title("Per-layer fraction of values that overflow / flush / turn subnormal (unscaled)")
    save_figure(figure, path, _footer(report))
