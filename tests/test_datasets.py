"""CIFAR-10, Quick, Draw!, MNIST and image-folder loaders on real-format fixtures and real samples."""

import gzip
import http.server
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import run_cli
from fixtures import (
    CIFAR_CLASSES,
    cifar_batches,
    cifar_md5s,
    write_cifar_archive,
    write_image_folder,
    write_mnist,
    write_quickdraw,
)

import ampgan.data.cifar10 as cifar10
from ampgan.data import DataConfig, load_dataset
from ampgan.data.files import download
from ampgan.errors import AmpganError

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture
def cifar_fixture(tmp_path, monkeypatch):
    """A tiny CIFAR-style archive; the loader's reference MD5s are pointed at its members."""
    members = cifar_batches()
    monkeypatch.setattr(cifar10, "FILE_MD5", cifar_md5s(members))
    archive = write_cifar_archive(tmp_path / "cifar-10-python.tar.gz", members)
    return tmp_path, members, archive


def test_cifar10_loads_from_the_archive_and_from_the_extracted_folder(cifar_fixture, tmp_path):
    data_dir, members, archive = cifar_fixture
    train = load_dataset(DataConfig(dataset="cifar10", data_dir=str(data_dir)))
    assert train.images.shape == (100, 3, 32, 32) and train.class_names == tuple(CIFAR_CLASSES)
    first = np.frombuffer(
        __import__("pickle").loads(members["data_batch_1"], encoding="bytes")[b"data"][0].tobytes(), np.uint8
    )
    assert torch.equal(train.images[0].flatten(), torch.from_numpy(first.copy()))  # CHW order kept
    assert train.source["md5_verified"] and set(train.source["md5"]) == {f"data_batch_{i}" for i in range(1, 6)} | {
        "batches.meta"
    }
    test = load_dataset(DataConfig(dataset="cifar10", data_dir=str(data_dir)), "test")
    assert len(test) == 20
    extracted = tmp_path / "extracted"
    shutil.unpack_archive(archive, extracted)
    again = load_dataset(DataConfig(dataset="cifar10", data_dir=str(extracted)))
    assert torch.equal(again.images, train.images) and torch.equal(again.labels, train.labels)


def _flip_a_byte(blob: bytes) -> bytes:
    middle = len(blob) // 2
    return blob[:middle] + bytes([blob[middle] ^ 0xFF]) + blob[middle + 1 :]


def test_cifar10_bad_input(cifar_fixture, tmp_path):
    data_dir, members, archive = cifar_fixture
    cases = []
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    (truncated / "cifar-10-python.tar.gz").write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    cases.append((truncated, "truncated or corrupted"))
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    write_cifar_archive(
        tampered / "cifar-10-python.tar.gz", members | {"data_batch_3": _flip_a_byte(members["data_batch_3"])}
    )
    cases.append((tampered, "checksum mismatch for"))
    empty = tmp_path / "empty"
    empty.mkdir()
    cases.append((empty, "add --download"))
    cases.append((tmp_path / "missing", "does not exist"))
    for folder, message in cases:
        with pytest.raises(AmpganError, match=message):
            load_dataset(DataConfig(dataset="cifar10", data_dir=str(folder)))
    with pytest.raises(AmpganError, match="needs --data-dir"):
        load_dataset(DataConfig(dataset="cifar10"))


def test_cifar10_pickles_cannot_run_code(cifar_fixture, tmp_path, monkeypatch):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    _, members, _ = cifar_fixture
    evil = members | {"test_batch": __import__("pickle").dumps({b"data": Evil()}, protocol=2)}
    monkeypatch.setattr(cifar10, "FILE_MD5", cifar_md5s(evil))
    folder = tmp_path / "evil"
    folder.mkdir()
    write_cifar_archive(folder / "cifar-10-python.tar.gz", evil)
    with pytest.raises(AmpganError, match="is not a CIFAR-10 batch"):
        load_dataset(DataConfig(dataset="cifar10", data_dir=str(folder)), "test")


class _ArchiveServer:
    """Serves one payload on 127.0.0.1; `cut_after` bytes simulates a dropped connection."""

    def __init__(self, payload: bytes, cut_after: int | None = None):
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload if outer.cut_after is None else payload[: outer.cut_after])
                self.wfile.flush()
                outer.stalls.wait()  # set: the connection stays open, the rest never comes (until close)

            def log_message(self, *args):
                pass

        self.cut_after, self.stalls = cut_after, threading.Event()
        self.stalls.set()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/cifar-10-python.tar.gz"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.stalls.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("variant", ["good", "corrupted", "interrupted", "no network"])
