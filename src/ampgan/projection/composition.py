"""A training step's time composed from its parts with the step-level quantities fitted end to end.

The kernel model (kernel_model.py) times each matrix kernel as DeepBench measured kernels alone. A whole
step adds what no kernel sheet shows, and these few quantities are fitted on published end-to-end training
throughput (benchmarks/validation/: NVIDIA DeepLearningExamples and Lambda's single-GPU fp32/TF32 and AMP
rows; one GAN among them, NVIDIA's HiFi-GAN vocoder), never on ampgan's own GANs nor on the study's figures:

    matrix  = sum over precision paths of  exp(matrix[path] + generation[path]) x kernel-model seconds / clock
    clock   = min(1, watts / (SMs x watts_per_sm)) ** (1/3)     (a power cap holds the clock below boost; a
              published sustained clock, gpus.csv's clock_share, instead where there is one: the T4's)
    GPU     = matrix + other bytes / (bandwidth x memory_fraction[_16: on 16-bit data])
              + autocast's casts / (bandwidth x cast_fraction)
              + the optimizer's and scaler's passes / (bandwidth x update_fraction) + non-matrix kernels x launch_gap
    host    = operations x host_per_op                           (the GPU server's dispatch, not this machine's)
    step    = (GPU^4 + host^4)^(1/4)                             (the host runs ahead, or it bounds the step)

The band is what the fit got wrong on models it did not see (leave-one-model-out), per GPU generation; a
generation without rows takes the errors of each generation predicted with its own rows left out.
The fitted values, their source, date and versions and the script that rebuilds them are in
calibration/composition.json (benchmarks/validation/fit_composition.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

from ampgan.bench.ops import FUSED_UPDATES, OpRow
from ampgan.errors import AmpganError
from ampgan.precisions import FP16, FP32, TF32
from ampgan.precisions import precision as precision_mode
from ampgan.projection.kernel_model import (
    calibration_for,
    features,
    on_tensor_cores,
    pads_channels,
    peak_tflops,
    predict_seconds,
    unmeasured_terms,
    with_terms,
)
from ampgan.projection.step_model import DEFAULT, row_kernels
from ampgan.system.gpus import GpuSpec

PATHS = (FP32, TF32, FP16)  # bf16 composes as fp16: the same tensor-core path and bytes
GLOBAL = (
    "matrix_fp32",
    "matrix_tf32",
    "matrix_fp16",
    "memory_fraction",
    "memory_fraction_16",
    "cast_fraction",
    "update_fraction",
    "launch_gap_s",
    "host_per_op_s",
    "watts_per_sm",
)
PER_GENERATION = ("matrix_fp32", "matrix_16")  # a generation's offset on fp32 products, and on tensor-core ones
CASTS = ("aten._to_copy", "aten.to", "aten.copy_")
SCALER = ("cuda.amp_unscale",)


@dataclass(frozen=True)
class StepParts:
    """What a step is made of on one GPU, before the fitted quantities: the kernel model's seconds per
    precision path at datasheet peak, the other operations' bytes per kind, and operation counts."""

    matrix_s: dict[str, float]
    other_bytes: float  # element-wise, normalisation, reductions on fp32 data
    other_bytes_16: float  # the same on 16-bit data (narrower transfers reach a smaller share of the bandwidth)
    cast_bytes: float
    update_bytes: float
    memory_ops: float
    operations: float


