"""`synthetic`: a deterministic, generated dataset for tests and benchmarks.

Each class is a sinusoidal grating with its own orientation and frequency; every image gets a
random phase, contrast and a little noise. Classes are easy to tell apart, so an auxiliary
classifier has something real to learn, and any size, class count or channel count is free.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ampgan.data.dataset import ImageDataset, refuse_images_that_cannot_fit
from ampgan.data.registry import DataConfig, register


def make_synthetic(
    *, count: int = 2048, num_classes: int = 10, channels: int = 3, image_size: int = 32, seed: int = 0
) -> ImageDataset:
    # The gratings are made in float64, the pixels and their noise at once: 8 bytes each, twice, then uint8.
    refuse_images_that_cannot_fit(count, channels, image_size, bytes_per_value=8 + 8 + 1)
    rng = np.random.default_rng(seed)
    labels = np.arange(count) % num_classes
    rng.shuffle(labels)
    angle = math.pi * labels / num_classes  # (N,) one orientation per class
    frequency = 2.0 + (labels % 3)  # (N,) cycles across the image
    phase = rng.uniform(0, 2 * math.pi, size=count)
    contrast = rng.uniform(0.6, 1.0, size=count)
    axis = np.linspace(-0.5, 0.5, image_size, dtype=np.float32)
    yy, xx = np.meshgrid(axis, axis, indexing="ij")  # (H, W)
    along = np.cos(angle)[:, None, None] * xx + np.sin(angle)[:, None, None] * yy  # (N, H, W)
    wave = np.sin(2 * math.pi * frequency[:, None, None] * along + phase[:, None, None])
    grey = 0.5 + 0.5 * contrast[:, None, None] * wave
    tint = rng.uniform(0.7, 1.0, size=(count, channels, 1, 1))  # per-channel colour cast
    pixels = grey[:, None] * tint + rng.normal(0, 0.03, size=(count, channels, image_size, image_size))
    images = np.clip(pixels * 255.0, 0, 255).round().astype(np.uint8)
    return ImageDataset(
        torch.from_numpy(images),
        torch.from_numpy(labels.astype(np.int64)),
        tuple(f"grating-{k}" for k in range(num_classes)),
        {"name": "synthetic", "generator": "sinusoidal gratings, one orientation/frequency per class", "seed": seed},
    )


@register("synthetic")
def _synthetic(data: DataConfig, split: str, seed: int) -> ImageDataset:
    return make_synthetic(channels=data.channels or 3, image_size=data.image_size or 32, seed=seed)
