"""folder:PATH reads what is in the images, says what it leaves out, and keeps its cache honest."""

from __future__ import annotations

import io
import json
import os
import signal
import struct
import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import fill_the_disk, run_cli, writer_in_flight
from PIL import Image

from ampgan.data.folder import load_folder
from ampgan.errors import AmpganError, AmpganWarning


def _load(path, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AmpganWarning)
        dataset = load_folder(str(path), **kwargs)
    return dataset, [str(w.message) for w in caught if issubclass(w.category, AmpganWarning)]


def test_a_16_bit_image_is_scaled_by_its_range_not_clipped(tmp_path):
    (tmp_path / "a").mkdir()
    ramp = np.linspace(0, 65535, 16 * 16).reshape(16, 16).astype(np.uint16)
    Image.fromarray(ramp).save(tmp_path / "a" / "ramp.png")  # a real 16-bit grey PNG
    dataset, _ = _load(tmp_path, image_size=16, channels=1)
    pixels = dataset.images[0, 0].numpy().astype(int)
    assert pixels.min() == 0 and pixels.max() == 255
    assert abs(pixels.mean() - 127.5) < 2  # the ramp, not 99.6% white
    assert (pixels == 255).mean() < 0.05


def test_transparency_is_flattened_and_said(tmp_path):
    (tmp_path / "a").mkdir()
    rgba = np.zeros((8, 8, 4), np.uint8)
    rgba[..., 0] = 200
    rgba[:4, :, 3] = 255  # top half opaque red, bottom half fully transparent
    Image.fromarray(rgba, "RGBA").save(tmp_path / "a" / "x.png")
    dataset, said = _load(tmp_path, image_size=8, channels=3)
    image = dataset.images[0].numpy()
    assert tuple(image[:, 0, 0]) == (200, 0, 0) and tuple(image[:, 7, 0]) == (255, 255, 255)
    assert any("transparent pixels" in line and "flattened onto white" in line for line in said)


def test_nested_images_belong_to_their_class_and_what_is_left_out_is_said(tmp_path):
    for relative in ("cats/a.png", "cats/indoor/b.png", "cats/indoor/deep/c.png", "dogs/d.png", "stray.png"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (8, 8), (10, 20, 30)).save(tmp_path / relative)
    (tmp_path / "dogs" / "notes.txt").write_text("not an image")
    dataset, said = _load(tmp_path, image_size=8)
    assert dataset.class_names == ("cats", "dogs") and dataset.labels.tolist() == [0, 0, 0, 1]
    (line,) = [line for line in said if "leaves out" in line]
    assert "1 image(s) directly in" in line and "stray.png" in line and "1 file(s) that are not images (.txt)" in line


