"""CUDA autocast's casts on the meta device, where torch.autocast does nothing.

torch.autocast has no meta backend ("unsupported autocast device_type 'meta'"), so a model built on the
meta device traces in fp32 only. This mode applies CUDA autocast's fp16 policy at the function level
(torch/csrc/autograd/autocast_mode.cpp, the CUDA lists of torch 2.x): the functions on its lower-precision
list run with their floating inputs cast to fp16, those on its fp32 list with them cast to fp32, the
"promote" ones with every input at the widest floating type among them. The casts are ordinary `to()`
calls, so the tracer records them, and autograd their casts back in the backward pass, as under CUDA
autocast. Autocast's weight-cast cache as well (autocast_mode.cpp cached_cast: "Do what Apex does, and cache
lower_precision_fp casts of fp32 model weights (leaves)": an fp32 leaf that requires grad, not a view, is cast
to fp16 once per autocast region, cleared when the region exits), which matters where one forward reuses a
weight: Tacotron 2's decoder runs its cells and layers once per mel frame (its AMP trace cast 125 GB of
weights a step without it, a weight per frame). A weight-normed layer's weight is computed, not a leaf, and is
cast at every use, as on CUDA.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch.overrides import TorchFunctionMode

F = torch.nn.functional

LOWER = {
    F.linear,
    F.conv1d,
    F.conv2d,
    F.conv3d,
    F.conv_transpose1d,
    F.conv_transpose2d,
    torch.conv1d,
    torch.conv2d,
    torch.conv_transpose1d,
    torch.conv_transpose2d,
    torch.matmul,
    torch.Tensor.matmul,
    torch.Tensor.__matmul__,
    torch.mm,
    torch.Tensor.mm,
    torch.bmm,
    torch.Tensor.bmm,
    torch.baddbmm,
    torch.addmm,
    torch.addbmm,
    torch.einsum,
    torch.lstm_cell,
    torch.gru_cell,
    torch._VF.lstm,
    torch._VF.gru,
    torch.ops.aten._thnn_fused_lstm_cell,  # what lstm_cell runs on CUDA (models/rnn.py); on the same list
    F.prelu,
}
FP32 = {
    F.layer_norm,
    F.group_norm,
    F.softmax,
    F.log_softmax,
    torch.softmax,
    torch.log_softmax,
    torch.Tensor.softmax,
    torch.Tensor.log_softmax,
    F.cross_entropy,
    F.nll_loss,
    F.mse_loss,
    F.l1_loss,
    F.smooth_l1_loss,
    F.binary_cross_entropy_with_logits,
    F.softplus,
    torch.exp,
    torch.log,
    torch.Tensor.exp,
    torch.Tensor.log,
    torch.pow,
    torch.Tensor.pow,
    torch.rsqrt,
    torch.sum,
    torch.Tensor.sum,
    torch.cumsum,
    torch.logsumexp,
    torch.norm,
}
PROMOTE = {torch.cat, torch.stack, torch.addcmul, torch.addcdiv, torch.index_put, torch.Tensor.index_put_}


_DISABLED = ContextVar("meta_autocast_disabled", default=False)
_REGION_CACHE: ContextVar[dict | None] = ContextVar("meta_autocast_region", default=None)


@contextmanager
def region() -> Iterator[None]:
    """One `with autocast(...)` block of a training script inside the traced step: its own weight-cast cache
    (autocast clears the cache when a block exits; HiFi-GAN's train.py opens one per forward)."""
    token = _REGION_CACHE.set({})
    try:
        yield
    finally:
        _REGION_CACHE.reset(token)


@contextmanager
def autocast_disabled() -> Iterator[None]:
    """`torch.autocast("cuda", enabled=False)` for this emulation: what a model runs inside keeps its dtypes
    (HiFi-GAN's spectrogram and its fp32 grouped convolutions)."""
    token = _DISABLED.set(True)
    try:
        yield
    finally:
        _DISABLED.reset(token)


def _cast(value, dtype: torch.dtype, cache: dict):
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point() or value.dtype == dtype:
            return value
        if dtype == torch.float16 and value.is_leaf and value.requires_grad and not value._is_view():
            if id(value) not in cache:  # keyed by the tensor, as autocast keys its TensorImpl (kept alive here)
                cache[id(value)] = (value, value.to(dtype))
            return cache[id(value)][1]
        return value.to(dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype, cache) for v in value)
    return value


def _floats(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _floats(v)]
    return []


class MetaAutocast(TorchFunctionMode):
    """CUDA autocast's fp16 policy on meta tensors (entered inside the forward and loss, as autocast is; one
    instance is one autocast region, its weight casts cached for the region)."""

    def __init__(self):
        super().__init__()
        self.cache: dict = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _DISABLED.get():
            dtype = None
        elif func in LOWER:
            dtype = torch.float16
        elif func in FP32:
            dtype = torch.float32
        elif func in PROMOTE:
            floats = _floats(args) + _floats(list(kwargs.values()))
            dtype = torch.float32 if any(t.dtype == torch.float32 for t in floats) else None
        else:
            dtype = None
        if dtype is not None:
            cache = _REGION_CACHE.get()
            cache = self.cache if cache is None else cache
            args, kwargs = _cast(args, dtype, cache), {k: _cast(v, dtype, cache) for k, v in kwargs.items()}
        # The mode is off while its handler runs (torch pops it), so the function's own calls inside run
        # uncast, as autocast runs a function once under its dispatch key: an LSTM's gates stay in fp16.
        return func(*args, **kwargs)