def step_parts(
    rows: Iterable[OpRow],
    batch_size: float,
    gpu: GpuSpec,
    precision: str,
    terms: dict | None = None,
    fp32_ops: str = FP32,
) -> StepParts:
    """`precision`: fp32, tf32, fp16, bf16 or step_model.DEFAULT (TF32 convolutions, fp32 products).
    `terms`: kernel-model terms to use instead of the calibration's, {path: {term: value}}: those no
    calibration kernel measured (its "unmeasured": a 1-4 channel data gradient, a 16-bit GEMM cuBLAS runs
    misaligned) at their other value (fit.py's `unmeasured`) instead of the fit's 0, or at a value tried end
    to end (benchmarks/validation/composition_fit.py). `fp32_ops`: what an op that stays fp32 under a 16-bit
    mode runs as (step_model.kernel_precision)."""
    rows = list(rows)
    calibration = with_terms(calibration_for(gpu)[0], terms)
    shaped = row_kernels(rows, batch_size)
    kernels, weights = shaped.kernels, shaped.weights
    matrix = dict.fromkeys(PATHS, 0.0)
    groups: dict[str, list[int]] = {}
    for i, used in enumerate(shaped.precisions(precision, fp32_ops)):
        groups.setdefault(used, []).append(i)
    for used, indices in groups.items():
        picked = [kernels[i] for i in indices]
        # Without tensor cores (Pascal) autocast's 16-bit products run fp32 arithmetic on 16-bit data (cuBLAS
        # and cuDNN's compute type): the fp32 path, not DeepBench's cuDNN 6 pseudo-fp16 kernels.
        tensor = on_tensor_cores(gpu, used)
        name = FP16 if tensor else FP32
        seconds, _, _ = predict_seconds(
            features(picked, gpu.sms, used if tensor else FP32, pads_channels=pads_channels(gpu, used)),
            calibration.paths[name],
            calibration.shared,
            peak_tflops(gpu, used),
            gpu.bandwidth_gbs,
            precision_mode(used).element_bytes,
        )
        matrix[precision_mode(used).kernel_path] += float((seconds * np.asarray([weights[i] for i in indices])).sum())
    other = other_16 = cast = update = memory_ops = 0.0
    for row in rows:
        if row.unit == "matrix":
            continue
        moved = row.bytes_at(batch_size) * row.weight
        memory_ops += row.weight
        if row.op in FUSED_UPDATES or row.op in SCALER:
            update += moved
        elif row.op in CASTS:
            cast += moved
        elif row.dtype in ("float16", "bfloat16"):
            other_16 += moved
        else:
            other += moved
    return StepParts(matrix, other, other_16, cast, update, memory_ops, sum(r.weight for r in rows))


def clock_factor(gpu: GpuSpec, watts_per_sm: float) -> float:
    """The share of the boost clock a board sustains under matrix work: its published figure (gpus.csv's
    clock_share), else what its power limit allows (1 without a limit)."""
    return gpu.clock_share or (min(1.0, gpu.watts / (gpu.sms * watts_per_sm)) ** (1 / 3) if gpu.watts else 1.0)


def compose(parts: StepParts, gpu: GpuSpec, params: dict) -> dict[str, float]:
    """{"seconds", "gpu_s", "host_s", "matrix_s", "memory_s", "launch_s"}: the step composed with `params`
    ({"global": {name: log value}, "generations": {generation: {name: log offset}}})."""
    g = params["global"]
    offsets = params.get("generations", {}).get(gpu.generation, {})
    clock = clock_factor(gpu, math.exp(g["watts_per_sm"]))
    matrix = 0.0
    for path, seconds in parts.matrix_s.items():
        offset = offsets.get("matrix_fp32" if path == FP32 else "matrix_16", 0.0)
        matrix += math.exp(g[f"matrix_{path}"] + offset) * seconds / clock
    bandwidth = gpu.bandwidth_gbs * 1e9
    memory = (
        parts.other_bytes / math.exp(g["memory_fraction"])
        + parts.other_bytes_16 / math.exp(g["memory_fraction_16"])
        + parts.cast_bytes / math.exp(g["cast_fraction"])
        + parts.update_bytes / math.exp(g["update_fraction"])
    ) / bandwidth
    launch = parts.memory_ops * math.exp(g["launch_gap_s"])
    gpu_s = matrix + memory + launch
    host_s = parts.operations * math.exp(g["host_per_op_s"])
    return {
        "seconds": (gpu_s**4 + host_s**4) ** 0.25,
        "gpu_s": gpu_s,
        "host_s": host_s,
        "matrix_s": matrix,
        "memory_s": memory,
        "launch_s": launch,
    }


@dataclass(frozen=True)
class Composition:
    """The fitted quantities and the bands, as calibration/composition.json ships them."""

    params: dict
    bands: dict  # generation -> {"speedup": [low, high], "time": [low, high], "rows": n, "models": n}
    uncalibrated: dict  # the band of a generation predicted without its own rows
    document: dict

    def band(self, gpu: GpuSpec) -> tuple[dict, bool, str]:
        """(the band's log factors, whether the GPU's generation has rows, what the band rests on)."""
        own = self.bands.get(gpu.generation)
        if own is None:
            return self.uncalibrated, False, f"{gpu.generation}: no end-to-end rows; {self.uncalibrated['source']}"
        return own, True, f"{gpu.generation}: {own['source']}"


@lru_cache(maxsize=None)
def load_composition() -> Composition:
    try:
        document = json.loads(
            resources.files("ampgan.projection").joinpath("calibration", "composition.json").read_text("utf-8")
        )
        return Composition(document["parameters"], document["bands"], document["uncalibrated_band"], document)
    except (FileNotFoundError, KeyError, TypeError, ValueError) as error:
        raise AmpganError(
            f"the step composition shipped with ampgan is missing or damaged ({error}): rebuild it with "
            "benchmarks/validation/fit_composition.py"
        ) from None


