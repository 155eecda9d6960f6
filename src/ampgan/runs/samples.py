"""Sample grids: fixed noise, one row per class (conditional GANs), the same for every precision.

The noise comes from a CPU generator seeded by the run's seed alone (seeds.sample_grid_seed), so an
fp32 run and a bf16 run with the same seed draw the very same z vectors and can be compared image
by image.
"""

from __future__ import annotations

import numpy as np
import torch

from ampgan.files.images import image_grid, to_uint8
from ampgan.seeds import sample_grid_seed


def fixed_noise(gan, num_classes: int, per_class: int, seed: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Conditional GANs: (z (K*n, z_dim), labels (K*n,)), row k of the grid is class k and column j reuses
    z_j. Unconditional: n*n distinct z (an n x n grid), no labels. `gan`: the GAN (gan/contract.py)."""
    generator = torch.Generator().manual_seed(sample_grid_seed(seed))
    if not gan.conditional:
        return gan.draw_z(per_class * per_class, generator), None
    z_row = gan.draw_z(per_class, generator)  # one row's noise, the same in every class's row
    return z_row.repeat(num_classes, 1), torch.arange(num_classes).repeat_interleave(per_class)


@torch.no_grad()
def render_samples(gan, z: torch.Tensor, labels: torch.Tensor | None, rows: int, autocast) -> np.ndarray:
    """The grid the generator draws for the fixed noise, in eval mode (running BN statistics)."""
    generator_net = gan.sampling_generator  # the EMA of G when the model declares one
    device = next(generator_net.parameters()).device
    was_training = generator_net.training
    generator_net.eval()
    try:
        with autocast():
            images = gan.generate(generator_net, z.to(device), labels.to(device) if labels is not None else None)
    finally:
        generator_net.train(was_training)
    return image_grid(to_uint8(gan.to_unit_range(images.float())), rows)
