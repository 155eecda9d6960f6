"""Datasets: one in-memory type (`ImageDataset`), one registry of named loaders."""

from ampgan.data.dataset import ImageDataset
from ampgan.data.registry import DataRequest, dataset_names, load_dataset

__all__ = ["DataRequest", "ImageDataset", "dataset_names", "load_dataset"]
