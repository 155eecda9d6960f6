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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from ampgan.doctor.ranges import FORMATS, classify, log2_histogram
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
    formats: dict = field(default_factory=lambda: dict(FORMATS))  # the 16-bit formats it computes in: its checks
    counts: dict = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))  # kind -> fmt.key -> n
    histograms: dict = field(default_factory=lambda: defaultdict(_zeros_histogram))  # kind -> log2 counts
    max_abs: dict = field(default_factory=lambda: defaultdict(float))

    def add(self, kind: str, tensor: torch.Tensor) -> None:
        if tensor is None or not tensor.is_floating_point() or tensor.numel() == 0:
            return
        for index, (fmt_name, fmt) in enumerate(self.formats.items()):
            for key, value in classify(tensor, fmt).items():
                if key in ("values", "zeros") and index:
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


def layers(networks: dict[str, torch.nn.Module]) -> Iterator[tuple[str, torch.nn.Module]]:
    """Every leaf layer that has parameters (conv, linear, norm, embedding), named 'G.body.1'."""
    for prefix, network in networks.items():
        for name, module in network.named_modules():
            if not list(module.children()) and list(module.parameters(recurse=False)):
                yield f"{prefix}.{name}", module


def computed_in_fp32(networks: dict[str, torch.nn.Module], run: Callable[[], object]) -> set[str]:
    """The layers whose every output in `run()` (a step under a 16-bit mode's autocast) is fp32, whatever kept them
    there: GAN.fp32_modules, the model's own autocast(enabled=False) region, an op autocast runs in fp32 (an
    embedding, a norm on CUDA). That format's range is not theirs. Decided from what runs, not from declarations."""
    dtypes = defaultdict(set)
    handles = [
        module.register_forward_hook(
            lambda m, args, out, name=name: dtypes[name].add(getattr(_tensor(out), "dtype", None))
        )
        for name, module in layers(networks)
    ]
    try:
        run()
    finally:
        for handle in handles:
            handle.remove()
    return {name for name, seen in dtypes.items() if seen == {torch.float32}}


def _tensor(output) -> torch.Tensor:
    return output if isinstance(output, torch.Tensor) else output[0]


class LayerRecorder:
    """Forward/backward hooks on every leaf layer that has parameters, each judged by the 16-bit formats it computes
    in: `in_fp32` names, per format, the layers that compute in fp32 under it (computed_in_fp32); a layer in fp32
    under every format is not recorded."""

    def __init__(self, networks: dict[str, torch.nn.Module], in_fp32: dict[str, set[str]] | None = None):
        self.records: dict[str, LayerRecord] = {}
        self._handles = []
        self._parameters = []
        for name, module in layers(networks):
            formats = {fmt: found for fmt, found in FORMATS.items() if name not in (in_fp32 or {}).get(fmt, ())}
            if not formats:
                continue
            record = self.records.setdefault(name, LayerRecord(name, formats))
            self._handles.append(module.register_forward_hook(self._on_forward(record)))
            self._parameters += [(record, p) for p in module.parameters(recurse=False)]

    @staticmethod
    def _on_forward(record: LayerRecord):
        # A tensor hook on the output (not a module backward hook): it sees the gradient of the
        # layer's output and tolerates the in-place activations that follow the layer.
        def hook(module, inputs, output):
            output = _tensor(output)
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
    """The gradients of the layers that compute in fp16 (the fp16 loss scale's), on a log2 axis."""
    gradients = [
        record.histograms[kind]
        for record in records.values()
        for kind in ("activation_grads", "weight_grads")
        if kind in record.histograms and FP16 in record.formats
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
