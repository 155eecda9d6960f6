"""A kernel's time on a GPU: the roofline with an efficiency that depends on the kernel's shape.

    time = launch + (compute^4 + memory^4)^(1/4)         (a smooth max of the two)
    compute = FLOPs / (peak of the unit x efficiency),  memory = bytes / (bandwidth x bandwidth fraction)
    log efficiency = base[op] + tiles + log(K / (K + K0)) + misaligned + tiny channels + strided + 3x3 + transposed

`tiles` is tile and wave quantisation: the implicit GEMM's M x N cut into tiles (128x128 down to 32x32,
smaller tiles paying `tile_exponent` for their lower reuse), the tiles spread over the GPU's
multiprocessors in waves (split along K when there are too few), the best choice kept, as cuBLAS
and cuDNN's heuristics pick one. The other terms are what the measurements show that a datasheet
does not: a short reduction (K) costs its prologue, a kernel whose channels (a GEMM's leading dimensions)
are off the path's alignment takes another code path (on tensor cores a convolution is padded instead,
`padded`; a GEMM cuBLAS runs so was never measured: DeepBench padded its own), a 1-3 channel convolution
runs a slow kernel beyond its padding (in fp16 slower than in fp32), strided data gradients and 3x3
filters (Winograd) differ. Each is one number per GPU
architecture and unit path (fp32 on CUDA cores; 16 bit on tensor cores or, on a P100, converted to
fp32), fitted by least squares on log time to measured kernels (kernel_fit.py) and shipped with its
source in calibration/<architecture>.json. Pure numpy, vectorised over a table of kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources

import numpy as np

from ampgan.errors import AmpganError
from ampgan.files.jsonfile import parse_json
from ampgan.precisions import FP16, FP32, PRECISIONS
from ampgan.projection.kernels import CONV_OPS, GEMM, OPS, Kernel
from ampgan.system.gpus import GpuSpec

PATH_PARAMETERS = (
    "gemm",
    "conv_fwd",
    "conv_bwd_data",
    "conv_bwd_weight",
    "tile_exponent",
    "log_small_k",
    "misaligned_gemm",
    "misaligned_conv",
    "tiny_c_fwd",
    "tiny_c_bwd_data",
    "tiny_c_bwd_weight",
    "strided_bwd_data",
    "winograd_3x3",
    "transposed_a",
)
SHARED_PARAMETERS = ("log_launch_s", "log_bandwidth_fraction")
PATHS = (FP32, FP16)  # a calibration's two unit paths: 32-bit, and 16-bit inputs with fp32 accumulation
TILES = ((128, 128), (128, 64), (64, 64), (64, 32), (32, 32))
TINY_CHANNELS = 4  # 1-3 channel images (and a 4-channel one) are the measured slow case


def path_of(precision: str) -> str:
    """The calibrated path a precision runs on (its record's kernel path): tf32 is a tensor-core path like
    fp16 (its own peak)."""
    return FP32 if PRECISIONS[precision].kernel_path == FP32 else FP16


def peak_tflops(gpu: GpuSpec, precision: str) -> float:
    """The unit's peak a kernel in `precision` runs at: its own column of the GPU's row, else fp32's. A GPU
    without tensor cores (P100: half2 accumulates in fp16) converts autocast's 16-bit inputs and multiplies
    at its fp32 rate."""
    return (gpu.peak_tflops.get(precision) if gpu.tensor_cores else None) or gpu.peak_tflops[FP32] or 0.0


@dataclass(frozen=True)
class Features:
    """What the model reads of each kernel, as arrays (one entry per kernel)."""

    flops: np.ndarray
    elements: np.ndarray
    op_index: np.ndarray  # into PATH_PARAMETERS[:4]
    log_tile_util: np.ndarray  # (kernels, len(TILES)): log of tile x wave utilisation per tile choice
    k: np.ndarray
    misaligned_gemm: np.ndarray
    misaligned_conv: np.ndarray
    tiny_c: np.ndarray  # (kernels, 3): fwd, bwd_data, bwd_weight
    strided_bwd_data: np.ndarray
    winograd: np.ndarray
    transposed_a: np.ndarray


def _tile_utilisation(m: int, n: int, k: int, sms: int) -> list[float]:
    out = []
    for tm, tn in TILES:
        rows, cols = math.ceil(m / tm), math.ceil(n / tn)
        tiles = rows * cols
        # Too few tiles to fill the GPU: the libraries split the reduction (split-K) when K allows.
        split = max(1, min(sms // tiles, k // 256)) if tiles < sms else 1
        work = tiles * split
        wave = work / (math.ceil(work / sms) * sms)
        fill = (m * n) / (rows * tm * cols * tn)
        out.append(math.log(fill * wave))
    return out


def on_tensor_cores(gpu: GpuSpec, precision: str) -> bool:
    """Whether `precision`'s matrix kernels run on this GPU's tensor cores (16 bit or TF32 on a GPU that has
    them; a P100 runs autocast's 16-bit products at its fp32 rate)."""
    return gpu.tensor_cores and PRECISIONS[precision].tensor_cores


def pads_channels(gpu: GpuSpec, precision: str) -> bool:
    """Whether `precision`'s convolutions run on this GPU with their channels padded to the tensor cores' multiple:
    the GPU's row says whether its libraries pad (GpuSpec.pads_channels; unsaid: they do), and only onto tensor
    cores."""
    return gpu.pads_channels is not False and on_tensor_cores(gpu, precision)


def padded(kernel: Kernel, align: int) -> Kernel:
    """The kernel with the dimensions tensor cores need aligned (`Kernel.channel_dims`) padded to `align`.
    cuDNN pads a convolution's channels to call tensor cores (its "Tensor Transformations"), and DeepBench's
    conv_bench padded every such 16-bit training kernel itself before timing it (code/nvidia/conv_bench.cu,
    `pad_dim(padded_c, 8)` and `pad_dim(padded_k, 8)`: input and output channels), so a 1-channel layer does
    8 channels' work. cuBLAS pads no GEMM; DeepBench's gemm_bench padded its 16-bit ones by the same rule
    (benchmarks/calibration/kernel_fit.py times them so). 8 is the 16-bit alignment; TF32's 4 is the same
    16 bytes per access, assumed: no TF32 kernel with channels off 4 was measured."""

    def up(d: int) -> int:
        return math.ceil(d / align) * align

    if kernel.op != GEMM:
        return replace(kernel, c=up(kernel.c), out_channels=up(kernel.out_channels))
    # the leading dimensions only: n when B is transposed, k unless only B is
    n_leads, k_leads = kernel.transpose_b, kernel.transpose_a or not kernel.transpose_b
    return replace(
        kernel, m=up(kernel.m), n=up(kernel.n) if n_leads else kernel.n, k=up(kernel.k) if k_leads else kernel.k
    )


def features(kernels: list[Kernel], sms: int, precision: str, *, pads_channels: bool) -> Features:
    """`pads_channels`: a convolution runs padded onto tensor cores (`pads_channels()`; DeepBench padded its own), so
    its work, tiles and bytes are those of its padded problem (`padded`), and a 1-4 channel one's own term is what
    is left beyond that padding: a misaligned convolution is one left unpadded."""
    align = PRECISIONS[precision].alignment
    rows = []
    for kernel in kernels:
        conv = kernel.op != GEMM
        tiny = conv and kernel.c <= TINY_CHANNELS
        if conv and pads_channels:
            kernel = padded(kernel, align)
        m, n, k = kernel.implicit_gemm()
        misaligned = any(d % align for d in kernel.channel_dims())
        rows.append(
            (
                kernel.flops(),
                kernel.elements(),
                OPS.index(kernel.op),
                _tile_utilisation(m, n, k, sms),
                k,
                misaligned and not conv,
                misaligned and conv and not tiny,
                [tiny and kernel.op == op for op in CONV_OPS],
                kernel.op == "conv_bwd_data" and (kernel.stride_h > 1 or kernel.stride_w > 1),
                conv and kernel.r == 3 and kernel.s == 3 and kernel.stride_h == 1 and kernel.stride_w == 1,
                kernel.op == GEMM and kernel.transpose_a,
            )
        )
    columns = list(zip(*rows)) if rows else [[] for _ in range(11)]
    as_float = [np.asarray(c, dtype=float) for c in columns]
    return Features(
        as_float[0],
        as_float[1],
        np.asarray(columns[2], dtype=int),
        as_float[3].reshape(len(kernels), len(TILES)),
        as_float[4],
        *as_float[5:7],
        as_float[7].reshape(len(kernels), 3),
        *as_float[8:],
    )


def log_efficiency(f: Features, path: np.ndarray) -> np.ndarray:
    """log of the fraction of the unit's peak each kernel reaches (`path`: one path's parameters)."""
    base = path[:4][f.op_index]
    area = np.log(np.array([tm * tn for tm, tn in TILES]) / (128 * 128))
    tiles = np.max(f.log_tile_util + path[4] * area[None, :], axis=1)
    small_k = np.log(f.k / (f.k + np.exp(path[5])))
    return (
        base
        + tiles
        + small_k
        + path[6] * f.misaligned_gemm
        + path[7] * f.misaligned_conv
        + f.tiny_c @ path[8:11]
        + path[11] * f.strided_bwd_data
        + path[12] * f.winograd
        + path[13] * f.transposed_a
    )


def predict_seconds(
    f: Features, path: np.ndarray, shared: np.ndarray, peak_tflops_: float, bandwidth_gbs: float, element_bytes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(time, compute time, memory time) in seconds per kernel; the launch cost is shared[0]."""
    compute = f.flops / (peak_tflops_ * 1e12 * np.exp(log_efficiency(f, path)))
    memory = f.elements * element_bytes / (bandwidth_gbs * 1e9 * np.exp(shared[1]))
    return np.exp(shared[0]) + (compute**4 + memory**4) ** 0.25, compute, memory


@dataclass(frozen=True)
class Calibration:
    """One GPU architecture's fitted parameters, their source, and their cross-validated error."""

    architecture: str
    paths: dict[str, np.ndarray]  # "fp32" / "fp16" -> PATH_PARAMETERS values
    shared: np.ndarray  # SHARED_PARAMETERS values
    residuals: dict  # class -> precision -> {"low": q, "high": q} of log(measured / predicted), cross-validated
    document: dict  # the whole JSON, for provenance


def with_terms(calibration: Calibration, terms: dict | None) -> Calibration:
    """The calibration with some path terms at other values, {path: {term: value}}: its "unmeasured" ones
    at their other value (benchmarks/calibration/fit.py), or values tried end to end."""
    paths = {name: values.copy() for name, values in calibration.paths.items()}
    for name, values in (terms or {}).items():
        for term, value in values.items():
            paths[name][PATH_PARAMETERS.index(term)] = value
    return replace(calibration, paths=paths)


# The 16-bit GEMM with a leading dimension off 8 (cuBLAS's tensor-op rule, Kernel.channel_dims), which no calibration
# kernel measured (DeepBench padded its own, benchmarks/calibration/kernel_fit.path_data): its other value is the
# software's. Before cuBLAS 11.0 it ran off tensor cores (NVIDIA's "Matrix Multiplication Background User's Guide",
# Tensor Core Requirements: alignment "is a requirement to use Tensor Cores" before cuBLAS 11.0; "starting with
# cuBLAS 11.0.0 ... Tensor Cores may be used regardless"): `off_tensor_cores`. From cuBLAS 11 (every Ampere, Ada and
# Hopper GPU needs it; PyTorch's wheels ship 11.8 or 12) it stays on them with an align1 kernel: published times
# against aligned neighbours, less what the model's tiles and waves already charge, leave e^-0.35 (A100, CUDA
# 11.6, fp16), e^+0.12 (A100, CUDA 11.7, fp16 and bf16) and e^-0.05 to e^+0.03 (RTX 4090, CUDA 12, bf16)
# (pytorch/pytorch#83272 and #181718; benchmarks/results/misaligned-gemm-cublas11-2026-12-04/). The far end is the
# worst of them; CUDA 11.6's bf16 e^-1.8 was a heuristic defect its own issue shows gone in 11.7.
MISALIGNED_GEMM_CUBLAS11 = -0.35


def off_tensor_cores(paths: dict[str, np.ndarray], gpu: GpuSpec) -> float:
    """A tensor-core path's misaligned_gemm if the GEMM runs as an fp32 one, at this GPU's fp32 peak and the fp32
    path's efficiency: as cuBLAS before 11.0 ran a 16-bit GEMM with leading dimensions off 8."""
    gemm = PATH_PARAMETERS.index("gemm")
    ratio = math.log(gpu.peak_tflops[FP32] / gpu.peak_tflops[FP16])
    return float(ratio + paths[FP32][gemm] - paths[FP16][gemm])


def unmeasured_terms(gpu: GpuSpec, cublas11: bool = True) -> dict:
    """{path: {term: value}}: the terms no kernel of the GPU's calibration measured at their other value (its
    "unmeasured", benchmarks/calibration/fit.py), the misaligned 16-bit GEMM's for the software: cuBLAS 11 or later
    (`cublas11`: what a projection assumes; the validation's CUDA 10.2 rows ran earlier), else off tensor cores."""
    calibration = calibration_for(gpu)[0]
    terms = {path: dict(values) for path, values in calibration.document.get("unmeasured", {}).items()}
    if "misaligned_gemm" in terms.get(FP16, {}):
        terms[FP16]["misaligned_gemm"] = (
            MISALIGNED_GEMM_CUBLAS11 if cublas11 else off_tensor_cores(calibration.paths, gpu)
        )
    return terms


def calibration_for(gpu: GpuSpec) -> tuple[Calibration, bool]:
    """(the calibration a GPU's kernels are projected with, whether it was fitted on this architecture)."""
    own = gpu.calibration  # gpus.csv names it; a GPU without one borrows the nearest: with tensor cores or not
    return load_calibration(own or ("volta" if gpu.tensor_cores else "pascal")), bool(own)


@lru_cache(maxsize=None)
def load_calibration(architecture: str) -> Calibration:
    try:
        shipped = resources.files("ampgan.projection").joinpath("calibration", f"{architecture}.json")
        document = parse_json(shipped.read_text("utf-8"))
        paths = {p: np.array([document["parameters"][p][name] for name in PATH_PARAMETERS], dtype=float) for p in PATHS}
        shared = np.array([document["parameters"]["shared"][name] for name in SHARED_PARAMETERS], dtype=float)
        return Calibration(architecture, paths, shared, document["cross_validation"], document)
    except (FileNotFoundError, KeyError, TypeError, ValueError) as error:
        raise AmpganError(
            f"the {architecture} kernel calibration shipped with ampgan is missing or damaged ({error}): "
            "rebuild it with benchmarks/calibration/fit.py"
        ) from None


def irregular(kernel: Kernel, precision: str) -> bool:
    """A kernel in the calibration's wide-error class: tiny channels, or channels a 16-bit path needs aligned."""
    tiny = kernel.op != GEMM and kernel.c <= TINY_CHANNELS
    return tiny or any(d % PRECISIONS[precision].alignment for d in kernel.channel_dims())


SMALL_FLOPS = 3e9  # under it a kernel is mostly launch and prologue: its errors differ from a large one's


def kernel_class(kernel: Kernel, precision: str) -> str:
    """The band's class: the op, whether its channels are irregular (1-4 channels, or not aligned for the
    16-bit path), whether it is small, whether it is a strided convolution (their 16-bit kernels differ
    most between libraries: DeepBench's P100 data gradients)."""
    shape = "irregular" if irregular(kernel, path_of(precision)) else "regular"
    strided = kernel.op != "gemm" and (kernel.stride_h > 1 or kernel.stride_w > 1)
    return f"{kernel.op}:{shape}" + (":small" if kernel.flops() < SMALL_FLOPS else "") + (":strided" if strided else "")


def class_candidates(name: str) -> list[str]:
    """A class and the broader ones it belongs to, most specific first ("conv_fwd:regular:small" ->
    ..., "conv_fwd:regular", "conv_fwd"): a band comes from the first with enough kernels."""
    parts = name.split(":")
    return [":".join(parts[:i]) for i in range(len(parts), 0, -1)]
