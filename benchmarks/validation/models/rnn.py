"""LSTMs as CUDA runs them, for the op tracer.

On the meta device (and the CPU) torch decomposes an LSTM step into its element-wise operations (the gates'
sum, three sigmoids, two tanh, three products, a sum: about ten kernels and dispatches forward, more
backward). On CUDA an nn.LSTMCell step is two products and one fused element-wise kernel,
aten._thnn_fused_lstm_cell, and one more for its backward (aten/src/ATen/native/RNN.cpp, LSTMCell's
`input.is_cuda()` branch); nn.LSTM is one cuDNN call that runs the input products of every step as one GEMM,
then per step the recurrent product and one fused element-wise kernel. These modules keep nn.LSTM's and
nn.LSTMCell's parameters and run those operations. cuDNN's backward (cudnnRNNBackwardData, then
cudnnRNNBackwardWeights) runs per step the fused cell's backward and the data gradient's product, then the
recurrent weights' gradient as one GEMM over every step (`_CudnnRecurrence`): autograd's per-step products
had accumulated it with one weight-sized add a step (GNMT's fp32 step 843 adds, 12.8 of its 43 GB of
element-wise traffic, none of which cuDNN moves). What stays apart: a cuDNN call issues its per-step kernels
from C++, not one PyTorch dispatch each, so the host count of an nn.LSTM is still an upper bound.
"""

from __future__ import annotations

import torch
from torch import nn

F = nn.functional


def fused_step(input_gates, h, c, weight_hh, bias_ih, bias_hh):
    """One LSTM step from its input gates (B, 4H): the recurrent product, then CUDA's fused cell."""
    hy, cy, _ = torch.ops.aten._thnn_fused_lstm_cell(input_gates, F.linear(h, weight_hh), c, bias_ih, bias_hh)
    return hy, cy


class CudaLSTMCell(nn.LSTMCell):
    def forward(self, x, state):
        h, c = state
        return fused_step(F.linear(x, self.weight_ih), h, c, self.weight_hh, self.bias_ih, self.bias_hh)


class _CudnnRecurrence(torch.autograd.Function):
    """One layer and direction's recurrence as cuDNN runs it, from every step's input products (B, T, 4H) to the
    hidden states (B, T, H): forward per step the recurrent product and the fused cell; backward per step the
    cell's backward and the data gradient's product, then the recurrent weight's and the biases' gradients once
    over all steps. The weight is cast to the gates' dtype once (autocast casts cuDNN's weights once a call)."""

    @staticmethod
    def forward(ctx, gates, weight_hh, bias_ih, bias_hh, reverse):
        weight = weight_hh.to(gates.dtype)
        h = c = gates.new_zeros(gates.shape[0], weight.shape[1])
        ctx.steps, hidden = [], [None] * gates.shape[1]
        for t in reversed(range(gates.shape[1])) if reverse else range(gates.shape[1]):
            hy, cy, work = torch.ops.aten._thnn_fused_lstm_cell(gates[:, t], F.linear(h, weight), c, bias_ih, bias_hh)
            ctx.steps.append((t, h, c, cy, work))
            h, c, hidden[t] = hy, cy, hy
        ctx.weight = weight
        return torch.stack(hidden, 1)

    @staticmethod
    def backward(ctx, grad_out):
        grad_gates, before = [None] * grad_out.shape[1], [None] * grad_out.shape[1]
        grad_h = grad_c = None
        for t, h, c, cy, work in reversed(ctx.steps):
            grad_hy = grad_out[:, t] if grad_h is None else grad_out[:, t] + grad_h
            grad_gates[t], grad_c, _ = torch.ops.aten._thnn_fused_lstm_cell_backward_impl(
                grad_hy, grad_c, c, cy, work, True
            )
            grad_h, before[t] = grad_gates[t].mm(ctx.weight), h  # (B, 4H) @ (4H, H)
        every = torch.stack(grad_gates, 1)  # (B, T, 4H)
        # (4H, B x T) @ (B x T, H): the weight's gradient over every step at once, cudnnRNNBackwardWeights' GEMM
        grad_weight = every.flatten(0, 1).t().mm(torch.stack(before, 1).flatten(0, 1))
        grad_bias = every.sum((0, 1))
        return every, grad_weight, grad_bias, grad_bias, None


class CudnnLSTM(nn.LSTM):
    """One batch-first layer, either direction: (B, T, in) -> ((B, T, H x directions), None)."""

    def forward(self, x):
        outputs = []
        for suffix in ("", "_reverse")[: 1 + self.bidirectional]:
            # (B, T, 4H): every step's input product as one GEMM
            gates = F.linear(x, getattr(self, f"weight_ih_l0{suffix}"))
            weights = (getattr(self, f"{name}_l0{suffix}") for name in ("weight_hh", "bias_ih", "bias_hh"))
            outputs.append(_CudnnRecurrence.apply(gates, *weights, bool(suffix)))
        return torch.cat(outputs, -1) if len(outputs) > 1 else outputs[0], None