@dataclass(frozen=True)
class ComposedStep:
    """One step on one GPU: its composed time, band, what bounds it, and the speedup band it carries."""

    seconds: float
    low: float
    high: float
    parts: dict[str, float]  # compose()'s seconds by part
    speedup_band: tuple[float, float]  # log factors on a speedup whose faster side is this step
    unmeasured_s: float  # the step with the unmeasured kernel terms at their other value
    calibrated: bool
    note: str

    @property
    def bound(self) -> str:
        p = self.parts
        host = p["host_s"] if p["host_s"] >= p["gpu_s"] else 0.0  # a host that keeps ahead bounds nothing
        shares = {"compute": p["matrix_s"], "memory": p["memory_s"], "launch": p["launch_s"], "host": host}
        return max(shares, key=shares.get)


# What each unmeasured kernel term is, in a band note's words (fit.py's `unmeasured` ships these).
TERM_WORDS = {
    "tiny_c_fwd": "a 1-4 channel forward convolution",
    "tiny_c_bwd_data": "a 1-4 channel data gradient",
    "tiny_c_bwd_weight": "a 1-4 channel weight gradient",
    "misaligned_gemm": "a 16-bit GEMM cuBLAS runs misaligned",
    "misaligned_conv": "a convolution with channels off the alignment",
}


def _moved_terms(rows, batch_size, gpu, precision, siblings: dict, seconds: float, params: dict) -> list[str]:
    """The unmeasured terms that move this step's time, each alone at its other value: the note names only
    these (a step without a misaligned GEMM is not told about one)."""
    moved = []
    for path, terms in siblings.items():
        for term, value in terms.items():
            alone = compose(step_parts(rows, batch_size, gpu, precision, {path: {term: value}}), gpu, params)
            if abs(math.log(alone["seconds"] / seconds)) > 1e-9 and TERM_WORDS[term] not in moved:
                moved.append(TERM_WORDS[term])
    return moved


def composed_step(rows: Iterable[OpRow], batch_size: float, gpu: GpuSpec, precision: str) -> ComposedStep:
    """The step's time with the fitted composition and its band: the generation's leave-one-model-out
    errors, or, for a generation without rows, those of generations predicted without theirs, around both the
    step and the step with the kernel terms no calibration measured at their other value (a GAN's 1-4 channel
    data gradients at their measured siblings', a misaligned 16-bit GEMM at cuBLAS 11's align1 kernel's:
    nothing measured says which holds, so the band spans both). A 16-bit step
    on a GPU without tensor cores (Pascal) is never called calibrated: no P100 row was published, GP102's
    (GTX 1080 Ti) are another chip, so its band spans both its generation's errors and the uncalibrated ones."""
    composition = load_composition()
    rows = list(rows)
    siblings = unmeasured_terms(gpu)
    parts = compose(step_parts(rows, batch_size, gpu, precision), gpu, composition.params)
    other = compose(step_parts(rows, batch_size, gpu, precision, siblings), gpu, composition.params)["seconds"]
    band, own, note = composition.band(gpu)
    if precision != DEFAULT and precision_mode(precision).mixed and not gpu.tensor_cores:
        wide = composition.uncalibrated
        band = {key: [min(band[key][0], wide[key][0]), max(band[key][1], wide[key][1])] for key in ("speedup", "time")}
        own = False
        note = (
            f"{note}; 16-bit without tensor cores: NOT calibrated on this chip, band spans the uncalibrated errors too"
        )
    seconds = parts["seconds"]
    if abs(math.log(other / seconds)) > 0.01:  # say why this step's band is wider than its generation's
        moved = _moved_terms(rows, batch_size, gpu, precision, siblings, seconds, composition.params)
        note = (
            f"{note}; also spans x{other / seconds:.2f} this step's time: kernel terms no calibration measured "
            f"({', '.join(moved)}) at their other value"
        )
    return ComposedStep(
        seconds,
        min(seconds, other) * math.exp(band["time"][0]),
        max(seconds, other) * math.exp(band["time"][1]),
        parts,
        (band["speedup"][0], band["speedup"][1]),
        other,
        own,
        note,
    )


def composed_speedup(baseline: ComposedStep, faster: ComposedStep) -> tuple[float, float, float]:
    """(mid, low, high) per-sample speedup of `faster` over `baseline` at the same batch size: the band is
    the measured-over-projected speedup errors of the faster side's generation, around the mid and around
    the speedup with the unmeasured kernel terms at their other value."""
    if faster is baseline:
        return 1.0, 1.0, 1.0
    mid = baseline.seconds / faster.seconds
    other = baseline.unmeasured_s / faster.unmeasured_s
    return mid, min(mid, other) * math.exp(faster.speedup_band[0]), max(mid, other) * math.exp(faster.speedup_band[1])
