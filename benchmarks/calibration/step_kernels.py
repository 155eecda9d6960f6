"""Every GEMM and convolution of the real training step, timed alone: rows of the projection's calibration.

Run by benchmarks/kernel_calibration.py (the GPU sweep's calibrate stage); ampgan itself only reads the tables.

The projection (projection/) predicts a step's time on GPUs this machine does not have from op tables
and datasheet peaks; its calibration is a table of measured kernels on real GPUs, in one format shared
with it (DeepBench's idea: every kernel's shape, precision and time, with the GPU and software that
produced it). This module writes that table from ampgan's own step:

- the step's matrix operations are recorded by a dispatch mode as they run (aten.mm, addmm and bmm;
  aten.convolution and aten.convolution_backward), with their shapes and strides;
- each becomes one row per kernel it stands for: a GEMM (A is m x k, B is k x n, `transpose_x` when that
  operand is stored column-major), or a convolution pass (conv_fwd, conv_bwd_data, conv_bwd_weight) of
  the direct convolution it computes. A transposed convolution (the generator's upsampling) is the data
  gradient of the direct convolution from its output to its input, so its forward is a conv_bwd_data row
  of that convolution, and its backward passes conv_fwd and conv_bwd_weight rows; convolution_backward is
  split by its output_mask, so data and weight gradients are timed apart;
- each row is run alone on fresh tensors of the recorded shapes and strides and timed (CUDA events on a
  GPU, the clock on a CPU), in milliseconds per kernel call; successive calls take their inputs in turn
  from enough sets that a set is out of the cache (the GPU's L2, the CPU's last level) when its turn comes
  again, as a kernel of a real step reads inputs other kernels have since pushed out (repeated on the same
  inputs, a small kernel would read them from the cache and time optimistically).

Grouped or dilated convolutions have no row in the format and are counted apart, never dropped silently.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils._pytree import tree_leaves, tree_map

from ampgan.bench.attainable import CallRecorder, TensorSpec, materialised
from ampgan.bench.ops import convolution_kernels
from ampgan.files.atomic import write_csv_atomically, write_json_atomically
from ampgan.precisions import BF16, FP16, FP32, TF32
from ampgan.projection.kernels import CALIBRATION_COLUMNS as COLUMNS
from ampgan.projection.kernels import CONV_FIELDS, cublas_call
from ampgan.training.step import train_step

_GEMMS = {"aten.mm": 0, "aten.addmm": 1, "aten.bmm": 0}  # index of operand A in the call's arguments
_CONVOLUTIONS = ("aten.convolution", "aten.convolution_backward")
MIN_TIMED_MS = 2.0  # repeat a kernel until this much device time has passed ...
MAX_REPEATS = 100  # ... or this many calls


def is_matrix_call(name: str, func) -> bool:
    return name in _GEMMS or name in _CONVOLUTIONS


def precision_of(dtype: torch.dtype, tf32: bool) -> str:
    """The format's precision of a matrix kernel computing in `dtype` (fp32 inputs run TF32 when allowed)."""
    if dtype == torch.float32:
        return TF32 if tf32 else FP32
    return {torch.bfloat16: BF16, torch.float16: FP16}.get(dtype, str(dtype).removeprefix("torch."))


def _column_major(spec: TensorSpec) -> int:
    """1 when a matrix is stored transposed (its rows are contiguous in memory columns)."""
    return int(spec.stride[-2] == 1 and spec.stride[-1] != 1 and spec.shape[-2] > 1)


@dataclass(frozen=True)
class KernelRow:
    """One row of the table, without its name and time: what was run, and how to run it again."""

    fields: tuple[tuple[str, int | str], ...]  # the format's columns this kernel fills, in COLUMNS order
    func: object
    args: tuple
    kwargs: dict

    def as_dict(self) -> dict:
        return dict(self.fields)


def _gemm_rows(name: str, func, args, kwargs, tf32: bool) -> list[KernelRow]:
    a, b = args[_GEMMS[name]], args[_GEMMS[name] + 1]
    fields = {
        "op": "gemm",
        # row-major torch C = A B written as the cuBLAS call, as every GEMM row is (kernels.cublas_call)
        **cublas_call(a.shape[-2], b.shape[-1], a.shape[-1], _column_major(a), _column_major(b)),
        "batch": a.shape[0] if len(a.shape) == 3 else "",
        "precision": precision_of(a.dtype, tf32),
    }
    return [KernelRow(tuple((c, fields[c]) for c in COLUMNS if c in fields), func, args, kwargs)]


def _conv_rows(name: str, func, args, kwargs, tf32: bool) -> tuple[list[KernelRow], str | None]:
    """(rows, None), or ([], why) for a convolution the format cannot describe. Each pass's geometry is the
    op table's (bench/ops.py convolution_kernels: a transposed convolution as the direct one from its output
    back to its input); a backward pass is run alone, with the output mask that asks for it only."""
    backward = name == "aten.convolution_backward"
    x, weight, _, _, _, dilation, _, _, groups = args[backward : backward + 9]
    if len(x.shape) != 4 or groups != 1 or any(d != 1 for d in dilation):
        return [], f"{name} with {len(x.shape) - 2}-d input, groups {groups}, dilation {list(dilation)}"
    rows = []
    for op, dims in convolution_kernels(backward, args):
        fields = dict(zip(CONV_FIELDS, dims)) | {"op": op, "precision": precision_of(x.dtype, tf32)}
        alone = [False, True, False] if op == "conv_bwd_weight" else [True, False, False]
        call = (*args[:10], alone) if backward else (x, weight, None, *args[3:])  # the bias is a kernel of its own
        rows.append(KernelRow(tuple((c, fields[c]) for c in COLUMNS if c in fields), func, call, kwargs))
    return rows, None


