"""Ranks started with other settings or data than rank 0 (by hand, a config file edited between launches, another
data folder) stop on every rank with one line naming what differs, before any collective of the run: rank 0's
record is injected in place of the all-gather, so this runs in one process."""

import copy

import pytest
from conftest import run_cli

import ampgan.training.distributed as distributed


def _as_rank_1_beside(change):
    """gather_objects as rank 1 sees it: rank 0's record is this rank's with `change` applied."""

    def gather(record):
        first = copy.deepcopy(record)
        change(first)
        return [first, record]

    return gather


TRAIN = ["train", "--dataset", "synthetic", "--image-size", "28", "--width", "8", "--batch-size", "8", "--steps", "2"]
TRAIN += ["--no-compile", "--no-channels-last", "--quiet"]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda r: r["config"].update(seed=1), "config.seed"),
        (lambda r: r["config"]["precision"].update(name="bf16"), "config.precision.name"),
        (lambda r: r["config"]["model"].update(width=16), "config.model.width"),
        (
            lambda r: r["config"]["budget"].update(batch_size=16, steps=9),
            "config.budget.batch_size, config.budget.steps",
        ),
        (lambda r: r.update(data="another folder's content"), "data"),
        (lambda r: r["config"]["model"].pop("width"), "config.model.width"),
    ],
)
def test_a_rank_with_other_settings_or_data_is_one_line(tmp_path, capsys, monkeypatch, change, named):
    monkeypatch.setattr(distributed, "gather_objects", _as_rank_1_beside(change))
    code, _, err = run_cli(capsys, *TRAIN, "--out", str(tmp_path / "run"))
    assert code == 2 and err.count("\n") == 1, err
    assert f"rank 1 runs other settings or data than rank 0 ({named}" in err
    assert not (tmp_path / "run").exists()  # nothing trained: the claimed folder is given back


def test_a_bench_rank_with_other_batch_sizes_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(distributed, "gather_objects", _as_rank_1_beside(lambda r: r.update(batch_sizes=(16,))))
    code, _, err = run_cli(
        capsys, "bench", "--dataset", "synthetic", "--image-size", "28", "--width", "8", "--batch-sizes", "8",
        "--precisions", "fp32", "--max-seconds", "1", "--out", str(tmp_path / "b"),
    )  # fmt: skip
    assert code == 2 and "rank 1 runs other settings or data than rank 0 (batch_sizes)" in err and err.count("\n") == 1


def _image_folder(root, seed=0):
    """Two classes of four 8x8 PNGs each (the same seed, the same bytes)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    for name in ("cats", "dogs"):
        (root / name).mkdir(parents=True)
        for index in range(4):
            Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(root / name / f"{index}.png")
    return root


def test_nodes_that_keep_the_same_images_under_other_paths_agree(tmp_path, capsys, monkeypatch):
    """Two nodes, the same images in their own local folders: the data's digest agrees, the paths are not
    compared (rank 0's record is the one rank 0 computes from its own folder)."""
    here, there = _image_folder(tmp_path / "node1" / "data"), _image_folder(tmp_path / "node0" / "images")
    records = []

    def gather(record):
        records.append(record)
        return [copy.deepcopy(record), record]

    monkeypatch.setattr(distributed, "gather_objects", gather)
    folder_train = [*TRAIN[:2], f"folder:{here}", *TRAIN[3:]]
    code, _, err = run_cli(capsys, *folder_train, "--out", str(tmp_path / "run1"))
    assert code == 0, err
    folder_train[2] = f"folder:{there}"
    code, _, err = run_cli(capsys, *folder_train, "--out", str(tmp_path / "run0"))
    assert code == 0, err
    assert records[0] == records[1] and records[0]["data"]  # what node 0 and node 1 send to the all-gather
    _image_folder(tmp_path / "other", seed=1)
    folder_train[2] = f"folder:{tmp_path / 'other'}"
    run_cli(capsys, *folder_train, "--out", str(tmp_path / "run2"))
    assert records[2]["data"] != records[0]["data"]  # other images: the digest differs, so the ranks do
