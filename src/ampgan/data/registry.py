"""Dataset names -> loaders: one `@register(name)` function per format, each reading the `data` config
section (data/request.py) it needs."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from ampgan.data.dataset import ImageDataset
from ampgan.data.request import DataConfig
from ampgan.errors import AmpganError


Loader = Callable[[DataConfig, str, int], ImageDataset]  # (data section, split, seed)
_LOADERS: dict[str, Loader] = {}


def register(name: str) -> Callable[[Loader], Loader]:
    def add(loader: Loader) -> Loader:
        _LOADERS[name] = loader
        return loader

    return add


def dataset_names() -> list[str]:
    return sorted(_LOADERS)


def load_dataset(data: DataConfig = DataConfig(), split: str = "train", seed: int = 0) -> ImageDataset:
    """The dataset `data` names, shaped as it asks (size and channels) and stamped with its source.
    `seed`: the run's (Quick, Draw!'s train/test split and the synthetic images depend on it)."""
    name = data.dataset
    if name.startswith("folder:"):
        from ampgan.data.folder import load_folder

        dataset = load_folder(name.removeprefix("folder:"), data.image_size, data.channels, data.cache)
    elif name not in _LOADERS:
        close = difflib.get_close_matches(name, _LOADERS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise AmpganError(
            f"unknown dataset {name!r}{hint}: choose one of {', '.join(dataset_names())} or folder:PATH"
        )
    else:
        dataset = _LOADERS[name](data, split, seed).with_shape(data.image_size, data.channels)
    dataset.source.setdefault("sha256", dataset.content_sha256())
    return dataset


@register("digits")
def _digits(data: DataConfig, split: str, seed: int) -> ImageDataset:
    from ampgan.data.digits import load_digits_dataset

    return load_digits_dataset(data.image_size)


@register("synthetic")
def _synthetic(data: DataConfig, split: str, seed: int) -> ImageDataset:
    from ampgan.data.synthetic import make_synthetic

    return make_synthetic(channels=data.channels or 3, image_size=data.image_size or 32, seed=seed)


@register("cifar10")
def _cifar10(data: DataConfig, split: str, seed: int) -> ImageDataset:
    from ampgan.data.cifar10 import load_cifar10

    return load_cifar10(data.data_dir, split, data.download)


@register("quickdraw")
def _quickdraw(data: DataConfig, split: str, seed: int) -> ImageDataset:
    from ampgan.data.quickdraw import load_quickdraw

    return load_quickdraw(data.data_dir, data.class_list, data.max_per_class, split, seed, data.download)


@register("mnist")
def _mnist(data: DataConfig, split: str, seed: int) -> ImageDataset:
    from ampgan.data.mnist import load_mnist

    return load_mnist(data.data_dir, split)
