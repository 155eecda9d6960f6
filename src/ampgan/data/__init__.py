"""Datasets: one in-memory type (`ImageDataset`), the `data` config section, one registry of loaders."""

from ampgan.data.dataset import ImageDataset
from ampgan.data.registry import DataConfig, dataset_names, load_dataset

__all__ = ["DataConfig", "ImageDataset", "dataset_names", "load_dataset"]
