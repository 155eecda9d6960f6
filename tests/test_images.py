"""Image grids as PNG files (files/images.py): the pixels are the images, and what made them is in the PNG text."""

import numpy as np
from PIL import Image

from ampgan.files.images import image_grid, save_png


def test_a_grid_keeps_its_pixels_and_carries_what_made_it(tmp_path):
    images = np.arange(4 * 3 * 3, dtype=np.uint8).reshape(4, 3, 3, 1) * 7  # 4 grey images of 3x3
    grid = image_grid(images, rows=2)
    save_png(grid, tmp_path / "g.png", "AMD EPYC | bf16 | batch 64 | model acgan | torch 2.13.0 | step 5")
    saved = Image.open(tmp_path / "g.png")
    assert saved.mode == "L" and np.array_equal(np.asarray(saved), grid[..., 0])  # grey stays grey, unrotated
    assert saved.info["Description"] == "AMD EPYC | bf16 | batch 64 | model acgan | torch 2.13.0 | step 5"
    assert np.array_equal(np.asarray(saved)[2:5, 7:10], images[1, ..., 0])  # row 0, column 1: the second image
