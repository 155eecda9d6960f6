"""`ampgan project --kernels FILE.csv`: the kernel model on a table of kernels, so that anyone can hold
it against their own measurements. One row per kernel x GPU x precision the GPU runs:

    name,device,precision,ms,ms_low,ms_high,bound

ms is the model's mid, [ms_low, ms_high] its band (the kernel class's cross-validated residuals, widened
for a GPU whose architecture has no calibration, around the mid and around the kernel with the terms no
calibration kernel measured at their other value: a 16-bit GEMM cuBLAS runs misaligned, a 1-4 channel data
gradient), bound what limits it: compute, memory or launch.
"""

from __future__ import annotations

from pathlib import Path

from ampgan.errors import AmpganError
from ampgan.files.atomic import write_csv_atomically
from ampgan.precisions import NAMES
from ampgan.projection.kernel_model import calibration_for, unmeasured_terms, with_terms
from ampgan.projection.kernels import Kernel, kernel_from_row, read_kernel_rows
from ampgan.projection.step_model import UNCALIBRATED_WIDENING, kernel_times
from ampgan.system.gpus import GpuSpec

OUTPUT_COLUMNS = ("name", "device", "precision", "ms", "ms_low", "ms_high", "bound")


def read_kernels(path: Path) -> list[Kernel]:
    """Every kernel of an input table, checked row by row (one error line naming the row)."""
    kernels = [kernel_from_row(row, f"{path} line {number}") for number, row in read_kernel_rows(path, measured=False)]
    if not kernels:
        raise AmpganError(f"{path} holds no kernels: one row per kernel under the header")
    seen: dict[str, int] = {}
    for number, kernel in enumerate(kernels, start=2):
        if kernel.name in seen:
            raise AmpganError(
                f"{path} line {number}: the name {kernel.name!r} is already used on line "
                f"{seen[kernel.name]}: give every kernel its own name"
            )
        seen[kernel.name] = number
    return kernels


def project_kernels(kernels: list[Kernel], gpus: list[GpuSpec]) -> list[dict]:
    rows = []
    for gpu in gpus:
        calibration, own = calibration_for(gpu)
        # Every mode the GPU runs: fp32 and fp16 on every one (a P100's fp16 converts to fp32 arithmetic), tf32
        # and bf16 where it has them.
        for precision in [name for name in NAMES if gpu.cannot_run(name) is None]:
            widening = 1.0 if own else UNCALIBRATED_WIDENING
            timed = kernel_times(kernels, gpu, precision, calibration, widening)
            unmeasured = with_terms(calibration, unmeasured_terms(gpu))
            other = kernel_times(kernels, gpu, precision, unmeasured, widening).seconds / timed.seconds
            for i, kernel in enumerate(kernels):
                launch = float(timed.seconds[i] - (timed.compute[i] ** 4 + timed.memory[i] ** 4) ** 0.25)
                parts = {"compute": timed.compute[i], "memory": timed.memory[i], "launch": launch}
                ms = float(timed.seconds[i]) * 1e3
                rows.append(
                    {
                        "name": kernel.name,
                        "device": gpu.key,
                        "precision": precision,
                        "ms": ms,
                        "ms_low": ms * min(1.0, float(other[i])) * float(timed.time_low[i]),
                        "ms_high": ms * max(1.0, float(other[i])) * float(timed.time_high[i]),
                        "bound": max(parts, key=parts.get),
                    }
                )
    return rows


def write_kernel_projection(rows: list[dict], out: Path) -> Path:
    path = Path(out) / "kernels.csv"
    shown = [{**row, **{k: f"{row[k]:.6g}" for k in ("ms", "ms_low", "ms_high")}} for row in rows]
    write_csv_atomically(path, OUTPUT_COLUMNS, shown, lineterminator="\n")
    return path
