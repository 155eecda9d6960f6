"""NVIDIA GPUs as their datasheets describe them: peak rates per precision, memory bandwidth, sources.

One table (gpus.csv beside this file) serves the bench's "% of peak" column and the projection onto
GPUs this machine does not have. Rates are dense (no 2:4 sparsity); the fp16/bf16/tf32 rates are
tensor-core rates, except on a GPU whose fp16_units is "half2" (the P100): its fp16 figure is packed
half-precision arithmetic that also accumulates in fp16, which autocast's matrix products (fp32
accumulation) do not use. Each row names the datasheet and how it was checked.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from ampgan import precisions
from ampgan.errors import AmpganError


@dataclass(frozen=True, kw_only=True)
class GpuSpec:
    key: str  # as device names and the price catalog spell it: "T4", "A100-80GB", "H100 PCIe"
    name: str  # as torch.cuda.get_device_name spells it (the price catalog matches on it)
    peak_tflops: dict[str, float | None]  # precision -> dense peak; None: no fast path in that precision
    fp16_units: str  # "tensor" or "half2"
    bandwidth_gbs: float
    memory_gib: float
    cuda_capability: tuple[int, int]
    generation: str  # its architecture ("volta", "hopper"): the step composition fits offsets and bands per generation
    calibration: str  # the kernel calibration fitted on this architecture (projection/calibration/NAME.json); "": none
    sms: int = 80  # streaming multiprocessors: the kernel model spreads tiles over them in waves
    watts: float | None = None  # the board's power limit: a low one per multiprocessor holds the clock below boost
    source: str
    checked: str

    @property
    def tensor_cores(self) -> bool:
        return self.fp16_units == "tensor"

    def cannot_run(self, precision: str) -> str | None:
        """Why this GPU cannot run `precision` (too old for its mode, or no rate for it in this row), or None."""
        reason = precisions.precision(precision).unavailable_reason("cuda", self.cuda_capability)
        if reason is None and precision in self.peak_tflops and not self.peak_tflops[precision]:
            return f"no {precision} units (its datasheet row gives no {precision} rate)"
        return reason


def _number(text: str) -> float | None:
    return float(text) if text else None


def _capability(text: str) -> tuple[int, int]:
    """(8, 6) from "8.6"; (8, 0) from "8" (8.0 as a spreadsheet saves it)."""
    major, _, minor = text.partition(".")
    return int(major), int(minor or "0")


def _units(text: str) -> str:
    if text not in ("tensor", "half2"):
        raise ValueError(text)
    return text


# Each column of gpus.csv, how its cell is read and what it must hold (a precision's peak rate: "<name>_tflops").
COLUMNS = {
    "key": (str, "a name"),
    "name": (str, "a name"),
    "fp16_units": (_units, "tensor or half2"),
    "bandwidth_gbs": (float, "a number"),
    "memory_gib": (float, "a number"),
    "cuda_capability": (_capability, "MAJOR.MINOR such as 8.0"),
    "generation": (str, "a name"),
    "calibration": (str, "a name or empty"),
    "sms": (int, "a whole number"),
    "watts": (_number, "a number or empty"),  # empty: no power limit
    "source": (str, "a text"),
    "checked": (str, "a text"),
}


@lru_cache(maxsize=1)
def gpu_table() -> dict[str, GpuSpec]:
    """Every row of gpus.csv by key, in the file's order."""
    return parse_gpu_table(resources.files("ampgan.system").joinpath("gpus.csv").read_text(encoding="utf-8"))


def parse_gpu_table(text: str, source: str = "src/ampgan/system/gpus.csv") -> dict[str, GpuSpec]:
    """The rows of a table in gpus.csv's columns (benchmarks/validation/gpus.csv adds the GPUs it checks on).
    The table is input (edited by hand, saved by a spreadsheet): a column missing or a cell that does not read
    as its column says is one line naming the file, the GPU, the column and the value."""
    reader = csv.DictReader(text.splitlines())
    header = reader.fieldnames or []
    missing = [column for column in COLUMNS if column not in header]
    if missing:
        raise AmpganError(f"{source} has no column {', '.join(missing)}: its first line names gpus.csv's columns")
    # A mode without a column (one registered in code) runs at the fp32 rate (kernel_model.peak_tflops); an empty
    # cell: no fast path in that precision.
    rates = {name: f"{name}_tflops" for name in precisions.NAMES if f"{name}_tflops" in header}
    columns = COLUMNS | {column: (_number, "a number or empty") for column in rates.values()}
    table = {}
    for row in reader:
        cells = {}
        for column, (read, form) in columns.items():
            try:
                cells[column] = read((row[column] or "").strip())
            except ValueError:
                raise AmpganError(
                    f"{source}: GPU {row['key']!r} has {column} {row[column]!r}, not {form}: correct that cell"
                ) from None
        rate = {name: cells.pop(column) for name, column in rates.items()}
        table[cells["key"]] = GpuSpec(peak_tflops=rate, **cells)
    return table


def register(spec: GpuSpec) -> GpuSpec:
    """Adds a GPU to the table `project`, `cost` and the bench's % of peak read (a test's dummy, a board the
    CSV does not list yet)."""
    if spec.key in gpu_table():
        raise ValueError(f"GPU {spec.key!r} is registered twice")
    gpu_table()[spec.key] = spec
    return spec


def gpu_spec(key: str) -> GpuSpec:
    """The row called `key` (case-insensitive); one error line listing the table otherwise."""
    table = gpu_table()
    for name, spec in table.items():
        if name.lower() == key.strip().lower():
            return spec
    raise AmpganError(f"unknown GPU {key!r}: choose from {', '.join(table)} (the table is src/ampgan/system/gpus.csv)")