def kernel_rows(calls: list[tuple], tf32: bool) -> tuple[list[KernelRow], list[str]]:
    """The distinct kernels of recorded calls, in first-seen order, and what could not be described."""
    rows, skipped = {}, []  # a kernel's columns -> its KernelRow; what could not be described
    for func, args, kwargs in calls:
        name = str(func._overloadpacket)
        if name in _GEMMS:
            found = _gemm_rows(name, func, args, kwargs, tf32)
        else:
            found, why = _conv_rows(name, func, args, kwargs, tf32)
            if why:
                skipped.append(why)
        for item in found:
            rows.setdefault(item.fields, item)  # a kernel is its columns: the same ones are timed once
    return list(rows.values()), skipped


def record_matrix_calls(timer) -> list[tuple]:
    """Every GEMM and convolution call of one cycle of a StepTimer's real step (eager modules)."""
    recorder = CallRecorder(is_matrix_call)
    with timer.state.eager() as state:
        for before, _ in timer.step_kinds:
            state.step = before
            with recorder:
                train_step(state, timer.resident_batch)
    return recorder.calls


# Where a device says nothing of its caches: larger than any CPU's L2 and the L2 of every GPU in gpus.csv
# (the H100's and H200's 50 MB), so the inputs still leave the cache between their turns.
DEFAULT_CACHE_BYTES = 64 * 2**20


def cache_bytes(device: torch.device) -> int:
    """The largest cache a kernel's inputs could stay in between two of its timed calls: the GPU's L2, the
    CPU's last level (sysfs: the largest of cpu0's caches); DEFAULT_CACHE_BYTES when the device does not say."""
    if device.type == "cuda":
        return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)) or DEFAULT_CACHE_BYTES
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = entry.read_text().strip().upper()  # "32K", "1024K", "32768K", "2M"
        unit = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * unit)
    return max(sizes, default=DEFAULT_CACHE_BYTES)


def _bytes_of(inputs) -> int:
    return sum(t.untyped_storage().nbytes() for t in tree_leaves(inputs) if isinstance(t, torch.Tensor))


def rotating_calls(row: KernelRow, cache: int, calls: int) -> tuple[Callable[[], object], int]:
    """(a call of `row`'s kernel that takes the next of several input sets each time, how many sets): enough
    that the sets used since a set's last turn fill `cache` bytes (they push it out), and no more than the
    `calls` that will be made (each call on a set of its own then)."""
    first = (tree_map(materialised, row.args), tree_map(materialised, row.kwargs))
    count = max(1, min(calls, 1 + math.ceil(cache / max(_bytes_of(first), 1))))
    turns = itertools.cycle(
        [first] + [(tree_map(materialised, row.args), tree_map(materialised, row.kwargs)) for _ in range(count - 1)]
    )

    def call():
        args, kwargs = next(turns)
        return row.func(*args, **kwargs)

    return call, count


def time_kernel_ms(run: Callable[[], object], device: torch.device, repeats: int | None = None) -> float:
    """Milliseconds per call of `run`, alone: one call to warm (kernel selection, cuDNN autotuning), one
    to size the repeats, then repeated between CUDA events (the clock on a CPU). `repeats`: exactly that
    many timed calls, no warm-up (a rehearsal's rough number)."""
    if repeats is not None:
        return timed_calls_ms(run, device, repeats)
    run()
    once = timed_calls_ms(run, device, 1)
    return timed_calls_ms(run, device, max(3, min(MAX_REPEATS, int(MIN_TIMED_MS / max(once, 1e-4)))))


def timed_calls_ms(run: Callable[[], object], device: torch.device, repeats: int) -> float:
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / repeats
    began = time.perf_counter()
    for _ in range(repeats):
        run()
    return (time.perf_counter() - began) * 1e3 / repeats


def measure_kernels(timer, name: str, tf32: bool, repeats: int | None = None) -> tuple[list[dict], list[str]]:
    """(calibration rows of a StepTimer's step, each timed alone; what had no row). `name`: the rows'
    name prefix (model, batch size, the step's precision)."""
    rows, skipped = kernel_rows(record_matrix_calls(timer), tf32)
    measured = []
    cache = cache_bytes(timer.device)
    # Every call time_kernel_ms makes: a warm one, one to size the repeats, then the repeats themselves.
    calls = repeats if repeats is not None else MAX_REPEATS + 2
    with timer.policy.backend_settings():  # TF32 as the step's precision has it
        for index, row in enumerate(rows):
            run, _ = rotating_calls(row, cache, calls)
            ms = round(time_kernel_ms(run, timer.device, repeats), 6)
            measured.append({"name": f"{name}/{index:03d}", **row.as_dict(), "ms": ms})
            del run
    return measured, skipped


def write_calibration(rows: list[dict], csv_path: Path, sidecar: dict) -> None:
    """The table (COLUMNS, unused columns empty) and its sidecar JSON beside it (same name, .json)."""
    write_csv_atomically(Path(csv_path), COLUMNS, rows, restval="", lineterminator="\n")
    write_json_atomically(Path(csv_path).with_suffix(".json"), sidecar)
