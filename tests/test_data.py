import pytest
import torch

from ampgan.data import DataConfig, load_dataset
from ampgan.data.batches import BatchStream
from ampgan.data.synthetic import make_synthetic
from ampgan.errors import AmpganError


def test_digits_is_real_embedded_data_at_32_px():
    digits = load_dataset(DataConfig(dataset="digits"))
    assert digits.images.shape == (1797, 1, 32, 32) and digits.images.dtype == torch.uint8
    assert digits.class_names == tuple("0123456789")
    assert sum(digits.counts_per_class()) == 1797 and min(digits.counts_per_class()) >= 170
    assert digits.images.max() > 200 and digits.images.min() == 0  # ink and background
    assert "scikit-learn" in digits.source["origin"] and len(digits.source["sha256"]) == 64


def test_datasets_can_be_reshaped_to_what_the_model_wants():
    digits = load_dataset(DataConfig(dataset="digits", image_size=28, channels=3))
    assert digits.images.shape == (1797, 3, 28, 28)
    assert torch.equal(digits.images[:, 0], digits.images[:, 2])  # grey copied into RGB
    grey = load_dataset(DataConfig(dataset="synthetic", channels=1, image_size=64))
    assert grey.images.shape[1:] == (1, 64, 64)


def test_synthetic_is_deterministic_and_balanced():
    a, b = make_synthetic(count=100, seed=3), make_synthetic(count=100, seed=3)
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.images, make_synthetic(count=100, seed=4).images)
    assert a.counts_per_class() == [10] * 10
    several = make_synthetic(count=12, num_classes=3, channels=1, image_size=28)
    assert several.images.shape == (12, 1, 28, 28) and several.num_classes == 3


def test_unknown_dataset_suggests_a_close_name():
    with pytest.raises(AmpganError, match=r"unknown dataset 'synthetc' \(did you mean 'synthetic'\?\)"):
        load_dataset(DataConfig(dataset="synthetc"))


def test_batches_cover_every_image_once_per_epoch_and_are_scaled():
    data = make_synthetic(count=20, num_classes=4, image_size=28, channels=1)
    stream = BatchStream(data, batch_size=5, device=torch.device("cpu"), seed=0)
    seen = torch.cat([stream.next_indices() for _ in range(4)])
    assert sorted(seen.tolist()) == list(range(20))
    images, labels = stream.next_batch()
    assert images.dtype == torch.float32 and images.min() >= -1 and images.max() <= 1
    assert labels.shape == (5,) and stream.epoch == 1


def test_a_batch_larger_than_the_dataset_spans_epochs():
    data = make_synthetic(count=6, num_classes=2, image_size=28, channels=1)
    stream = BatchStream(data, batch_size=15, device=torch.device("cpu"), seed=1)
    indices = stream.next_indices()
    assert indices.shape == (15,) and torch.bincount(indices, minlength=6).tolist()[:6] >= [2] * 6


def test_same_seed_same_order_whatever_else_used_the_rng():
    data = make_synthetic(count=30, num_classes=3, image_size=28, channels=1)
    first = BatchStream(data, 7, torch.device("cpu"), seed=9).next_indices()
    torch.manual_seed(123)
    torch.randn(100)
    assert torch.equal(first, BatchStream(data, 7, torch.device("cpu"), seed=9).next_indices())
