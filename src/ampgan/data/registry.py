"""Dataset names -> loaders. Each format's module registers its own (`@register(name, uses=...)`), and
this registry imports every module of the data package to find them, as gan/registry.py does for GANs:
adding a dataset touches one module (docs/layout.md has the checklist). `uses` names the `data`
fields the dataset reads beyond its name and shape; a field another dataset would ignore is refused
(data/request.py asks `fields_used_by`)."""

from __future__ import annotations

import difflib
import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from ampgan.data.dataset import ImageDataset
from ampgan.data.request import DataConfig
from ampgan.errors import AmpganError

Loader = Callable[[DataConfig, str, int], ImageDataset]  # (data section, split, seed)


@dataclass(frozen=True)
class RegisteredDataset:
    load: Loader
    uses: tuple[str, ...]  # data fields it reads besides dataset, image_size, channels


_LOADERS: dict[str, RegisteredDataset] = {}


def register(name: str, uses: tuple[str, ...] = ()) -> Callable[[Loader], Loader]:
    def add(loader: Loader) -> Loader:
        _LOADERS[name] = RegisteredDataset(loader, tuple(uses))
        return loader

    return add


@functools.cache
def _registered() -> dict[str, RegisteredDataset]:
    """Every dataset of the data package's modules (each imported once)."""
    import ampgan.data as package

    for found in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{found.name}")
    return _LOADERS


def dataset_names() -> list[str]:
    return sorted(_registered())


def fields_used_by(field: str) -> tuple[str, ...]:
    """The datasets that read this data field (data_dir, download, classes, ...)."""
    return tuple(name for name, entry in sorted(_registered().items()) if field in entry.uses)


def load_dataset(data: DataConfig = DataConfig(), split: str = "train", seed: int = 0) -> ImageDataset:
    """The dataset `data` names, shaped as it asks (size and channels) and stamped with its source.
    `seed`: the run's (Quick, Draw!'s train/test split and the synthetic images depend on it)."""
    name = data.dataset
    loaders = _registered()
    if name.startswith("folder:"):
        from ampgan.data.folder import load_folder

        dataset = load_folder(name.removeprefix("folder:"), data.image_size, data.channels, data.cache)
    elif name not in loaders:
        close = difflib.get_close_matches(name, loaders, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise AmpganError(f"unknown dataset {name!r}{hint}: choose one of {', '.join(dataset_names())} or folder:PATH")
    else:
        dataset = loaders[name].load(data, split, seed).with_shape(data.image_size, data.channels)
    dataset.source.setdefault("sha256", dataset.content_sha256())
    return dataset
