"""The step composition's measured quantities (projection/step_band.py): how the speedup errors of kernels no fit
saw correlate, per relation (the same layer, the same class and filter, neither), and the composed band held
against pseudo-steps of whole DeepBench layers. Run by fit.py; what it finds ships in
src/ampgan/projection/calibration/<arch>.json, which is all ampgan reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ampgan.precisions import FP16, FP32
from ampgan.projection.kernels import GEMM, Kernel
from ampgan.projection.step_band import (
    CORRELATION_KINDS,
    band_class,
    composition_factor,
    filter_of,
    layer_key,
    relation,
)

# The share of pseudo-steps the step's band multiple is set to hold, per architecture: the smallest of
# these at which the multiple from one half of the layers holds 80% of the other half's pseudo-steps
# (out of sample, as the kernel band's level was chosen; benchmarks/calibration/fit.py prints each).
STEP_SHARES = (0.80, 0.85, 0.90, 0.95)
STEP_COVERAGE = 0.80


def measured_filters(kernels: Sequence[Kernel]) -> list[list[int]]:
    """The convolution filters (height, width, strides) a calibration table measured."""
    return [list(f) for f in sorted({filter_of(k) for k in kernels if k.op != GEMM})]


def pair_correlations(
    kernels: Sequence[Kernel], errors: np.ndarray, class_of: Callable[[Kernel], str]
) -> dict[str, float]:
    """The correlation of two kernels' errors, per relation: the mean product of their centred errors
    over every pair so related, over the errors' variance (clipped to [0, 1]: a negative one would
    narrow the band on a handful of pairs)."""
    errors = np.asarray(errors, dtype=float)
    centred = errors - errors.mean()
    variance = float(centred @ centred) / len(centred)
    sums = dict.fromkeys(CORRELATION_KINDS, 0.0)
    counts = dict.fromkeys(CORRELATION_KINDS, 0)
    for i in range(len(kernels)):
        for j in range(i + 1, len(kernels)):
            kind = relation(kernels[i], kernels[j], class_of)
            sums[kind] += centred[i] * centred[j]
            counts[kind] += 1
    return {
        kind: float(min(1.0, max(0.0, sums[kind] / counts[kind] / variance))) if counts[kind] else 1.0
        for kind in CORRELATION_KINDS
    }


def _band(slow32: np.ndarray, fast16: np.ndarray, low: np.ndarray, high: np.ndarray, scale: float) -> tuple:
    return slow32.sum() / (fast16 * np.exp(-scale * low)).sum(), slow32.sum() / (fast16 * np.exp(-scale * high)).sum()


def needed_scale(truth: float, slow32, fast16, low, high, factor: float) -> float:
    """The least multiple of the composed band (its log ends) that holds a measured speedup (bisection:
    the band widens monotonically with the multiple)."""
    lo, hi = 0.0, 64.0
    band_low, band_high = _band(slow32, fast16, low, high, hi * factor)
    if not band_low <= truth <= band_high:
        return hi
    for _ in range(40):
        middle = (lo + hi) / 2
        band_low, band_high = _band(slow32, fast16, low, high, middle * factor)
        lo, hi = (lo, middle) if band_low <= truth <= band_high else (middle, hi)
    return hi


def conformal_level(values: Sequence[float], share: float) -> float:
    """The ceil((n + 1) share)-th smallest value: a multiple that holds `share` of steps not yet seen."""
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, math.ceil((len(ordered) + 1) * share) - 1)])


def step_multiple(needed: Sequence[float], share: float) -> float:
    """The multiple of the composed band that holds `share` of pseudo-steps, never below 1: kernels that
    err as one (a repeated shape, an unmeasured filter) keep the band the kernel check validated."""
    return max(1.0, conformal_level(needed, share))


def pseudo_step_check(
    kernels: Sequence[Kernel],
    measured: tuple[np.ndarray, np.ndarray],
    predicted: tuple[np.ndarray, np.ndarray],
    log_band: tuple[np.ndarray, np.ndarray],
    correlations_of_half: Callable[[int], dict[str, float]],
    class_of: Callable[[Kernel], str],
    share: float,
    steps: int = 400,
    layers_per_step: tuple[int, int] = (3, 9),
    seed: int = 0,
) -> dict:
    """Pseudo-steps of whole layers (each layer's every batch and pass), drawn from one half of the layers,
    composed with the correlations measured on the other (`correlations_of_half(h)`: without half h). Each
    says what multiple of its composed band holds its measured fp32 -> 16-bit speedup; `step_scale`, the
    multiple that holds `share` of them, widens every projected step's band (1 when the composition alone
    holds them). Out of sample: the multiple from one half's pseudo-steps is held against the other half's,
    and the band's width is reported beside that of every kernel at its band's end at once.

    measured and predicted: (fp32 ms, 16-bit ms) per kernel, predicted out of sample; log_band: each
    kernel's (low, high) log factor on its predicted speedup, from other folds' residuals."""
    layers: dict[tuple, list[int]] = {}
    for index, kernel in enumerate(kernels):
        layers.setdefault(layer_key(kernel), []).append(index)
    keys = sorted(layers, key=repr)
    halves = [[k for n, k in enumerate(keys) if n % 2 == h] for h in (0, 1)]
    rng = np.random.default_rng(seed)
    drawn = []  # (half, needed multiple, composed band's arguments)
    for step in range(steps):
        half = step % 2
        count = int(rng.integers(layers_per_step[0], layers_per_step[1] + 1))
        picked = rng.choice(len(halves[half]), size=min(count, len(halves[half])), replace=False)
        members = [i for p in picked for i in layers[halves[half][p]]]
        slow32, fast16 = predicted[0][members], predicted[1][members]
        low, high = log_band[0][members], log_band[1][members]
        truth = measured[0][members].sum() / measured[1][members].sum()
        factor = composition_factor(
            [kernels[i] for i in members], fast16, (high - low) / 2, correlations_of_half(half), class_of
        )
        arguments = (slow32, fast16, low, high)
        drawn.append((half, needed_scale(truth, *arguments, factor), factor, truth, arguments))
    held, ratios, held_together, ratios_together = [], [], [], []
    for half in (0, 1):
        scale = step_multiple([n for h, n, *_ in drawn if h != half], share)
        for _, _, factor, truth, arguments in (d for d in drawn if d[0] == half):
            for multiple, hits, widths in ((scale * factor, held, ratios), (1.0, held_together, ratios_together)):
                band_low, band_high = _band(*arguments, multiple)
                hits.append(band_low <= truth <= band_high)
                widths.append(band_high / band_low)
    return {
        "pseudo_steps": steps,
        "layers_per_step": list(layers_per_step),
        "share": share,
        "step_scale": step_multiple([n for _, n, *_ in drawn], share),
        "composed": {"band_holds": float(np.mean(held)), "median_band_ratio": float(np.median(ratios))},
        "every_kernel_at_its_end": {
            "band_holds": float(np.mean(held_together)),
            "median_band_ratio": float(np.median(ratios_together)),
        },
    }


def chosen_pseudo_step_check(*arguments, **options) -> dict:
    """pseudo_step_check at the smallest of STEP_SHARES whose multiple holds STEP_COVERAGE of the other
    half's pseudo-steps (the largest when none does, and its coverage says so)."""
    for share in STEP_SHARES:
        result = pseudo_step_check(*arguments, share=share, **options)
        if result["composed"]["band_holds"] >= STEP_COVERAGE:
            return result
    return result


