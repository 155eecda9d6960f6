"""The step's operations per precision for `ampgan project` (bench/ops.py traces one table): the precisions
asked for first, then the others a projection onto GPUs reads, within the trace's share of the bench's budget
(bench/deadline.py), each left out with its reason when it would not fit; and a lower bound on one step's
memory."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from unittest.mock import patch

import torch
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
    UnsupportedOperatorException,
    is_fake,
    unset_fake_temporarily,
)
from torch.utils._python_dispatch import TorchDispatchMode

from ampgan.bench.deadline import TRACE_SHARE, budget_s
from ampgan.bench.ops import SMALL_CYCLES_PER_TRACE, TRACE_BATCH_SIZES, OverBudget, trace_op_table
from ampgan.bench.results import ConfigResult
from ampgan.bench.spec import BenchSpec
from ampgan.errors import AmpganError
from ampgan.gan.registry import ModelRecipe
from ampgan.precisions import FP32, PRECISIONS
from ampgan.speed.step_timer import StepTimer
from ampgan.training import prepared
from ampgan.training.memory import estimate_step_memory
from ampgan.training.prepared import resolve_config

# What the meta device cannot follow, by the exception FakeTensorMode raises.
_META_LIMITS = {
    DataDependentOutputException: "reads a tensor's value (.item(), float(), a Python branch on a tensor)",
    DynamicOutputShapeException: "makes a tensor whose shape depends on values",
    UnsupportedOperatorException: "has no meta kernel",
}


def foreseen_cycles(results: list[ConfigResult]) -> dict[str, float]:
    """Each precision's first trace cycle in seconds, foreseen from its first warm-up call (a cycle at the
    smaller trace batch)."""
    foreseen = {}
    for result in results:
        for call_s in result.warmup_call_s[:1]:
            cycle_s = call_s * TRACE_BATCH_SIZES[0] / result.batch_size
            foreseen[result.precision] = min(foreseen.get(result.precision, cycle_s), cycle_s)
    return foreseen


def trace_op_tables(
    spec: BenchSpec,
    dataset,
    device: torch.device,
    log=lambda line: None,
    stop_check=lambda: False,
    cycle_s: dict[str, float] | None = None,
) -> dict:
    """{"op_tables": {precision: table}, "op_tables_failed": [...], "op_tables_seconds", "step_memory"}: the
    step's operations per precision (bench/ops.py), traced eager on this rank alone: the precisions the bench
    was asked for (--precisions) first, then the others a projection onto GPUs reads, all within TRACE_SHARE of
    the bench's budget (a trace stops before a cycle that would end past it, and says so). `cycle_s`: each
    precision's first cycle foreseen (foreseen_cycles). `stop_check()` true: the precisions not traced yet are
    left out (a signal arrived)."""
    cycle_s = cycle_s or {}
    tables, failed = {}, []
    share = 1.0 if device.type == "meta" else TRACE_SHARE  # --trace-only runs nothing else: all of it is the trace's
    budget = share * budget_s(spec)
    started = time.perf_counter()
    deadline = started + budget
    traced = [name for name, mode in PRECISIONS.items() if mode.traced]
    asked = tuple(spec.precisions) or traced
    for name in (*asked, *(p for p in traced if p not in asked)):
        # A precision the bench did not run is foreseen as slow as the slowest it did.
        foreseen = cycle_s.get(name, max(cycle_s.values(), default=None))
        fits = _what_fits(spec, share, time.perf_counter() - started, foreseen, name in asked)
        reason = _left_out(name in asked, deadline, budget, foreseen, stop_check, fits)
        if reason is None:
            try:
                tables[name] = _traced(spec, name, dataset, device, deadline, foreseen)
            except OverBudget as error:  # measured, not foreseen: what it had spent and still needed at the least
                least = _max_seconds_for(spec, share, time.perf_counter() - started + error.more_s)
                reason = f"{error}; --max-seconds {least} at the least"
            except AmpganError as error:
                reason = str(error)
            except Exception as error:  # noqa: BLE001 - a step that cannot be traced is reported, not fatal
                reason = (
                    f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
                    if str(error)
                    else type(error).__name__
                )
        if reason is not None:
            failed.append({"precision": name, "reason": reason})
    spent = time.perf_counter() - started
    log(
        f"op tables: {', '.join(tables) or 'none'} traced in {spent:.1f} s (their share: at most {share:.0%} of "
        f"the bench's --max-seconds x batch sizes = {budget:.0f} s; skip them with --no-trace)"
    )
    if failed:
        log("op tables not traced for " + "; ".join(f"{f['precision']}: {f['reason']}" for f in failed))
    return {
        "op_tables": tables,
        "op_tables_failed": failed,
        "op_tables_seconds": round(spent, 3),
        "step_memory": step_memory(spec, dataset),
    }


def untraced(document: dict) -> str:
    """Why a bench's (or a traced step's) document has op tables missing: 'PRECISION: REASON; ...' of the precisions
    it was asked for (its spec's; none named: all of them). One it traced only for a projection, left out for time,
    is no failure of what the user asked."""
    asked = (document.get("spec") or {}).get("precisions") or None
    failed = document.get("op_tables_failed") or []
    return "; ".join(
        f"{f.get('precision')}: {f.get('reason')}" for f in failed if not asked or f.get("precision") in asked
    )


def _what_fits(spec: BenchSpec, share: float, spent: float, foreseen: float | None, asked: bool) -> str:
    """What would trace a precision left out for time: the --max-seconds whose trace share holds its trace
    (SMALL_CYCLES_PER_TRACE cycles as foreseen) after the `spent` seconds the traces before it took; one that
    --precisions does not name also needs half the share left when it starts. A user's GAN at its real size
    can need far more than the default budget: the line names the number instead of leaving it to guesses."""
    if foreseen is None:
        return "give a larger --max-seconds"
    needed = spent + SMALL_CYCLES_PER_TRACE * foreseen
    if not asked:
        needed = max(needed, 2 * spent)
    return f"--max-seconds {_max_seconds_for(spec, share, needed)} would fit its trace (as foreseen from its warm-up)"


def _max_seconds_for(spec: BenchSpec, share: float, trace_s: float) -> int:
    """The --max-seconds whose trace share (`share` of it per batch size) holds `trace_s` seconds of tracing."""
    return math.ceil(trace_s / (share * len(spec.batch_sizes)))


def _left_out(asked: bool, deadline: float, budget: float, foreseen: float | None, stop_check, fits: str) -> str | None:
    """Why a precision is not traced (None: it is); `fits`: what would trace it (_what_fits)."""
    if not asked and deadline - time.perf_counter() < budget / 2:
        return (
            "not traced: --precisions left it out and under half the trace's share of the budget was left for it; "
            f"name it in --precisions, or {fits}"
        )
    if stop_check():
        return "not traced: the bench was asked to stop"
    left = deadline - time.perf_counter()
    if foreseen is not None and foreseen > left:
        return (
            f"not traced: its warm-up foresees {foreseen:.1f} s per trace cycle, more than the {max(left, 0):.1f} s "
            f"left of the trace's share of the budget; {fits}"
        )
    return None


def _traced(spec: BenchSpec, name: str, dataset, device, deadline: float, foreseen: float | None) -> dict:
    """One precision's op table; on the meta device (`ampgan bench --trace-only`), the CPU's step traced by
    on_meta without running it."""
    with on_meta() if device.type == "meta" else nullcontext():
        table = trace_op_table(
            lambda batch_size: StepTimer(
                spec.train_config(name, batch_size).with_fields({"compute.compile": False}),
                dataset,
                torch.device("cpu") if device.type == "meta" else device,
                data_parallel=False,
                across_ranks=False,
            ),
            name,
            deadline=deadline,
            first_cycle_s=foreseen or 0.0,
        ).to_dict()
    return table | {"device": device.type}


@contextmanager
def on_meta() -> Iterator[None]:
    """The step inside runs on meta tensors that carry the CPU device (FakeTensorMode): the very code, CPU
    autocast's casts and every operation's shapes and dtypes of the CPU trace, no values and no arithmetic.
    GradScaler's check for inf/NaN reads a value (.item()): each update steps, as a traced cycle that is kept
    does. What needs a value or has no meta kernel is one line naming the operation and the fix."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with (
        mode,
        patch.object(ModelRecipe, "build", _weights_made_then_faked(mode)),
        _BatchNormStatistics(),
        patch.object(torch.amp.GradScaler, "_maybe_opt_step", lambda _, optimizer, _state: optimizer.step()),
        patch.object(torch.Tensor, "__deepcopy__", _deepcopy),
        # A run's memory checks (its step, its sample grid): a meta trace allocates neither.
        patch.multiple(prepared, refuse_what_cannot_fit=_fits, refuse_unless_it_fits=_fits),
    ):
        try:
            yield
        except Exception as error:  # noqa: BLE001 - translated when the meta device is the cause, else as it was
            cause = error
            while cause is not None and not isinstance(cause, tuple(_META_LIMITS)):
                cause = cause.__cause__ or cause.__context__
            if cause is None:
                raise
            op = str(getattr(cause, "func", cause)).removesuffix(".default")
            why = next(what for kind, what in _META_LIMITS.items() if isinstance(cause, kind))
            where = f" (in {str(error).split(' failed: ')[0]})" if isinstance(error, AmpganError) else ""
            raise AmpganError(
                f"the step cannot be traced on the meta device: {op} {why}{where}; "
                "bench it with the real trace instead (ampgan bench without --trace-only)"
            ) from None


