"""Where mixed precision pays: the bench over model settings (its map), and each operation of the real
step timed alone (the attainable speedup)."""

import json

import pytest
import torch
from conftest import run_cli

from ampgan.bench.attainable import (
    TensorSpec,
    attainable_comparison,
    ops_alone,
    summarise,
)
from ampgan.bench.sweep import cells, parse_axes
from ampgan.errors import AmpganError

TINY = [
    "--set",
    "model.z_dim=16",
    "--device",
    "cpu",
    "--set",
    "bench.warmup=1",
    "--steps",
    "2",
    "--set",
    "bench.min_seconds=0",
    "--max-seconds",
    "4",
]


def test_sweep_axes_parse_into_a_grid_and_bad_ones_are_one_line():
    axes = parse_axes(("model.width=8,16", "model.name=acgan,dcgan"))
    assert axes == {"model.width": [8, 16], "model.name": ["acgan", "dcgan"]}
    assert cells(axes) == [
        {"model.width": 8, "model.name": "acgan"},
        {"model.width": 8, "model.name": "dcgan"},
        {"model.width": 16, "model.name": "acgan"},
        {"model.width": 16, "model.name": "dcgan"},
    ]
    for bad in ("model.width", "model.width=", "=8"):
        with pytest.raises(AmpganError, match="--sweep takes section.field=V1,V2"):
            parse_axes((bad,))
    with pytest.raises(AmpganError, match="given twice"):
        parse_axes(("model.width=8", "model.width=16"))


def test_an_expanded_view_is_rebuilt_with_its_zero_strides():
    tensor = TensorSpec((16, 10), (0, 1), torch.float32, torch.device("cpu")).make()
    assert tensor.stride() == (0, 1) and torch.equal(tensor[0], tensor[15])


def test_attainable_arithmetic_against_hand_computed_values():
    fp32 = {"step_s": 2.0, "by_op": [{"op": "aten.convolution", "seconds": 1.5}, {"op": "aten.relu", "seconds": 0.5}]}
    mixed = {
        "step_s": 1.0,
        "by_op": [
            {"op": "aten.convolution", "seconds": 0.5},
            {"op": "aten._to_copy", "seconds": 0.3},
            {"op": "aten.relu", "seconds": 0.2},
        ],
    }
    row = attainable_comparison(fp32, mixed, achieved=1.5)
    assert row["attainable_speedup"] == 2.0 and row["achieved_of_attainable"] == 0.75
    # the casts are new time (no fp32 counterpart), ahead of the convolution that shrank
    assert [g["op"] for g in row["biggest_gaps"]][:1] == ["aten._to_copy"]
    assert next(g for g in row["biggest_gaps"] if g["op"] == "aten.convolution")["speedup"] == 3.0


def test_every_operation_of_a_real_step_replays_alone_and_sums_near_the_step(tmp_path):
    from conftest import tiny_config

    from ampgan.data import DataConfig, load_dataset
    from ampgan.speed.step_timer import StepTimer

    timer = StepTimer(tiny_config(), load_dataset(DataConfig(dataset="synthetic"), seed=0), torch.device("cpu"))
    step_s = min(timer() for _ in range(3))
    summary = summarise(ops_alone(timer))
    assert summary["replayed_share"] == 1.0 and not summary["not_replayed"]
    assert summary["ops"] > 50 and 0 < summary["step_s"] < 20 * step_s
    assert {row["op"] for row in summary["by_op"]} >= {"aten.convolution", "aten.convolution_backward"}


