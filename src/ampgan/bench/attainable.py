"""The limit this machine's kernels allow: each operation of the real step timed alone, summed.

A bench measures the step; how close is it to what these kernels can do? Every ATen operation of one
real step (at its training shape, dtypes and memory format: recorded by a dispatch mode, as
bench/ops.py records them) is run again on its own, on fresh tensors of the same shapes and strides,
repeated until its time is clear of the clock's resolution, and the times are summed, each weighted by
how often a step runs it. That sum is the step a perfect harness would reach with these kernels (no
Python, no dispatch between them, no allocator, nothing waiting); the ratio of two precisions' sums is
the attainable speedup, and the measured speedup over it says how much of that the real step gets.
This is `benchmarks/conv_ceiling.py` (each convolution alone) grown to every operation and into the
bench. Operations that cannot run on fresh tensors (an in-place write into an expanded view, say) are
counted apart, with their share of the step's operations, never silently dropped.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from ampgan.bench.ops import NO_KERNEL
from ampgan.precisions import FP32
from ampgan.training.step import train_step

MIN_TIMED_S = 0.005  # per operation: repeat it until this much time has passed (or MAX_REPEATS)
MAX_REPEATS = 50


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device

    def make(self, dense: bool = False) -> torch.Tensor:
        """A fresh tensor of this shape: with the recorded strides (an expanded view's zero strides
        included: its storage is filled, then viewed), or `dense` (contiguous) when an operation cannot
        write into the recorded layout."""
        if dense:
            return self._filled(torch.empty(self.shape, dtype=self.dtype, device=self.device))
        elements = 1 + sum((size - 1) * step for size, step in zip(self.shape, self.stride)) if all(self.shape) else 0
        return self._filled(torch.empty(elements, dtype=self.dtype, device=self.device)).as_strided(
            self.shape, self.stride
        )

    @staticmethod
    def _filled(tensor: torch.Tensor) -> torch.Tensor:
        # Indices and labels: 0 is valid for every index an op takes.
        return tensor.normal_() if tensor.is_floating_point() else tensor.zero_()


def as_spec(value):
    """A tensor as the TensorSpec a fresh one is made from; anything else as it is."""
    is_tensor = isinstance(value, torch.Tensor)
    return TensorSpec(tuple(value.shape), tuple(value.stride()), value.dtype, value.device) if is_tensor else value


def materialised(value, dense: bool = False):
    return value.make(dense) if isinstance(value, TensorSpec) else value


class CallRecorder(TorchDispatchMode):
    """The calls a block dispatches whose op `keep(name, func)` keeps, as (op, args and kwargs with TensorSpecs),
    in order."""

    def __init__(self, keep):
        super().__init__()
        self.keep, self.calls = keep, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.keep(str(func._overloadpacket), func):
            self.calls.append((func, tree_map(as_spec, args), tree_map(as_spec, kwargs)))
        return func(*args, **kwargs)


def _has_kernel(name: str, func) -> bool:
    return name.startswith("aten.") and not func.is_view and name.rsplit(".", 1)[-1] not in NO_KERNEL


@dataclass
class OpAlone:
    op: str
    weight: float  # how many of it one step runs
    seconds: float | None  # one run, alone; None: it could not run on fresh tensors
    error: str = ""


def _time_alone(func, args, kwargs, device: torch.device) -> float:
    inputs = (tree_map(materialised, args), tree_map(materialised, kwargs))
    try:
        func(*inputs[0], **inputs[1])  # warm: kernel selection, first allocation
    except RuntimeError as error:
        if "more than one element of the written-to tensor" not in str(error):
            raise

        dense = functools.partial(materialised, dense=True)
        inputs = (tree_map(dense, args), tree_map(dense, kwargs))
        func(*inputs[0], **inputs[1])
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    repeats, start = 0, time.perf_counter()
    while True:
        func(*inputs[0], **inputs[1])
        repeats += 1
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - start
        if elapsed >= MIN_TIMED_S or repeats >= MAX_REPEATS:
            return elapsed / repeats


def ops_alone(timer) -> list[OpAlone]:
    """Every operation of one cycle of a StepTimer's real step, timed alone (identical calls once)."""
    recorded: dict[str, tuple] = {}
    with timer.state.eager() as state:
        for before, count in timer.step_kinds:
            state.step = before
            with CallRecorder(_has_kernel) as recorder:
                train_step(state, timer.resident_batch)
            for func, args, kwargs in recorder.calls:
                key = repr((func, args, kwargs))
                *call, weight = recorded.get(key, (func, args, kwargs, 0.0))
                recorded[key] = (*call, weight + count / timer.cycle_steps)
    alone = []
    for func, args, kwargs, weight in recorded.values():
        op = str(func._overloadpacket)
        try:
            alone.append(OpAlone(op, weight, _time_alone(func, args, kwargs, timer.device)))
        except Exception as error:  # noqa: BLE001 - an op that needs its real inputs is counted apart
            alone.append(
                OpAlone(
                    op,
                    weight,
                    None,
                    f"{type(error).__name__}: {str(error).splitlines()[0][:120]}"
                    if str(error)
                    else type(error).__name__,
                )
            )
    return alone


