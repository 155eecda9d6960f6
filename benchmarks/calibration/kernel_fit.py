"""Fitting the kernel model to measured kernels, and saying how wrong it is on kernels it did not see.

Run by fit.py beside it (the fitted parameters and bands ship as src/ampgan/projection/calibration/*.json;
ampgan itself only reads them), and by tests/test_calibration.py, which recomputes the shipped numbers.

Reads a calibration table (benchmarks/calibration/*.csv: kernel shape, precision, measured ms; the
format docs/projection.md gives), fits each architecture's parameters by Levenberg-Marquardt on log
time (numpy only; a weak pull towards neutral values keeps a term that few kernels exercise near
zero), and cross-validates by kernel: the kernels are dealt into folds, each fold predicted by a fit
on the others, so every residual is out of sample. Those residuals give the band (per kernel class
and precision) and the error the documentation states; tests/test_calibration.py recomputes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ampgan.errors import AmpganError
from ampgan.precisions import FP16, FP32, NAMES
from ampgan.precisions import precision as precision_mode
from ampgan.projection.kernel_model import (
    PATH_PARAMETERS,
    PATHS,
    Features,
    class_candidates,
    features,
    kernel_class,
    on_tensor_cores,
    padded,
    path_of,
    peak_tflops,
    predict_seconds,
)
from ampgan.projection.kernels import GEMM, Kernel, kernel_from_row, read_kernel_rows
from ampgan.system.gpus import GpuSpec

# Of the cross-validated log residuals, per class and precision, conformally corrected: 11% of a class's
# kernels may fall below its band and 11% above. The one level chosen knowing the cross-validation: the
# smallest band that still holds 80% of the measured speedups of kernels neither fit nor band saw.
BAND_QUANTILES = (0.11, 0.89)
FOLDS = 5
# Where the fit starts and what it is pulled towards (weakly): 60% of peak, small tiles a little worse,
# a reduction of 64 half as fast, no other effect; 5 us per launch, 75% of the bandwidth.
START_PATH = np.array([math.log(0.6)] * 4 + [0.2, math.log(64.0)] + [0.0] * 8)
START_SHARED = np.array([math.log(5e-6), math.log(0.75)])
START = np.concatenate([START_PATH] * len(PATHS) + [START_SHARED])  # every path's, then the shared parameters
PRIOR_WEIGHT = 0.05
STEP = 1e-5  # of the finite differences that make the fit's Jacobian


@dataclass(frozen=True)
class Measured:
    kernel: Kernel
    precision: str
    ms: float


def read_calibration(path: Path) -> list[Measured]:
    """Every measured kernel of a calibration table, checked row by row."""
    out = []
    for number, row in read_kernel_rows(path, measured=True):
        where = f"{path} line {number}"
        kernel = kernel_from_row(row, where)
        precision = str(row.get("precision") or "").strip()
        if precision not in NAMES:
            raise AmpganError(f"{where} ({kernel.name}): precision is {precision!r}: choose from {', '.join(NAMES)}")
        try:
            ms = float(row.get("ms") or "")
        except ValueError:
            ms = float("nan")
        if not math.isfinite(ms) or ms <= 0:
            raise AmpganError(f"{where} ({kernel.name}): ms is {row.get('ms')!r}: give the kernel's measured time, > 0")
        out.append(Measured(kernel, precision, ms))
    return out


@dataclass(frozen=True)
class PathData:
    """One precision's measured kernels of one GPU, ready for the model."""

    precision: str
    gpu: GpuSpec
    names: list[str]
    kernels: list[Kernel]
    features: Features
    log_ms: np.ndarray
    peak: float
    element_bytes: int

    def subset(self, keep: np.ndarray) -> PathData:
        picked = [i for i in range(len(self.names)) if keep[i]]
        return path_data([self.kernels[i] for i in picked], self.log_ms[picked], self.precision, self.gpu)


def path_data(kernels: list[Kernel], log_ms: np.ndarray, precision: str, gpu: GpuSpec) -> PathData:
    """On tensor cores every kernel is the one DeepBench timed: its GEMMs padded too (gemm_bench.cu, commit
    30c5115, padded a 16-bit GEMM's leading dimensions to 8 before timing it, as `padded` does), so a GEMM
    cuBLAS would run misaligned was never measured; ampgan's own steps leave GEMMs unpadded, as cuBLAS does."""
    tensor = on_tensor_cores(gpu, precision)
    timed = kernels  # a kernel keeps its class (its band is of kernels of its shape); its features are as timed
    if tensor:  # (a convolution `features` pads itself, knowing a 1-4 channel one's own term)
        timed = [padded(k, precision_mode(precision).alignment) if k.op == GEMM else k for k in kernels]
    return PathData(
        precision,
        gpu,
        [k.name for k in kernels],
        kernels,
        features(timed, gpu.sms, precision, pads_channels=tensor),
        np.asarray(log_ms, dtype=float),
        peak_tflops(gpu, precision),
        precision_mode(precision).element_bytes,
    )


