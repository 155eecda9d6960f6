"""`folder:PATH`: the user's own images, one sub-folder per class (PNG, JPEG, ...).

Images are decoded with Pillow, converted to 1 or 3 channels and resized (bilinear, antialiased)
to the model's size. `--cache` writes the decoded tensor as an .npz next to the data, keyed by a
fingerprint of the file list (names, sizes, modification times) and verified by SHA-256, so a
second load is instant and a changed folder is re-read rather than served stale.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError

from ampgan.files.atomic import write_atomically
from ampgan.data.dataset import ImageDataset
from ampgan.errors import AmpganError

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff"}
DEFAULT_SIZE = 32


def _class_folders(root: Path) -> list[Path]:
    if not root.is_dir():
        raise AmpganError(f"image folder {root} does not exist: give folder:PATH with one sub-folder per class")
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    for folder in folders:
        _refuse_links_that_leave(folder, root)
    if not folders:
        raise AmpganError(f"{root} has no class sub-folders: put each class's images in a folder named after the class")
    return folders


def _refuse_links_that_leave(path: Path, root: Path) -> None:
    """A dataset is what lies inside its folder: a symbolic link that leads out of it (a linked
    directory would silently become a class) is refused rather than followed."""
    if path.is_symlink() and not path.resolve().is_relative_to(root.resolve()):
        raise AmpganError(f"{path} is a link to {path.resolve()}, outside the dataset folder {root}: copy the "
                          "images in, or remove the link")


def _image_files(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    for path in files:
        _refuse_links_that_leave(path, folder.parent)
    if not files:
        raise AmpganError(f"class folder {folder} has no images ({', '.join(sorted(IMAGE_SUFFIXES))}): add some or remove it")
    return files


def _fingerprint(files: list[Path], size: int, channels: int) -> str:
    digest = hashlib.sha256(f"{size}:{channels}".encode())
    for path in files:
        stat = path.stat()
        digest.update(f"{path.parent.name}/{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def _decode(path: Path, size: int, channels: int) -> np.ndarray:
    try:
        with Image.open(path) as image:
            image = image.convert("L" if channels == 1 else "RGB")
            if image.size != (size, size):
                image = image.resize((size, size), Image.Resampling.BILINEAR, reducing_gap=None)
            array = np.asarray(image, dtype=np.uint8)
    except Image.DecompressionBombError:
        raise AmpganError(f"{path} claims more pixels than any dataset image should (Pillow's decompression-bomb "
                          "limit): fix or remove the file") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        raise AmpganError(f"cannot read image {path} ({type(error).__name__}): fix or remove the file") from None
    return array[None] if channels == 1 else array.transpose(2, 0, 1)  # (C, H, W)


def load_folder(path: str, image_size: int | None = None, channels: int | None = None, cache: bool = False) -> ImageDataset:
    root = Path(path).expanduser()
    size, channels = image_size or DEFAULT_SIZE, channels or 3
    folders = _class_folders(root)
    files_per_class = [_image_files(folder) for folder in folders]
    all_files = [f for files in files_per_class for f in files]
    fingerprint = _fingerprint(all_files, size, channels)
    class_names = tuple(folder.name for folder in folders)
    cache_path = root / f".ampgan-cache-{size}px-{channels}ch.npz"
    source = {"name": "folder", "origin": str(root), "files": len(all_files), "fingerprint": fingerprint}
    if cache and cache_path.is_file():
        cached = _read_cache(cache_path, fingerprint, class_names)
        if cached is not None:
            images, labels = cached
            return ImageDataset(images, labels, class_names, source | {"cache": str(cache_path), "cache_hit": True})
    images = np.empty((len(all_files), channels, size, size), dtype=np.uint8)
    labels = np.empty(len(all_files), dtype=np.int64)
    index = 0
    for label, files in enumerate(files_per_class):
        for file in files:
            images[index] = _decode(file, size, channels)
            labels[index] = label
            index += 1
    if cache:
        _write_cache(cache_path, images, labels, fingerprint, class_names)
        source |= {"cache": str(cache_path), "cache_hit": False}
    return ImageDataset(torch.from_numpy(images), torch.from_numpy(labels), class_names, source)


def _content_hash(images: np.ndarray, labels: np.ndarray) -> str:
    return hashlib.sha256(images.tobytes() + labels.tobytes()).hexdigest()


def _write_cache(path: Path, images, labels, fingerprint: str, class_names) -> None:
    meta = json.dumps({"fingerprint": fingerprint, "class_names": list(class_names), "sha256": _content_hash(images, labels)})
    buffer = io.BytesIO()
    np.savez(buffer, images=images, labels=labels, meta=np.frombuffer(meta.encode(), dtype=np.uint8))
    write_atomically(path, lambda stream: stream.write(buffer.getvalue()))


def _read_cache(path: Path, fingerprint: str, class_names) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The cached tensors, or None when the folder changed or the cache does not verify."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            meta = json.loads(archive["meta"].tobytes().decode())
            images, labels = archive["images"], archive["labels"]
    except (OSError, ValueError, KeyError, json.JSONDecodeError):
        return None
    if meta.get("fingerprint") != fingerprint or meta.get("class_names") != list(class_names):
        return None
    if meta.get("sha256") != _content_hash(images, labels):
        return None
    return torch.from_numpy(images), torch.from_numpy(labels)
