"""What one real training step does, operation by operation: FLOPs, bytes moved, and which unit does it.

Every ATen operation the step dispatches (both updates, forward, backward, the penalty's double
backward, the loss scaler, the optimizer) is recorded by a dispatch mode with its FLOPs (PyTorch's
own formulas: `flops_of` below), the bytes of every tensor it reads and writes (in the
dtypes they run in under this precision), and its unit: "matrix" work (convolutions, matrix products
and their backward passes) or "memory" work (everything else: element-wise ops, normalisation,
reductions, casts). Views and allocations launch no kernel and move no data; they are left out.

The table is traced at two small batch sizes and written as `intercept + slope x batch` per
operation, which is exact for operations whose cost is affine in the batch (every convolution,
matrix product, normalisation and element-wise op of these networks; the weights' casts and the
optimizer are the intercept). So it describes the step at any batch size, including ones this
machine could never run. A run of one operation whose length follows the batch (a grouped convolution with
groups = batch runs its double backward group by group) is taken as one row; `trace_op_table` refuses a
step whose operations otherwise change with the batch.

Optimizer updates are marked: on CUDA ampgan steps Adam with the fused implementation (one pass
over weights, gradients and moments), where the CPU runs foreach kernels, so each optimizer step also
gets a row `cuda.fused_adam` with what the fused update moves, and a projection onto a GPU uses it
instead of the traced kernels (`OpTable.on_cuda`). Other optimizers get their fused update's row too
(`cuda.fused_sgd`, `cuda.fused_lamb`: apex's and torch's fused kernels, as NVIDIA's published training
runs step them), by what each reads and writes per weight.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch._subclasses.fake_tensor import is_fake, unset_fake_temporarily
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from ampgan.errors import AmpganError
from ampgan.speed.step_timer import CallTooLong, abandoned_after
from ampgan.training.step import train_step

FORMAT = "ampgan-ops/1"
FUSED_ADAM = "cuda.fused_adam"  # not traced: the update CUDA runs instead of the optimizer's traced kernels
# The fused updates CUDA runs, by what each moves per weight element (in weight-sized passes): Adam reads the
# weight, gradient and two moments and writes three; SGD with momentum reads three and writes two (without
# momentum: two and one); LAMB (apex FusedLAMB) is Adam's pass writing its update, the update's and the
# weight's norms, then a second pass reading weight and update and writing the weight.
FUSED_UPDATES = {FUSED_ADAM: 7, "cuda.fused_sgd": 5, "cuda.fused_sgd_plain": 3, "cuda.fused_lamb": 12}
# Multiples of 8, so that a matrix dimension that is the batch (a linear layer's rows) is aligned as it is
# at the batch sizes people train at, and large enough for batch norm.
TRACE_BATCH_SIZES = (8, 16)

# FLOPs, counted with PyTorch's own formulas: those of `torch.utils.flop_counter` count the matrix work
# (convolutions, matmuls, their backward passes) that dispatches through them, 2 FLOPs per multiply-add. They are
# applied by the dispatch mode below that records a step's operations rather than by FlopCounterMode, whose module
# tracker hooks every module's backward and fails inside `torch.autograd.grad` on a leaf input (a gradient
# penalty's interpolated images: "A leaf node was passed to _will_engine_execute_node"). Element-wise work
# (activations, batch-norm, Adam) is not counted; for these networks it is a few percent at most. The split between
# matrix products and convolutions matters for mixed precision: tensor cores and AMX reach a larger share of their
# peak on large matrix products than on small convolutions.
MATMUL_OPS = ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear")
_aten = torch.ops.aten
# Fused attention (F.scaled_dot_product_attention, nn.MultiheadAttention) is two batched products forward and five
# backward. The CPU runs kernels of its own, which torch's FLOP table lacks: each takes the formula of the CUDA flash
# kernel with the same leading (query, key, value) or (grad_out, query, key, value) that a GPU runs instead.
ATTENTION_FLOPS_AS = {
    _aten._scaled_dot_product_flash_attention_for_cpu: _aten._scaled_dot_product_flash_attention,
    _aten._scaled_dot_product_flash_attention_for_cpu_backward: _aten._scaled_dot_product_flash_attention_backward,
}
# CUDA's other fused kernels, which torch's table has, take the same leading arguments as flash's.
ATTENTION_OPS = {str(packet).rsplit(".", 1)[-1] for pair in ATTENTION_FLOPS_AS.items() for packet in pair} | {
    f"_scaled_dot_product_{kind}_attention{end}" for kind in ("efficient", "cudnn") for end in ("", "_backward")
}
# An LSTM layer on the CPU (oneDNN), which torch's table lacks: (input, W_ih, W_hh, ...) in both directions. Its gate
# products each step, (rows, input) x (input, 4 hidden) and (rows, hidden) x (hidden, 4 hidden), run once forward
# and twice backward (the data's and the weights' gradients).
RNN_PASSES = {"mkldnn_rnn_layer": 1, "mkldnn_rnn_layer_backward": 2}
# cuDNN's RNN (nn.LSTM, nn.GRU, nn.RNN on CUDA), which torch's table lacks: _cudnn_rnn(input, weights, ...) and its
# backward (input, weights, ..., output_mask at 21), all layers and directions in one call. Each 2-D weight (gates x
# hidden by the layer's input, by hidden; a projection's) is one product with every time step's rows, run once
# forward, and backward once for the gradients of data and state (output_mask's first three) and once for the weights'.
CUDNN_RNN = ("_cudnn_rnn", "_cudnn_rnn_backward")


def kind_of(op_name: str) -> str:
    """'aten.convolution_backward' -> 'convolution'; 'aten.addmm' or fused attention -> 'matmul'; else 'other'."""
    name = op_name.rsplit(".", 1)[-1]
    if "convolution" in name:
        return "convolution"
    if name in MATMUL_OPS or name in ATTENTION_OPS or name in RNN_PASSES or name in CUDNN_RNN:
        return "matmul"
    return "other"


def flops_of(packet, args, kwargs, out) -> int:
    """FLOPs of one dispatched operation by PyTorch's formula, with one correction: the weight gradient of
    a grouped convolution. torch's formula computes it as a convolution of every input channel with every
    output channel, `groups` times the work each group's channels do (torch 2.13, flop_counter.py). A
    StyleGAN2 modulated convolution (groups = batch) then counts batch² FLOPs, which no affine op table
    can hold (its intercept went negative: a projection at large batch made the step's cost grow as the
    square of the batch). Each group's weight gradient is counted once, as its forward is."""
    name = str(packet).rsplit(".", 1)[-1]
    if name in RNN_PASSES:
        _, gates, inputs, hidden = _rnn_dims(name, args)
        rows = args[0].numel() // inputs  # every time step's
        return 2 * rows * gates * (inputs + hidden) * RNN_PASSES[name]
    if name in CUDNN_RNN:
        rows = args[0].numel() // args[0].shape[-1]  # every time step's (a packed sequence's too)
        forward = sum(2 * rows * w.shape[0] * w.shape[1] for w in args[1] if w.dim() == 2)
        mask = args[21] if name == "_cudnn_rnn_backward" else (True, False, False, False)
        return forward * (any(mask[:3]) + bool(mask[3]))
    formula = flop_registry.get(ATTENTION_FLOPS_AS.get(packet, packet))
    if formula is None:  # no formula: an operation with no matrix work to count
        return 0
    if packet is not torch.ops.aten.convolution_backward or len(args) < 11 or args[9] == 1:
        return int(formula(*args, **kwargs, out_val=out))
    groups, mask = args[9], args[10]
    data_part = formula(*args[:10], [mask[0], False, False], **kwargs, out_val=out) if mask[0] else 0
    weight_part = formula(*args[:10], [False, mask[1], False], **kwargs, out_val=out) if mask[1] else 0
    return int(data_part + weight_part // groups)


# Operations that allocate or relabel memory without a kernel over it.
NO_KERNEL = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "lift_fresh",
    "detach",
    "alias",
    "set_",
    "resize_",
    "_local_scalar_dense",
    "sym_size",
    "sym_stride",
    "sym_numel",
}