_tensor_deepcopy = torch.Tensor.__deepcopy__
_build = ModelRecipe.build


def _weights_made_then_faked(mode: FakeTensorMode):
    """The GAN built with real weights, then its networks' tensors made fake: an initialization may read values
    (trunc_normal_'s rejection sampling, a built-in study model's), which the step it traces never needs."""

    def build(recipe: ModelRecipe, data):
        with unset_fake_temporarily():
            gan = _build(recipe, data)
        for network in (gan.generator, gan.discriminator):
            network._apply(mode.from_tensor)
        return gan

    return build


def _fits(*_) -> None:
    return None


def _deepcopy(tensor: torch.Tensor, memo: dict) -> torch.Tensor:
    """A fake tensor's copy (an EMA's copy of G's batch-norm buffers) is its clone: copying its storage fails
    (torch 2.13: "set the storage of a tensor on device meta to a storage on ... cpu")."""
    if not is_fake(tensor):
        return _tensor_deepcopy(tensor, memo)
    return memo.setdefault(id(tensor), tensor.detach().clone().requires_grad_(tensor.requires_grad))


class _BatchNormStatistics(TorchDispatchMode):
    """Batch norm's saved mean and inverse deviation in fp32, as the CPU keeps them for a 16-bit input with fp32
    weights or running statistics, where the meta kernel gives them the input's dtype (torch 2.13): the bytes of
    the operation and of its backward are then the CPU trace's."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        # (input, weight, bias, running_mean, running_var, ...): fp32 beside a 16-bit input; an instance norm
        # without either keeps them in the input's dtype on the CPU too
        if func is torch.ops.aten.native_batch_norm.default and any(
            isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in args[1:5]
        ):
            return (out[0], *(t.float() for t in out[1:]))
        return out


def step_memory(spec: BenchSpec, dataset) -> dict | None:
    """A lower bound on one step's memory as a function of the batch (training/memory.py's estimate on
    the meta device): {"parameters_bytes", "activation_bytes_per_sample": {precision: bytes}}; None when
    the model cannot be traced there."""
    try:
        _, _, gan, data = resolve_config(spec.train_config(FP32, TRACE_BATCH_SIZES[0]), dataset)
        if not any(p.is_meta for p in gan.generator.parameters()):
            return None
        per_precision = {
            name: estimate_step_memory(gan, data, 1, mode.element_bytes)
            for name, mode in PRECISIONS.items()
            if mode.traced
        }
    except Exception:  # noqa: BLE001 - a model the meta trace cannot follow has no estimate, not an error
        return None
    return {
        "parameters_bytes": per_precision[FP32].parameters_bytes,
        "activation_bytes_per_sample": {name: e.activations_bytes_per_sample for name, e in per_precision.items()},
        "what": "a lower bound (training/memory.py): weights, gradients and Adam's moments in fp32, every layer's "
        "output; no temporaries, no allocator slack",
    }
