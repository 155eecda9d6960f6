"""`quickdraw`: Google's Quick, Draw! numpy-bitmap files, one `<class>.npy` per class.

Each file is (N, 784) uint8: 28x28 grey drawings, white strokes on black. The full files hold
100k+ rows each, so only the first `max_per_class` rows are read (through a memory map, never
the whole file); a seeded permutation of those rows splits them into train and test. No
checksums are published: the SHA-256 of each file goes into a manifest on first use and is
checked on every later load.
"""

from __future__ import annotations

import difflib
import urllib.parse
from pathlib import Path

import numpy as np
import torch

from ampgan.data.dataset import ImageDataset
from ampgan.data.files import download, require_data_dir, verify_with_manifest
from ampgan.data.registry import DataConfig, register
from ampgan.errors import AmpganError
from ampgan.seeds import data_split_seed

URL_PATTERN = "https://storage.googleapis.com/quickdraw_dataset/full/numpy_bitmap/{}.npy"
STUDY_CLASSES = ("airplane", "apple", "bee", "bird", "book", "clock", "cow", "dog", "eye", "fish")
DEFAULT_MAX_PER_CLASS = 10_000  # 10 classes x 10k x 784 B = 78 MB in memory
TEST_FRACTION = 0.1


def class_url(name: str) -> str:
    return URL_PATTERN.format(urllib.parse.quote(name))


def _open_bitmaps(path: Path) -> np.ndarray:
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError, OverflowError) as error:  # Overflow: a header's negative or huge shape
        raise AmpganError(f"{path} is not a readable .npy file ({error}): fetch it again") from None
    if array.dtype != np.uint8 or array.ndim != 2 or array.shape[1] != 784:
        raise AmpganError(
            f"{path} holds {array.dtype} {tuple(array.shape)}, not Quick, Draw! bitmaps (N, 784) uint8: "
            "use the numpy_bitmap files"
        )
    if array.shape[0] == 0:
        raise AmpganError(f"{path} has no drawings")
    return array


@register("quickdraw", uses=("data_dir", "download", "classes", "max_per_class"))
def load_quickdraw(data: DataConfig, split: str, seed: int) -> ImageDataset:
    root = require_data_dir(data.data_dir, "quickdraw", data.download)
    classes = tuple(data.class_list or STUDY_CLASSES)
    max_per_class = data.max_per_class or DEFAULT_MAX_PER_CLASS
    # <class>.npy, or the name Google's bucket page gives a file it downloads (full_numpy_bitmap_<class>.npy).
    names = [(f"{name}.npy", f"full_numpy_bitmap_{name}.npy") for name in classes]
    paths = [next((root / n for n in both if (root / n).is_file()), root / both[0]) for both in names]
    for name, path in zip(classes, paths):
        if not path.is_file():
            if data.download:
                download(class_url(name), path)
            else:
                # the classes there by name (a downloaded file's prefix left out), then the study's
                there = {p.stem.removeprefix("full_numpy_bitmap_") for p in root.glob("*.npy")}
                close = difflib.get_close_matches(name, sorted(there - {name}), n=3) or difflib.get_close_matches(
                    name, sorted(set(STUDY_CLASSES) - {name}), n=3
                )
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                # the drawings as strokes, which ampgan does not draw: <class>.ndjson, or the bucket page's
                # full_simplified_<class>.ndjson / full_raw_<class>.ndjson
                strokes = [f"{kind}{name}.ndjson" for kind in ("", "full_simplified_", "full_raw_")]
                strokes = [found for found in strokes if (root / found).is_file()]
                if strokes:
                    hint = f" ({strokes[0]} there holds strokes, not the numpy_bitmap 28x28 images ampgan reads)"
                raise AmpganError(
                    f"no Quick, Draw! class {name!r} in {root}{hint}: put {name}.npy there, or add --download"
                )
    # Every file is validated before the manifest records it: a bad file replaced by a good one must
    # not be refused later as a "checksum mismatch" against the bad one's digest.
    opened = [_open_bitmaps(path) for path in paths]
    checksums, manifest = verify_with_manifest(root, paths)
    images, labels = [], []
    for label, bitmaps in enumerate(opened):
        rows = min(max_per_class, bitmaps.shape[0])
        order = np.random.default_rng(data_split_seed(seed, label)).permutation(rows)
        test_count = max(1, int(round(rows * TEST_FRACTION)))
        chosen = np.sort(order[:test_count] if split == "test" else order[test_count:])
        block = np.asarray(bitmaps[:rows])[chosen]  # reads only the first `rows` rows from disk
        images.append(torch.from_numpy(block.reshape(-1, 1, 28, 28).copy()))
        labels.append(torch.full((len(chosen),), label, dtype=torch.int64))
    return ImageDataset(
        torch.cat(images),
        torch.cat(labels),
        classes,
        {
            "name": "quickdraw",
            "split": split,
            "origin": str(root),
            "classes": list(classes),
            "max_per_class": max_per_class,
            "split_seed": seed,
            "sha256": checksums,
            "manifest": manifest,
        },
    )
