"""The precision modes, one object each: what a mode computes in, where it runs, how it is drawn.

Everything that differs between fp32, tf32, bf16 and fp16 lives in its `Precision` object (nanoGPT maps
one dtype string to an autocast context and a scaler; this is that mapping, written once). The training
policy (training/precision.py), the speed decisions, the projection, the doctor, the tables and figures
all look a mode up here by name: what a mode stores per element, the alignment its matrix kernels want,
the unit path its kernels take on a GPU, the mode whose traced operations stand in for it, the range of its
16-bit format, its colour and order. Adding a mode means adding one entry below, or one `register` call
(its GPU rates: a `NAME_tflops` column in system/gpus.csv, else it runs at fp32's; docs/layout.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ampgan.errors import AmpganError, ConfigError, registered_once


@dataclass(frozen=True)
class FormatRange:
    """What a floating-point format represents. Round-to-nearest decides the edges: a value overflows to
    inf from halfway between the largest finite value and the next one (65520 for fp16), and flushes to
    zero at or below half the smallest subnormal."""

    name: str
    max_finite: float
    overflow_at: float  # |x| >= this rounds to inf
    min_normal: float
    min_subnormal: float

    @classmethod
    def of(cls, name: str, dtype: torch.dtype) -> FormatRange:
        info = torch.finfo(dtype)
        ulp_at_max = info.eps * 2.0 ** math.floor(math.log2(info.max))
        return cls(
            name,
            max_finite=info.max,
            overflow_at=info.max + ulp_at_max / 2,
            min_normal=info.smallest_normal,
            min_subnormal=info.smallest_normal * info.eps,
        )

    @property
    def flush_at_or_below(self) -> float:
        return self.min_subnormal / 2  # ties round to even, i.e. to zero


@dataclass(frozen=True)
class Precision:
    name: str
    compute_dtype: torch.dtype  # the dtype autocast casts matmul/conv inputs to (fp32 modes: float32)
    autocast: bool  # runs under torch.autocast
    loss_scaling: bool  # gradients need a loss scale (fp16's exponent range underflows)
    tf32_matmul: bool  # CUDA: the process-wide TF32 switch for matmuls and convolutions
    cpu: bool  # has a CPU path (not necessarily a fast one: the speed decision measures that)
    cuda_capability: tuple[int, int] | None  # the oldest NVIDIA compute capability with fast units; None: any
    cuda_requirement: str  # why older GPUs cannot run it, for the error line
    colour: str  # in every figure
    order: int  # in tables and legends
    mixed: bool  # the study's "mixed precision": 16-bit compute, fp32 master weights
    summary: str  # one line for the README's table and --help
    # The matrix unit its kernels run on, as the projection's calibrations fit them: "fp32" (fp32 arithmetic),
    # "tf32" (fp32 data on tensor cores) or "fp16" (16-bit inputs on tensor cores, fp32 accumulation).
    kernel_path: str
    # The mode whose traced operations describe this one's step when it was not traced itself: tf32 runs
    # fp32's operations (only the matrix unit differs); fp16 and bf16 move the same bytes.
    stand_in: str | None = None
    # The bench traces its step's operations for the projection unless asked otherwise; tf32's are fp32's exactly.
    traced: bool = True

    @property
    def element_bytes(self) -> int:
        """Bytes per element of the tensors its matrix kernels read (tf32 stores fp32)."""
        return self.compute_dtype.itemsize

    @property
    def alignment(self) -> int:
        """Elements per 16-byte access: the multiple cuBLAS and cuDNN want of a matrix kernel's dimensions
        for their vectorised (tensor-core) paths (8 for 16-bit, 4 for 32-bit)."""
        return 16 // self.element_bytes

    @property
    def tensor_cores(self) -> bool:
        """Its matrix kernels run on NVIDIA tensor cores where the GPU has them for this mode."""
        return self.mixed or self.tf32_matmul

    @property
    def format_range(self) -> FormatRange | None:
        """The limits of its 16-bit compute format, or None for a 32-bit mode."""
        return FormatRange.of(self.name, self.compute_dtype) if self.element_bytes == 2 else None

    def unavailable_reason(self, device_type: str, capability: tuple[int, int] | None = None) -> str | None:
        """Why this mode cannot run on that device, or None when it can."""
        if device_type == "cuda":
            too_old = self.cuda_capability is not None and capability is not None and capability < self.cuda_capability
            return self.cuda_requirement if too_old else None
        return None if self.cpu else "a CUDA tensor-core mode"


# Each mode's name, as configs, files and tables spell it (config.json, results.json's and the calibration's
# columns): the code outside this module uses these, never the letters.
FP32, TF32, BF16, FP16 = "fp32", "tf32", "bf16", "fp16"

_MODES = (
    Precision(
        FP32,
        torch.float32,
        autocast=False,
        loss_scaling=False,
        tf32_matmul=False,
        cpu=True,
        cuda_capability=None,
        cuda_requirement="",
        colour="#1f77b4",
        order=0,
        mixed=False,
        summary="strict FP32 (TF32 switched off on CUDA)",
        kernel_path=FP32,
    ),
    Precision(
        TF32,
        torch.float32,
        autocast=False,
        loss_scaling=False,
        tf32_matmul=True,
        cpu=False,
        cuda_capability=(8, 0),
        cuda_requirement="needs an Ampere or newer GPU (compute capability 8.0)",
        colour="#9467bd",
        order=1,
        mixed=False,
        summary="FP32 storage, TF32 tensor-core matmuls",
        kernel_path=TF32,
        stand_in=FP32,
        traced=False,
    ),
    Precision(
        BF16,
        torch.bfloat16,
        autocast=True,
        loss_scaling=False,
        tf32_matmul=False,
        cpu=True,
        cuda_capability=(8, 0),
        cuda_requirement="needs an Ampere or newer GPU (compute capability 8.0)",
        colour="#2ca02c",
        order=2,
        mixed=True,
        summary="autocast to bfloat16, no loss scaling",
        kernel_path=FP16,
        stand_in=FP16,
    ),
    # fp16 runs on every NVIDIA GPU (a P100 has fp16 units but no tensor cores: the study measured no gain
    # there); whether it is faster is the speed decision's question.
    Precision(
        FP16,
        torch.float16,
        autocast=True,
        loss_scaling=True,
        tf32_matmul=False,
        cpu=True,
        cuda_capability=None,
        cuda_requirement="",
        colour="#d62728",
        order=3,
        mixed=True,
        summary="autocast to float16 with loss scaling",
        kernel_path=FP16,
        stand_in=BF16,
    ),
)

PRECISIONS: dict[str, Precision] = {mode.name: mode for mode in sorted(_MODES, key=lambda m: m.order)}
# Every mode's name, in order: a live view, so a mode registered later (a test's dummy, a user's own) is in
# every choice, table and loop that reads it.
NAMES = PRECISIONS.keys()
BASELINE = FP32


def register(mode: Precision) -> Precision:
    """Adds a mode: the command line, the bench, the projection, tables and figures loop over PRECISIONS."""
    return registered_once(PRECISIONS, mode.name, mode, "precision")


def precision(name: str) -> Precision:
    """The mode called `name`; one error line listing the modes otherwise."""
    try:
        return PRECISIONS[name]
    except (KeyError, TypeError):
        raise AmpganError(f"unknown precision {name!r}: choose one of {', '.join(NAMES)}") from None


def check_names(names, path: str) -> None:
    """Each of `names` a mode, else one ConfigError naming the setting at `path` (the command line names its flag)."""
    for name in names:
        if not isinstance(name, str) or name not in PRECISIONS:
            raise ConfigError(path, f"has unknown precision {name!r}: choose one of {', '.join(NAMES)}")


def colour(name: str) -> str | None:
    return PRECISIONS[name].colour if name in PRECISIONS else None


def in_order(names) -> list[str]:
    """`names` sorted as tables and legends show them (unknown names last, as given)."""
    return sorted(names, key=lambda name: PRECISIONS[name].order if name in PRECISIONS else len(PRECISIONS))