@dataclass(frozen=True)
class OpRecord:
    """One operation as it ran: `weight` is how many of it one step runs (a cycle's average)."""

    op: str  # "aten.convolution" (the overload packet)
    unit: str  # "matrix" | "memory"
    dtype: str  # the dtype a matrix op computes in ("float32", "bfloat16", "float16"); memory ops: their widest input
    alignment: (
        int  # the largest of 8, 4, 1 that divides every matrix dimension (tensor cores want 8 in 16 bit, 4 in tf32)
    )
    flops: float
    bytes: float
    optimizer: bool  # inside an optimizer's step()
    weight: float = 1.0
    kernels: tuple = ()  # the GEMM / convolution-pass kernels a matrix op launches: ((op, (dims...)), ...)


@dataclass(frozen=True)
class OpRow(OpRecord):
    """One operation of the op table, its fields an OpRecord's: its cost at batch size B is intercept + slope x B.
    `kernels`: each dimension affine in the batch like flops, ((kind, ((intercept, slope), ...)), ...), kind
    and dimensions as kernel_shapes() gives them."""

    flops: tuple[float, float]  # (intercept, slope)
    bytes: tuple[float, float]

    def kernels_at(self, batch_size: float) -> list[tuple[str, tuple[int, ...]]]:
        return [(kind, tuple(max(0, round(a + b * batch_size)) for a, b in dims)) for kind, dims in self.kernels]

    def flops_at(self, batch_size: float) -> float:
        return max(0.0, self.flops[0] + self.flops[1] * batch_size)

    def bytes_at(self, batch_size: float) -> float:
        return max(0.0, self.bytes[0] + self.bytes[1] * batch_size)

    def to_list(self) -> list:
        """The row as an op table's file holds it (OpTable.to_dict's "columns"); from_list reads it back."""
        return [
            self.op,
            self.unit,
            self.dtype,
            self.alignment,
            list(self.flops),
            list(self.bytes),
            self.optimizer,
            self.weight,
            [[kind, [list(d) for d in dims]] for kind, dims in self.kernels],
        ]

    @classmethod
    def from_list(cls, item: list) -> OpRow:
        # Tables written before kernels were recorded have 8 columns.
        op, unit, dtype, alignment, flops, data, optimizer, weight, *rest = item
        if unit not in ("matrix", "memory") or not isinstance(op, str) or not isinstance(dtype, str) or len(rest) > 1:
            raise ValueError(f"not an op row: {item!r:.80}")
        kernels = tuple(
            (str(kind), tuple((float(a), float(b)) for a, b in dims)) for kind, dims in (rest[0] if rest else [])
        )
        if any(KERNEL_DIMS.get(kind) != len(dims) for kind, dims in kernels):
            raise ValueError(
                f"a kernel of an op row is not one of {', '.join(KERNEL_DIMS)} with its dimensions: {item!r:.80}"
            )
        counts = [float(v) for v in (*flops[:2], *data[:2], *(d for _, dims in kernels for pair in dims for d in pair))]
        # Each count is affine in the batch size (its intercept may be negative) and finite; a row's share of the step
        # is above 0 (the shares are summed and divided by: 0 was a ZeroDivisionError in a projection).
        if not all(math.isfinite(v) for v in counts) or not 0 < float(weight) < math.inf:
            raise ValueError(f"an op row with a count that is not finite, or a share that is not above 0: {item!r:.80}")
        return cls(
            op,
            unit,
            dtype,
            int(alignment),
            (float(flops[0]), float(flops[1])),
            (float(data[0]), float(data[1])),
            bool(optimizer),
            float(weight),
            kernels,
        )


