"""Image grids and PNG files: uint8 arrays in, atomically written PNGs out.

A few lines of numpy instead of torchvision's make_grid: torchvision's wheels are tied to one torch
build, and ampgan should install beside any torch >= 2.5.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from ampgan.files.atomic import write_atomically


def to_uint8(images: torch.Tensor) -> np.ndarray:
    """[-1, 1] float (N, C, H, W) -> uint8 (N, H, W, C)."""
    return (
        ((images.detach().float().cpu().clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()
    )


def image_grid(images: np.ndarray, rows: int, padding: int = 2) -> np.ndarray:
    """uint8 (N, H, W, C) -> one (rows*(H+p)+p, cols*(W+p)+p, C) image with dark gutters."""
    count, height, width, channels = images.shape
    cols = -(-count // rows)
    grid = np.full((rows * (height + padding) + padding, cols * (width + padding) + padding, channels), 32, np.uint8)
    for index in range(count):
        row, col = divmod(index, cols)
        top, left = padding + row * (height + padding), padding + col * (width + padding)
        grid[top : top + height, left : left + width] = images[index]
    return grid


def save_png(grid: np.ndarray, path: Path, description: str | None = None) -> None:
    """`description` (what made the images: hardware, precision, batch, model, versions, step) goes into the
    PNG's Description text, so a grid shared without its run folder still says it; the pixels stay the images."""
    image = Image.fromarray(grid[..., 0] if grid.shape[-1] == 1 else grid)
    info = PngInfo()
    info.add_text("Description", description or "")
    write_atomically(path, lambda stream: image.save(stream, format="PNG", pnginfo=info))