def speedup_errors(tables: dict, residuals: dict) -> tuple[list, np.ndarray, np.ndarray, np.ndarray]:
    """The kernels measured in both precisions: each, its out-of-sample speedup error (log measured over
    predicted), and its (fp32, fp16) measured and predicted ms."""
    fp32, fp16 = tables[FP32], tables[FP16]
    index = {n: i for i, n in enumerate(fp16.names)}
    pairs = [(i, index[n]) for i, n in enumerate(fp32.names) if n in index]
    kernels = [fp32.kernels[i] for i, _ in pairs]
    errors = np.array([residuals[FP32][i] - residuals[FP16][j] for i, j in pairs])
    measured = np.array([[np.exp(fp32.log_ms[i]), np.exp(fp16.log_ms[j])] for i, j in pairs])
    predicted = np.array(
        [[np.exp(fp32.log_ms[i] - residuals[FP32][i]), np.exp(fp16.log_ms[j] - residuals[FP16][j])] for i, j in pairs]
    )
    return kernels, errors, measured, predicted


def step_composition(tables: dict, residuals: dict, check) -> dict:
    """The correlations between kernels' speedup errors (all kernels), and the composed band held
    against pseudo-steps of whole layers, with correlations measured on the other half of the layers."""
    kernels, errors, measured, predicted = speedup_errors(tables, residuals)
    keys = sorted({layer_key(k) for k in kernels}, key=repr)
    half_of = {key: n % 2 for n, key in enumerate(keys)}

    def correlations_without(half: int) -> dict:
        keep = [i for i, k in enumerate(kernels) if half_of[layer_key(k)] != half]
        return pair_correlations([kernels[i] for i in keep], errors[keep], band_class)

    halves = {h: correlations_without(h) for h in (0, 1)}
    band = (np.log(check.low / check.predicted), np.log(check.high / check.predicted))
    return {
        "correlation": pair_correlations(kernels, errors, band_class),
        "filters": measured_filters(kernels),
        "pseudo_steps": chosen_pseudo_step_check(
            kernels, (measured[:, 0], measured[:, 1]), (predicted[:, 0], predicted[:, 1]), band, halves.get, band_class
        ),
    }