@pytest.mark.parametrize("damage", ["truncated", "garbage", "not a table", "float images", "foreign content"])
def test_a_damaged_or_foreign_cache_is_rebuilt_with_one_warning(tmp_path, damage):
    data = tmp_path / "data"
    for index in range(15):
        (data / f"c{index % 3}").mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (32, 32), (index * 10, 50, 90)).save(data / f"c{index % 3}" / f"{index}.png")
    first, _ = _load(data, cache=True)
    (cache,) = data.glob(".ampgan-cache-*.npz")
    stat = cache.stat()
    if damage == "truncated":
        cache.write_bytes(cache.read_bytes()[:300])
    elif damage == "garbage":
        cache.write_bytes(os.urandom(2000))
    else:
        with np.load(cache) as archive:
            meta = json.loads(archive["meta"].tobytes().decode())
            images, labels = archive["images"], archive["labels"]
        if damage == "not a table":
            meta = ["x"]
        elif damage == "float images":
            images = images.astype(np.float32)
        else:  # 3 images at 8 px, with a digest that matches them: not this folder's 15 at 32 px
            from ampgan.data.folder import _content_hash

            images, labels = images[:3, :, :8, :8].copy(), np.array([0, 1, 2])
            meta["sha256"] = _content_hash(images, labels)
        buffer = io.BytesIO()
        np.savez(buffer, images=images, labels=labels, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8))
        cache.write_bytes(buffer.getvalue())
    os.utime(cache, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    again, said = _load(data, cache=True)
    assert len(again) == 15 and again.images.equal(first.images) and again.labels.equal(first.labels)
    assert len([line for line in said if "dataset cache" in line]) == 1
    third, said = _load(data, cache=True)  # rebuilt: served from the cache, silently
    assert third.source["cache_hit"] and not said


def test_a_read_only_folder_trains_without_its_cache(tmp_path, read_only_view):
    (tmp_path / "data" / "a").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(tmp_path / "data" / "a" / "x.png")
    view = read_only_view(tmp_path / "data")
    dataset, said = _load(view, image_size=8, cache=True)
    assert len(dataset) == 1 and any("cannot write the dataset cache" in line and "Read-only" in line for line in said)


def test_a_full_disk_costs_only_the_cache(tmp_path, tiny_disk):
    for index in range(3):
        (tiny_disk / "a").mkdir(exist_ok=True)
        Image.fromarray(np.random.default_rng(index).integers(0, 255, (200, 200, 3), dtype=np.uint8)).save(
            tiny_disk / "a" / f"{index}.png"
        )
    fill_the_disk(tiny_disk)  # what is left
    dataset, said = _load(tiny_disk, image_size=128, cache=True)
    assert len(dataset) == 3 and any("No space left" in line for line in said)
    assert not list(tiny_disk.glob(".ampgan-cache*")) and not list(tiny_disk.glob(".*.tmp"))


def test_a_cache_write_that_fails_costs_only_the_cache(tmp_path, monkeypatch):
    """ENOSPC, EROFS or EACCES while writing the cache: one warning, the data still loads."""
    import errno

    import ampgan.data.folder as folder

    (tmp_path / "a").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "a" / "x.png")
    for code in (errno.ENOSPC, errno.EROFS, errno.EACCES):

        def refuse(path, write, code=code):
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr(folder, "write_atomically", refuse)
        dataset, said = _load(tmp_path, image_size=8, cache=True)
        assert len(dataset) == 1 and any(os.strerror(code) in line for line in said)


def test_floating_point_pixels_are_refused(tmp_path):
    (tmp_path / "a").mkdir()
    Image.fromarray(np.full((8, 8), 0.5, np.float32), mode="F").save(tmp_path / "a" / "x.tiff")
    with pytest.raises(AmpganError, match="floating-point pixels"):
        load_folder(str(tmp_path), image_size=8)


def test_an_evaluator_cache_that_cannot_be_written_costs_only_the_cache(tmp_path, read_only_view, monkeypatch):
    """A trained evaluator whose cache folder refuses the write is used all the same, with one warning."""
    from ampgan.data.synthetic import make_synthetic
    from ampgan.quality import evaluator as evaluator_module
    from ampgan.quality.evaluator import evaluator_for

    monkeypatch.setattr(evaluator_module, "MIN_TRAINING_STEPS", 10)  # the cache's behaviour, not its accuracy

    dataset = make_synthetic(count=200, num_classes=4, image_size=16, seed=0)
    (tmp_path / "cache").mkdir()
    cache = read_only_view(tmp_path / "cache")  # a full disk is the same refusal (ENOSPC): tested on the data cache
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AmpganWarning)
        evaluator = evaluator_for(dataset, cache_dir=cache, epochs=1, min_accuracy=0.0)
    said = [str(w.message) for w in caught if issubclass(w.category, AmpganWarning)]
    assert evaluator.held_out_accuracy >= 0 and any("cannot keep the evaluator in its cache" in line for line in said)
    assert not list(Path(cache).glob("*.pt")) and not list(Path(cache).glob(".*.tmp"))


