"""`ampgan doctor`: will this model train in fp16 or bf16? Layer by layer, before you spend money.

Runs K FP32 training steps with hooks on every layer of G and D and records the magnitudes of
weights, activations (layer outputs), activation gradients (gradients of layer outputs) and weight
gradients: exact counts of what would overflow, flush to zero or turn subnormal in fp16 and bf16,
and log2 histograms. From the gradient histogram it recommends an fp16 loss scale (the largest
power of two whose scaled maximum stays `SAFETY_BITS` powers of two below fp16's overflow) and
says how much gradient mass that scale rescues from flushing to zero.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import torch

from ampgan.doctor.ranges import FORMATS, classify, log2_histogram
from ampgan.gan.layers import in_fp32_modules
from ampgan.precisions import FP16, FP32
from ampgan.speed.decision import decide_for_run

KINDS = ("weights", "activations", "activation_grads", "weight_grads")
HIST_LOW, HIST_HIGH = -150, 130
SAFETY_BITS = 1  # headroom kept below the overflow limit: gradients grow during training
MAX_SCALE_EXPONENT = 24


def _zeros_histogram() -> list[int]:
    return [0] * (HIST_HIGH - HIST_LOW + 1)


@dataclass
class LayerRecord:
    name: str
    counts: dict = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))  # kind -> fmt.key -> n
    histograms: dict = field(default_factory=lambda: defaultdict(_zeros_histogram))  # kind -> log2 counts
    max_abs: dict = field(default_factory=lambda: defaultdict(float))

    def add(self, kind: str, tensor: torch.Tensor) -> None:
        if tensor is None or not tensor.is_floating_point() or tensor.numel() == 0:
            return
        for fmt_name, fmt in FORMATS.items():
            for key, value in classify(tensor, fmt).items():
                if key in ("values", "zeros") and fmt_name != FP16:
                    continue  # counted once
                self.counts[kind][key if key in ("values", "zeros") else f"{fmt_name}_{key}"] += value
        histogram, _ = log2_histogram(tensor, HIST_LOW, HIST_HIGH)
        self.histograms[kind] = [mine + more for mine, more in zip(self.histograms[kind], histogram)]
        finite = tensor.detach()[torch.isfinite(tensor.detach())]
        if finite.numel():
            self.max_abs[kind] = max(self.max_abs[kind], float(finite.abs().max()))

    def fractions(self, kind: str) -> dict[str, float]:
        counts = self.counts.get(kind)
        if not counts or not counts["values"]:
            return {}
        return {key: value / counts["values"] for key, value in counts.items() if key not in ("values", "zeros")}


class LayerRecorder:
    """Forward/backward hooks on every leaf layer that has parameters (conv, linear, norm, embedding), but those in
    GAN.fp32_modules: they compute in fp32 in every precision, so fp16's and bf16's ranges are not theirs."""

    def __init__(self, networks: dict[str, torch.nn.Module]):
        self.records: dict[str, LayerRecord] = {}
        self._handles = []
        self._parameters = []
        in_fp32 = in_fp32_modules(*networks.values())
        for prefix, network in networks.items():
            for name, module in network.named_modules():
                if list(module.children()) or not list(module.parameters(recurse=False)) or id(module) in in_fp32:
                    continue
                record = self.records.setdefault(f"{prefix}.{name}", LayerRecord(f"{prefix}.{name}"))
                self._handles.append(module.register_forward_hook(self._on_forward(record)))
                self._parameters += [(record, p) for p in module.parameters(recurse=False)]

    @staticmethod
    def _on_forward(record: LayerRecord):
        # A tensor hook on the output (not a module backward hook): it sees the gradient of the
        # layer's output and tolerates the in-place activations that follow the layer.
        def hook(module, inputs, output):
            output = output if isinstance(output, torch.Tensor) else output[0]
            record.add("activations", output)
            if output.requires_grad:
                output.register_hook(lambda grad: record.add("activation_grads", grad))

        return hook

    def after_backward(self) -> None:
        """Read the weight gradients (call after each backward, before the optimizer zeroes them)."""
        for record, parameter in self._parameters:
            if parameter.grad is not None:
                record.add("weight_grads", parameter.grad)

    def record_weights(self) -> None:
        for record, parameter in self._parameters:
            record.add("weights", parameter.detach())

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()


def gradient_histogram(records: dict[str, LayerRecord]) -> list[int]:
    gradients = [
        record.histograms[kind]
        for record in records.values()
        for kind in ("activation_grads", "weight_grads")
        if kind in record.histograms
    ]
    return [sum(bucket) for bucket in zip(_zeros_histogram(), *gradients)]


def fractions_at_scale(histogram: list[int], scale_exponent: int) -> dict[str, float]:
    """fp16 overflow / flush / subnormal fractions of a log2 histogram multiplied by 2^scale_exponent.

    Bucket b holds magnitudes in [2^b, 2^(b+1)). Scaled by a power of two, a bucket moves whole, so
    the fp16 limits (powers of two, except overflow at 65520 which sits inside bucket 15: counted as
    overflow from bucket 16 on) fall on bucket edges.
    """
    buckets = [(index + HIST_LOW + scale_exponent, count) for index, count in enumerate(histogram)]
    total = sum(histogram) or 1  # no values: every fraction 0
    return {
        "overflow": sum(count for exponent, count in buckets if exponent >= 16) / total,
        # entirely at or below 2^-25: rounds to zero
        "flush_to_zero": sum(count for exponent, count in buckets if exponent < -25) / total,
        "subnormal": sum(count for exponent, count in buckets if -25 <= exponent < -14) / total,
    }


def recommend_loss_scale(histogram: list[int]) -> dict:
    """The largest 2^k (0 <= k <= 24) keeping every recorded gradient SAFETY_BITS below overflow."""
    occupied = [index + HIST_LOW for index, count in enumerate(histogram) if count]
    if not occupied:
        return {"scale": 1.0, "exponent": 0, "reason": "no gradients recorded"}
    top = max(occupied)  # the largest gradient is in [2^top, 2^(top+1))
    exponent = max(0, min(MAX_SCALE_EXPONENT, 15 - SAFETY_BITS - top))
    before, after = fractions_at_scale(histogram, 0), fractions_at_scale(histogram, exponent)
    return {
        "scale": 2.0**exponent,
        "exponent": exponent,
        "largest_gradient_log2": top,
        "unscaled": before,
        "scaled": after,
        "rescued_fraction": before["flush_to_zero"] - after["flush_to_zero"],
    }


def summarize_layers(records: dict[str, LayerRecord]) -> list[dict]:
    return [
        {"layer": name, "max_abs": dict(record.max_abs)} | {kind: record.fractions(kind) for kind in KINDS}
        for name, record in records.items()
    ]


def flagged(rows: list[dict], threshold: float = 1e-4) -> dict[str, list[str]]:
    """Layers where some kind of value overflows / flushes, per format."""
    flags = defaultdict(list)
    for row in rows:
        for kind in KINDS:
            for key, fraction in row.get(kind, {}).items():
                if key.endswith(("overflow", "flush_to_zero")) and fraction > threshold:
                    flags[key].append(f"{row['layer']} ({kind}: {fraction:.3%})")
    return dict(flags)


def hardware_advice(config, dataset, device: torch.device, log=lambda line: None) -> dict:
    """Which precision to train in here: the speed decision (speed.decision) for every mode this
    device can run, on the diagnosed configuration's own training step, and the fastest useful one."""
    decisions, cannot_run = decide_for_run(
        config.with_fields({"precision.name": FP32, "precision.loss_scale": None}), dataset, device, log=log
    )
    useful = {name: d for name, d in decisions.items() if d.useful}
    return {
        "speedup_vs_fp32": {name: d.interval["estimate"] if d.interval else None for name, d in decisions.items()},
        "decisions": {name: d.to_dict() for name, d in decisions.items()},
        "cannot_run": cannot_run,
        "fast_modes": sorted(useful),
        "recommended_mode": max(useful, key=lambda name: useful[name].interval["estimate"]) if useful else FP32,
        "batch_size": config.budget.batch_size,
    }


def loss_scale_history(scales: list[float]) -> dict:
    """Where dynamic scaling settled: the last scale, and the most common over the last half."""
    if not scales:
        return {}
    tail = scales[len(scales) // 2 :]
    common = max(set(tail), key=tail.count)
    return {"final": scales[-1], "settled": common, "settled_log2": math.log2(common) if common > 0 else None}