def _matrix_dims(name: str, args) -> tuple[str, tuple[int, ...]]:
    """(compute dtype, the dimensions tensor cores tile) of a matrix op."""

    def shape(index):
        value = args[index] if len(args) > index else None
        return tuple(value.shape) if isinstance(value, torch.Tensor) else ()

    if name == "convolution_backward":  # (grad_output, input, weight, ...)
        return str(args[0].dtype).removeprefix("torch."), shape(2)[:2]
    if "convolution" in name:  # (input, weight, ...): out and in channels (either order when transposed)
        return str(args[0].dtype).removeprefix("torch."), shape(1)[:2]
    if name in RNN_PASSES:
        rows, gates, inputs, hidden = _rnn_dims(name, args)
        return str(args[0].dtype).removeprefix("torch."), (rows, gates, inputs, hidden)
    if name in CUDNN_RNN:  # the batch (hx's rows) and every weight's sides
        return str(args[0].dtype).removeprefix("torch."), (shape(4)[1], *(d for w in args[1] for d in w.shape))
    if name in ATTENTION_OPS:  # (query, key, value, ...), backward (grad_out, query, key, value, ...)
        first = 1 if name.endswith("backward") else 0
        query, key, value = shape(first), shape(first + 1), shape(first + 2)
        return str(args[first].dtype).removeprefix("torch."), (query[-2], key[-2], query[-1], value[-1])
    first = 1 if name in ("addmm", "baddbmm") else 0
    a, b = shape(first), shape(first + 1)
    dtype = args[first].dtype if isinstance(args[first], torch.Tensor) else torch.float32
    return str(dtype).removeprefix("torch."), tuple(a[-2:]) + tuple(b[-1:])


def _rnn_dims(name: str, args) -> tuple[int, int, int, int]:
    """An LSTM layer's gate products: (the batch's rows, 4 x hidden, input, hidden), its rows counted once per
    time step (the batch: a step's product tiles over it alone)."""
    data, w_ih, w_hh = args[0], args[1], args[2]
    batch_first = args[14] if name == "mkldnn_rnn_layer" else args[21]
    steps = data.shape[1 if batch_first else 0] if data.dim() == 3 else data.shape[0]
    return data.numel() // data.shape[-1] // steps, w_ih.shape[0], w_ih.shape[1], w_hh.shape[1]


