"""One GPU kernel by its shape: a GEMM or one of a convolution's three passes, and its arithmetic.

The calibration tables (benchmarks/calibration/*.csv), `ampgan project --kernels FILE.csv` and the
op tables of a traced step all describe kernels this way:

    name,op,m,n,k,transpose_a,transpose_b,batch,c,h,w,out_channels,r,s,pad_h,pad_w,stride_h,stride_w

op is gemm (cuBLAS's column-major call, as DeepBench names it: A is m x k, B k x n, transpose_a and
transpose_b its op flags; a row-major product, an op table's or the GPU sweep's, becomes that call by
`cublas_call`) or
conv_fwd | conv_bwd_data | conv_bwd_weight (input batch x c x h x w, filter out_channels x c x r x s: r its
height). Every kernel is also an implicit GEMM (M x N x K), the
form cuBLAS and cuDNN tile onto the GPU's multiprocessors: that is where its efficiency comes from.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from ampgan.errors import AmpganError
from ampgan.files.jsonfile import refuse_unless_regular_file
from ampgan.files.schema import table_number

GEMM, CONV_OPS = "gemm", ("conv_fwd", "conv_bwd_data", "conv_bwd_weight")
OPS = (GEMM, *CONV_OPS)
GEMM_FIELDS = ("m", "n", "k")
GEMM_FLAGS = ("transpose_a", "transpose_b")
CONV_FIELDS = ("batch", "c", "h", "w", "out_channels", "r", "s", "pad_h", "pad_w", "stride_h", "stride_w")
COLUMNS = ("name", "op", *GEMM_FIELDS, *GEMM_FLAGS, *CONV_FIELDS)
CALIBRATION_COLUMNS = (*COLUMNS, "precision", "ms")  # a measured table: each kernel's precision and time


def cublas_call(m: int, n: int, k: int, transpose_a: bool, transpose_b: bool) -> dict:
    """A row-major product C (m x n) = op(A) op(B) (transpose_x: X stored column-major) as the call column-major
    cuBLAS gets, C^T = B^T A^T: m and n, A and B swapped. The one convention of a GEMM row (DeepBench's), for
    a traced step (step_model.kernel_of) and the GPU sweep's table (calibration/step_kernels.py) alike."""
    return {"m": n, "n": m, "k": k, "transpose_a": int(bool(transpose_b)), "transpose_b": int(bool(transpose_a))}


@dataclass(frozen=True)
class Kernel:
    name: str
    op: str
    m: int = 0
    n: int = 0
    k: int = 0
    transpose_a: bool = False
    transpose_b: bool = False
    batch: int = 0
    c: int = 0
    h: int = 0
    w: int = 0
    out_channels: int = 0
    r: int = 0
    s: int = 0
    pad_h: int = 0
    pad_w: int = 0
    stride_h: int = 1
    stride_w: int = 1

    @property
    def output_hw(self) -> tuple[int, int]:
        """(P, Q): the convolution's output height and width."""
        return (
            (self.h + 2 * self.pad_h - self.r) // self.stride_h + 1,
            (self.w + 2 * self.pad_w - self.s) // self.stride_w + 1,
        )

    def implicit_gemm(self) -> tuple[int, int, int]:
        """(M, N, K) of the product the kernel computes: N and K are what tensor cores need aligned."""
        if self.op == GEMM:
            return self.m, self.n, self.k
        p, q = self.output_hw
        return {
            "conv_fwd": (self.batch * p * q, self.out_channels, self.c * self.r * self.s),
            "conv_bwd_data": (self.batch * self.h * self.w, self.c, self.out_channels * self.r * self.s),
            "conv_bwd_weight": (self.out_channels, self.c * self.r * self.s, self.batch * p * q),
        }[self.op]

    def flops(self) -> float:
        p, q = self.output_hw
        conv = self.batch * self.out_channels * p * q * self.c * self.r * self.s
        return 2.0 * (self.m * self.n * self.k if self.op == GEMM else conv)

    def elements(self) -> float:
        """Elements read and written once: both operands and the result."""
        if self.op == GEMM:
            return float(self.m * self.k + self.k * self.n + self.m * self.n)
        p, q = self.output_hw
        return float(
            self.batch * self.c * self.h * self.w
            + self.out_channels * self.c * self.r * self.s
            + self.batch * self.out_channels * p * q
        )

    def channel_dims(self) -> tuple[int, ...]:
        """The dimensions a library needs to be multiples of 8 (16 bit) or 4 (tf32) for tensor cores: a
        convolution's channels; a GEMM's leading dimensions (cuBLAS's tensor-op restriction, column-major:
        m and k untransposed, m and n for NT, all three for TT), the rule DeepBench's gemm_bench pads by."""
        if self.op != GEMM:
            return (self.c, self.out_channels)
        if not self.transpose_b:
            return (self.m, self.k)
        return (self.m, self.n, self.k) if self.transpose_a else (self.m, self.n)


# No GPU kernel has a dimension past int32's indexing (CUDA's grids and cuBLAS's sizes are int32): a larger
# one is a typo, and 1e300 or inf would give a time with no meaning (or an OverflowError).
LARGEST_DIMENSION = 2**31 - 1


def _whole(row: dict, field: str, where: str, least: int) -> int:
    return table_number(row.get(field), where, field, whole=True, least=least, most=LARGEST_DIMENSION)


def _flag(row: dict, field: str, where: str) -> bool:
    text = str(row.get(field) if row.get(field) is not None else "").strip().lower()
    if text in ("", "0", "n", "false"):
        return False
    if text in ("1", "t", "true"):
        return True
    raise AmpganError(f"{where}: {field} is {text!r}: write 0 or 1 (or N/T)")


def kernel_from_row(row: dict, where: str) -> Kernel:
    """A Kernel from one CSV row (strings); one AmpganError naming `where` and the column otherwise."""
    name = str(row.get("name") or "").strip()
    op = str(row.get("op") or "").strip()
    if not name:
        raise AmpganError(f"{where}: no name: give every kernel a name")
    if op not in OPS:
        raise AmpganError(f"{where} ({name}): op is {op!r}: choose from {', '.join(OPS)}")
    if op == GEMM:
        return Kernel(
            name,
            op,
            **{f: _whole(row, f, f"{where} ({name})", 1) for f in GEMM_FIELDS},
            **{f: _flag(row, f, f"{where} ({name})") for f in GEMM_FLAGS},
        )
    # The paddings may be 0; every other dimension is at least 1.
    kernel = Kernel(
        name, op, **{f: _whole(row, f, f"{where} ({name})", 0 if f in ("pad_h", "pad_w") else 1) for f in CONV_FIELDS}
    )
    p, q = kernel.output_hw
    if p < 1 or q < 1:
        raise AmpganError(
            f"{where} ({name}): a {kernel.r}x{kernel.s} filter does not fit a {kernel.h}x{kernel.w} "
            f"input padded by {kernel.pad_h}x{kernel.pad_w}"
        )
    return kernel


def read_kernel_rows(path: Path, *, measured: bool) -> list[tuple[int, dict]]:
    """(line number, row) of a kernel CSV; one error line for a missing file or missing columns."""
    refuse_unless_regular_file(path, "the kernel table")  # a FIFO would block the read forever
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise AmpganError(
            f"cannot read the kernel table {path} ({error.__class__.__name__}): give a CSV file"
        ) from None
    reader = csv.DictReader(text.splitlines())
    needed = ("name", "op") + (("precision", "ms") if measured else ())
    missing = [c for c in needed if c not in (reader.fieldnames or [])]
    if missing:
        raise AmpganError(
            f"{path} has no column {', '.join(missing)}: its header must hold "
            f"{','.join(CALIBRATION_COLUMNS if measured else COLUMNS)}"
        )
    return [(number, row) for number, row in enumerate(reader, start=2)]
