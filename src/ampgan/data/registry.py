"""The `data` config section (which dataset, shaped how, from where; declared here once: the training
config, the bench, the comparison and `ampgan data` all carry it) and the dataset names -> loaders.
Each format's module registers its own (`@register(name, uses=...)`), and this registry imports every
module of the data package to find them, as gan/registry.py does for GANs: adding a dataset touches one
module (docs/layout.md has the checklist). `uses` names the `data` fields the dataset reads beyond its
name and shape; a field another dataset would ignore is refused by the section's own check."""

from __future__ import annotations

import difflib
import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from ampgan.data.dataset import ImageDataset
from ampgan.errors import AmpganError, ConfigError
from ampgan.files.schema import OneOf
from ampgan.sections import Section, setting

Loader = Callable[["DataConfig", str, int], ImageDataset]  # (data section, split, seed)
# The splits a loader is asked for (`ampgan data --split`): a dataset that ships none (digits, synthetic, a
# folder) gives all its images for either.
SPLITS = ("train", "test")


CHANNEL_COUNTS = (1, 3)
# Fields only some datasets read (each dataset's module says which, as it registers): one that the chosen
# dataset would ignore is refused.
_DATASET_FIELDS = ("classes", "max_per_class", "data_dir", "download")


@dataclass(frozen=True, kw_only=True)
class DataConfig(Section):
    NAME = "data"

    dataset: str = setting(
        "digits",
        lambda: f"A registered dataset ({', '.join(dataset_names())}; digits is embedded) or folder:PATH.",
        True,
    )
    image_size: int | None = setting(
        None, "Resize the data (default: the dataset's size; the model says which it draws).", True, "whole4"
    )
    channels: int | None = setting(None, "Grey or colour (default: the dataset's).", kind="channels")
    data_dir: str | None = setting(None, "Where a file-based dataset lives (cifar10, quickdraw, mnist).", True)
    classes: str | None = setting(
        None, "Quick, Draw! classes, comma-separated (default: the study's ten).", kind="names"
    )
    max_per_class: int | None = setting(None, "Quick, Draw!: rows read per class.", kind="whole")
    download: bool = setting(False, "Fetch missing dataset files (cifar10, quickdraw).", True, "flag")
    cache: bool = setting(False, "folder:PATH: keep a verified .npz cache next to the images.", kind="flag")

    def check(self) -> None:
        if not self.dataset.removeprefix("folder:").strip():  # 'folder:$DATA' with DATA unset read the current folder
            raise ConfigError(self.path("dataset"), "is empty: name a dataset such as digits, or folder:PATH")
        if self.channels is not None and self.channels not in CHANNEL_COUNTS:
            raise ConfigError(self.path("channels"), f"must be 1 or 3, got {self.channels}")
        if self.classes is not None and not self.class_list:
            raise ConfigError(self.path("classes"), "needs at least one class name, e.g. apple,eye,fish")
        for name in _DATASET_FIELDS:
            datasets = tuple(dataset for dataset, entry in sorted(_registered().items()) if name in entry.uses)
            if getattr(self, name) not in (None, False) and self.dataset not in datasets:
                raise ConfigError(
                    self.path(name), f"applies to {' and '.join(datasets)} only, not to {self.dataset}: drop it"
                )
        if self.cache and not self.dataset.startswith("folder:"):
            raise ConfigError(
                self.path("cache"), f"applies to folder:PATH datasets only, not to {self.dataset}: drop it"
            )

    @property
    def folders_read(self) -> tuple[str, ...]:
        """The dataset folder the images are read from (folder:PATH): no command writes into it or around it
        (runs/claim.py check_place), or its own files would be read as data."""
        return (self.dataset.removeprefix("folder:"),) if self.dataset.startswith("folder:") else ()

    @property
    def downloads(self) -> bool:
        """The dataset fetches its files with --download (cifar10, quickdraw)."""
        return self.dataset in _registered() and "download" in _registered()[self.dataset].uses

    @property
    def class_list(self) -> tuple[str, ...] | None:
        if self.classes is None:
            return None
        return tuple(name.strip() for name in self.classes.split(",") if name.strip())


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


def registry_of(package: str, table: dict) -> Callable[[], dict]:
    """A function that returns `table` once every module of `package` is imported (each once, on the first
    call): what they register fills it (datasets here, GANs in gan/models/). The package is imported by
    name: this registry is imported by its own package."""

    @functools.cache
    def filled() -> dict:
        for found in pkgutil.iter_modules(importlib.import_module(package).__path__):
            importlib.import_module(f"{package}.{found.name}")
        return table

    return filled


_registered = registry_of("ampgan.data", _LOADERS)  # every dataset of the data package's modules


def dataset_names() -> list[str]:
    return sorted(_registered())


# A dataset's name in a document read back (config.json, results.json, compare.json, projection.json): a registered
# one, or a folder of the user's images.
DATASET_NAME = OneOf("a dataset", dataset_names, (", or folder:PATH", lambda name: name.startswith("folder:")))


def load_dataset(data: DataConfig, split: str = "train", seed: int = 0) -> ImageDataset:
    """The dataset `data` names, shaped as it asks (size and channels) and stamped with its source.
    `seed`: the run's (Quick, Draw!'s train/test split and the synthetic images depend on it)."""
    name = data.dataset
    loaders = _registered()
    if split not in SPLITS:
        raise AmpganError(f"a dataset has the splits {' and '.join(SPLITS)}, not {split!r}")
    if name.startswith("folder:"):
        from ampgan.data.folder import load_folder  # not at the top: Pillow costs 0.13 s of every command's start

        dataset = load_folder(name.removeprefix("folder:"), data.image_size, data.channels, data.cache)
    elif name not in loaders:
        close = difflib.get_close_matches(name, loaders, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise AmpganError(f"unknown dataset {name!r}{hint}: choose one of {', '.join(dataset_names())} or folder:PATH")
    else:
        dataset = loaders[name].load(data, split, seed).with_shape(data.image_size, data.channels)
    dataset.source.setdefault("sha256", dataset.content_sha256())
    return dataset
