"""The `data` section of the config: which dataset, shaped how, from where. Declared here once; the
training config, the bench, the comparison and `ampgan data` all carry this one section."""

from __future__ import annotations

from dataclasses import dataclass

from ampgan.errors import ConfigError
from ampgan.sections import Section

CHANNEL_COUNTS = (1, 3)
# Fields only some datasets read (each dataset's module says which: data/registry.py): one that the
# chosen dataset would ignore is refused.
_DATASET_FIELDS = ("classes", "max_per_class", "data_dir", "download")


@dataclass(frozen=True, kw_only=True)
class DataConfig(Section):
    NAME = "data"

    dataset: str = "digits"  # a registered name (data/registry.py) or folder:PATH
    image_size: int | None = None  # None: the dataset's own size (the model says which sizes it draws)
    channels: int | None = None  # None: the dataset's own channel count
    data_dir: str | None = None  # where a file-based dataset lives
    classes: str | None = None  # Quick, Draw!: comma-separated class names (default: the study's ten)
    max_per_class: int | None = None  # Quick, Draw!: rows read per class
    download: bool = False  # fetch missing files (cifar10, quickdraw)
    cache: bool = False  # folder:PATH: keep a verified .npz beside the images

    def check(self) -> None:
        if not self.dataset.strip():
            raise ConfigError(self.path("dataset"), "is empty: name a dataset such as digits, or folder:PATH")
        self.whole("image_size", minimum=4, optional=True)
        if self.channels is not None and self.channels not in CHANNEL_COUNTS:
            raise ConfigError(self.path("channels"), f"must be 1 or 3, got {self.channels}")
        self.whole("max_per_class", optional=True)
        if self.classes is not None and not self.class_list:
            raise ConfigError(self.path("classes"), "needs at least one class name, e.g. apple,eye,fish")
        from ampgan.data.registry import fields_used_by  # the registry reads this section: imported late

        for name in _DATASET_FIELDS:
            datasets = fields_used_by(name)
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
    def class_list(self) -> tuple[str, ...] | None:
        if self.classes is None:
            return None
        return tuple(name.strip() for name in self.classes.split(",") if name.strip())
