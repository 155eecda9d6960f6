"""Batches drawn by index from a dataset that lives on the training device.

The whole uint8 dataset is copied to the device once; each batch is an index gather plus a
scale to [-1, 1], so no loader processes or host-to-device copies sit in the training loop.
Order: a fresh seeded permutation per epoch, consumed B indices at a time (a batch may span
two epochs, so any batch size works, even one larger than the dataset). Under data parallelism
every rank draws the same permutation and keeps its shard, permutation[rank::world_size]: the
shards of an epoch are disjoint and together cover the dataset.
"""

from __future__ import annotations

import torch

from ampgan.data.dataset import ImageDataset
from ampgan.errors import AmpganError
from ampgan.seeds import CURRENT_SCHEME, data_order_seed


class BatchStream:
    def __init__(
        self,
        dataset: ImageDataset,
        batch_size: int,
        device: torch.device,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        seed_scheme: int = CURRENT_SCHEME,
        image_range: tuple[float, float] = (-1.0, 1.0),
    ):
        if len(dataset) < world_size:
            # An empty shard would make next_indices() look for images forever.
            raise AmpganError(
                f"the dataset has {len(dataset)} training image(s), fewer than the {world_size} "
                "process(es) that share it: give a dataset with more images, or fewer processes"
            )
        self.images = dataset.images.to(device)  # (N, C, H, W) uint8
        self.labels = dataset.labels.to(device)  # (N,) int64
        self.batch_size = batch_size
        self.seed = seed
        self.seed_scheme = seed_scheme  # a resumed run keeps the scheme it started with (seeds.py)
        self.rank, self.world_size = rank, world_size
        self.image_range = image_range  # what the model's images are in: the data is scaled to it
        self.start_epoch(0)

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self._position}

    def load_state_dict(self, state: dict) -> None:
        """Continue the data order exactly where a checkpoint left it."""
        self.start_epoch(state["epoch"])
        self._position = state["position"]

    def start_epoch(self, epoch: int) -> None:
        """Continue from the start of an epoch (a run resumed on another number of processes)."""
        self.epoch, self._position = epoch, 0
        # Seeded by (seed, epoch) alone, so the data order never depends on the precision or on
        # what else consumed random numbers: every precision in a comparison sees the same batches.
        generator = torch.Generator().manual_seed(data_order_seed(self.seed, epoch, self.seed_scheme))
        self._order = copy_to_device(
            torch.randperm(len(self.labels), generator=generator)[self.rank :: self.world_size], self.images.device
        )

    def next_indices(self) -> torch.Tensor:
        parts, needed = [], self.batch_size
        while needed:
            if self._position == len(self._order):
                self.start_epoch(self.epoch + 1)
            take = min(needed, len(self._order) - self._position)
            parts.append(self._order[self._position : self._position + take])
            self._position += take
            needed -= take
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(images (B, C, H, W) float32 in the model's image range, labels (B,) int64), on the device."""
        indices = self.next_indices()
        return scale_images(self.images[indices], self.image_range), self.labels[indices]


def copy_to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`tensor` (on the CPU) on `device`. To a GPU through pinned memory, without waiting: a copy from
    pageable memory blocks the host until the GPU has taken it, a stall in the middle of the training loop
    once per epoch (the pinned buffer is PyTorch's caching host allocator's, kept until the copy is done)."""
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def scale_images(images: torch.Tensor, image_range: tuple[float, float]) -> torch.Tensor:
    """uint8 (0 black .. 255 white) -> float32 in [low, high]."""
    low, high = image_range
    if (low, high) == (-1.0, 1.0):
        return images.float().div_(127.5).sub_(1.0)
    return images.float().mul_((high - low) / 255.0).add_(low)
