"""How a step's kernel errors add up (projection/step_band.py): hand-computed compositions, the measured
correlations, and the step band built from them."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from ampgan.projection.kernels import Kernel
from ampgan.projection.step_band import composition_factor, layer_key

# the correlations are measured by the calibration's fit, beside its data
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "calibration"))
from step_band_fit import pair_correlations  # noqa: E402


def conv(name, op="conv_fwd", batch=64, c=64, out=128, hw=16):
    return Kernel(
        name, op, batch=batch, c=c, h=hw, w=hw, out_channels=out, r=4, s=4, pad_h=1, pad_w=1, stride_h=2, stride_w=2
    )


def by_op(kernel):
    return kernel.op


CORRELATIONS = {"same_layer": 0.45, "same_class": 0.0, "other": 0.0}


def test_a_repeated_kernel_errs_as_one():
    # D run on real and on fake images launches the same kernel twice: no averaging.
    kernels = [conv("d_real"), conv("d_fake")]
    assert composition_factor(kernels, np.array([1.0, 1.0]), np.array([0.5, 0.5]), CORRELATIONS, by_op) == 1.0


def test_unrelated_kernels_average_and_a_layers_passes_partly():
    unrelated = [conv("a", c=64, out=128), conv("b", op="conv_bwd_weight", c=256, out=512, hw=4)]
    equal = (np.array([1.0, 1.0]), np.array([0.5, 0.5]))
    assert composition_factor(unrelated, *equal, CORRELATIONS, by_op) == pytest.approx(1 / math.sqrt(2))
    # The forward and data gradient of one layer: 0.45 correlated, sqrt(1 + 1 + 2 x 0.45) / 2.
    passes = [conv("fwd"), conv("dgrad", op="conv_bwd_data")]
    assert layer_key(passes[0]) == layer_key(passes[1])
    assert composition_factor(passes, *equal, CORRELATIONS, by_op) == pytest.approx(math.sqrt(2.9) / 2)


def test_a_dominant_kernel_keeps_its_own_band():
    kernels = [conv("big", batch=2048), conv("small", c=3, out=64, hw=32)]
    factor = composition_factor(kernels, np.array([99.0, 1.0]), np.array([0.5, 0.5]), CORRELATIONS, by_op)
    assert factor == pytest.approx(math.hypot(99, 1) / 100)


def test_a_products_passes_are_one_layer():
    forward = Kernel("fwd", "gemm", m=2048, n=1024, k=8192)
    data_gradient = Kernel("dgrad", "gemm", m=2048, n=8192, k=1024)
    weight_gradient = Kernel("wgrad", "gemm", m=1024, n=8192, k=2048, transpose_a=True)
    assert layer_key(forward) == layer_key(data_gradient) == layer_key(weight_gradient)
    assert layer_key(Kernel("fwd64", "gemm", m=64, n=1024, k=8192)) != layer_key(forward)


def test_correlations_are_measured_per_relation_and_clipped():
    # Two layers, each with two passes: errors agree within a layer and oppose across.
    kernels = [
        conv("a1"),
        conv("a2", op="conv_bwd_data"),
        conv("b1", c=256, out=512),
        conv("b2", c=256, out=512, op="conv_bwd_data"),
    ]
    found = pair_correlations(kernels, np.array([1.0, 1.0, -1.0, -1.0]), lambda k: "one class")
    assert found == {"same_layer": 1.0, "same_class": 0.0, "other": 1.0}  # no 'other' pair: taken as together


def test_layers_with_a_filter_no_calibration_kernel_had_err_as_one():
    # The study's 4x4 stride-2 convolutions: DeepBench has no such filter, so nothing says they average.
    layers = [conv("a", c=64, out=128), conv("b", op="conv_bwd_weight", c=256, out=512, hw=4)]
    equal = (np.array([1.0, 1.0]), np.array([0.5, 0.5]))
    measured_3x3 = frozenset({(3, 3, 1, 1)})
    assert composition_factor(layers, *equal, CORRELATIONS, by_op, measured_3x3) == pytest.approx(1.0)
    assert composition_factor(layers, *equal, CORRELATIONS, by_op, frozenset({(4, 4, 2, 2)})) < 1.0
