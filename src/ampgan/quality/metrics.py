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
    return frechet_distance_of_gaussians(
        features_a.mean(0),
        np.atleast_2d(np.cov(features_a, rowvar=False)),
        features_b.mean(0),
        np.atleast_2d(np.cov(features_b, rowvar=False)),
    )


def frechet_distance_of_gaussians(mu_a, cov_a, mu_b, cov_b) -> float:
    mu_a, mu_b = np.asarray(mu_a, np.float64), np.asarray(mu_b, np.float64)
    cov_a, cov_b = np.asarray(cov_a, np.float64), np.asarray(cov_b, np.float64)
    # Tr((S1 S2)^(1/2)) = sum of the square roots of the eigenvalues of S1 S2, which are real and
    # non-negative for two PSD matrices (tiny negative/imaginary parts are rounding).
    trace_sqrt = np.sqrt(np.clip(np.linalg.eigvals(cov_a @ cov_b).real, 0, None)).sum()
    return max(float(((mu_a - mu_b) ** 2).sum() + np.trace(cov_a) + np.trace(cov_b) - 2 * trace_sqrt), 0.0)


def _polynomial_kernel(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (x @ y.T / x.shape[1] + 1.0) ** 3


def kernel_inception_distance(
    features_a: np.ndarray, features_b: np.ndarray, subsets: int = 10, subset_size: int = 200, seed: int = 0
) -> tuple[float, float]:
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
        values.append(
            (k_xx.sum() - np.trace(k_xx)) / off_diagonal
            + (k_yy.sum() - np.trace(k_yy)) / off_diagonal
            - 2 * k_xy.mean()
        )
    return float(np.mean(values)), float(np.std(values))


def accuracy(predicted: np.ndarray, intended: np.ndarray) -> float:
    return float((np.asarray(predicted) == np.asarray(intended)).mean())


# ---------------------------------------------------------------- manifolds: does it look real, is all of real covered


def _pairwise_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclidean distances (len(a), len(b)) in float64."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.sqrt(np.clip((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T, 0.0, None))


def knn_radii(features: np.ndarray, k: int) -> np.ndarray:
    """Each point's distance to its k-th nearest other point of the same set."""
    if len(features) <= k:
        raise ValueError(f"k-nearest-neighbour radii need more than k={k} points, got {len(features)}")
    return np.sort(_pairwise_distances(features, features), axis=1)[:, k]  # column 0 is the point itself (distance 0)


def precision_recall(real: np.ndarray, fake: np.ndarray, k: int = 3) -> dict:
    """Improved precision and recall (Kynkäänniemi et al. 2019): a set's manifold is the union of
    balls around its points, each as wide as the distance to its k-th nearest neighbour.
    precision: share of fakes inside the real manifold (do samples look real?);
    recall: share of reals inside the fake manifold (is all of the data reproduced?)."""
    real_radii, fake_radii = knn_radii(real, k), knn_radii(fake, k)
    real_to_fake = _pairwise_distances(real, fake)  # (N real, M fake)
    return {
        "precision": float((real_to_fake <= real_radii[:, None]).any(axis=0).mean()),
        "recall": float((real_to_fake <= fake_radii[None, :]).any(axis=1).mean()),
    }


def density_coverage(real: np.ndarray, fake: np.ndarray, k: int = 5) -> dict:
    """Density and coverage (Naeem et al. 2020), both built on the real manifold only, so an outlier
    among the fakes cannot inflate them. density: how many real balls hold each fake, over k (1 when
    fakes are spread like reals; above 1 when they crowd dense regions); coverage: share of real
    balls holding at least one fake (low when modes are missing, the mark of collapse)."""
    inside = _pairwise_distances(real, fake) <= knn_radii(real, k)[:, None]  # (N real, M fake)
    return {"density": float(inside.sum() / (k * fake.shape[0])), "coverage": float(inside.any(axis=1).mean())}


def mean_pairwise_distance(features: np.ndarray) -> float:
    """Mean Euclidean distance over all pairs of distinct points (0 for identical points)."""
    if len(features) < 2:
        raise ValueError("pairwise distances need at least two points")
    count = len(features)
    return float(_pairwise_distances(features, features).sum() / (count * (count - 1)))


def diversity_ratio(fake: np.ndarray, real: np.ndarray) -> float | None:
    """Mean pairwise feature distance of the samples over that of the real images (1.0 = as varied as the
    data, near 0 = one image repeated); None with fewer than two of either, or real images all alike."""
    if len(fake) < 2 or len(real) < 2:
        return None
    reference = mean_pairwise_distance(real)
    return mean_pairwise_distance(fake) / reference if reference > 0 else None


def intra_class_diversity(
    fake: np.ndarray, fake_labels: np.ndarray, real: np.ndarray, real_labels: np.ndarray, num_classes: int
) -> list[float | None]:
    """Per class: the diversity_ratio of its samples against its real images."""
    return [diversity_ratio(fake[fake_labels == label], real[real_labels == label]) for label in range(num_classes)]


def confusion_matrix(intended: np.ndarray, predicted: np.ndarray, num_classes: int) -> np.ndarray:
    """counts[i, j]: samples drawn for class i that the evaluator reads as class j."""
    counts = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(counts, (np.asarray(intended), np.asarray(predicted)), 1)
    return counts


# Thresholds for the report's flags (documented in the README).
COLLAPSE_BELOW = 0.25  # a class whose samples vary less than a quarter as much as its real images
PERMUTED_ABOVE = 0.5  # a class drawn as one other class in more than half of its samples


def quality_flags(diversity: list[float | None], confusion: np.ndarray, class_names: list[str]) -> list[str]:
    """Plain-language warnings: collapsed classes and classes drawn as another class."""
    flags = [
        f"class {class_names[label]}: diversity {ratio:.0%} of real "
        "(collapsed: to the evaluator its samples are nearly one image)"
        for label, ratio in enumerate(diversity)
        if ratio is not None and ratio < COLLAPSE_BELOW
    ]
    read_as_another = confusion - np.diag(np.diag(confusion))  # each class's samples the evaluator reads otherwise
    for label, others in enumerate(read_as_another):
        total = confusion[label].sum()
        drawn_as = int(others.argmax())
        if total and others[drawn_as] / total > PERMUTED_ABOVE:
            flags.append(
                f"class {class_names[label]}: drawn as {class_names[drawn_as]} in "
                f"{others[drawn_as] / total:.0%} of its samples"
            )
    return flags


DROPPED_BELOW = 0.25  # a class an unconditional GAN draws at less than a quarter of its share of the data


def class_shares(predicted: np.ndarray, num_classes: int) -> np.ndarray:
    """The share of samples the evaluator reads as each class."""
    return np.bincount(np.asarray(predicted), minlength=num_classes)[:num_classes] / max(1, len(predicted))


def unconditional_flags(
    diversity: float | None,
    shares: np.ndarray,
    real_shares: np.ndarray,
    class_names: list[str],
    translated: bool = False,
) -> list[str]:
    """Plain-language warnings for a GAN that draws no intended class: collapse, and modes it drops
    (classes the evaluator finds far less often in its samples than in the data). An image-to-image G's samples
    are translations of held-out images (`translated`): a class found far less often is one its translations
    lose (they no longer look like it), not one it never draws."""
    samples = "the translations" if translated else "the samples"
    flags = []
    if diversity is not None and diversity < COLLAPSE_BELOW:
        flags.append(f"diversity {diversity:.0%} of real (collapsed: to the evaluator {samples} are nearly one image)")
    dropped = [
        f"{class_names[label]} ({share:.0%} of {samples}, {real_share:.0%} of real)"
        for label, (share, real_share) in enumerate(zip(shares, real_shares))
        if real_share > 0 and share < DROPPED_BELOW * real_share
    ]
    if dropped:
        shown = ", ".join(dropped[:4]) + (f" and {len(dropped) - 4} more" if len(dropped) > 4 else "")
        lost = "lost in translation (read in the translations" if translated else "dropped (drawn"
        flags.append(
            f"{len(dropped)} of {len(class_names)} classes {lost} under a quarter as often as in the data): {shown}"
        )
    return flags