# The kernels kernel_shapes records and how many dimensions each has.
KERNEL_DIMS = {"gemm": 5, "conv_fwd": 11, "conv_bwd_data": 11, "conv_bwd_weight": 11}


def _is_transposed(matrix: torch.Tensor) -> bool:
    """A 2-D operand, or each matrix of a batched one, stored column-major (a linear layer's weight.t(),
    attention's k.transpose(1, 2)): cuBLAS reads it transposed."""
    return matrix.dim() in (2, 3) and matrix.stride(-2) == 1 and matrix.stride(-1) != 1


def kernel_shapes(name: str, args) -> tuple:
    """The kernels a matrix op launches, by shape: ("gemm", (m, n, k, transpose_a, transpose_b)) or
    (conv pass, (batch, c, h, w, out_channels, r, s, pad_h, pad_w, stride_h, stride_w)) with the pass one of
    conv_fwd, conv_bwd_data, conv_bwd_weight of an ordinary convolution. A transposed convolution is the
    ordinary one run the other way: its forward is that one's data gradient, and its data gradient that
    one's forward. A 1-D convolution is the 2-D one with a 1-high input and filter; a batched product one
    product with its batches' rows stacked. Empty for what the kernel model does not describe (grouped
    convolutions, products of more than 3 dimensions)."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if name in ("mm", "addmm"):
        a, b = tensors[-2], tensors[-1]
        if a.dim() != 2 or b.dim() != 2:
            return ()
        return (("gemm", (a.shape[0], b.shape[1], a.shape[1], int(_is_transposed(a)), int(_is_transposed(b)))),)
    if name in ("bmm", "baddbmm"):
        # A batched product (attention's scores and context) tiles like one product with its batches'
        # rows stacked: the same tiles over the multiprocessors, the same FLOPs.
        a, b = tensors[-2], tensors[-1]
        if a.dim() != 3 or b.dim() != 3:
            return ()
        return (("gemm", (a.shape[0] * a.shape[1], b.shape[2], a.shape[2], *map(int, map(_is_transposed, (a, b))))),)
    if name in ATTENTION_OPS:
        return _attention_kernels(name.endswith("backward"), tensors)
    if name not in ("convolution", "convolution_backward"):
        return ()
    first = 1 if name == "convolution_backward" else 0
    if args[first].dim() == 3:
        # A 1-D convolution (audio, text) is cuDNN's 2-D one with a 1-high input and filter.
        return kernel_shapes(name, _as_2d_convolution(name, args))
    if args[first].dim() == 5:
        return _volume_convolution_kernels(name == "convolution_backward", args)
    return convolution_kernels(name == "convolution_backward", args)


def _volume_convolution_kernels(backward: bool, args) -> tuple:
    """A 3-D convolution (video, volumes) as the 2-D convolution passes with its implicit GEMMs: a 1x1 filter over
    (N, in channels x filter volume, output depth x height, output width) maps to (out channels), so forward, data
    and weight gradient each have its products and torch's FLOPs (the data gradient's columns, scattered back),
    and PyTorch's default runs them in TF32 as cuDNN's 3-D convolutions are. Each is the ordinary convolution's; a
    transposed one is the ordinary one run the other way. A grouped one: ()."""
    first = 1 if backward else 0
    data, weight = args[first], args[first + 1]
    stride, padding, dilation, transposed, _, groups = args[first + 3 : first + 9]
    if groups != 1:
        return ()
    kernel = weight.shape[2:]
    # The ordinary convolution's output (a transposed convolution's input is the ordinary one's output), its out
    # (K) and in (C) channels: weight (K, C, kd, kh, kw) in both cases.
    if transposed:
        out_shape = data.shape[2:]
    elif backward:
        out_shape = args[0].shape[2:]  # the output gradient
    else:
        out_shape = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in
                     zip(data.shape[2:], stride, padding, dilation, kernel)]  # fmt: skip
    (channels_out, channels_in), volume = weight.shape[:2], math.prod(kernel)
    shape = (data.shape[0], channels_in * volume, out_shape[0] * out_shape[1], out_shape[2], channels_out)
    forward, data_gradient = ("conv_bwd_data", "conv_fwd") if transposed else ("conv_fwd", "conv_bwd_data")
    passes = _passes(backward, forward, data_gradient, args)
    return tuple((kind, (*(int(d) for d in shape), 1, 1, 0, 0, 1, 1)) for kind in passes)


def _passes(backward: bool, forward: str, data_gradient: str, args) -> tuple[str, ...]:
    """The passes a convolution runs: its forward; or the gradients its backward's output_mask (args[10]) asks for."""
    if not backward:
        return (forward,)
    return tuple(kind for kind, wanted in zip((data_gradient, "conv_bwd_weight"), args[10][:2]) if wanted)