def _unpack(theta: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    size = len(PATH_PARAMETERS)
    return {p: theta[i * size : (i + 1) * size] for i, p in enumerate(PATHS)}, theta[len(PATHS) * size :]


def predict_ms(data: PathData, paths: dict[str, np.ndarray], shared: np.ndarray, gpu: GpuSpec) -> np.ndarray:
    seconds, _, _ = predict_seconds(
        data.features, paths[path_of(data.precision)], shared, data.peak, gpu.bandwidth_gbs, data.element_bytes
    )
    return seconds * 1e3


def _residuals(theta: np.ndarray, data: list[PathData], gpu: GpuSpec) -> np.ndarray:
    paths, shared = _unpack(theta)
    parts = [np.log(predict_ms(d, paths, shared, gpu)) - d.log_ms for d in data]
    parts.append(math.sqrt(PRIOR_WEIGHT) * (theta - START))
    return np.concatenate(parts)


def fit(data: list[PathData], gpu: GpuSpec, iterations: int = 60) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Levenberg-Marquardt on log time over every precision's kernels of one GPU at once."""
    theta = START.copy()  # _unpack returns views of it
    damping, current = 1e-2, _residuals(theta, data, gpu)
    cost = float(current @ current)
    for _ in range(iterations):
        # Forward differences, one parameter at a time (a unit vector of the identity each).
        columns = [(_residuals(theta + STEP * unit, data, gpu) - current) / STEP for unit in np.eye(theta.size)]
        jacobian = np.stack(columns, axis=1)
        normal = jacobian.T @ jacobian
        gradient = jacobian.T @ current
        while True:
            delta = np.linalg.solve(normal + damping * np.diag(np.diag(normal) + 1e-9), -gradient)
            candidate = theta + delta
            trial = _residuals(candidate, data, gpu)
            trial_cost = float(trial @ trial)
            if trial_cost < cost:
                theta, current, improvement = candidate, trial, cost - trial_cost
                cost, damping = trial_cost, max(damping / 3, 1e-7)
                break
            damping *= 4
            if damping > 1e6:
                return _unpack(theta)
        if improvement < 1e-8 * cost:
            break
    return _unpack(theta)


def paired(measured: list[Measured], gpu: GpuSpec) -> dict[str, PathData]:
    """The table's kernels per precision (only kernels measured in fp32 and one 16-bit precision count)."""
    by_precision: dict[str, dict[str, Measured]] = {}
    for m in measured:
        by_precision.setdefault(m.precision, {})[m.kernel.name] = m
    fp32 = by_precision.get(FP32, {})
    out = {}
    for precision, rows in by_precision.items():
        names = [n for n in rows if precision == FP32 or n in fp32]
        if names:
            out[precision] = path_data(
                [rows[n].kernel for n in names], np.log([rows[n].ms for n in names]), precision, gpu
            )
    return out


def _fold_of(name: str, folds: int) -> int:
    # Deterministic by name (not Python's salted hash): the same kernel lands in the same fold everywhere.
    return sum(ord(ch) * (i + 1) for i, ch in enumerate(name.split("#")[0])) % folds


def cross_validated_log_residuals(
    tables: dict[str, PathData], gpu: GpuSpec, folds: int = FOLDS
) -> dict[str, np.ndarray]:
    """log(measured / predicted) of every kernel, each predicted by a fit that did not see it (folds by
    kernel name: a kernel's fp32 and fp16 times leave together)."""
    out = {p: np.zeros(len(d.names)) for p, d in tables.items()}
    for fold in range(folds):
        train = [d.subset(np.array([_fold_of(n, folds) != fold for n in d.names])) for d in tables.values()]
        paths, shared = fit([d for d in train if d.names], gpu)
        for precision, data in tables.items():
            held = np.array([_fold_of(n, folds) == fold for n in data.names])
            if held.any():
                test = data.subset(held)
                out[precision][held] = test.log_ms - np.log(predict_ms(test, paths, shared, gpu))
    return out


MIN_CLASS = 8  # kernels a class needs to have its own band; a smaller one takes its broader class's


def conformal_quantiles(values: list[float], tail: float) -> tuple[float, float]:
    """The (tail, 1 - tail) quantiles corrected for a class of n kernels as split-conformal prediction
    does (the ceil((n + 1)(1 - tail)) / n order statistic): a small class gets a wider band, so that the
    band holds its share of kernels it has not seen, not only of those it was drawn from."""
    n = len(values)
    level = max(0.0, (tail * (n + 1) - 1) / n)
    low, high = np.quantile(values, [level, 1 - level])
    return float(low), float(high)


def residual_quantiles(
    tables: dict[str, PathData],
    residuals: dict[str, np.ndarray],
    quantiles: tuple[float, float] = BAND_QUANTILES,
    half: str = FP16,
) -> dict[str, dict]:
    """{class: {"fp32" | "fp16" | "speedup": {"low", "high", "kernels"}}}: the band's log factors per kernel
    class: of each precision's time, and of the fp32 -> 16-bit speedup (measured over predicted). The
    speedup has its own because a kernel's two errors move together (the same shape costs both): its
    quantiles are what the speedup's band must cover, and they are checked on kernels they did not see."""
    # (kernel, "fp32" | "fp16" | "speedup", log factor): each precision's residuals, then each kernel's speedup's.
    found = [
        (kernel, path_of(precision), float(value))
        for precision, data in tables.items()
        for kernel, value in zip(data.kernels, residuals[precision])
    ]
    if FP32 in tables and half in tables:
        index = {n: i for i, n in enumerate(tables[half].names)}
        found += [
            (kernel, "speedup", float(residuals[FP32][i] - residuals[half][index[name]]))
            for i, (name, kernel) in enumerate(zip(tables[FP32].names, tables[FP32].kernels))
            if name in index
        ]
    pooled: dict[str, dict[str, list[float]]] = {}
    for kernel, key, value in found:
        # The class is the 16-bit one for both precisions, so a kernel's bands come from the same kernels.
        for name in class_candidates(kernel_class(kernel, FP16)):
            pooled.setdefault(name, {}).setdefault(key, []).append(value)
    return {
        name: {path: _band(values, quantiles[0]) for path, values in by_path.items()}
        for name, by_path in pooled.items()
        if min(len(v) for v in by_path.values()) >= MIN_CLASS or ":" not in name  # a class too small is left out
    }


def _band(values: list[float], tail: float) -> dict:
    """One class's band of log factors: its conformal quantiles, never excluding 0 (the model's own value)."""
    low, high = conformal_quantiles(values, tail)
    return {"low": float(min(low, 0.0)), "high": float(max(high, 0.0)), "kernels": len(values)}


@dataclass(frozen=True)
class SpeedupCheck:
    """The cross-validated fp32 -> 16-bit speedup of each kernel against the measured one."""

    names: list[str]
    measured: np.ndarray
    predicted: np.ndarray
    low: np.ndarray
    high: np.ndarray

    def summary(self) -> dict:
        error = np.exp(np.abs(np.log(self.predicted / self.measured)))
        inside = (self.measured >= self.low) & (self.measured <= self.high)
        return {
            "kernels": len(self.names),
            "median_speedup_error": float(np.median(error)),
            "p90_speedup_error": float(np.quantile(error, 0.9)),
            "band_coverage": float(inside.mean()),
            "median_band_ratio": float(np.median(self.high / self.low)),
        }


def speedup_check(
    tables: dict[str, PathData], residuals: dict[str, np.ndarray], folds: int = FOLDS, half: str = FP16
) -> SpeedupCheck:
    """Each kernel's speedup predicted out of sample, its band from the residuals of the other folds only
    (so the band is checked on kernels that neither the fit nor the band saw)."""
    fp32, low16 = tables[FP32], tables[half]
    index16 = {n: i for i, n in enumerate(low16.names)}
    names = [n for n in fp32.names if n in index16]
    rows = [(fp32.names.index(n), index16[n]) for n in names]
    measured = np.array([math.exp(fp32.log_ms[a] - low16.log_ms[b]) for a, b in rows])
    predicted = np.array(
        [math.exp(fp32.log_ms[a] - residuals[FP32][a] - low16.log_ms[b] + residuals[half][b]) for a, b in rows]
    )
    low, high = np.empty(len(names)), np.empty(len(names))
    for fold in range(folds):
        others = {p: np.array([_fold_of(n, folds) != fold for n in d.names]) for p, d in tables.items()}
        kept = {p: d.subset(others[p]) for p, d in tables.items() if p in (FP32, half)}
        bands = residual_quantiles(kept, {p: residuals[p][others[p]] for p in kept}, half=half)
        for i, (name, (a, _)) in enumerate(zip(names, rows)):
            if _fold_of(name, folds) != fold:
                continue
            entry = next(bands[c] for c in class_candidates(kernel_class(fp32.kernels[a], half)) if c in bands)
            low[i] = predicted[i] * math.exp(entry["speedup"]["low"])
            high[i] = predicted[i] * math.exp(entry["speedup"]["high"])
    return SpeedupCheck(names, measured, predicted, low, high)