@pytest.mark.parametrize(
    "orientation, turn",
    [
        (1, None),
        (3, Image.Transpose.ROTATE_180),
        (6, Image.Transpose.ROTATE_270),
        (8, Image.Transpose.ROTATE_90),
        (2, Image.Transpose.FLIP_LEFT_RIGHT),
    ],
)
@pytest.mark.parametrize("suffix", [".jpg", ".png"])
def test_an_image_stands_as_its_exif_orientation_says(tmp_path, orientation, turn, suffix):
    """A phone stores a portrait photo sideways and says so in EXIF; the data is the picture as it is seen."""
    (tmp_path / "a").mkdir()
    pixels = np.zeros((8, 16, 3), np.uint8)
    pixels[:, :8] = 255  # stored: white left half, black right half, 16 wide and 8 tall
    stored = Image.fromarray(pixels)
    exif = stored.getexif()
    exif[0x0112] = orientation
    stored.save(tmp_path / "a" / f"x{suffix}", exif=exif, **({"quality": 100} if suffix == ".jpg" else {}))
    dataset, _ = _load(tmp_path, image_size=16, channels=1)
    seen = stored if turn is None else stored.transpose(turn)
    expected = np.asarray(seen.convert("L").resize((16, 16), Image.Resampling.BILINEAR, reducing_gap=None))
    assert np.abs(dataset.images[0, 0].numpy().astype(int) - expected.astype(int)).max() <= 8  # JPEG's own noise