def _attention_kernels(backward: bool, tensors: list[torch.Tensor]) -> tuple:
    """Fused attention's products, each batched over (batch x heads) as bmm's are: scores = Q K^T and out = P V
    forward; backward recomputes the scores, then dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q (torch's FLOP
    formula counts these five)."""
    query, key, value = tensors[1:4] if backward else tensors[:3]
    if not query.dim() == key.dim() == value.dim() == 4:
        return ()
    rows, (s_q, d), (s_k, d_v) = query.shape[0] * query.shape[1], query.shape[2:], value.shape[2:]
    forward = ((rows * s_q, s_k, d, 0, 1), (rows * s_q, d_v, s_k, 0, 0))
    gradients = ((rows * s_q, s_k, d_v, 0, 1), (rows * s_k, d_v, s_q, 1, 0), (rows * s_q, d, s_k, 0, 0))
    products = forward[:1] + gradients + ((rows * s_k, d, s_q, 1, 0),) if backward else forward
    return tuple(("gemm", dims) for dims in products)


def convolution_kernels(backward: bool, args) -> tuple:
    """kernel_shapes of aten.convolution (`backward` False) or aten.convolution_backward (True): their tensors'
    shapes are all it reads (a recorded call's TensorSpecs do too, benchmarks/calibration/step_kernels.py)."""
    # convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    # convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    #                      output_padding, groups, output_mask)
    first = 1 if backward else 0
    data, weight = args[first], args[first + 1]
    stride, padding, dilation, transposed, _, groups = args[first + 3 : first + 9]
    if len(data.shape) != 4 or groups != 1 or (transposed and any(d != 1 for d in dilation)):
        return ()
    r, s = weight.shape[2:]
    # A dilated filter (WaveNet's) does a dense one's work over the same output: taken as the dense filter
    # padded so that its output has the same size.
    pad_h, pad_w = (p - (d - 1) * (k - 1) // 2 for p, d, k in zip(padding, dilation, (r, s)))
    if pad_h < 0 or pad_w < 0:
        return ()
    common = (r, s, pad_h, pad_w, stride[0], stride[1])
    if not transposed:  # input (N, C, H, W), weight (K, C, r, s)
        shape, forward, data_gradient = (*data.shape, weight.shape[0], *common), "conv_fwd", "conv_bwd_data"
    else:  # input (N, Cin, H, W), weight (Cin, Cout, r, s): the ordinary convolution maps Cout -> Cin
        if backward:
            outer_shape = tuple(args[0].shape)
        else:  # the forward's output size, as conv_transpose computes it (no output padding here)
            height = (data.shape[2] - 1) * stride[0] - 2 * padding[0] + r + args[7][0]
            width = (data.shape[3] - 1) * stride[1] - 2 * padding[1] + s + args[7][1]
            outer_shape = (data.shape[0], weight.shape[1], height, width)
        shape, forward, data_gradient = (*outer_shape, weight.shape[0], *common), "conv_bwd_data", "conv_fwd"
    return tuple((kind, tuple(int(d) for d in shape)) for kind in _passes(backward, forward, data_gradient, args))


def _as_2d_convolution(name: str, args) -> tuple:
    """A 1-D convolution's arguments as the 2-D convolution's (shapes only: the tensors are views)."""
    args = list(args)
    first = 1 if name == "convolution_backward" else 0
    tensors = (0, 1, 2) if first else (0, 1)
    for index in tensors:
        args[index] = args[index].unsqueeze(2)
    for index, fill in ((first + 3, 1), (first + 4, 0), (first + 5, 1), (first + 7, 0)):
        args[index] = [fill, *args[index]]
    return tuple(args)


def _tensors(tree) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(tree)
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def _bytes_of(tensors: list[torch.Tensor]) -> int:
    """The bytes of the tensors, each counted once however often it appears."""
    return sum(t.numel() * t.element_size() for t in {id(t): t for t in tensors}.values())


class _OpRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.records: list[OpRecord] = []
        self.in_optimizer = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func._overloadpacket
        name = str(packet).rsplit(".", 1)[-1]
        if not str(packet).startswith("aten.") or func.is_view or name in NO_KERNEL:
            return out
        inputs, outputs = _tensors((args, kwargs)), _tensors(out)
        if kind_of(str(packet)) == "other":
            widest = max((t for t in inputs if t.is_floating_point()), key=lambda t: t.element_size(), default=None)
            dtype = str(widest.dtype).removeprefix("torch.") if widest is not None else "none"
            alignment, unit, kernels = 1, "memory", ()
        else:
            dtype, dims = _matrix_dims(name, args)
            # OpRecord.alignment: the largest of 8, 4, 1 that divides every dimension tensor cores tile.
            alignment = next((step for step in (8, 4) if all(int(d) % step == 0 for d in dims)), 1)
            unit, kernels = "matrix", kernel_shapes(name, args)
        self.records.append(
            OpRecord(
                op=str(packet),
                unit=unit,
                dtype=dtype,
                alignment=alignment,
                flops=float(flops_of(packet, args, kwargs, out)),
                bytes=float(_bytes_of(inputs + outputs)),
                optimizer=self.in_optimizer > 0,
                kernels=kernels,
            )
        )
        return out


def fused_update_op(optimizer: torch.optim.Optimizer) -> str:
    """The fused CUDA update that stands for `optimizer`'s step: by its class's name, so that an optimizer
    written elsewhere (apex's FusedLAMB, a LAMB of one's own) is recognised as torch's are."""
    name = type(optimizer).__name__.lower()
    if "lamb" in name or "lars" in name:
        return "cuda.fused_lamb"
    if "sgd" in name:
        momentum = any(group.get("momentum", 0) for group in optimizer.param_groups)
        return "cuda.fused_sgd" if momentum else "cuda.fused_sgd_plain"
    return FUSED_ADAM


def fused_update(optimizer: torch.optim.Optimizer) -> OpRecord | None:
    """What the fused update of `optimizer`'s weights that have a gradient moves (None: none has one)."""
    stepped = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    if not stepped:
        return None
    op = fused_update_op(optimizer)
    moved = sum(p.numel() * 4 for p in stepped) * FUSED_UPDATES[op]  # fp32 master weights and states
    return OpRecord(op=op, unit="memory", dtype="float32", alignment=1, flops=0.0, bytes=float(moved), optimizer=True)


def record_ops(run: Callable[[], object]) -> list[OpRecord]:
    """Every kernel-launching operation `run` dispatches, in order (it runs once, for real)."""
    recorder = _OpRecorder()

    def enter(optimizer, *_):
        recorder.in_optimizer += 1
        update = fused_update(optimizer)
        if update is not None:
            recorder.records.append(update)

    def leave(*_):
        recorder.in_optimizer -= 1

    handles = [register_optimizer_step_pre_hook(enter), register_optimizer_step_post_hook(leave)]
    try:
        with recorder:
            run()
    finally:
        for handle in handles:
            handle.remove()
    return recorder.records


def count_flops_by_kind(run: Callable[[], object]) -> dict[str, int]:
    """{"convolution": n, "matmul": n, "other": n} FLOPs of everything `run` computes (it runs once, for real),
    as its recorded operations count them."""
    kinds = {"convolution": 0, "matmul": 0, "other": 0}
    for record in record_ops(run):
        kinds[kind_of(record.op)] += int(record.flops)
    return kinds


def _kind(record: OpRecord) -> tuple:
    return record.op, record.unit, record.dtype, record.optimizer, record.weight


def _runs(records: list[OpRecord]) -> list[list[OpRecord]]:
    """Consecutive records of the same kind, grouped."""
    return [list(run) for _, run in itertools.groupby(records, key=_kind)]


def _merged(run: list[OpRecord]) -> OpRecord:
    """One record for the run. Its kernels are left out: their number follows the batch, so the run is
    projected from its summed FLOPs and bytes (as a table without kernel shapes is)."""
    return replace(
        run[0],
        alignment=min(r.alignment for r in run),
        flops=sum(r.flops for r in run),
        bytes=sum(r.bytes for r in run),
        kernels=(),
    )


def match_batch_dependent_runs(small: list[OpRecord], large: list[OpRecord]) -> tuple[list[OpRecord], list[OpRecord]]:
    """The two traces with each run of one operation whose length changes with the batch merged into one
    record (its FLOPs and bytes summed, which stay affine in the batch). A grouped convolution with
    groups = batch (StyleGAN2's modulated convolution) runs its double backward as one convolution per
    group, so its penalty's trace holds as many convolutions as images. The merged row counts as one
    kernel launch; the work is all there. Unchanged when the traces' operations do not line up run for run."""
    small_runs, large_runs = _runs(small), _runs(large)
    if len(small_runs) != len(large_runs) or any(_kind(a[0]) != _kind(b[0]) for a, b in zip(small_runs, large_runs)):
        return small, large
    pairs = [(a, b) if len(a) == len(b) else ([_merged(a)], [_merged(b)]) for a, b in zip(small_runs, large_runs)]
    return [r for a, _ in pairs for r in a], [r for _, b in pairs for r in b]


def affine_rows(small: list[OpRecord], large: list[OpRecord], small_batch: int, large_batch: int) -> list[OpRow]:
    """Op rows from the same step traced at two batch sizes (operation for operation, a run of one operation
    whose length follows the batch taken as one), merged where identical. Raises AmpganError when the two
    traces are not the same operations in the same order."""
    small, large = match_batch_dependent_runs(small, large)
    if len(small) != len(large) or any(
        _kind(a) + (tuple(k for k, _ in a.kernels),) != _kind(b) + (tuple(k for k, _ in b.kernels),)
        for a, b in zip(small, large)
    ):
        raise AmpganError(
            f"the training step runs different operations at batch {small_batch} and {large_batch} "
            f"({len(small)} against {len(large)}): its cost cannot be written as a function of the "
            "batch size, so it is not projected"
        )
    merged: dict[tuple, float] = {}
    span = large_batch - small_batch
    for a, b in zip(small, large):
        flop_slope = (b.flops - a.flops) / span
        byte_slope = (b.bytes - a.bytes) / span
        kernels = tuple(
            (kind, tuple((x - (y - x) / span * small_batch, (y - x) / span) for x, y in zip(dims, other)))
            for (kind, dims), (_, other) in zip(a.kernels, b.kernels)
        )
        key = (
            a.op,
            a.unit,
            a.dtype,
            min(a.alignment, b.alignment),
            (a.flops - flop_slope * small_batch, flop_slope),
            (a.bytes - byte_slope * small_batch, byte_slope),
            a.optimizer,
            kernels,
        )
        merged[key] = merged.get(key, 0.0) + a.weight
    return [OpRow(*key[:7], weight=weight, kernels=key[7]) for key, weight in merged.items()]


@dataclass(frozen=True)
class OpTable:
    """One precision's step as op rows, with what it was traced on."""

    precision: str
    rows: tuple[OpRow, ...]
    traced_at: tuple[int, int]
    device: str  # where the trace ran ("cpu")

    def flops_at(self, batch_size: float, unit: str | None = None) -> float:
        return sum(r.flops_at(batch_size) * r.weight for r in self.rows if unit is None or r.unit == unit)

    def bytes_at(self, batch_size: float) -> float:
        return sum(r.bytes_at(batch_size) * r.weight for r in self.rows)

    def kernels(self) -> float:
        return sum(r.weight for r in self.rows)

    def on_cuda(self) -> tuple[OpRow, ...]:
        """The rows a CUDA step runs: the traced optimizer kernels replaced by the fused update."""
        return tuple(r for r in self.rows if not r.optimizer or r.op in FUSED_UPDATES)

    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "precision": self.precision,
            "traced_at": list(self.traced_at),
            "device": self.device,
            "columns": ["op", "unit", "dtype", "alignment", "flops", "bytes", "optimizer", "weight", "kernels"],
            "rows": [r.to_list() for r in self.rows],
        }

    @classmethod
    def from_dict(cls, document: dict) -> OpTable:
        """Raises ValueError naming what is wrong with a table read back from a file."""
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise ValueError(
                f"not an op table (format {document.get('format') if isinstance(document, dict) else None!r})"
            )
        rows = document.get("rows")
        if not isinstance(rows, list) or not rows:
            raise ValueError("an op table without rows")
        try:
            parsed = tuple(OpRow.from_list(item) for item in rows)
            traced_at = tuple(int(b) for b in document["traced_at"])
        except (TypeError, ValueError, KeyError, IndexError) as error:
            raise ValueError(f"a damaged op table: {error}") from None
        if len(traced_at) != 2 or not 0 < traced_at[0] < traced_at[1]:  # the rows' slopes divide by their gap
            raise ValueError(
                f"a damaged op table: traced at batch sizes {list(traced_at)}, not a smaller then a larger one"
            )
        return cls(
            precision=str(document.get("precision")),
            rows=parsed,
            traced_at=traced_at,
            device=str(document.get("device")),
        )


