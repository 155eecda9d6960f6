"""Dataset names -> loaders. Later formats (CIFAR-10, Quick, Draw!, image folders) plug in here."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass

from ampgan.data.dataset import ImageDataset
from ampgan.errors import AmpganError


@dataclass(frozen=True)
class DataRequest:
    """What the training run wants; a loader uses what applies to its format."""

    image_size: int | None = None
    channels: int | None = None
    data_dir: str | None = None
    seed: int = 0
    split: str = "train"
    classes: tuple[str, ...] | None = None  # Quick, Draw! class names
    max_per_class: int | None = None
    download: bool = False
    cache: bool = False


Loader = Callable[[DataRequest], ImageDataset]
_LOADERS: dict[str, Loader] = {}


def register(name: str) -> Callable[[Loader], Loader]:
    def add(loader: Loader) -> Loader:
        _LOADERS[name] = loader
        return loader

    return add


def dataset_names() -> list[str]:
    return sorted(_LOADERS)


def load_dataset(name: str, request: DataRequest = DataRequest()) -> ImageDataset:
    """The named dataset, shaped as requested (size and channels) and stamped with its source."""
    if name.startswith("folder:"):
        from ampgan.data.folder import load_folder

        dataset = load_folder(name.removeprefix("folder:"), request.image_size, request.channels, request.cache)
    elif name not in _LOADERS:
        close = difflib.get_close_matches(name, _LOADERS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise AmpganError(
            f"unknown dataset {name!r}{hint}: choose one of {', '.join(dataset_names())} or folder:PATH"
        )
    else:
        dataset = _LOADERS[name](request).with_shape(request.image_size, request.channels)
    dataset.source.setdefault("sha256", dataset.content_sha256())
    return dataset


@register("digits")
def _digits(request: DataRequest) -> ImageDataset:
    from ampgan.data.digits import load_digits_dataset

    return load_digits_dataset(request.image_size)


@register("synthetic")
def _synthetic(request: DataRequest) -> ImageDataset:
    from ampgan.data.synthetic import make_synthetic

    return make_synthetic(
        channels=request.channels or 3, image_size=request.image_size or 32, seed=request.seed
    )


@register("cifar10")
def _cifar10(request: DataRequest) -> ImageDataset:
    from ampgan.data.cifar10 import load_cifar10

    return load_cifar10(request.data_dir, request.split, request.download)


@register("quickdraw")
def _quickdraw(request: DataRequest) -> ImageDataset:
    from ampgan.data.quickdraw import load_quickdraw

    return load_quickdraw(request.data_dir, request.classes, request.max_per_class, request.split,
                          request.seed, request.download)


@register("mnist")
def _mnist(request: DataRequest) -> ImageDataset:
    from ampgan.data.mnist import load_mnist

    return load_mnist(request.data_dir, request.split)