def test_cifar10_download(cifar_fixture, tmp_path, monkeypatch, variant):
    _, _, archive = cifar_fixture
    payload = archive.read_bytes()
    import hashlib

    monkeypatch.setattr(cifar10, "ARCHIVE_MD5", hashlib.md5(payload).hexdigest())
    served = payload[:-10] + b"0123456789" if variant == "corrupted" else payload
    server = _ArchiveServer(served, cut_after=len(payload) // 3 if variant == "interrupted" else None)
    url = server.url if variant != "no network" else "http://127.0.0.1:9/cifar-10-python.tar.gz"
    monkeypatch.setattr(cifar10, "URL", url)
    target = tmp_path / "downloads"
    try:
        if variant == "good":
            dataset = load_dataset(DataConfig(dataset="cifar10", data_dir=str(target), download=True))
            assert len(dataset) == 100 and (target / "cifar-10-python.tar.gz").read_bytes() == payload
        else:
            message = {"corrupted": "has MD5", "interrupted": "broke off", "no network": "put it at"}[variant]
            with pytest.raises(AmpganError, match=message):
                load_dataset(DataConfig(dataset="cifar10", data_dir=str(target), download=True))
            assert not (target / "cifar-10-python.tar.gz").exists()  # never a half file under the final name
            assert os.listdir(target) == []  # nor its temporary file
    finally:
        server.close()


def test_a_download_killed_midway_leaves_nothing_once_another_is_done_there(tmp_path):
    """kill -9 while Quick, Draw!'s apple.npy downloaded left `apple.npy.part` in the user's data folder for good
    unless apple was downloaded again (a run with other classes, or the file put there by hand, kept it)."""
    server = _ArchiveServer(b"x" * 4096, cut_after=100)
    server.stalls.clear()
    script = "import sys\nfrom pathlib import Path\nfrom ampgan.data.files import download\n"
    script += "download(sys.argv[1], Path(sys.argv[2]))"
    killed = subprocess.Popen([sys.executable, "-c", script, server.url, str(tmp_path / "apple.npy")])
    try:
        while not os.listdir(tmp_path):  # its temporary file, made as the download starts
            assert killed.poll() is None
            time.sleep(0.05)
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        server.cut_after = None
        server.stalls.set()
        download(server.url, tmp_path / "eye.npy")
        assert os.listdir(tmp_path) == ["eye.npy"] and (tmp_path / "eye.npy").read_bytes() == b"x" * 4096
    finally:
        killed.kill()
        killed.wait()
        server.close()


def test_a_download_the_disk_refuses_is_one_line_about_the_disk(tmp_path, read_only_view):
    """It said 'cannot download URL (Read-only file system ...): no network?'."""
    (tmp_path / "data").mkdir()
    view, server = read_only_view(tmp_path / "data"), _ArchiveServer(b"x" * 10)
    try:
        with pytest.raises(AmpganError, match=r"^cannot write .*apple\.npy.*\(Read-only file system\)") as refused:
            download(server.url, view / "apple.npy")
        assert "no network" not in str(refused.value)
    finally:
        server.close()


def test_quickdraw_loads_splits_deterministically_and_keeps_a_manifest(tmp_path):
    folder = write_quickdraw(tmp_path / "qd")
    request = DataConfig(dataset="quickdraw", data_dir=str(folder), classes="apple,eye,fish", max_per_class=40)
    train = load_dataset(request, seed=3)
    test = load_dataset(request, "test", seed=3)
    assert train.images.shape == (108, 1, 28, 28) and len(test) == 12 and train.class_names == ("apple", "eye", "fish")
    row_ids = lambda d, label: set(d.images[d.labels == label].flatten(1)[:, 700].tolist())  # noqa: E731
    for label in range(3):
        assert row_ids(train, label).isdisjoint(row_ids(test, label))
        assert row_ids(train, label) | row_ids(test, label) == set(range(40))  # only the first 40 rows read
    assert torch.equal(load_dataset(request, seed=3).images, train.images)  # same seed, same split
    manifest = json.loads((folder / "ampgan-manifest.json").read_text())["sha256"]
    assert set(manifest) == {"apple.npy", "eye.npy", "fish.npy"}


def test_quickdraw_bad_input(tmp_path):
    folder = write_quickdraw(tmp_path / "qd")
    request = lambda **kw: DataConfig(dataset="quickdraw", data_dir=str(folder), **kw)  # noqa: E731
    load_dataset(request(classes="apple"))  # records the manifest
    with pytest.raises(AmpganError, match=r"no Quick, Draw! class 'aple' .*did you mean apple"):
        load_dataset(request(classes="aple"))
    np.save(folder / "apple.npy", np.zeros((5, 784), dtype=np.uint8))
    with pytest.raises(AmpganError, match="checksum mismatch: .*apple.npy has changed"):
        load_dataset(request(classes="apple"))
    np.save(folder / "bee.npy", np.zeros((5, 28, 28), dtype=np.uint8))
    with pytest.raises(AmpganError, match=r"bee.npy holds uint8 \(5, 28, 28\), not Quick, Draw! bitmaps"):
        load_dataset(request(classes="bee"))
    np.save(folder / "cow.npy", np.zeros((5, 784), dtype=np.float32))
    with pytest.raises(AmpganError, match="cow.npy holds float32"):
        load_dataset(request(classes="cow"))


def test_mnist_as_a_mirror_names_it(tmp_path):
    """Kaggle's MNIST, the one most users find, names its files train-images.idx3-ubyte, not gzipped."""
    folder = write_mnist(tmp_path / "mnist", count=20)
    for kind in ("images-idx3", "labels-idx1"):
        gzipped = folder / f"train-{kind}-ubyte.gz"
        (folder / f"train-{kind.replace('-idx', '.idx')}-ubyte").write_bytes(gzip.decompress(gzipped.read_bytes()))
        gzipped.unlink()
    dataset = load_dataset(DataConfig(dataset="mnist", data_dir=str(folder)))
    assert dataset.images.shape == (20, 1, 28, 28) and dataset.counts_per_class() == [2] * 10


def test_quickdraw_as_the_user_downloaded_it(tmp_path):
    """Google's bucket page names a download full_numpy_bitmap_<class>.npy (it was 'no class apple, did you
    mean apple?'); the simplified ndjson holds strokes, and the refusal says so beside the file."""
    folder = write_quickdraw(tmp_path / "qd", classes=("apple", "eye"))
    (folder / "apple.npy").rename(folder / "full_numpy_bitmap_apple.npy")
    dataset = load_dataset(DataConfig(dataset="quickdraw", data_dir=str(folder), classes="apple,eye"))
    assert dataset.class_names == ("apple", "eye") and dataset.counts_per_class() == [45, 45]
    (folder / "fish.ndjson").write_text('{"word": "fish", "drawing": [[[0, 255], [0, 255]]]}\n')
    with pytest.raises(AmpganError) as refused:
        load_dataset(DataConfig(dataset="quickdraw", data_dir=str(folder), classes="fish"))
    assert str(refused.value) == (
        f"no Quick, Draw! class 'fish' in {folder} (fish.ndjson there holds strokes, not the numpy_bitmap 28x28 "
        "images ampgan reads): put fish.npy there, or add --download"
    )


def _damage_gzip(blob: bytes, where: str) -> bytes:
    packed = bytearray(gzip.compress(blob))
    if where == "deflate":  # inside the compressed data: zlib's own error, not gzip's
        packed[40:80] = bytes(40)
    elif where == "crc":
        packed[-8:-4] = bytes(4)
    else:
        del packed[len(packed) // 2 :]
    return bytes(packed)


@pytest.mark.parametrize(
    "images",
    [
        pytest.param(lambda raw: _damage_gzip(raw, "deflate"), id="deflate-data-damaged"),
        pytest.param(lambda raw: _damage_gzip(raw, "crc"), id="crc-wrong"),
        pytest.param(lambda raw: _damage_gzip(raw, "cut"), id="stream-cut"),
        pytest.param(lambda raw: gzip.compress(struct.pack(">IIII", 0x803, 20, 0, 28)), id="zero-rows"),
        pytest.param(lambda raw: gzip.compress(struct.pack(">IIII", 0x803, 20, 7, 112) + raw[16:]), id="not-square"),
        pytest.param(lambda raw: gzip.compress(struct.pack(">IIII", 0x803, 0, 28, 28)), id="no-images"),
    ],
)
def test_a_damaged_mnist_file_is_one_line(tmp_path, capsys, images):
    folder = write_mnist(tmp_path / "mnist", count=20)
    path = folder / "train-images-idx3-ubyte.gz"
    path.write_bytes(images(gzip.decompress(path.read_bytes())))
    code, _, err = run_cli(capsys, "data", "info", "mnist", "--data-dir", str(folder), "--image-size", "28")
    assert code == 2 and err.startswith(f"error: {path} ") and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "shape", ["(-5, 784)", "(10**30, 784)", "(1" + "0" * 30 + ", 784)", "(2.5, 784)", "(-1, -784)"]
)
def test_a_quickdraw_file_whose_header_lies_about_its_shape_is_one_line(tmp_path, capsys, shape):
    folder = write_quickdraw(tmp_path / "qd", classes=("apple", "eye"))
    header = f"{{'descr': '|u1', 'fortran_order': False, 'shape': {shape}, }}".ljust(117) + "\n"
    path = folder / "apple.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + path.read_bytes()[128:])
    code, _, err = run_cli(capsys, "data", "info", "quickdraw", "--data-dir", str(folder), "--classes", "apple,eye")
    assert code == 2 and err.startswith(f"error: {path} is not a readable .npy file") and err.count("\n") == 1, err


def test_quickdraw_download_url_encodes_spaces():
    from ampgan.data.quickdraw import class_url

    assert class_url("hot air balloon").endswith("/numpy_bitmap/hot%20air%20balloon.npy")


def test_image_folder_loads_resizes_and_caches(tmp_path):
    root = write_image_folder(tmp_path / "pets")
    dataset = load_dataset(DataConfig(dataset="folder:" + str(root), image_size=32, channels=3, cache=True))
    assert dataset.images.shape == (6, 3, 32, 32) and dataset.class_names == ("cats", "dogs")
    assert dataset.counts_per_class() == [3, 3] and dataset.source["cache_hit"] is False
    again = load_dataset(DataConfig(dataset="folder:" + str(root), image_size=32, channels=3, cache=True))
    assert again.source["cache_hit"] is True and torch.equal(again.images, dataset.images)
    grey = load_dataset(DataConfig(dataset="folder:" + str(root), image_size=28, channels=1))
    assert grey.images.shape == (6, 1, 28, 28)
    (root / "dogs" / "img9.png").write_bytes((root / "dogs" / "img0.png").read_bytes())  # the folder changes
    third = load_dataset(DataConfig(dataset="folder:" + str(root), image_size=32, channels=3, cache=True))
    assert third.source["cache_hit"] is False and len(third) == 7


def test_image_folder_bad_input(tmp_path):
    root = write_image_folder(tmp_path / "pets")
    (root / "birds").mkdir()
    with pytest.raises(AmpganError, match="class folder .*birds has no images"):
        load_dataset(DataConfig(dataset="folder:" + str(root)))
    (root / "birds" / "broken.png").write_bytes(b"not a png at all")
    with pytest.raises(AmpganError, match=r"cannot read image .*birds/broken.png"):
        load_dataset(DataConfig(dataset="folder:" + str(root)))
    with pytest.raises(AmpganError, match="does not exist"):
        load_dataset(DataConfig(dataset="folder:" + str(tmp_path / "nowhere")))
    (tmp_path / "flat").mkdir()
    with pytest.raises(AmpganError, match="no class sub-folders"):
        load_dataset(DataConfig(dataset="folder:" + str(tmp_path / "flat")))


def test_data_commands(tmp_path, capsys):
    folder = write_quickdraw(tmp_path / "qd")
    code, out, err = run_cli(capsys, "data", "info", "quickdraw", "--data-dir", str(folder), "--classes", "apple,eye")
    assert code == 0, err
    assert "quickdraw (train): 90 images, 1x28x28" in out and "apple" in out and "match the manifest" in out
    code, out, _ = run_cli(
        capsys,
        "data",
        "grid",
        "quickdraw",
        "--data-dir",
        str(folder),
        "--classes",
        "apple,eye",
        "--out",
        str(tmp_path / "grid.png"),
        "--per-class",
        "4",
    )
    assert code == 0 and (tmp_path / "grid.png").exists()
    from PIL import Image

    assert Image.open(tmp_path / "grid.png").size == (4 * 30 + 2, 2 * 30 + 2)
    code, _, err = run_cli(
        capsys,
        "data",
        "grid",
        "quickdraw",
        "--data-dir",
        str(folder),
        "--classes",
        "apple",
        "--out",
        str(tmp_path / "grid.png"),
    )
    assert code == 2 and "already exists" in err and Image.open(tmp_path / "grid.png").size[1] == 2 * 30 + 2
    code, _, err = run_cli(capsys, "data", "info", "quickdraw", "--data-dir", str(tmp_path / "none"))
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err


# --- the real samples in ../shared/data (skipped where that folder is absent) ------------------

needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is not present")


@needs_shared
@pytest.mark.slow
def test_real_quickdraw_sample_loads_and_trains(tmp_path, capsys):
    # Linked into a temporary folder: the manifest is written there, never into the shared data.
    folder = tmp_path / "qd"
    folder.mkdir()
    for name in ("apple", "eye", "fish"):
        (folder / f"{name}.npy").symlink_to(SHARED / "quickdraw-numpy-bitmap" / f"{name}.npy")
    dataset = load_dataset(DataConfig(dataset="quickdraw", data_dir=str(folder), classes="apple,eye,fish"))
    assert dataset.images.shape == (8100, 1, 28, 28) and dataset.source["sha256"]["apple.npy"].startswith("3fb70890")
    assert 20 < dataset.images.float().mean() < 80  # white strokes on black
    code, _, err = run_cli(
        capsys,
        "train",
        "--dataset",
        "quickdraw",
        "--data-dir",
        str(folder),
        "--set",
        "data.classes=apple,eye,fish",
        "--width",
        "8",
        "--set",
        "model.z_dim=16",
        "--batch-size",
        "16",
        "--steps",
        "3",
        "--device",
        "cpu",
        "--quiet",
        "--out",
        str(tmp_path / "run"),
    )
    assert code == 0, err
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["dataset"]["source"]["sha256"]["fish.npy"].startswith("113b4a7c")


@needs_shared
@pytest.mark.slow
def test_real_cifar10_jpeg_folder_loads_and_trains(tmp_path, capsys):
    dataset = load_dataset(DataConfig(dataset="folder:" + str(SHARED / "cifar10-test-jpg")))
    assert dataset.images.shape == (10000, 3, 32, 32) and dataset.class_names[0] == "airplane"
    assert dataset.counts_per_class() == [1000] * 10
    code, _, err = run_cli(
        capsys,
        "train",
        "--dataset",
        f"folder:{SHARED / 'cifar10-test-jpg'}",
        "--width",
        "8",
        "--set",
        "model.z_dim=16",
        "--batch-size",
        "16",
        "--steps",
        "3",
        "--device",
        "cpu",
        "--quiet",
        "--out",
        str(tmp_path / "run"),
    )
    assert code == 0, err


@needs_shared
@pytest.mark.slow
def test_real_mnist_idx_loads_and_trains(tmp_path, capsys):
    dataset = load_dataset(DataConfig(dataset="mnist", data_dir=str(SHARED / "mnist-idx")), "test")
    assert dataset.images.shape == (10000, 1, 28, 28)
    assert dataset.counts_per_class()[:3] == [980, 1135, 1032]  # the MNIST test set's known counts
    code, _, err = run_cli(
        capsys,
        "train",
        "--dataset",
        "mnist",
        "--data-dir",
        str(SHARED / "mnist-idx"),
        "--width",
        "8",
        "--set",
        "model.z_dim=16",
        "--batch-size",
        "16",
        "--steps",
        "3",
        "--device",
        "cpu",
        "--quiet",
        "--out",
        str(tmp_path / "run"),
    )
    assert code == 2 and "no train-images-idx3-ubyte" in err  # the sample holds the test split only


def test_quickdraw_s_hints_know_the_names_google_s_bucket_page_downloads(tmp_path):
    """A near miss of a downloaded class was offered as 'full_numpy_bitmap_banana' (or nothing: 'bananas' is not a
    study class), and the strokes hint looked for fish.ndjson only, not full_simplified_fish.ndjson."""
    folder = write_quickdraw(tmp_path / "qd", classes=("apple", "eye"))
    (folder / "apple.npy").rename(folder / "full_numpy_bitmap_banana.npy")
    with pytest.raises(AmpganError, match=r"class 'bananas' .*\(did you mean banana\?\)"):
        load_dataset(DataConfig(dataset="quickdraw", data_dir=str(folder), classes="bananas"))
    (folder / "full_simplified_fish.ndjson").write_text('{"word": "fish", "drawing": [[[0, 255], [0, 255]]]}\n')
    with pytest.raises(AmpganError, match=r"\(full_simplified_fish.ndjson there holds strokes, not the numpy_bitmap"):
        load_dataset(DataConfig(dataset="quickdraw", data_dir=str(folder), classes="fish"))


@pytest.mark.parametrize("dataset", ["digits", "synthetic", "mnist"])
def test_a_split_no_dataset_has_is_refused_by_name_for_every_dataset(tmp_path, dataset):
    """The splits are checked once, for every dataset: 'val' was refused by MNIST's loader and silently given
    all of digits' images."""
    write_mnist(tmp_path, split="test")
    data = DataConfig(dataset=dataset, data_dir=str(tmp_path) if dataset == "mnist" else None)
    with pytest.raises(AmpganError, match=r"^a dataset has the splits train and test, not 'val'$"):
        load_dataset(data, "val")
    assert len(load_dataset(data, "test")) > 0
