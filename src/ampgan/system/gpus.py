"""NVIDIA GPUs as their datasheets describe them: peak rates per precision, memory bandwidth, sources.

One table (gpus.csv beside this file) serves the bench's "% of peak" column and the projection onto
GPUs this machine does not have. Rates are dense (no 2:4 sparsity); the fp16/bf16/tf32 rates are
tensor-core rates, except on a GPU whose fp16_units is "half2" (the P100): its fp16 figure is packed
half-precision arithmetic that also accumulates in fp16, which autocast's matrix products (fp32
accumulation) do not use. Each row names the datasheet and how it was checked.
"""

from __future__ import annotations

import csv
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ampgan import precisions
from ampgan.errors import AmpganError, registered_once
from ampgan.files.jsonfile import read_csv_text
from ampgan.files.schema import table_number


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
    # The share of its boost clock the board sustains under matrix work where that is published (the T4 at 70 W:
    # ~900 of 1590 MHz), or 1 where the boost clock is already the one for its power (laptop parts); else None,
    # and the projection estimates it from `watts` (projection/composition.py clock_factor).
    clock_share: float | None = None
    # Whether its convolution libraries pad channels off the tensor cores' multiple (8 in 16 bit, 4 in TF32) to run
    # them there (cuDNN does on every NVIDIA GPU with tensor cores; projection/kernel_model.padded): gpus.csv's
    # pads_channels, so a GPU or library that does not declares it on its row. None (a row without the column):
    # where it has tensor cores.
    pads_channels: bool | None = None
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


# The largest value a cell can mean (no GPU has more multiprocessors, TFLOP/s, GB/s, GiB or watts): beyond it
# a cell is a typo.
MOST = 100_000
# Every column of gpus.csv (a precision's peak rate is a column "<name>_tflops").
COLUMNS = (
    "key",
    "name",
    "fp16_units",
    "bandwidth_gbs",
    "memory_gib",
    "cuda_capability",
    "generation",
    "calibration",
    "sms",
    "watts",
    "source",
    "checked",
)


@lru_cache(maxsize=1)
def gpu_table() -> dict[str, GpuSpec]:
    """Every row of gpus.csv by key, in the file's order, and those registered or given for a command (--gpus)."""
    return shipped_gpus()


def shipped_gpus() -> dict[str, GpuSpec]:
    """gpus.csv as ampgan ships it, read afresh: without the rows registered or given for a command."""
    return parse_gpu_table(resources.files("ampgan.system").joinpath("gpus.csv").read_text(encoding="utf-8"))


def parse_gpu_table(text: str, source: str = "src/ampgan/system/gpus.csv") -> dict[str, GpuSpec]:
    """The rows of a table in gpus.csv's columns (a user's --gpus file; benchmarks/validation/gpus.csv's laptop parts).
    The table is input (edited by hand, saved by a spreadsheet): a column missing, or a cell that does not
    read as its column says, is one line naming the file, the line and the column (files/schema.py)."""
    reader = csv.DictReader(text.splitlines())
    header = reader.fieldnames or []
    missing = [column for column in COLUMNS if column not in header]
    if missing:
        raise AmpganError(f"{source} has no column {', '.join(missing)}: its first line names gpus.csv's columns")
    # A mode without a column (one registered in code) runs at the fp32 rate (kernel_model.peak_tflops).
    rates = [name for name in precisions.NAMES if f"{name}_tflops" in header]
    specs = [
        # (cells past the header's columns, under the key None, are left aside as before)
        _row({c: (value or "").strip() for c, value in row.items() if c is not None}, f"{source} line {line}", rates)
        for line, row in enumerate(reader, start=2)
    ]
    twice = sorted({spec.key for spec in specs if [s.key for s in specs].count(spec.key) > 1})
    if twice:
        raise AmpganError(f"{source} has the key {', '.join(twice)} on more than one row: give each GPU its own key")
    return {spec.key: spec for spec in specs}


