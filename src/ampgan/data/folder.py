"""`folder:PATH`: the user's own images, one sub-folder per class (PNG, JPEG, ...).

Images are decoded with Pillow, converted to 1 or 3 channels by their real range (integer grey by the
bits its file declares, not clipped; transparency is flattened onto white and said so) and resized (bilinear,
antialiased) to the model's size, a non-square image stretched to a square, and said so. A class's images may sit
in nested folders inside its folder (as torchvision's ImageFolder reads them); files that are not images, images
outside any class folder, FIFOs and sockets, and what an operating system left (__MACOSX/, ._NAME, Thumbs.db) are
counted in one warning, never dropped without a word.

`data.cache` writes the decoded tensor as an .npz next to the data, keyed by a fingerprint of the file
list (names, sizes, modification times) and checked against the folder it claims to be (count,
shape, dtype, labels per class, SHA-256) before use: it is only a cache, so a damaged or foreign one
is rebuilt with one warning, and a folder that cannot be written to trains without one.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import warnings
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageOps, UnidentifiedImageError

from ampgan.data.dataset import ImageDataset, refuse_images_that_cannot_fit
from ampgan.errors import AmpganError, name_as_text, one_line, warn
from ampgan.files.atomic import remove_dead_temporaries, write_atomically
from ampgan.files.jsonfile import parse_json
from ampgan.files.manifest import FOLDER_MARKER
from ampgan.files.paths import leads_out

# Every name Pillow gives the formats a photo or a dataset comes in (.JPG, .jfif from a browser, .pgm of the
# classic face sets, .avif where Pillow reads it): a file named otherwise is left out, and said.
_FORMATS = ("AVIF", "BMP", "GIF", "JPEG", "PNG", "PPM", "TIFF", "WEBP")
IMAGE_SUFFIXES = {suffix for suffix, name in Image.registered_extensions().items() if name in _FORMATS}
DEFAULT_SIZE = 32
# What an operating system leaves in a folder, never the user's data: macOS's zip (__MACOSX/ of AppleDouble
# ._NAME files, which end in .png too), Windows (Thumbs.db, desktop.ini, $RECYCLE.BIN/), a Synology NAS's
# thumbnails (@eaDir/, real JPEGs); hidden names (.DS_Store) are skipped with them.
SYSTEM_NAMES = {
    "__macosx",
    "thumbs.db",
    "ehthumbs.db",
    "desktop.ini",
    "$recycle.bin",
    "system volume information",
    "@eadir",
}


# What decoding changed in an image, said once per folder: (what the images have, what was done).
_TRANSPARENT = ("have transparent pixels", "flattened onto white, the transparency is dropped")
_FRAMES = ("hold several frames (animated, multi-page, a JPEG's extra pictures)", "the first frame is used")
_STRETCHED = ("are not square", "each is stretched to a square, not cropped: crop them first to keep their proportions")


def _made_by_the_system(path: Path, root: Path) -> bool:
    """Whether `path` is hidden or is, or lies inside, what an operating system made (SYSTEM_NAMES)."""
    return any(part.startswith(".") or part.lower() in SYSTEM_NAMES for part in path.relative_to(root).parts)


def _class_folders(root: Path) -> list[Path]:
    if root.is_file():  # an archive, most likely: a zip is unpacked by Python itself, on every system
        raise AmpganError(
            f"folder:{one_line(root)} is a file, not a folder of class folders: unpack it (an archive: python -m "
            "zipfile -e FILE DIR, or tar -xf FILE -C DIR) and give folder:DIR"
        )
    if not root.is_dir():
        raise AmpganError(f"image folder {root} does not exist: give folder:PATH with one sub-folder per class")
    _refuse_an_output_folder(root, root)
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not _made_by_the_system(p, root))
    for folder in folders:
        _refuse_links_that_leave(folder, root)
        name_as_text(folder.name, f"the class folder of folder:{one_line(root)} named")
    if not folders:
        raise AmpganError(f"{root} has no class sub-folders: put each class's images in a folder named after the class")
    return folders


def _refuse_links_that_leave(path: Path, root: Path) -> None:
    """A dataset is what lies inside its folder: a symbolic link that leads out of it (a linked image, a
    linked class folder or subfolder, a `../` link) is refused rather than followed (files/paths.py)."""
    if leads_out(root, path):
        raise AmpganError(
            f"{path} is a link to {path.resolve()}, outside the dataset folder {root}: copy the "
            "images in, or remove the link"
        )


def _refuse_an_output_folder(folder: Path, root: Path) -> None:
    """A folder ampgan writes (a run, a study: it holds ampgan's marker) is never read as data: a run put
    inside its own dataset would train on its sample grids the next time the images are read."""
    if (folder / FOLDER_MARKER).exists():
        raise AmpganError(
            f"{one_line(folder)} in folder:{one_line(root)} is an ampgan output folder, not images: its sample "
            "grids would be read as training data; move it out of the dataset folder"
        )


def _image_files(folder: Path) -> list[Path]:
    """Every image in the class folder and in folders nested inside it (no ampgan output folder among them)."""
    found = list(folder.rglob("*"))
    for path in found:
        if path.name == FOLDER_MARKER:
            _refuse_an_output_folder(path.parent, folder.parent)
        if path.is_symlink() and path.is_dir():  # not followed (rglob; it may loop), and refused when it leads out
            _refuse_links_that_leave(path, folder.parent)
    # A link that leads nowhere (its image deleted or on a drive not mounted, or a loop) is no file, but it is
    # an image the user put there: refused by name rather than left out without a word.
    files = sorted(
        p
        for p in found
        if (p.is_file() or p.is_symlink()) and p.suffix.lower() in IMAGE_SUFFIXES and not _made_by_the_system(p, folder)
    )
    for path in files:
        if not path.is_file():
            raise AmpganError(
                f"{one_line(path)} is a link to no image ({one_line(os.readlink(path))} is missing, not a file, "
                "or a loop of links): restore the image or remove the link"
            )
        _refuse_links_that_leave(path, folder.parent)
    if not files:
        raise AmpganError(
            f"class folder {one_line(folder)} has no images ({', '.join(_FORMATS)}): add some or remove it"
        )
    return files


def _warn_about_what_is_not_read(root: Path, folders: list[Path]) -> None:
    """One warning naming what the dataset leaves out: images outside a class folder, other files, and what
    the operating system made (in a class folder, or beside them: the __MACOSX/ of an unzipped archive)."""
    at_root = [p for p in root.iterdir() if p.is_file()]
    loose = [p for p in at_root if p.suffix.lower() in IMAGE_SUFFIXES and not _made_by_the_system(p, root)]
    system = [p for p in root.iterdir() if p.is_dir() and p.name.lower() in SYSTEM_NAMES]
    found = [p for folder in folders + system for p in folder.rglob("*")]
    # macOS's ._NAME.png or a Thumbs.db beside the classes is the system's, not an image to move into one (other
    # hidden files there, ampgan's own cache among them, are not the dataset's business)
    inside = [p for p in found if p.is_file()] + [
        p for p in at_root if p.name.startswith("._") or p.name.lower() in SYSTEM_NAMES | {".ds_store"}
    ]
    linked = sorted(p for p in found if p.is_symlink() and not p.is_file() and not _made_by_the_system(p, root))
    # A FIFO, socket or device named x.png is neither a file nor a folder: it was left out without a word.
    special = sorted(p for p in found if not (p.is_file() or p.is_dir() or p.is_symlink()))
    made = sorted(p for p in inside if _made_by_the_system(p, root))
    other = [p for p in inside if p.suffix.lower() not in IMAGE_SUFFIXES and not _made_by_the_system(p, root)]
    parts = []
    if loose:
        parts.append(
            f"{len(loose)} image(s) directly in {one_line(root)} belong to no class folder "
            f"(e.g. {one_line(loose[0].name)})"
        )
    if other:
        suffixes = sorted({p.suffix.lower() or p.name for p in other})[:5]
        parts.append(f"{len(other)} file(s) that are not images ({', '.join(map(one_line, suffixes))})")
    if linked:
        parts.append(
            f"{len(linked)} link(s) to a folder or to nothing, not followed (e.g. "
            f"{one_line(linked[0].relative_to(root))})"
        )
    if special:
        parts.append(
            f"{len(special)} entr(ies) that are no file to read (a FIFO, socket or device, e.g. "
            f"{one_line(special[0].relative_to(root))})"
        )
    if made:
        parts.append(
            f"{len(made)} file(s) hidden or made by macOS or Windows (e.g. {one_line(made[0].relative_to(root))})"
        )
    if parts:
        advice = [
            *(["move images into a class folder to use them"] if loose else []),
            *(
                ["copy what a link leads to into its class folder (links to folders are not followed)"]
                if linked
                else []
            ),
        ]
        said = ": " + "; ".join(advice) if advice else " (none of them is read)"
        warn(f"folder:{one_line(root)} leaves out " + " and ".join(parts) + said)


def _decode(path: Path, size: int, channels: int, noted: dict, pillow_said: dict) -> np.ndarray:
    """The image at `path` as uint8 (C, H, W); what decoding changed is kept in `noted` by kind, and what Pillow
    warned of it in `pillow_said`, with the file: Pillow's own warnings (a decompression bomb's, a corrupt EXIF's)
    never name the file."""
    try:
        with warnings.catch_warnings(record=True) as caught, Image.open(path) as image:
            warnings.simplefilter("always")
            if getattr(image, "is_animated", False):  # GIF, APNG, WebP, multi-page TIFF, a JPEG's MPO pictures
                noted.setdefault(_FRAMES, []).append(path)
            # A camera's EXIF orientation says how the pixels stand: a phone's portrait photo is stored sideways.
            # A TIFF's tags (its bits per sample) are read from the file as opened: the upright copy has none.
            image = _to_8_bit(ImageOps.exif_transpose(image), getattr(image, "tag_v2", {}), path, channels, noted)
            if image.width != image.height:
                noted.setdefault(_STRETCHED, []).append(path)
            if image.size != (size, size):
                image = image.resize((size, size), Image.Resampling.BILINEAR, reducing_gap=None)
            array = np.asarray(image, dtype=np.uint8)
        for warning in caught:
            pillow_said.setdefault(warning.category.__name__, []).append((path, str(warning.message)))
    except Image.DecompressionBombError:
        raise AmpganError(
            f"{one_line(path)} claims more pixels than any dataset image should (Pillow's "
            "decompression-bomb limit): fix or remove the file"
        ) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        unknown = isinstance(error, UnidentifiedImageError)  # its message repeats the path, not the reason
        reason = f"not an image Pillow can decode, {path.stat().st_size} bytes" if unknown else f"{error}"
        raise AmpganError(
            f"cannot read image {one_line(path)} ({type(error).__name__}: {one_line(reason)}): fix or remove the file"
        ) from None
    return array[None] if channels == 1 else array.transpose(2, 0, 1)  # (C, H, W)


def _to_8_bit(image: Image.Image, tags: dict, path: Path, channels: int, noted: dict) -> Image.Image:
    """`image` as 8-bit grey ("L") or RGB by its real range: integer grey is scaled from the range its file
    declares in `tags` (Pillow's convert would clip 16 bits to white), transparency is flattened onto white
    (recorded in `noted`), and a colour space Pillow cannot turn grey (LAB) goes through RGB."""
    if image.mode == "I" or image.mode.startswith("I;"):
        image = _integer_grey_as_8_bit(image, tags, path)
    elif image.mode == "F":
        raise AmpganError(
            f"{one_line(path)} holds floating-point pixels (mode F), whose range an image does not state: save "
            "it as an 8- or 16-bit image"
        )
    if "A" in image.getbands() or "transparency" in image.info:
        rgba = image.convert("RGBA")
        if rgba.getextrema()[3][0] < 255:  # some pixel is not opaque
            noted.setdefault(_TRANSPARENT, []).append(path)
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, rgba)
    if image.mode not in ("1", "L", "RGB"):
        image = image.convert("RGB")  # LAB, HSV, CMYK, YCbCr, P: colour as RGB first, then grey by its luma
    return image.convert("L" if channels == 1 else "RGB")


def _integer_grey_as_8_bit(image: Image.Image, tags: dict, path: Path) -> Image.Image:
    """Integer grey ("I", "I;16", ...) scaled to 0-255 from the range its file declares: a TIFF states its bits
    per sample and their sign (Pillow holds 12-bit grey as "I;16", 16-bit signed and 32-bit as "I"); a PNG
    (Pillow 9 opened 16-bit grey as "I") or any other holds at most 16 bits."""
    bits, signed = tags.get(258, (16,))[0], tags.get(339, (1,))[0] == 2  # BitsPerSample, SampleFormat
    highest = 2 ** (bits - signed) - 1
    values = np.asarray(image).astype(np.int64 if signed else np.uint32)  # Pillow holds unsigned 32 bits as "I"
    lowest, brightest = int(values.min()), int(values.max())
    # Negative or past the range: no grey level; all under 1/510 of it: every pixel black (int32 holding 16 bits).
    if lowest < 0 or brightest > highest or 0 < brightest < highest / 510:
        raise AmpganError(
            f"{one_line(path)} ({'signed ' if signed else ''}{bits}-bit grey, mode {image.mode}) holds pixel values "
            f"{lowest} to {brightest}, which its range 0-{highest} shows as "
            f"{'black' if lowest >= 0 and brightest <= highest else 'no grey level'}: save it as an unsigned 8- or "
            "16-bit image, white at 255 or 65535"
        )
    return Image.fromarray(np.round(values * (255 / highest)).astype(np.uint8))


def load_folder(
    path: str, image_size: int | None = None, channels: int | None = None, cache: bool = False
) -> ImageDataset:
    root = Path(path).expanduser()
    size, channels = image_size or DEFAULT_SIZE, channels or 3
    folders = _class_folders(root)
    files_per_class = [_image_files(folder) for folder in folders]
    _warn_about_what_is_not_read(root, folders)
    all_files = [f for files in files_per_class for f in files]
    # The cache's key: the file list and the shape; "upright": decoded by EXIF orientation, which caches written
    # before were not; "declared range": integer grey scaled by its file's bits (16- or 32-bit were taken as 16).
    digest = hashlib.sha256(f"{size}:{channels}:upright:declared range".encode())
    for file in all_files:
        stat = file.stat()
        # A name that is not UTF-8 (surrogate-escaped by Python) hashes as the bytes it is.
        digest.update(
            f"{file.parent.name}/{file.name}:{stat.st_size}:{stat.st_mtime_ns}".encode("utf-8", "surrogateescape")
        )
    fingerprint = digest.hexdigest()
    class_names = tuple(folder.name for folder in folders)
    counts = [len(files) for files in files_per_class]
    cache_path = root / f".ampgan-cache-{size}px-{channels}ch.npz"
    source = {"name": "folder", "origin": str(root), "files": len(all_files), "fingerprint": fingerprint}
    # A cache that is a link leading out is not read: it is replaced by a file of this folder's own.
    if cache and cache_path.is_file() and not leads_out(root, cache_path):
        cached = _read_cache(cache_path, fingerprint, class_names, counts, (channels, size, size))
        if cached is not None:
            return ImageDataset(*cached, class_names, source | {"cache": str(cache_path), "cache_hit": True})
    refuse_images_that_cannot_fit(len(all_files), channels, size)
    images = np.empty((len(all_files), channels, size, size), dtype=np.uint8)
    labels = np.repeat(np.arange(len(folders), dtype=np.int64), counts)  # the files are in class order
    noted: dict[tuple[str, str], list[Path]] = {}
    pillow_said: dict[str, list[tuple[Path, str]]] = {}
    refused: list[tuple[Path, str]] = []
    for index, file in enumerate(all_files):
        try:
            images[index] = _decode(file, size, channels, noted, pillow_said)
        except AmpganError as error:  # every image that cannot be used, at once: not one per hour-long read
            refused.append((file, str(error)))
    if refused:
        others = ", ".join(one_line(path.relative_to(root)) for path, _ in refused[1:4])
        more = f"; {len(refused) - 1} more image(s) cannot be used either: {others}" + ", ..." * (len(refused) > 4)
        raise AmpganError(refused[0][1] + more * (len(refused) > 1))
    for (what, done), files in noted.items():
        warn(
            f"{len(files)} image(s) of folder:{one_line(root)} {what} (e.g. {one_line(files[0].relative_to(root))}): "
            f"{done}"
        )
    for kind, said in pillow_said.items():  # one line per kind: a folder of 10,000 photos may share one fault
        (first, message), files = said[0], len({path for path, _ in said})
        warn(
            f"Pillow warned of {files} image(s) of folder:{one_line(root)} ({kind}), e.g. "
            f"{one_line(first.relative_to(root))}: {one_line(message).rstrip('.')}; used as Pillow decoded it"
        )
    if cache and _write_cache(cache_path, images, labels, fingerprint, class_names):
        source |= {"cache": str(cache_path), "cache_hit": False}
    return ImageDataset(torch.from_numpy(images), torch.from_numpy(labels), class_names, source)


def _content_hash(images: np.ndarray, labels: np.ndarray) -> str:
    return hashlib.sha256(images.tobytes() + labels.tobytes()).hexdigest()


def _labels_match(labels: np.ndarray, counts: list[int]) -> bool:
    """Labels in 0..classes-1, sorted by class, as many of each class as its folder has images."""
    if labels.size and (labels.min() < 0 or labels.max() >= len(counts)):
        return False
    return np.bincount(labels, minlength=len(counts)).tolist() == counts and bool(np.all(np.diff(labels) >= 0))


def _write_cache(path: Path, images, labels, fingerprint: str, class_names) -> bool:
    """Whether the cache was written: a folder that refuses the write (read-only, full) trains without one."""
    meta = json.dumps(
        {"fingerprint": fingerprint, "class_names": list(class_names), "sha256": _content_hash(images, labels)}
    )
    buffer = io.BytesIO()
    np.savez(buffer, images=images, labels=labels, meta=np.frombuffer(meta.encode(), dtype=np.uint8))
    try:
        write_atomically(path, lambda stream: stream.write(buffer.getvalue()))
    except OSError as error:
        warn(
            f"cannot write the dataset cache {one_line(path)} ({error.strerror or error}): training goes on "
            "without it; drop data.cache, or make the folder writable"
        )
        return False
    return True


def _read_cache(
    path: Path, fingerprint: str, class_names, counts: list[int], image_shape: tuple[int, int, int]
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The cached tensors when they are this folder's, else None (the folder changed: re-read it). A
    cache that is damaged or holds anything but this folder's images is rebuilt, with one warning."""
    remove_dead_temporaries(path.parent)  # a cache write killed midway left its temporary file here
    try:
        with np.load(path, allow_pickle=False) as archive:
            meta = parse_json(archive["meta"].tobytes().decode())
            images, labels = archive["images"], archive["labels"]
        if not isinstance(meta, dict):
            raise ValueError("its description is not a table")
    except Exception as error:  # noqa: BLE001 - truncated, garbage, not a zip, wrong types: only a cache
        warn(f"the dataset cache {one_line(path)} is damaged ({type(error).__name__}): rebuilding it from the images")
        return None
    if meta.get("fingerprint") != fingerprint or meta.get("class_names") != list(class_names):
        return None
    expected = (sum(counts), *image_shape)
    if (
        images.dtype != np.uint8
        or images.shape != expected
        or labels.dtype != np.int64
        or labels.shape != expected[:1]
        or not _labels_match(labels, counts)
        or meta.get("sha256") != _content_hash(images, labels)
    ):
        warn(
            f"the dataset cache {one_line(path)} does not hold this folder's {sum(counts)} images at "
            f"{image_shape[1]} px: rebuilding it from the images"
        )
        return None
    return torch.from_numpy(images), torch.from_numpy(labels)
