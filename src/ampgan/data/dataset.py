"""The one in-memory dataset type every loader returns."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from ampgan.system.memory import largest_count, refuse_unless_it_fits


@dataclass(frozen=True)
class ImageDataset:
    images: torch.Tensor  # (N, C, H, W) uint8, 0 = black
    labels: torch.Tensor  # (N,) int64 in [0, K)
    class_names: tuple[str, ...]
    source: dict[str, Any] = field(default_factory=dict)  # where it came from, checksums
    # Only ampgan's loaders make one, each from input it has checked (shapes, dtypes, labels per class) or
    # from checksummed files: nothing is checked again here.

    def __len__(self) -> int:
        return self.images.shape[0]

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def channels(self) -> int:
        return self.images.shape[1]

    @property
    def image_size(self) -> int:
        return self.images.shape[2]

    def counts_per_class(self) -> list[int]:
        return torch.bincount(self.labels, minlength=self.num_classes).tolist()

    def content_sha256(self) -> str:
        """A fingerprint of the pixels and labels, recorded in config.json."""
        digest = hashlib.sha256()
        digest.update(self.images.contiguous().numpy().tobytes())
        digest.update(self.labels.contiguous().numpy().tobytes())
        return digest.hexdigest()

    def with_shape(self, image_size: int | None, channels: int | None) -> ImageDataset:
        """Resized (bilinear) and/or converted to 1 or 3 channels; self when nothing changes."""
        images = self.images
        if channels is not None and channels != images.shape[1]:
            if channels == 1:  # ITU-R 601 luma, the usual RGB -> grey weights
                weights = torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)
                images = (images.float() * weights).sum(1, keepdim=True).round().to(torch.uint8)
            else:
                images = images.expand(-1, 3, -1, -1).contiguous()
        if image_size is not None and image_size != images.shape[2]:
            images = resize_uint8(images, image_size)
        if images is self.images:
            return self
        return ImageDataset(
            images,
            self.labels,
            self.class_names,
            dict(self.source, resized_to=[images.shape[1], images.shape[2], images.shape[3]]),
        )


def refuse_images_that_cannot_fit(count: int, channels: int, size: int, bytes_per_value: int = 1) -> None:
    """One error line before a loader makes `count` images of `size` x `size` pixels (`bytes_per_value` per
    value while it makes them) when the machine cannot hold them: a typo such as --image-size 65536
    would ask for terabytes."""
    per_pixel = count * channels * bytes_per_value
    largest = math.isqrt(largest_count(per_pixel))
    refuse_unless_it_fits(
        f"--image-size {size}",
        per_pixel * size * size,
        f"{count} images of {channels}x{size}x{size}",
        f"use --image-size {largest} or less" if largest >= 4 else "use fewer images or a machine with more memory",
    )


def resize_uint8(images: torch.Tensor, size: int, chunk: int = 4096) -> torch.Tensor:
    """Bilinear resize of a uint8 batch, in chunks so memory stays near the uint8 size."""
    refuse_images_that_cannot_fit(images.shape[0], images.shape[1], size)
    out = torch.empty(images.shape[0], images.shape[1], size, size, dtype=torch.uint8)
    for start in range(0, images.shape[0], chunk):
        part = images[start : start + chunk].float()
        resized = F.interpolate(part, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
        out[start : start + chunk] = resized.round().clamp_(0, 255).to(torch.uint8)
    return out
