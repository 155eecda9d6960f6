"""Sample grids: fixed noise, one row per class (conditional GANs), the same for every precision.

The noise comes from a CPU generator seeded by the run's seed alone (seeds.sample_grid_seed), so an
fp32 run and a bf16 run with the same seed draw the very same z vectors and can be compared image
by image.
"""

from __future__ import annotations

import numpy as np
import torch

from ampgan.errors import AmpganError, first_words
from ampgan.files.images import image_grid, to_uint8
from ampgan.seeds import sample_grid_seed
from ampgan.system.memory import is_out_of_memory

# What G is called on outside the training step: a G that takes something else (a label map to translate, drawn by
# draw_inputs for training) trains, then fails at its first samples.
NOISE_INPUT = (
    "samples, `ampgan generate` and evaluations call G on z of shape (N, z_dim) drawn from its z_distribution, or, "
    "when draw_inputs returns another shape (a map, an image), on what it draws from real images "
    "(docs/your-gan.md, image-to-image GANs); an unconditional G on the codes its draw_inputs draws"
)


def fixed_noise(
    gan, num_classes: int, per_class: int, seed: int, real: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Conditional GANs: (z (K*n, z_dim), labels (K*n,)), row k of the grid is class k and column j reuses
    z_j. Unconditional: n*n distinct z (an n x n grid), no labels. `gan`: the GAN (gan/contract.py); `real`:
    the data's uint8 images an image-to-image G's maps are drawn from (GAN.inputs_for)."""
    generator = torch.Generator().manual_seed(sample_grid_seed(seed))
    if not gan.conditional:
        return gan.inputs_for(per_class * per_class, generator, real), None
    z_row = gan.inputs_for(per_class, generator, real)  # one row's noise, the same in every class's row
    return z_row.repeat(num_classes, *(1,) * (z_row.dim() - 1)), torch.arange(num_classes).repeat_interleave(per_class)


def render_samples(gan, z: torch.Tensor, labels: torch.Tensor | None, rows: int, autocast) -> np.ndarray:
    """The grid the generator draws for the fixed noise, in eval mode (running BN statistics)."""
    return image_grid(to_uint8(drawn(gan, z, labels, next(gan.sampling_generator.parameters()).device, autocast)), rows)


@torch.no_grad()
def drawn(gan, z: torch.Tensor, labels: torch.Tensor | None, device, autocast=None, batch_size: int = 500):
    """What G draws for the noise `z` (and the classes `labels`), `batch_size` at a time on `device`, in eval
    mode (running BN statistics) and under `autocast` (none: fp32): float images in [-1, 1] on the CPU. G is
    its EMA when the model declares one; its training mode is as it was afterwards."""
    generator_net = gan.sampling_generator
    was_training = generator_net.training
    generator_net.eval()
    images = []
    # On a forked random state: a G that draws noise of its own in forward (a StyleGAN's noise inputs) must
    # not move the training's RNG, or a run resumed from the checkpoint saved beside these samples would
    # not continue as the uninterrupted run does.
    with torch.random.fork_rng(devices=[device] if torch.device(device).type == "cuda" else []):
        try:
            for start in range(0, len(z), batch_size):
                part = labels[start : start + batch_size].to(device) if labels is not None else None
                with autocast() if autocast else torch.autocast("cpu", enabled=False):
                    try:
                        batch = gan.generate(generator_net, z[start : start + batch_size].to(device), part)
                    except Exception as error:  # noqa: BLE001 - the user's G failing is one line, not a traceback
                        if is_out_of_memory(error):
                            raise  # the caller's: the loop's and the bench's out-of-memory lines
                        raise AmpganError(
                            f"model {gan.name}: G failed drawing images: {type(error).__name__}: "
                            f"{first_words(str(error), 200)}; {NOISE_INPUT}"
                        ) from None
                images.append(gan.to_unit_range(batch.float()).cpu())
        finally:
            generator_net.train(was_training)
    return torch.cat(images)
