"""Quality metrics on feature vectors: pure functions, checked against hand-computed values.

- Fréchet distance between Gaussians fitted to two feature sets (FID's formula, here on the
  evaluator's features): |mu1 - mu2|^2 + Tr(S1 + S2 - 2 (S1 S2)^(1/2)).
- KID: the unbiased squared MMD with the cubic polynomial kernel k(x, y) = (x.y / d + 1)^3
  (Binkowski et al. 2018), averaged over subsets; near 0 for samples of one distribution even
  at small N, where FID is biased upward.
"""

from __future__ import annotations

import numpy as np


def frechet_distance(features_a: np.ndarray, features_b: np.ndarray) -> float:
    mu_a, mu_b = features_a.mean(0), features_b.mean(0)
    cov_a = np.atleast_2d(np.cov(features_a, rowvar=False))
    cov_b = np.atleast_2d(np.cov(features_b, rowvar=False))
    return frechet_distance_of_gaussians(mu_a, cov_a, mu_b, cov_b)


def frechet_distance_of_gaussians(mu_a, cov_a, mu_b, cov_b) -> float:
    mu_a, mu_b = np.asarray(mu_a, np.float64), np.asarray(mu_b, np.float64)
    cov_a, cov_b = np.asarray(cov_a, np.float64), np.asarray(cov_b, np.float64)
    # Tr((S1 S2)^(1/2)) = sum of the square roots of the eigenvalues of S1 S2, which are real and
    # non-negative for two PSD matrices (tiny negative/imaginary parts are rounding).
    eigenvalues = np.linalg.eigvals(cov_a @ cov_b)
    trace_sqrt = np.sqrt(np.clip(eigenvalues.real, 0, None)).sum()
    value = float(((mu_a - mu_b) ** 2).sum() + np.trace(cov_a) + np.trace(cov_b) - 2 * trace_sqrt)
    return max(value, 0.0)


def _polynomial_kernel(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (x @ y.T / x.shape[1] + 1.0) ** 3


def kernel_inception_distance(features_a: np.ndarray, features_b: np.ndarray, subsets: int = 10,
                              subset_size: int = 200, seed: int = 0) -> tuple[float, float]:
    """(mean, std) of the unbiased MMD^2 over random subsets of both sets."""
    rng = np.random.default_rng(seed)
    size = min(subset_size, len(features_a), len(features_b))
    if size < 2:
        raise ValueError("KID needs at least 2 samples per set")
    values = []
    for _ in range(subsets):
        x = features_a[rng.choice(len(features_a), size, replace=False)].astype(np.float64)
        y = features_b[rng.choice(len(features_b), size, replace=False)].astype(np.float64)
        k_xx, k_yy, k_xy = _polynomial_kernel(x, x), _polynomial_kernel(y, y), _polynomial_kernel(x, y)
        off_diagonal = size * (size - 1)
        mmd = ((k_xx.sum() - np.trace(k_xx)) / off_diagonal + (k_yy.sum() - np.trace(k_yy)) / off_diagonal
               - 2 * k_xy.mean())
        values.append(mmd)
    return float(np.mean(values)), float(np.std(values))


def accuracy(predicted: np.ndarray, intended: np.ndarray) -> float:
    return float((np.asarray(predicted) == np.asarray(intended)).mean())