def trace_cycle(timer, batch: tuple[torch.Tensor, torch.Tensor]) -> list[OpRecord] | None:
    """One cycle of a StepTimer's GAN on `batch` (every kind of step once, weighted by its share),
    traced on the eager modules. None when the loss scaler skipped an update in it (an fp16 overflow:
    that step runs no optimizer, which is not the step a run spends its time in)."""
    records, skipped = [], False
    with timer.state.eager() as state:
        # The step's noise generator seeded from torch's (seeded per cycle by _settled_trace): a branch drawn
        # with ctx.rng (style mixing as docs/your-gan.md asks) is taken alike in each cycle of one seed.
        with unset_fake_temporarily():  # (a meta trace's tensors hold no values: this one is drawn for real)
            state.rng.manual_seed(int(torch.randint(2**62, ())))
        for before, count in timer.step_kinds:
            state.step = before
            metrics = {}
            ran = record_ops(lambda: metrics.update(train_step(state, lambda: batch)))  # runs here, once
            records += [replace(record, weight=count / timer.cycle_steps) for record in ran]
            # A meta trace's flags hold no value: its scaler never skips (bench/op_tables.py on_meta).
            skipped |= any(not is_fake(v) and bool(v) for name, v in metrics.items() if name.startswith("skipped"))
    return None if skipped else records


