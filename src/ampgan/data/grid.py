"""A look at real images before training on them: a few seeded picks per class, one row per class."""

from __future__ import annotations

import numpy as np
import torch

from ampgan.data.dataset import ImageDataset
from ampgan.files.images import image_grid


def class_rows_grid(dataset: ImageDataset, per_class: int, seed: int) -> np.ndarray:
    """uint8 (H', W', C) grid: row k holds `per_class` random images of class k (black where a
    class has fewer)."""
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for label in range(dataset.num_classes):
        indices = torch.nonzero(dataset.labels == label).flatten()
        chosen = indices[torch.randperm(len(indices), generator=generator)[:per_class]]
        picked = dataset.images[chosen]  # (n, C, H, W) uint8
        if len(picked) < per_class:
            picked = torch.cat([picked, torch.zeros(per_class - len(picked), *picked.shape[1:], dtype=torch.uint8)])
        rows.append(picked)
    return image_grid(torch.cat(rows).permute(0, 2, 3, 1).numpy(), rows=dataset.num_classes)
