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
    # The share of its boost clock the board sustains under matrix work where that is published (the T4 at 70 W:
    # ~900 of 1590 MHz), or 1 where the boost clock is already the one for its power (laptop parts); else None,
    # and the projection estimates it from `watts` (projection/composition.py clock_factor).
    clock_share: float | None = None
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
    return float(text) if text.strip() else None


@lru_cache(maxsize=1)
def gpu_table() -> dict[str, GpuSpec]:
    """Every row of gpus.csv by key, in the file's order."""
    return parse_gpu_table(resources.files("ampgan.system").joinpath("gpus.csv").read_text(encoding="utf-8"))


def parse_gpu_table(text: str) -> dict[str, GpuSpec]:
    """The rows of a table in gpus.csv's columns (benchmarks/validation/gpus.csv adds the GPUs it checks on)."""
    return {
        row["key"]: GpuSpec(
            key=row["key"],
            name=row["name"],
            # A mode without a column (one registered in code) runs at the fp32 rate (kernel_model.peak_tflops).
            peak_tflops={name: _number(row[f"{name}_tflops"]) for name in precisions.NAMES if f"{name}_tflops" in row},
            fp16_units=row["fp16_units"],
            bandwidth_gbs=float(row["bandwidth_gbs"]),
            memory_gib=float(row["memory_gib"]),
            cuda_capability=tuple(int(part) for part in row["cuda_capability"].split(".")),  # "8.0" -> (8, 0)
            generation=row["generation"],
            calibration=row["calibration"],
            source=row["source"],
            checked=row["checked"],
            sms=int(row["sms"]),
            watts=_number(row.get("watts") or ""),
            clock_share=_number(row.get("clock_share") or ""),
        )
        for row in csv.DictReader(text.splitlines())
    }


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