# fp16's dynamic scale starts at 2^16 and halves at each overflow; the first update that is not skipped
# also creates Adam's moments, so a trace is kept once two cycles in a row ran the same operations.
MAX_TRACE_ATTEMPTS = 16
# Seeds of the random branches tried before a step whose operations differ between the two batches is not projected.
BRANCH_SEEDS = 4
# A trace takes each batch size's operations once two cycles in a row agree: at least two cycles at the small
# trace batch and two at the large one, each twice as long: six small-batch cycles in all.
SMALL_CYCLES_PER_TRACE = 6


class OverBudget(AmpganError):
    """A trace stopped for the bench's budget; `more_s`: the least it still needed (the next cycle, or a whole run
    of the cycle cut short), from which bench/op_tables.py says the least --max-seconds that could fit it."""

    def __init__(self, message: str, more_s: float):
        super().__init__(message)
        self.more_s = more_s


def _settled_trace(
    timer, batch, precision: str, deadline: float | None = None, first_cycle_s: float = 0.0, seed: int = 0
) -> list[OpRecord]:
    previous, last_cycle_s = None, first_cycle_s
    for _ in range(MAX_TRACE_ATTEMPTS):
        if deadline is not None and time.perf_counter() + last_cycle_s > deadline:
            raise OverBudget(
                f"not traced: another {precision} cycle at batch {len(batch[0])} ({last_cycle_s:.1f} s) "
                "would run past the trace's share of the bench's budget",
                more_s=last_cycle_s,
            )
        started = time.perf_counter()
        try:
            # A cycle slower than foreseen (tracing costs more than the warm-up it was foreseen from) is
            # stopped at the deadline rather than run past the trace's share of the budget.
            # manual_seed reseeds every CUDA generator too: the fork puts the timer's GPU's state back as well
            device = getattr(timer, "device", None)  # (a test's stand-in step has none)
            cuda = [device] if device is not None and device.type == "cuda" else []
            with abandoned_after(None if deadline is None else deadline - started), torch.random.fork_rng(devices=cuda):
                torch.manual_seed(seed)  # every cycle takes the same random branches (StyleGAN2's style mixing, p 0.9)
                records = trace_cycle(timer, batch)
        except CallTooLong:
            raise OverBudget(
                f"not traced: a {precision} cycle at batch {len(batch[0])} ran past the trace's share of the "
                f"bench's budget and was stopped there ({time.perf_counter() - started:.1f} s)",
                more_s=time.perf_counter() - started,
            ) from None
        last_cycle_s = time.perf_counter() - started
        if records is not None and previous is not None and [r.op for r in records] == [r.op for r in previous]:
            return records
        previous = records
    raise AmpganError(
        f"the {precision} step did not settle into the same operations in {MAX_TRACE_ATTEMPTS} steps "
        f"at batch {len(batch[0])} (the loss scaler kept skipping updates, or the step branches on the values it "
        "computes): its step is not traced"
    )