def summarise(alone: list[OpAlone], top: int = 8) -> dict:
    """The attainable step time and where it goes: {step_s, ops, replayed_share, by_op: [...], not_replayed}."""
    timed = [a for a in alone if a.seconds is not None]
    by_op: dict[str, float] = {}
    for item in timed:
        by_op[item.op] = by_op.get(item.op, 0.0) + item.seconds * item.weight
    return {
        "step_s": sum(by_op.values()),
        "ops": sum(a.weight for a in alone),
        "replayed_share": sum(a.weight for a in timed) / max(1e-12, sum(a.weight for a in alone)),
        "by_op": [{"op": op, "seconds": s} for op, s in sorted(by_op.items(), key=lambda kv: -kv[1])[:top]],
        "not_replayed": sorted({f"{a.op} ({a.error})" for a in alone if a.seconds is None})[:top],
    }


def attainable_comparison(fp32: dict, mixed: dict, achieved: float | None, top: int = 5) -> dict:
    """One precision against fp32 at one configuration: the attainable speedup (the sums' ratio), the
    achieved one over it, and the operations whose time alone grew most or shrank least."""
    attainable = fp32["step_s"] / mixed["step_s"] if mixed["step_s"] else None
    base = {row["op"]: row["seconds"] for row in fp32["by_op"]}
    gaps = sorted(
        (
            {
                "op": row["op"],
                "mixed_s": row["seconds"],
                "fp32_s": base.get(row["op"]),
                "speedup": base[row["op"]] / row["seconds"] if base.get(row["op"]) and row["seconds"] else None,
            }
            for row in mixed["by_op"]
        ),
        key=lambda g: -(g["mixed_s"] - (g["fp32_s"] or 0.0)),
    )[:top]
    return {
        "attainable_speedup": attainable,
        "achieved_speedup": achieved,
        "achieved_of_attainable": achieved / attainable if achieved and attainable else None,
        "biggest_gaps": gaps,
    }


def attainable_rows(rows: list[dict], pairs: list[dict]) -> list[dict]:
    """Per batch size and mixed precision with operations timed alone: attainable against achieved."""
    by_key = {(r["batch_size"], r["precision"]): r for r in rows if r.get("attainable")}
    achieved = {(p["batch_size"], p["precision"]): p["estimate"] for p in pairs}
    return [
        {
            "batch_size": batch_size,
            "precision": precision,
            "baseline": FP32,
            **attainable_comparison(
                by_key[(batch_size, FP32)]["attainable"], row["attainable"], achieved.get((batch_size, precision))
            ),
        }
        for (batch_size, precision), row in by_key.items()
        if precision != FP32 and (batch_size, FP32) in by_key
    ]
