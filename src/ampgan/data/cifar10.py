"""`cifar10`: the official python-version archive (cifar-10-python.tar.gz) or its extracted folder.

Layout: `cifar-10-batches-py/data_batch_1..5`, `test_batch` (pickled dicts: b'data' (N, 3072)
uint8 in CHW order, b'labels'), `batches.meta` (b'label_names'). Every batch file is checked
against the MD5 the dataset's authors (and torchvision) publish; the pickles are read with an
unpickler that only rebuilds numpy arrays, so a tampered file cannot run code.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from ampgan.data.dataset import ImageDataset
from ampgan.data.files import download, file_digest, require_data_dir
from ampgan.data.registry import DataConfig, register
from ampgan.errors import AmpganError

URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
ARCHIVE_NAME = "cifar-10-python.tar.gz"
FOLDER_NAME = "cifar-10-batches-py"
ARCHIVE_MD5 = "c58f30108f718f92721af3b95e74349a"
FILE_MD5 = {
    "data_batch_1": "c99cafc152244af753f735de768cd75f",
    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "data_batch_4": "634d18415352ddfa80567beed471001a",
    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "test_batch": "40351d587109b95175f43aff81a1287e",
    "batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
}
SPLITS = {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}

_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}


class _ArraysOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        return super().find_class(module, name)


def _members(folder: Path | None, archive: Path, names: list[str]) -> Iterator[tuple[str, bytes, str]]:
    """(name, its bytes, where they were read) of each named batch file, in order: from the extracted folder
    when there is one, else from the archive (opened once, one member in memory at a time)."""
    if folder is not None:
        for name in names:
            path = folder / name
            if not path.is_file():
                raise AmpganError(f"{path} is missing: the CIFAR-10 folder is incomplete, extract the archive again")
            yield name, path.read_bytes(), str(path)
        return
    try:
        tar = tarfile.open(archive, "r:gz")
    except (tarfile.TarError, OSError, EOFError) as error:
        raise AmpganError(
            f"{archive} is not a readable tar.gz ({error}): it is truncated or corrupted; delete it and fetch it again"
        ) from None
    with tar:
        for name in names:
            try:
                member = tar.extractfile(f"{FOLDER_NAME}/{name}")
                if member is None:
                    raise KeyError(name)
                blob = member.read()
            except KeyError:
                raise AmpganError(f"{archive} has no {FOLDER_NAME}/{name}: not the CIFAR-10 python archive") from None
            except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
                raise AmpganError(
                    f"{archive} is truncated or corrupted ({type(error).__name__}): delete it and fetch it again"
                ) from None
            yield name, blob, f"{archive}:{FOLDER_NAME}/{name}"
            del blob  # before the next member is read: one member in memory at a time


@register("cifar10", uses=("data_dir", "download"))
def load_cifar10(data: DataConfig, split: str, seed: int) -> ImageDataset:
    root = require_data_dir(data.data_dir, "cifar10", data.download)
    folder = root if root.name == FOLDER_NAME else root / FOLDER_NAME  # the extracted batches, if any
    folder, archive = folder if folder.is_dir() else None, root / ARCHIVE_NAME
    if folder is None and not archive.is_file():
        if not data.download:
            raise AmpganError(
                f"no {ARCHIVE_NAME} or {FOLDER_NAME}/ in {root}: add --download, or put the archive "
                f"from {URL} there by hand"
            )
        download(URL, archive, expected_md5=ARCHIVE_MD5)
    checksums, images, labels = {}, [], []
    for name, blob, origin in _members(folder, archive, ["batches.meta", *SPLITS[split]]):
        checksums[name] = hashlib.md5(blob).hexdigest()
        if checksums[name] != FILE_MD5[name]:
            raise AmpganError(
                f"checksum mismatch for {origin}: MD5 {checksums[name]}, expected {FILE_MD5[name]}; the file is "
                "damaged or not the official CIFAR-10, fetch the archive again"
            )
        try:
            batch = _ArraysOnlyUnpickler(io.BytesIO(blob), encoding="bytes").load()
        except Exception as error:  # noqa: BLE001 - any failure here means a damaged file
            raise AmpganError(
                f"{origin} is not a CIFAR-10 batch ({type(error).__name__}): the file is damaged; fetch the archive "
                "again"
            ) from None
        if name == "batches.meta":
            class_names = tuple(n.decode() if isinstance(n, bytes) else str(n) for n in batch[b"label_names"])
            continue
        pixels = np.asarray(batch[b"data"])
        if pixels.dtype != np.uint8 or pixels.ndim != 2 or pixels.shape[1] != 3072:
            raise AmpganError(f"{origin} holds {pixels.dtype} {pixels.shape}, not (N, 3072) uint8")
        images.append(torch.from_numpy(pixels.reshape(-1, 3, 32, 32).copy()))
        labels.append(torch.tensor(batch[b"labels"], dtype=torch.int64))
        del blob, batch, pixels  # keep peak memory near one batch beyond the result
    record = {
        "name": "cifar10",
        "split": split,
        "origin": str(folder or archive),
        "md5": checksums,
        "md5_verified": True,
    }
    if folder is None:
        record["archive_md5"] = file_digest(archive, "md5")
    return ImageDataset(torch.cat(images), torch.cat(labels), class_names, record)