def trace_op_table(
    make_timer: Callable[[int], object],
    precision: str,
    batch_sizes: tuple[int, int] = TRACE_BATCH_SIZES,
    deadline: float | None = None,
    first_cycle_s: float = 0.0,
) -> OpTable:
    """The op table of one precision's step: `make_timer(batch_size)` gives a StepTimer with a
    resident batch of the larger size; the smaller batch is its first images. Past `deadline`
    (time.perf_counter()) it stops between cycles with an AmpganError saying so."""
    small, large = sorted(batch_sizes)
    timer = make_timer(large)
    real, labels = timer.resident_batch()
    # `first_cycle_s`: the first cycle's foreseen time at the small batch (twice it at the large one), so
    # that no cycle starts that would end past `deadline`. A step with random branches (style mixing) takes the
    # same branches at both batches only by chance, the draws before a branch being as many as the images: each
    # further seed traces both batches again, until a pair runs the same operations.
    traces: dict[int, list] = {small: [], large: []}
    for seed in range(BRANCH_SEEDS):
        for size in (small, large):
            sized = (real[:size], labels[:size])
            traces[size].append(_settled_trace(timer, sized, precision, deadline, first_cycle_s * size / small, seed))
        for pair in itertools.product(traces[small], traces[large]):
            try:
                rows = affine_rows(*pair, small, large)
            except AmpganError as error:
                failed = error
                continue
            return OpTable(precision=precision, rows=tuple(rows), traced_at=(small, large), device=timer.device.type)
        if seed and all([r.op for r in found[-1]] == [r.op for r in found[0]] for found in traces.values()):
            break  # the same operations whatever the seed: not random branches, no seed will match them
    raise failed
