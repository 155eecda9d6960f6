"""`digits`: the embedded default, real handwritten digits that ship inside scikit-learn.

1797 scans of handwritten digits (UCI "Optical Recognition of Handwritten Digits"), 8x8 pixels
with 17 grey levels, 10 classes. Shipped in the scikit-learn wheel, so no download is needed.
They are upsampled to the model's size (32 px by default): blurry, but real data.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from ampgan.data.dataset import ImageDataset, resize_uint8
from ampgan.data.registry import DataConfig, register

DEFAULT_SIZE = 32


@register("digits")
def load_digits_dataset(data: DataConfig, split: str, seed: int) -> ImageDataset:
    from sklearn.datasets import load_digits  # here, not at the top: scikit-learn takes seconds to import

    bunch = load_digits()
    # bunch.images: (1797, 8, 8) float, values 0..16, ink = high values
    grey = np.round(bunch.images * (255.0 / 16.0)).astype(np.uint8)
    images = resize_uint8(torch.from_numpy(grey).unsqueeze(1), data.image_size or DEFAULT_SIZE)
    labels = torch.from_numpy(bunch.target.astype(np.int64))
    return ImageDataset(
        images,
        labels,
        tuple(str(d) for d in range(10)),
        {
            "name": "digits",
            "origin": "scikit-learn sklearn.datasets.load_digits (UCI optical recognition of handwritten digits)",
            "raw_sha256": hashlib.sha256(grey.tobytes()).hexdigest(),
        },
    )