def test_a_sweep_writes_a_bench_per_cell_a_map_per_precision_and_keeps_a_refused_cell(tmp_path, capsys):
    out = tmp_path / "sweep"
    code, stdout, err = run_cli(
        capsys,
        "bench",
        *TINY,
        "--batch-sizes",
        "4",
        "--precisions",
        "fp32,bf16",
        "--sweep",
        "model.width=4,8,0",
        "--attainable",
        "--out",
        str(out),
    )
    assert code == 0, err
    document = json.loads((out / "sweep.json").read_text())
    assert [c["label"] for c in document["cells"]] == ["model.width=4", "model.width=8", "model.width=0"]
    assert [c["status"] for c in document["cells"]] == ["ok", "ok", "error"] and "width" in document["cells"][2][
        "reason"
    ]
    results = json.loads((out / document["cells"][1]["results"]).read_text())
    assert results["spec"]["model_options"]["width"] == 8
    (row,) = results["attainable"]
    assert row["precision"] == "bf16" and row["attainable_speedup"] > 0
    assert (out / "cells" / "model.width=8" / "fig_attainable.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "fig_speedup_map_bf16.png").read_bytes()[:4] == b"\x89PNG"
    assert "model.width=4" in stdout and "bf16 over fp32" in stdout


def test_an_interrupted_sweep_continues_with_the_same_command_and_keeps_its_cells(tmp_path, capsys):
    out = tmp_path / "sweep"
    command = (
        "bench",
        *TINY,
        "--batch-sizes",
        "4",
        "--precisions",
        "fp32",
        "--sweep",
        "model.width=4,8",
        "--out",
        str(out),
    )
    assert run_cli(capsys, *command)[0] == 0
    document = json.loads((out / "sweep.json").read_text())
    kept = (out / document["cells"][0]["results"]).read_bytes()
    # As a stop during the second cell leaves it: the first finished, the second incomplete.
    document["cells"][1]["status"] = "incomplete"
    (out / "sweep.json").write_text(json.dumps(document))
    code, _, err = run_cli(capsys, *command)
    assert code == 0, err
    assert "continuing the sweep" in err and "model.width=4 (finished before, kept)" in err
    assert (out / document["cells"][0]["results"]).read_bytes() == kept
    assert [c["status"] for c in json.loads((out / "sweep.json").read_text())["cells"]] == ["ok", "ok"]
    # Another sweep in the same folder is refused, naming what differs; a path leading outside too.
    code, _, err = run_cli(capsys, *command[:-3], "model.width=4,16", "--out", str(out))
    assert code == 2 and "other settings (axes model.width)" in err
    document["cells"][0]["results"] = "../../elsewhere/results.json"
    (out / "sweep.json").write_text(json.dumps(document))
    code, _, err = run_cli(capsys, *command)
    assert code == 2 and "should be a path inside its folder" in err


@pytest.mark.parametrize("damage", ["another cell's", "other batch sizes", "cut short"])
def test_a_sweep_cell_whose_results_are_not_its_own_is_benched_again_and_said(tmp_path, capsys, damage):
    """A finished cell was kept whenever its results.json loaded: another cell's results copied over it (width 8's
    as width 4's) or results of other batch sizes went into the speedup map as that cell's, and a damaged one was
    measured again and replaced without a word."""
    out = tmp_path / "sweep"
    command = ("bench", *TINY, "--batch-sizes", "4", "--precisions", "fp32", "--sweep", "model.width=4,8")
    assert run_cli(capsys, *command, "--out", str(out))[0] == 0
    cell = out / "cells" / "model.width=4" / "results.json"
    other = out / "cells" / "model.width=8" / "results.json"
    if damage == "another cell's":
        cell.write_bytes(other.read_bytes())
    elif damage == "other batch sizes":
        cell.write_text(cell.read_text().replace('"batch_sizes": [', '"batch_sizes": [16, '))
    else:
        cell.write_bytes(cell.read_bytes()[:500])
    kept = other.read_bytes()
    code, _, err = run_cli(capsys, *command, "--out", str(out))
    assert code == 0, err
    said = [line for line in err.splitlines() if line.startswith("warning:") and "benched again" in line]
    assert len(said) == 1 and str(cell) in said[0], err
    assert "model.width=8 (finished before, kept)" in err and other.read_bytes() == kept
    assert json.loads(cell.read_text())["spec"]["model_options"]["width"] == 4