def test_what_pillow_warns_of_an_image_names_the_file_once_per_kind(tmp_path, monkeypatch):
    """Pillow's decompression-bomb warning (a 12000x12000 scan) named no file: which image of thousands was
    it? Now one line per kind names the first file and counts the rest, and nothing of Pillow's prints raw."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 150)  # 256 > 150 warns; 256 < 300 is no error
    (tmp_path / "a").mkdir()
    for name in ("big1.png", "big2.png"):
        Image.new("L", (16, 16), 90).save(tmp_path / "a" / name)
    Image.new("L", (8, 8), 90).save(tmp_path / "a" / "small.png")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = load_folder(str(tmp_path), image_size=8, channels=1)
    assert len(dataset.images) == 3 and int(dataset.images[0].float().mean()) == 90  # used as decoded
    assert [w.category for w in caught] == [AmpganWarning]
    message = str(caught[0].message)
    assert message.startswith("Pillow warned of 2 image(s) of folder:") and "(DecompressionBombWarning)" in message
    assert f"e.g. {Path('a', 'big1.png')}: Image size (256 pixels) exceeds limit of 150 pixels" in message


@pytest.mark.parametrize("target", ["gone.png", "loop.png", "../../elsewhere/gone.png"])
def test_a_link_to_no_image_is_refused_by_name_not_left_out(tmp_path, target):
    """A link whose image is gone (deleted, a drive not mounted) or that loops was left out without a word
    (a class of 1,000 photos silently trained on 10)."""
    (tmp_path / "a").mkdir()
    Image.new("L", (8, 8), 90).save(tmp_path / "a" / "real.png")
    (tmp_path / "a" / "loop.png").symlink_to(target)
    with pytest.raises(AmpganError) as refused:
        load_folder(str(tmp_path), image_size=8)
    assert str(refused.value) == (
        f"{tmp_path / 'a' / 'loop.png'} is a link to no image ({target} is missing, not a file, or a loop of "
        "links): restore the image or remove the link"
    )


def _grey_tiff(path: Path, values: np.ndarray) -> None:
    """A one-strip grey TIFF holding `values` as their dtype says (bits and sign), written by hand: Pillow
    writes grey only as signed 32-bit or unsigned 16-bit."""
    height, width = values.shape
    tags = [(256, width), (257, height), (258, values.dtype.itemsize * 8), (259, 1), (262, 1)]
    tags += [(273, 8 + 2 + 10 * 12 + 4), (277, 1), (278, height), (279, values.nbytes)]
    tags += [(339, 2 if values.dtype.kind == "i" else 1)]  # SampleFormat: signed or unsigned integer
    directory = struct.pack("<H", len(tags)) + b"".join(struct.pack("<HHII", tag, 4, 1, v) for tag, v in tags)
    path.write_bytes(
        b"II*\0" + struct.pack("<I", 8) + directory + b"\0\0\0\0" + values.astype(f"<{values.dtype.str[1:]}").tobytes()
    )


def _rgb_png_16_bit(path: Path, rgb: tuple[int, int, int]) -> None:
    """An 8x8 PNG of one 16-bit-per-channel colour, written by hand (Pillow writes no 16-bit RGB)."""
    rows = b"".join(b"\0" + np.array(rgb, ">u2").tobytes() * 8 for _ in range(8))
    chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))  # noqa: E731
    header = struct.pack(">IIBBBBB", 8, 8, 16, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    )


ORANGE = (200, 100, 50)  # grey by ITU-R 601 luma: 124
_UNIFORM = np.full((8, 8), 1, np.int64)


def _palette(transparent: bool) -> Image.Image:
    image = Image.new("P", (8, 8), 0)
    image.putpalette(ORANGE)
    if transparent:
        image.info["transparency"] = 0
    return image


@pytest.mark.parametrize(
    "write, rgb",
    [
        (lambda p: Image.new("1", (8, 8), 1).save(p / "x.png"), (255,) * 3),
        (lambda p: Image.new("L", (8, 8), 124).save(p / "x.png"), (124,) * 3),
        (lambda p: Image.new("LA", (8, 8), (124, 255)).save(p / "x.png"), (124,) * 3),
        (lambda p: _palette(False).save(p / "x.png"), ORANGE),
        (lambda p: _palette(True).save(p / "x.png"), (255,) * 3),  # transparent: white
        (lambda p: Image.new("RGB", (8, 8), ORANGE).save(p / "x.png"), ORANGE),
        (lambda p: Image.new("RGBA", (8, 8), (*ORANGE, 255)).save(p / "x.png"), ORANGE),
        (lambda p: Image.new("RGB", (8, 8), ORANGE).convert("CMYK").save(p / "x.tif"), ORANGE),
        (lambda p: Image.new("RGB", (8, 8), ORANGE).convert("CMYK").save(p / "x.jpg", quality=100), ORANGE),
        (lambda p: Image.new("RGB", (8, 8), ORANGE).convert("YCbCr").save(p / "x.tif"), ORANGE),
        (lambda p: Image.new("RGB", (8, 8), ORANGE).convert("LAB").save(p / "x.tif"), ORANGE),
        (lambda p: _rgb_png_16_bit(p / "x.png", tuple(257 * c for c in ORANGE)), ORANGE),
        (lambda p: Image.fromarray((_UNIFORM * 32768).astype(np.uint16)).save(p / "x.png"), (128,) * 3),
        (lambda p: Image.fromarray((_UNIFORM * 32768).astype(np.uint16)).save(p / "x.tif"), (128,) * 3),
        (
            lambda p: Image.frombytes("I;16B", (8, 8), (_UNIFORM * 32768).astype(">u2").tobytes()).save(p / "x.tif"),
            (128,) * 3,
        ),
        (lambda p: _grey_tiff(p / "x.tif", (_UNIFORM * 16384).astype(np.int16)), (128,) * 3),  # of 32767
        (lambda p: Image.fromarray((_UNIFORM * 2**30).astype(np.int32), "I").save(p / "x.tif"), (128,) * 3),
        (lambda p: _grey_tiff(p / "x.tif", (_UNIFORM * 3 * 2**30).astype(np.uint32)), (191,) * 3),
    ],
    ids=[
        "1",
        "L",
        "LA",
        "P",
        "P transparent",
        "RGB",
        "RGBA",
        "CMYK",
        "CMYK JPEG",
        "YCbCr",
        "LAB",
        "RGB 16-bit",
        "I;16 PNG",
        "I;16 TIFF",
        "I;16B",
        "int16",
        "int32 (I)",
        "uint32 (I)",
    ],
)
def test_every_mode_is_read_by_its_range_into_grey_and_colour(tmp_path, write, rgb):
    """The 32-bit integer grey of a TIFF (mode I) was scaled as if 16-bit; LAB could not be turned grey."""
    (tmp_path / "a").mkdir()
    write(tmp_path / "a")
    colour, _ = _load(tmp_path, image_size=8, channels=3)
    grey, _ = _load(tmp_path, image_size=8, channels=1)
    assert np.abs(colour.images[0, :, 3, 3].numpy().astype(int) - rgb).max() <= 3  # JPEG and LAB round
    luma = round(0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2])
    assert abs(int(grey.images[0, 0, 3, 3]) - luma) <= 3


@pytest.mark.parametrize(
    "values, said",
    [
        (_UNIFORM.astype(np.float32), "holds floating-point pixels (mode F), whose range an image does not state"),
        (
            (_UNIFORM * 65535).astype(np.int32),
            "(signed 32-bit grey, mode I) holds pixel values 65535 to 65535, "
            "which its range 0-2147483647 shows as black",
        ),
        (
            (_UNIFORM * -5).astype(np.int16),
            "(signed 16-bit grey, mode I) holds pixel values -5 to -5, which its range 0-32767 shows as no grey level",
        ),
    ],
    ids=["F", "int32 holding 16 bits", "negative"],
)
def test_pixels_no_grey_level_stands_for_are_refused_naming_file_mode_and_fix(tmp_path, values, said):
    (tmp_path / "a").mkdir()
    if values.dtype == np.float32:
        Image.fromarray(values, "F").save(tmp_path / "a" / "x.tif")
    else:
        _grey_tiff(tmp_path / "a" / "x.tif", values)
    with pytest.raises(AmpganError) as refused:
        load_folder(str(tmp_path), image_size=8)
    assert str(refused.value).startswith(f"{tmp_path / 'a' / 'x.tif'} ") and said in str(refused.value)
    assert str(refused.value).endswith("save it as an 8- or 16-bit image") or "white at 255 or 65535" in str(
        refused.value
    )


def test_what_macos_windows_and_a_nas_leave_in_an_unzipped_folder_is_skipped_and_counted_once(tmp_path, capsys):
    """An archive zipped on macOS unzips a __MACOSX/ folder beside the classes (refused as a class without
    images); AppleDouble ._NAME.png files, .DS_Store, Thumbs.db, desktop.ini and a Synology's @eaDir/ thumbnails
    (real JPEGs, read as data before) are the system's, not the user's images."""
    made = {
        "__MACOSX/cats/._a.png": b"\0\5\26\7\0\2\0\0Mac OS X        ",  # AppleDouble header
        "__MACOSX/._cats": b"\0\5\26\7\0\2\0\0Mac OS X        ",
        "cats/.DS_Store": b"\0\0\0\1Bud1\0\0\x10\0",
        "cats/._a.png": b"\0\5\26\7\0\2\0\0Mac OS X        ",
        "dogs/Thumbs.db": b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
        "dogs/desktop.ini": b"[.ShellClassInfo]\r\n",
        # beside the classes: named as the system's, not as an image to move into a class folder
        ".DS_Store": b"\0\0\0\1Bud1\0\0\x10\0",
        "._pets.png": b"\0\5\26\7\0\2\0\0Mac OS X        ",
    }
    archive = tmp_path / "pets.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for name in ("cats/a.png", "dogs/b.png", "dogs/@eaDir/b.png/SYNOFILE_THUMB_M.jpg"):
            image = io.BytesIO()
            Image.new("RGB", (8, 8), (200, 100, 50)).save(image, "JPEG" if name.endswith(".jpg") else "PNG")
            zipped.writestr(name, image.getvalue())
        for name, content in made.items():
            zipped.writestr(name, content)
    zipfile.ZipFile(archive).extractall(tmp_path / "pets")
    dataset, said = _load(tmp_path / "pets", image_size=8)
    assert dataset.class_names == ("cats", "dogs") and dataset.counts_per_class() == [1, 1]
    assert said == [
        f"folder:{tmp_path / 'pets'} leaves out 9 file(s) hidden or made by macOS or Windows (e.g. .DS_Store) "
        "(none of them is read)"
    ]
    code, out, err = run_cli(capsys, "data", "info", f"folder:{tmp_path / 'pets'}", "--image-size", "8")
    assert code == 0 and "2 images" in out and err.count("\n") == 1 and "leaves out 9 file(s)" in err, err


def test_an_archive_given_as_the_folder_is_refused_saying_to_unpack_it(tmp_path, capsys):
    """folder:pets.zip said 'image folder pets.zip does not exist', beside the file the user can see."""
    with zipfile.ZipFile(tmp_path / "pets.zip", "w") as zipped:
        zipped.writestr("cats/a.png", b"")
    code, out, err = run_cli(capsys, "data", "info", f"folder:{tmp_path / 'pets.zip'}")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"folder:{tmp_path / 'pets.zip'} is a file, not a folder of class folders" in err
    assert "python -m zipfile -e FILE DIR" in err and "give folder:DIR" in err


def test_every_image_that_cannot_be_read_is_named_in_one_line_with_its_reason(tmp_path, capsys):
    """A truncated image in the middle of a folder, a zero-byte file: the first was named as '(OSError)' and the
    rest found one read at a time."""
    (tmp_path / "a").mkdir()
    noise = np.random.default_rng(0).integers(0, 256, (64, 64, 3), np.uint8)
    Image.fromarray(noise).save(tmp_path / "a" / "0-good.png")
    Image.fromarray(noise).save(tmp_path / "a" / "1-cut.png")
    (tmp_path / "a" / "1-cut.png").write_bytes((tmp_path / "a" / "1-cut.png").read_bytes()[:3000])
    (tmp_path / "a" / "2-empty.jpg").write_bytes(b"")
    for name in ("3.png", "4.png", "5.png"):
        (tmp_path / "a" / name).write_bytes(b"<html>not found</html>")
    with pytest.raises(AmpganError) as refused:
        load_folder(str(tmp_path), image_size=8)
    assert str(refused.value) == (
        f"cannot read image {tmp_path / 'a' / '1-cut.png'} (OSError: image file is truncated): fix or remove the "
        f"file; 4 more image(s) cannot be used either: {Path('a', '2-empty.jpg')}, {Path('a', '3.png')}, "
        f"{Path('a', '4.png')}, ..."
    )
    for name in ("1-cut.png", "3.png", "4.png", "5.png"):
        (tmp_path / "a" / name).unlink()
    code, _, err = run_cli(capsys, "data", "info", f"folder:{tmp_path}")
    assert code == 2 and err == (
        f"error: cannot read image {tmp_path / 'a' / '2-empty.jpg'} (UnidentifiedImageError: not an image Pillow "
        "can decode, 0 bytes): fix or remove the file\n"
    )


def test_an_image_of_several_frames_gives_its_first_and_says_so(tmp_path):
    (tmp_path / "a").mkdir()
    red, green = Image.new("RGB", (8, 8), (255, 0, 0)), Image.new("RGB", (8, 8), (0, 255, 0))
    for suffix in (".gif", ".png", ".webp", ".tif"):  # animated GIF, APNG, animated WebP, a two-page TIFF
        red.save(tmp_path / "a" / f"moving{suffix}", save_all=True, append_images=[green])
    red.save(tmp_path / "a" / "still.png")
    dataset, said = _load(tmp_path, image_size=8)
    assert np.abs(dataset.images[:, :, 4, 4].numpy().astype(int) - [255, 0, 0]).max() <= 2  # red; WebP is lossy
    assert said == [
        f"4 image(s) of folder:{tmp_path} hold several frames (animated, multi-page, a JPEG's extra pictures) "
        f"(e.g. {Path('a', 'moving.gif')}): the first frame is used"
    ]


def test_a_linked_folder_inside_a_class_is_said_not_followed_and_refused_when_it_leads_out(tmp_path):
    """A folder linked into a class (a loop back up, a sibling class, a folder elsewhere) was passed over
    without a word: a class of 1,000 linked photos trained on the 10 beside the link."""
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    for folder in (data / "a", data / "b", elsewhere):
        folder.mkdir(parents=True)
        Image.new("L", (8, 8), 90).save(folder / "x.png")
    (data / "a" / "loop").symlink_to("..")
    (data / "a" / "sibling").symlink_to("../b")
    (data / "a" / "itself").symlink_to("itself")
    dataset, said = _load(data, image_size=8)
    assert dataset.counts_per_class() == [1, 1]
    assert said == [
        f"folder:{data} leaves out 3 link(s) to a folder or to nothing, not followed (e.g. {Path('a', 'itself')}): "
        "copy what a link leads to into its class folder (links to folders are not followed)"
    ]
    (data / "b" / "photos").symlink_to(elsewhere)
    with pytest.raises(AmpganError, match=f"^{data / 'b' / 'photos'} is a link to {elsewhere}, outside the dataset"):
        load_folder(str(data), image_size=8)


def test_every_name_pillow_gives_a_format_is_an_image_in_any_case(tmp_path):
    """.jfif (a browser's JPEG) and .pgm (the classic face sets) were left out as 'not images'."""
    (tmp_path / "a").mkdir()
    for name, format in [
        ("x.JPG", "JPEG"),
        ("y.PNG", "PNG"),
        ("z.JPEG", "JPEG"),
        ("w.jfif", "JPEG"),
        ("v.pgm", "PPM"),
        ("u.Tif", "TIFF"),
    ]:
        Image.new("L", (8, 8), 90).save(tmp_path / "a" / name, format)
    Image.new("L", (8, 8), 90).save(tmp_path / "a" / "p.jpg", progressive=True)
    dataset, said = _load(tmp_path, image_size=8, channels=1)
    assert len(dataset) == 7 and said == [] and int(dataset.images.float().mean().round()) == 90


@pytest.mark.parametrize("make", ["fifo", "socket"])
def test_a_fifo_or_socket_named_like_an_image_is_said_to_be_left_out(tmp_path, make):
    """A FIFO (or socket) named x.png in a class folder is neither a file nor a folder: it was skipped without a
    word, where a text file beside the images is counted."""
    import socket

    (tmp_path / "cats").mkdir()
    Image.new("RGB", (8, 8), (10, 20, 30)).save(tmp_path / "cats" / "a.png")
    odd = tmp_path / "cats" / "x.png"
    if make == "fifo":
        os.mkfifo(odd)
    else:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(odd))
        server.close()
    dataset, said = _load(tmp_path, image_size=8)
    assert len(dataset.images) == 1
    (line,) = [line for line in said if "leaves out" in line]
    assert "1 entr(ies) that are no file to read" in line and "cats/x.png" in line


