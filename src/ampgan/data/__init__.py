"""Datasets: one in-memory type (`ImageDataset`), the `data` config section, one registry of loaders."""

from ampgan.data.dataset import ImageDataset
from ampgan.data.registry import dataset_names, load_dataset
from ampgan.data.request import DataConfig

__all__ = ["DataConfig", "ImageDataset", "dataset_names", "load_dataset"]
