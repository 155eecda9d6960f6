"""A StyleGAN2-style modulated convolution (one grouped convolution, groups = batch) gets an op table: its
double backward runs one convolution per group, a run whose length follows the batch, taken as one row."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ampgan.bench.ops import OpRecord, OpTable, affine_rows, count_flops_by_kind, record_ops


def test_a_run_of_one_operation_that_follows_the_batch_is_one_row():
    conv = OpRecord("aten.convolution", "matrix", "float32", 8, 100.0, 40.0, False)
    cat = OpRecord("aten.cat", "memory", "float32", 1, 0.0, 16.0, False)
    rows = affine_rows([conv] * 4 + [cat], [conv] * 8 + [cat], 8, 16)  # groups = batch / 2
    table = OpTable("fp32", tuple(rows), (8, 16), "cpu")
    assert len(rows) == 2
    assert table.flops_at(8) == 400.0 and table.flops_at(16) == 800.0 and table.flops_at(32) == 1600.0


def _modulated_penalty_step(batch: int):
    """A modulated convolution's input-gradient penalty: forward, double backward."""
    torch.manual_seed(0)
    weight = nn.Parameter(torch.randn(4, 4, 3, 3))
    styles = torch.randn(batch, 4, requires_grad=True)
    x = torch.randn(batch, 4, 8, 8)

    def step():
        modulated = (weight.unsqueeze(0) * styles.view(batch, 1, 4, 1, 1)).reshape(-1, 4, 3, 3)
        inputs = x * styles.mean(1).view(batch, 1, 1, 1)  # the previous layer's output depends on the style too
        out = F.conv2d(inputs.reshape(1, batch * 4, 8, 8), modulated, padding=1, groups=batch)
        (grad,) = torch.autograd.grad(out.pow(2).sum(), styles, create_graph=True)
        grad.pow(2).sum().backward()

    return record_ops(step)


def test_a_grouped_modulated_convolution_gets_an_op_table():
    small, large = _modulated_penalty_step(8), _modulated_penalty_step(16)
    assert len(large) > len(small)  # torch 2.13 runs the grouped double backward one convolution per group
    rows = affine_rows(small, large, 8, 16)
    table = OpTable("fp32", tuple(rows), (8, 16), "cpu")
    assert table.flops_at(16) == pytest.approx(sum(r.flops for r in large))
    assert table.flops_at(8) == pytest.approx(sum(r.flops for r in small))
    # affine with a non-negative intercept: its cost at large batch grows with the batch, not its square
    assert all(row.flops[0] >= 0 and row.bytes[0] >= 0 for row in rows)
    assert table.flops_at(4096) == pytest.approx(256 * table.flops_at(16), rel=0.01)


def _conv_step(batch: int, grouped: bool):
    """Forward and backward (input and weight gradients) of B images through 3x3 convolutions 4 -> 6: one
    grouped convolution with a filter per image (groups = batch, as a modulated convolution), or one
    shared filter (an ordinary convolution); the same multiply-adds."""
    torch.manual_seed(0)
    x = torch.randn(batch, 4, 8, 8, requires_grad=True)
    if grouped:
        weight = torch.randn(batch * 6, 4, 3, 3, requires_grad=True)
        return lambda: F.conv2d(x.reshape(1, batch * 4, 8, 8), weight, padding=1, groups=batch).sum().backward()
    weight = torch.randn(6, 4, 3, 3, requires_grad=True)
    return lambda: F.conv2d(x, weight, padding=1).sum().backward()


@pytest.mark.parametrize("batch", [4, 8])
def test_a_grouped_convolution_counts_each_groups_work_once(batch):
    # torch's formula counts a grouped weight gradient `groups` times over (batch² for a modulated convolution)
    assert count_flops_by_kind(_conv_step(batch, grouped=True)) == count_flops_by_kind(_conv_step(batch, grouped=False))
