"""Every random stream ampgan draws from, derived from the one `--seed` by name.

Each stream gets its own seed, hashed from (its purpose, the user's seed, its coordinates), so
no two streams can share a seed by coincidence of arithmetic. Scheme 1 (ampgan 0.1's checkpoints)
derived them with offsets, and two collided at seed 0: the rank-0 noise generator
(seed + 1) and the epoch-1 data permutation (seed * 1_000_003 + 1) were both seeded with 1.

A run keeps the scheme it started with (its checkpoints record it): a run folder written under
scheme 1 resumes under scheme 1 and draws exactly what it would have drawn; new runs use the
current scheme. The initial weights are seeded with the user's seed itself in both schemes
(`torch.manual_seed(seed)`), so `--seed 3` means what a PyTorch user expects.
"""

from __future__ import annotations

import hashlib

CURRENT_SCHEME = 2  # scheme 1: ampgan 0.1's offsets, kept for the runs it started
# The largest seed: torch seeds a generator with a 64-bit number (2**64 and up was an OverflowError traceback), and
# a seed's offsets (the sample grid's, a study's next seeds) must stay below that.
MAX_SEED = 2**63 - 1


def _derive(purpose: str, *numbers: int) -> int:
    """A 63-bit seed unique to (purpose, numbers): SHA-256 of their text."""
    text = ":".join([purpose, *(str(int(n)) for n in numbers)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def weights_seed(seed: int) -> int:
    """Initial weights of G and D: the same on every rank and in every precision."""
    return seed


def step_noise_seed(seed: int, rank: int, step: int = 0, scheme: int = CURRENT_SCHEME) -> int:
    """A rank's generator of z and fake labels in the training step: distinct per rank, and per
    step for a rank that joins a resumed run without a saved generator of its own."""
    return seed + 1 + 7919 * rank + 1_000_003 * step if scheme == 1 else _derive("step-noise", seed, rank, step)


def data_order_seed(seed: int, epoch: int, scheme: int = CURRENT_SCHEME) -> int:
    """The permutation of the training set in one epoch: the same for every rank and precision."""
    return seed * 1_000_003 + epoch if scheme == 1 else _derive("data-order", seed, epoch)


def sample_grid_seed(seed: int) -> int:
    """The fixed noise of the sample grids (one row per class), shared by every precision."""
    return seed + 7919  # unchanged from scheme 1: grids of old and new runs stay comparable


def evaluation_noise_seed(seed: int) -> int:
    """The noise of the samples a quality evaluation generates (compare and evaluate alike)."""
    return _derive("evaluation-noise", seed)


def reference_subset_seed() -> int:
    """Which real training images stand in for a perfect generator (the metrics' floor)."""
    return 1


def data_split_seed(seed: int, label: int) -> list[int]:
    """The train/test split of one Quick, Draw! class (numpy's SeedSequence entropy)."""
    return [seed, label]
