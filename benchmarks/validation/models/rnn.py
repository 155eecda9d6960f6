"""LSTMs as CUDA runs them, for the op tracer.

On the meta device (and the CPU) torch decomposes an LSTM step into its element-wise operations (the gates'
sum, three sigmoids, two tanh, three products, a sum: about ten kernels and dispatches forward, more
backward). On CUDA an nn.LSTMCell step is two products and one fused element-wise kernel,
aten._thnn_fused_lstm_cell, and one more for its backward (aten/src/ATen/native/RNN.cpp, LSTMCell's
`input.is_cuda()` branch); nn.LSTM is one cuDNN call that runs the input products of every step as one GEMM,
then per step the recurrent product and one fused element-wise kernel. These modules keep nn.LSTM's and
nn.LSTMCell's parameters and run those operations (cuDNN's weight gradients, one GEMM over all steps, are
autograd's per-step products here: the same FLOPs). What stays apart: a cuDNN call issues its per-step
kernels from C++, not one PyTorch dispatch each, so the host count of an nn.LSTM is still an upper bound.
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


class CudnnLSTM(nn.LSTM):
    """One batch-first layer, either direction: (B, T, in) -> ((B, T, H x directions), None)."""

    def forward(self, x):
        batch, length = x.shape[:2]
        outputs = []
        for suffix in ("", "_reverse")[: 1 + self.bidirectional]:
            # (B, T, 4H): every step's input product as one GEMM, split by step with unbind (whose backward is
            # one stack; indexing each step would materialise a zero-filled (B, T, 4H) gradient per step)
            gates = F.linear(x, getattr(self, f"weight_ih_l0{suffix}")).unbind(1)
            h = c = x.new_zeros(batch, self.hidden_size)
            steps = [None] * length
            for t in reversed(range(length)) if suffix else range(length):
                h, c = fused_step(
                    gates[t],
                    h,
                    c,
                    *(getattr(self, f"{name}_l0{suffix}") for name in ("weight_hh", "bias_ih", "bias_hh")),
                )
                steps[t] = h
            outputs.append(torch.stack(steps, 1))
        return torch.cat(outputs, -1) if len(outputs) > 1 else outputs[0], None
