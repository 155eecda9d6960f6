"""How the speedup errors of a step's many kernels add up, with the correlation measured between them.

A step's speedup error is the time-weighted sum of its kernels' log errors (measured over predicted).
If every kernel erred to its class's end at once the step's band would be the kernels' own; measured
out of sample on DeepBench they do not: two kernels of one layer (the same geometry at another batch or
in another pass) err together only in part, two layers of one class hardly at all
(benchmarks/calibration/fit.py measures the correlations and stores them in calibration/<arch>.json).
So the step's spread is sqrt(sum_jk a_j a_k s_j s_k rho_jk) (a: a kernel's share of the matrix time, s:
its band's half-width in log, rho: 1 for the same kernel run again, as D on real and on fake images,
and between convolutions of a filter no calibration kernel had; the measured same-layer, same-class or
other value otherwise), and each kernel's band end is scaled by
that over sum_j a_j s_j: 1 when every kernel errs together, less the more the time spreads over
unrelated kernels. An architecture's shift as a whole (a GPU without its own calibration) is not in
these correlations: it is added to the composed band undivided.

The correlations and the pseudo-step check (the composition held against sums of DeepBench kernels no fit
saw: whole layers drawn at random into a pseudo-step) are measured by benchmarks/calibration/step_band_fit.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ampgan.precisions import FP16
from ampgan.projection.kernel_model import kernel_class
from ampgan.projection.kernels import GEMM, Kernel

# The relations relation() names whose correlation was measured (benchmarks/calibration/step_band_fit.py).
CORRELATION_KINDS = ("same_layer", "same_class", "other")


def band_class(kernel: Kernel) -> str:
    """The class a kernel's speedup band comes from (the 16-bit one, as kernel_fit bands both precisions)."""
    return kernel_class(kernel, FP16)


def layer_key(kernel: Kernel) -> tuple:
    """A kernel's layer: a convolution's geometry without its batch or pass; a product's three dimensions
    in any order (its forward and both gradients are permutations of batch, inputs and outputs; which
    one is the batch a GEMM does not say, so another batch counts as another layer)."""
    if kernel.op == GEMM:
        return (GEMM, *sorted((kernel.m, kernel.n, kernel.k)))
    return ("conv", kernel.c, kernel.out_channels, kernel.h, kernel.w, kernel.r, kernel.s, kernel.stride_h)


def shape_key(kernel: Kernel) -> tuple:
    """The kernel itself: the same shape run again errs exactly as it did the first time."""
    return tuple(value for field, value in vars(kernel).items() if field != "name")


def family_key(kernel: Kernel, class_of: Callable[[Kernel], str]) -> tuple:
    """A kernel's class and filter (height, width, stride): a network's layers share their filters (all of
    a DCGAN's are 4x4 with stride 2), and a library's choice of algorithm follows the filter, so two
    layers of one family may err together where two of one class need not."""
    return (class_of(kernel), kernel.r, kernel.s, kernel.stride_h, kernel.stride_w)


def filter_of(kernel: Kernel) -> tuple[int, int, int, int] | None:
    return None if kernel.op == GEMM else (kernel.r, kernel.s, kernel.stride_h, kernel.stride_w)


def relation(a: Kernel, b: Kernel, class_of: Callable[[Kernel], str], measured: frozenset | None = None) -> str:
    """How two kernels' errors are related: the same layer, the same family (class and filter), or
    neither; two convolutions with a filter no calibration kernel had err together ("unmeasured"):
    nothing measured says that their errors average, and they share what the model never saw."""
    if layer_key(a) == layer_key(b):
        return "same_layer"
    if (
        measured is not None
        and filter_of(a) is not None
        and filter_of(a) == filter_of(b)
        and filter_of(a) not in measured
    ):
        return "unmeasured"
    return "same_class" if family_key(a, class_of) == family_key(b, class_of) else "other"


def composition_factor(
    kernels: Sequence[Kernel],
    seconds: np.ndarray,
    spreads: np.ndarray,
    correlations: dict[str, float],
    class_of: Callable[[Kernel], str],
    measured: frozenset | None = None,
) -> float:
    """sqrt(sum_jk a_j a_k s_j s_k rho_jk) / sum_j a_j s_j over the distinct kernels (a repeated shape's
    seconds summed): what each kernel's band end is scaled by in the step's band. `measured`: the
    filters the calibration measured (None: every filter, as for the calibration's own kernels)."""
    merged: dict[tuple, list] = {}
    for kernel, second, spread in zip(kernels, seconds, spreads):
        entry = merged.setdefault(shape_key(kernel), [kernel, 0.0, 0.0])
        entry[1] += float(second)
        entry[2] = max(entry[2], float(spread))
    distinct = list(merged.values())
    weighted = np.array([second * spread for _, second, spread in distinct])
    whole = float(weighted.sum())
    if whole <= 0:
        return 1.0
    variance = float(weighted @ weighted)
    for i in range(len(distinct)):
        for j in range(i + 1, len(distinct)):
            kind = relation(distinct[i][0], distinct[j][0], class_of, measured)
            rho = 1.0 if kind == "unmeasured" else correlations[kind]
            variance += 2 * rho * weighted[i] * weighted[j]
    return math.sqrt(variance) / whole
