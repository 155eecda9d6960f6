"""`mnist`: the IDX files of MNIST (and of look-alikes in the same format), gzipped or not.

IDX: a big-endian header (magic 0x00000803 for images with rows/cols, 0x00000801 for labels),
then raw uint8 data. Train split: train-images-idx3-ubyte(.gz); test: t10k-images-idx3-ubyte(.gz).
"""

from __future__ import annotations

import gzip
import math
import struct
import zlib
from pathlib import Path

import numpy as np
import torch

from ampgan.data.dataset import ImageDataset
from ampgan.data.files import file_digest, require_data_dir
from ampgan.data.registry import DataConfig, register
from ampgan.errors import AmpganError

PREFIX = {"train": "train", "test": "t10k"}


def _find(root: Path, stem: str) -> Path:
    # As MNIST ships them, or as a popular mirror (Kaggle's) names them: train-images.idx3-ubyte.
    for candidate in (root / f"{stem}.gz", root / stem, root / stem.replace("-idx", ".idx")):
        if candidate.is_file():
            return candidate
    raise AmpganError(f"no {stem}(.gz) in {root}: put the MNIST IDX files there")


# The largest IDX payload read (MNIST's train images: 47 MB): a header claiming more is refused before any
# of it is decompressed. A 1.5 MB .gz can inflate to gigabytes; reading it whole first is what a bomb needs.
MAX_IDX_BYTES = 2**31


def _read_idx(path: Path, magic: int, header_ints: int, item_bytes: int = 1) -> tuple[tuple[int, ...], bytes]:
    """(the header's sizes, exactly the payload they announce). The header is read first and the payload
    size computed from it, checked against MAX_IDX_BYTES, then read in bounded chunks: a file with more
    (or less) data than its header says is refused, and no decompression runs past the announced size."""
    opener = gzip.open if path.suffix == ".gz" else open
    header_size = 4 * (1 + header_ints)
    try:
        with opener(path, "rb") as handle:
            header = handle.read(header_size)
            if len(header) < header_size:
                raise AmpganError(f"{path} is too short to be an IDX file")
            fields = struct.unpack(f">{1 + header_ints}I", header)
            if fields[0] != magic:
                raise AmpganError(f"{path} has IDX magic {fields[0]:#010x}, expected {magic:#010x}: wrong file")
            expected = item_bytes * math.prod(fields[1:])
            if expected > MAX_IDX_BYTES:
                raise AmpganError(
                    f"{path}'s header announces {expected / 2**30:.1f} GiB of data, more than an IDX "
                    f"dataset this tool reads ({MAX_IDX_BYTES / 2**30:.0f} GiB): the file is damaged or not MNIST"
                )
            chunks, left = [], expected
            while left:
                chunk = handle.read(min(left, 2**24))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            payload = b"".join(chunks)
            trailing = handle.read(1)
    except (OSError, EOFError, zlib.error) as error:  # zlib.error: a gzip stream damaged inside its data
        raise AmpganError(f"{path} is truncated or not gzip ({error}): fetch it again") from None
    if len(payload) != expected or trailing:
        raise AmpganError(
            f"{path} holds {'less' if len(payload) < expected else 'more'} data than its header "
            f"announces ({expected} bytes): the file is truncated or damaged; fetch it again"
        )
    return fields[1:], payload


@register("mnist", uses=("data_dir",))
def load_mnist(data: DataConfig, split: str, seed: int) -> ImageDataset:
    root = require_data_dir(data.data_dir, "mnist", False)
    images_path = _find(root, f"{PREFIX[split]}-images-idx3-ubyte")
    labels_path = _find(root, f"{PREFIX[split]}-labels-idx1-ubyte")
    (label_count,), label_bytes = _read_idx(labels_path, 0x00000801, 1)
    (count, rows, cols), pixels = _read_idx(images_path, 0x00000803, 3)
    if count != label_count:
        raise AmpganError(
            f"{images_path} holds {count} images but {labels_path} {label_count} labels: one of them "
            "is from another set; fetch both again"
        )
    if count == 0 or rows == 0 or rows != cols:  # the models draw square images; resizing would stretch these
        raise AmpganError(
            f"{images_path} holds {count} images of {rows}x{cols} pixels, no square images to train on: "
            "fetch the MNIST files again"
        )
    images = torch.from_numpy(np.frombuffer(pixels, dtype=np.uint8).reshape(count, 1, rows, cols).copy())
    labels = torch.from_numpy(np.frombuffer(label_bytes, dtype=np.uint8).astype(np.int64))
    if len(labels) and int(labels.max()) > 9:
        raise AmpganError(f"{labels_path} has the label {int(labels.max())}, but MNIST's are 0-9: wrong file")
    return ImageDataset(
        images,
        labels,
        tuple(str(d) for d in range(10)),
        {
            "name": "mnist",
            "split": split,
            "origin": str(root),
            "sha256": {p.name: file_digest(p) for p in (images_path, labels_path)},
        },
    )