def _row(row: dict[str, str], where: str, rates: list[str]) -> GpuSpec:
    """One row of gpus.csv, its numbers read by files/schema.py's table_number; an empty rate is no fast path in
    that precision, an empty watts no power limit."""

    def number(column: str, optional: bool = False, most: float = MOST, **limits):
        value = row.get(column, "")  # an optional column may be absent from the table
        return None if optional and not value else table_number(value, where, column, most=most, **limits)

    if row["fp16_units"] not in ("tensor", "half2"):
        raise AmpganError(f"{where}: fp16_units is {row['fp16_units']!r}: write tensor, or half2 (no tensor cores)")
    # "8.6" -> (8, 6); "8" (8.0 as a spreadsheet saves it) -> (8, 0)
    major, _, minor = row["cuda_capability"].partition(".")
    return GpuSpec(
        peak_tflops={name: number(f"{name}_tflops", optional=True) for name in rates},
        # A 0 is a typo, and a division by zero in the projection (bandwidth: its memory-bound time).
        bandwidth_gbs=number("bandwidth_gbs", least=1),
        memory_gib=number("memory_gib", least=1),
        cuda_capability=(
            table_number(major, where, "cuda_capability", whole=True, least=1, most=99),
            table_number(minor or "0", where, "cuda_capability's minor", whole=True, most=99),
        ),
        sms=number("sms", whole=True, least=1),
        # A 0 would read as "none" downstream (the power rule): an empty cell says that, a 0 is a typo.
        watts=number("watts", optional=True, least=1),
        clock_share=number("clock_share", optional=True, least=0.01, most=1),
        pads_channels=None if not row.get("pads_channels") else bool(number("pads_channels", whole=True, most=1)),
        **{k: row[k] for k in ("key", "name", "fp16_units", "generation", "calibration", "source", "checked")},
    )


def register(spec: GpuSpec) -> GpuSpec:
    """Adds a GPU to the table `project`, `cost` and the bench's % of peak read (a test's dummy, a board the
    CSV does not list yet)."""
    return registered_once(gpu_table(), spec.key, spec, "GPU")


@contextmanager
def user_gpus(path: Path | None):
    """The rows of a user's file in gpus.csv's columns (--gpus FILE) added to the table for one command, and
    taken out after it: a board the shipped table lacks, without editing the package. A row whose key or
    name is a shipped row's is refused unless it is that row."""
    rows = parse_gpu_table(read_csv_text(path, "GPU table", COLUMNS), str(path)) if path else {}
    table = gpu_table()
    # gpu_spec finds a row by its key or name, case and spacing aside: a user's "t4" would be the shipped T4
    clashes = [
        f"{mine.key!r} is ampgan's {theirs.key!r}"
        for mine in rows.values()
        for theirs in table.values()
        if _spelled(mine.key, mine.name) & _spelled(theirs.key, theirs.name) and mine != theirs
    ]
    if clashes:
        raise AmpganError(
            f"{path}: {', '.join(clashes)} with other figures: give your row a key and name of its own, or leave it "
            "out to use ampgan's"
        )
    # in the file's order (lookups take the first row that names a board); a row identical to ampgan's stays ampgan's
    added = [key for key in rows if key not in table]
    table.update({key: rows[key] for key in added})
    try:
        yield
    finally:
        for key in added:
            del table[key]


def _spelled(*names: str) -> set[str]:
    """Keys and names as gpu_spec compares them: "NVIDIA  h100 PCIe" -> "nvidia h100 pcie"."""
    return {" ".join(name.lower().split()) for name in names}


def gpu_spec(key: str) -> GpuSpec:
    """The row whose key, or whose name as nvidia-smi and torch print it ("Tesla T4", "NVIDIA H100 80GB HBM3"),
    is `key` (case and spacing aside: users paste nvidia-smi's name); one error line naming the fix otherwise."""
    table = gpu_table()
    for spec in table.values():
        if _spelled(key) & _spelled(spec.key, spec.name):
            return spec
    raise AmpganError(
        f"unknown GPU {key!r}: give a key ({', '.join(table)}) or the name nvidia-smi prints for one; for a GPU not "
        "listed, give --gpus FILE.csv: a row in src/ampgan/system/gpus.csv's columns (its datasheet's dense rates, "
        "memory bandwidth, source)"
    )
