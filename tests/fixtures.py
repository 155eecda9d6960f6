"""Small dataset fixtures written in the real formats (CIFAR-10 python pickles, .npy bitmaps, PNG folders)."""

from __future__ import annotations

import hashlib
import io
import pickle
import tarfile
from pathlib import Path

import numpy as np
from PIL import Image

# A tiny run on synthetic data, as the CLI's tests start one.
TINY_RUN = ["--dataset", "synthetic", "--width", "8", "--set", "model.z_dim=16", "--batch-size", "8", "--device", "cpu"]
TINY_RUN += ["--quiet"]
# The run and the study the session's `originals` are made with (conftest.py), and the damage fuzzer's
# (benchmarks/damage_fuzz.py): tiny, on synthetic data, in eager NCHW (no decision to time).
ORIGINALS_TINY = [*TINY_RUN, "--no-channels-last", "--no-compile"]
ORIGINALS_STUDY = [
    *ORIGINALS_TINY,
    "--precisions",
    "fp32,bf16",
    "--seeds",
    "1",
    "--set",
    "compare.eval_points=2",
    "--set",
    "compare.eval_samples=20",
    "--set",
    "compare.bench.batch_sizes=8",
    "--set",
    "compare.bench.min_seconds=0.2",
    "--set",
    "compare.bench.max_seconds=0.6",
    "--set",
    "logging.log_every=2",
]

CIFAR_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def cifar_batches(per_batch: int = 20, seed: int = 0, learnable: bool = False) -> dict[str, bytes]:
    """The seven members of cifar-10-batches-py, pickled the way the official files are (protocol 2).
    `learnable`: each class lights its own band of pixels, so a classifier can tell them apart."""
    rng = np.random.default_rng(seed)
    members = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8)
        labels = [int(x) for x in rng.integers(0, 10, size=per_batch)]
        if learnable:
            data //= 4
            for row, label in enumerate(labels):
                data[row, label * 300 : (label + 1) * 300] = 255
        members[name] = pickle.dumps(
            {b"batch_label": name.encode(), b"labels": labels, b"data": data, b"filenames": [b"x.png"] * per_batch},
            protocol=2,
        )
    members["batches.meta"] = pickle.dumps(
        {b"label_names": [c.encode() for c in CIFAR_CLASSES], b"num_cases_per_batch": per_batch, b"num_vis": 3072},
        protocol=2,
    )
    return members


def cifar_md5s(members: dict[str, bytes]) -> dict[str, str]:
    return {name: hashlib.md5(blob).hexdigest() for name, blob in members.items()}


def write_cifar_archive(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, blob in members.items():
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(blob)
            archive.addfile(info, io.BytesIO(blob))
    return path


def write_quickdraw(folder: Path, classes=("apple", "eye", "fish"), rows: int = 50) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for index, name in enumerate(classes):
        bitmaps = np.zeros((rows, 784), dtype=np.uint8)
        bitmaps[:, index * 10 : index * 10 + 100] = 255  # a class-specific stroke
        bitmaps[:, 700] = np.arange(rows, dtype=np.uint8)  # row identity, to check splits
        np.save(folder / f"{name}.npy", bitmaps)
    return folder


def write_image_folder(root: Path, classes=("cats", "dogs"), per_class: int = 3, size: int = 40) -> Path:
    for index, name in enumerate(classes):
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        for item in range(per_class):
            colour = (40 * index + 10 * item, 100, 200 - 50 * index)
            suffix = ".png" if item % 2 == 0 else ".jpg"
            Image.new("RGB", (size, size), colour).save(folder / f"img{item}{suffix}")
    return root


def write_mnist(folder: Path, count: int = 60, split: str = "train", seed: int = 0) -> Path:
    """IDX files as MNIST ships them (gzip, big-endian headers); each digit lights its own rows."""
    import gzip
    import struct

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    labels = (np.arange(count) % 10).astype(np.uint8)
    images = (rng.integers(0, 40, size=(count, 28, 28))).astype(np.uint8)
    for index, label in enumerate(labels):
        images[index, 2 * label : 2 * label + 3, :] = 255
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(folder / f"{prefix}-images-idx3-ubyte.gz", "wb") as handle:
        handle.write(struct.pack(">IIII", 0x00000803, count, 28, 28) + images.tobytes())
    with gzip.open(folder / f"{prefix}-labels-idx1-ubyte.gz", "wb") as handle:
        handle.write(struct.pack(">II", 0x00000801, count) + labels.tobytes())
    return folder
