"""`mnist`: the IDX files of MNIST (and of look-alikes in the same format), gzipped or not.

IDX: a big-endian header (magic 0x00000803 for images with rows/cols, 0x00000801 for labels),
then raw uint8 data. Train split: train-images-idx3-ubyte(.gz); test: t10k-images-idx3-ubyte(.gz).
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import torch

from ampgan.data.dataset import ImageDataset
from ampgan.data.files import file_digest, require_data_dir
from ampgan.errors import AmpganError

PREFIX = {"train": "train", "test": "t10k"}


def _find(root: Path, stem: str) -> Path:
    for candidate in (root / f"{stem}.gz", root / stem):
        if candidate.is_file():
            return candidate
    raise AmpganError(f"no {stem}(.gz) in {root}: put the MNIST IDX files there")


def _read_idx(path: Path, magic: int, header_ints: int) -> tuple[tuple[int, ...], bytes]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            blob = handle.read()
    except (OSError, EOFError) as error:
        raise AmpganError(f"{path} is truncated or not gzip ({error}): fetch it again") from None
    header_size = 4 * (1 + header_ints)
    if len(blob) < header_size:
        raise AmpganError(f"{path} is too short to be an IDX file")
    fields = struct.unpack(f">{1 + header_ints}I", blob[:header_size])
    if fields[0] != magic:
        raise AmpganError(f"{path} has IDX magic {fields[0]:#010x}, expected {magic:#010x}: wrong file")
    return fields[1:], blob[header_size:]


def load_mnist(data_dir: str | None, split: str = "train") -> ImageDataset:
    if split not in PREFIX:
        raise AmpganError(f"MNIST has the splits train and test, not {split!r}")
    root = require_data_dir(data_dir, "mnist", False)
    images_path = _find(root, f"{PREFIX[split]}-images-idx3-ubyte")
    labels_path = _find(root, f"{PREFIX[split]}-labels-idx1-ubyte")
    (count, rows, cols), pixels = _read_idx(images_path, 0x00000803, 3)
    (label_count,), label_bytes = _read_idx(labels_path, 0x00000801, 1)
    if len(pixels) != count * rows * cols or len(label_bytes) != label_count or count != label_count:
        raise AmpganError(f"{images_path} and {labels_path} disagree on their sizes: one of them is truncated")
    images = torch.from_numpy(np.frombuffer(pixels, dtype=np.uint8).reshape(count, 1, rows, cols).copy())
    labels = torch.from_numpy(np.frombuffer(label_bytes, dtype=np.uint8).astype(np.int64))
    source = {"name": "mnist", "split": split, "origin": str(root),
              "sha256": {p.name: file_digest(p) for p in (images_path, labels_path)}}
    return ImageDataset(images, labels, tuple(str(d) for d in range(10)), source)
