"""Sample grids: fixed noise, one row per class, the same for every precision.

The noise comes from a CPU generator seeded by the run's seed alone, so an fp32 run and a bf16
run with the same seed draw the very same z vectors and can be compared image by image.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from ampgan.atomic import write_atomically


def fixed_noise(num_classes: int, per_class: int, z_dim: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(z (K*n, z_dim), labels (K*n,)): row k of the grid is class k; column j reuses z_j."""
    generator = torch.Generator().manual_seed(seed + 7919)  # independent of the training RNG
    z_row = torch.randn(per_class, z_dim, generator=generator)
    z = z_row.repeat(num_classes, 1)
    labels = torch.arange(num_classes).repeat_interleave(per_class)
    return z, labels


def to_uint8(images: torch.Tensor) -> np.ndarray:
    """[-1, 1] float (N, C, H, W) -> uint8 (N, H, W, C)."""
    scaled = ((images.detach().float().cpu().clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)
    return scaled.permute(0, 2, 3, 1).numpy()


def image_grid(images: np.ndarray, rows: int, padding: int = 2) -> np.ndarray:
    """uint8 (N, H, W, C) -> one (rows*(H+p)+p, cols*(W+p)+p, C) image with dark gutters.

    A few lines of numpy instead of torchvision's make_grid: torchvision's wheels are tied to
    one torch build, and ampgan should install beside any torch >= 2.5.
    """
    count, height, width, channels = images.shape
    cols = -(-count // rows)
    grid = np.full(
        (rows * (height + padding) + padding, cols * (width + padding) + padding, channels), 32, np.uint8
    )
    for index in range(count):
        row, col = divmod(index, cols)
        top, left = padding + row * (height + padding), padding + col * (width + padding)
        grid[top : top + height, left : left + width] = images[index]
    return grid


def save_png(grid: np.ndarray, path: Path) -> None:
    image = Image.fromarray(grid[..., 0] if grid.shape[-1] == 1 else grid)

    write_atomically(path, lambda stream: image.save(stream, format="PNG"))


@torch.no_grad()
def render_samples(generator_net: torch.nn.Module, z: torch.Tensor, labels: torch.Tensor, rows: int, autocast) -> np.ndarray:
    """The grid the generator draws for the fixed noise, in eval mode (running BN statistics)."""
    device = next(generator_net.parameters()).device
    was_training = generator_net.training
    generator_net.eval()
    try:
        with autocast():
            images = generator_net(z.to(device), labels.to(device))
    finally:
        generator_net.train(was_training)
    return image_grid(to_uint8(images), rows)