@pytest.mark.parametrize("size", [(16, 8), (8, 16)])
def test_a_non_square_image_is_stretched_and_said(tmp_path, size):
    """Wide or tall, an image is stretched to the model's square (not cropped): the docs say resized, and the
    change of its proportions is said once per folder."""
    (tmp_path / "a").mkdir()
    Image.new("RGB", size, (200, 0, 0)).save(tmp_path / "a" / "wide.png")
    Image.new("RGB", (8, 8), (0, 200, 0)).save(tmp_path / "a" / "square.png")
    dataset, said = _load(tmp_path, image_size=8)
    assert tuple(dataset.images.shape) == (2, 3, 8, 8)
    (line,) = [line for line in said if "not square" in line]
    assert line.startswith("1 image(s) of folder:") and "wide.png" in line and "stretched to a square" in line


def test_folder_with_no_path_is_refused_not_the_current_folder_read(tmp_path, capsys, monkeypatch):
    """'--dataset folder:$DATA' with DATA unset reads 'folder:': it named the current folder, whose class folders
    (a project's runs/, data/) were read as training data. One line naming the fix; nothing written."""
    from fixtures import write_image_folder

    write_image_folder(tmp_path / "project", size=16)
    monkeypatch.chdir(tmp_path / "project")
    before = sorted(p.name for p in Path.cwd().rglob("*"))
    for command in (["train", "--dataset", "folder:", "--dry-run"], ["data", "info", "folder:"]):
        code, out, err = run_cli(capsys, *command)
        assert code == 2 and err.count("\n") == 1 and "is empty" in err and "folder:PATH" in err, err
    assert sorted(p.name for p in Path.cwd().rglob("*")) == before


def test_a_cache_write_killed_midway_leaves_nothing_in_the_dataset_folder_once_the_cache_is_read(tmp_path):
    """kill -9 while a process rewrote the cache left its tens of MB as `..ampgan-cache-*.npz....writing.tmp` in the
    user's dataset folder for good: the next load, which only reads the cache, removes it."""
    (tmp_path / "a").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "a" / "x.png")
    first, _ = _load(tmp_path, image_size=8, cache=True)
    killed = writer_in_flight(Path(first.source["cache"]))
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    assert len(list(tmp_path.glob(".*.writing.tmp"))) == 1
    again, said = _load(tmp_path, image_size=8, cache=True)
    assert again.source["cache_hit"] and not said
    assert sorted(path.name for path in tmp_path.iterdir()) == [Path(first.source["cache"]).name, "a"]
