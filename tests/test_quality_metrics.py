"""Quality metrics beyond accuracy: precision/recall, density/coverage, diversity, confusion, flags.

Each is checked on a toy case computed by hand, and the manifold metrics against the reference
implementation of Naeem et al. (the `prdc` package)."""

import numpy as np
import pytest

from ampgan.quality.metrics import (
    confusion_matrix,
    density_coverage,
    diversity_ratio,
    intra_class_diversity,
    knn_radii,
    mean_pairwise_distance,
    precision_recall,
    quality_flags,
)

LINE = np.array([[0.0], [1.0], [2.0], [3.0]])  # real points on a line: every 1-NN radius is 1


def test_knn_radii_skip_the_point_itself():
    assert list(knn_radii(LINE, 1)) == [1.0, 1.0, 1.0, 1.0]
    assert list(knn_radii(LINE, 2)) == [2.0, 1.0, 1.0, 2.0]
    with pytest.raises(ValueError):
        knn_radii(LINE, 4)


def test_precision_recall_by_hand():
    fake = np.array([[0.5], [10.0]])
    # precision: 0.5 lies in real 0's ball (radius 1), 10 in none -> 1/2. recall: the two fakes are
    # 9.5 apart, so each fake ball has radius 9.5 and covers every real point -> 1.
    assert precision_recall(LINE, fake, k=1) == {"precision": 0.5, "recall": 1.0}
    close = np.array([[0.1], [0.2], [0.3]])  # all fakes huddled at one end: precise, little recall
    result = precision_recall(LINE, close, k=1)
    assert result["precision"] == 1.0 and result["recall"] == 0.25  # only real 0 is within 0.1 of a fake


def test_density_coverage_by_hand():
    fake = np.array([[0.5], [10.0]])
    # Real balls (radius 1) holding 0.5: those of 0 and 1 -> density 2 / (k=1 x 2 fakes) = 1.0;
    # real balls holding any fake: 2 of 4 -> coverage 0.5.
    assert density_coverage(LINE, fake, k=1) == {"density": 1.0, "coverage": 0.5}


def test_manifold_metrics_agree_with_the_reference_implementation():
    prdc = pytest.importorskip("prdc")
    rng = np.random.default_rng(0)
    real = rng.normal(size=(200, 16))
    fake = rng.normal(loc=0.3, scale=0.8, size=(180, 16))
    for k in (3, 5):
        expected = prdc.compute_prdc(real_features=real, fake_features=fake, nearest_k=k)
        mine = precision_recall(real, fake, k) | density_coverage(real, fake, k)
        for name in ("precision", "recall", "density", "coverage"):
            assert mine[name] == pytest.approx(expected[name], abs=1e-12), (k, name)


def test_diversity_is_relative_to_the_real_images_of_each_class():
    real = np.array([[0.0, 0.0], [2.0, 0.0], [10.0, 0.0], [10.0, 4.0]])
    real_labels = np.array([0, 0, 1, 1])  # class 0 pairs 2 apart, class 1 pairs 4 apart
    fake = np.array([[5.0, 5.0], [5.0, 5.0], [0.0, 0.0], [0.0, 2.0], [7.0, 7.0]])
    fake_labels = np.array([0, 0, 1, 1, 2])
    ratios = intra_class_diversity(fake, fake_labels, real, real_labels, num_classes=3)
    assert ratios == [0.0, 0.5, None]  # class 0 one image repeated; class 1 half as varied; class 2 no reals
    assert mean_pairwise_distance(np.array([[0.0], [3.0], [4.0]])) == pytest.approx((3 + 4 + 1) / 3)


def test_the_diversity_ratio_of_an_unconditional_gan_is_none_where_it_cannot_be_had():
    """One rule for a class's samples and an unconditional GAN's whole set (evaluator.unconditional_metrics)."""
    real = np.array([[0.0], [2.0]])
    assert diversity_ratio(np.array([[0.0], [1.0]]), real) == 0.5
    assert diversity_ratio(np.array([[0.0]]), real) is None  # one sample: no pair
    assert diversity_ratio(np.array([[0.0], [1.0]]), real[:1]) is None  # one real image
    assert diversity_ratio(np.array([[0.0], [1.0]]), np.array([[3.0], [3.0]])) is None  # real images all alike


def test_confusion_and_the_flags_it_raises():
    intended = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2])
    predicted = np.array([0, 0, 0, 1, 2, 2, 2, 1, 2, 2])
    counts = confusion_matrix(intended, predicted, 3)
    assert counts.tolist() == [[3, 1, 0], [0, 1, 3], [0, 0, 2]]
    flags = quality_flags([0.9, 0.02, None], counts, ["zero", "one", "two"])
    assert flags == [
        "class one: diversity 2% of real (collapsed: to the evaluator its samples are nearly one image)",
        "class one: drawn as two in 75% of its samples",
    ]
