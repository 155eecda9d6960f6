"""The GPUs a user can rent are in the shipped table, and a user adds their own board with --gpus FILE.csv
(gpus.csv's columns) for `project` and `cost`, without editing the package: the rows join the table for that
command only; a row that would shadow a shipped one, a damaged cell or a missing column is one line, exit 2."""

from __future__ import annotations

import csv
import io
import json
import sys
from importlib import resources
from pathlib import Path

import pytest
from conftest import run_cli

import ampgan
from ampgan.projection.output import footer
from ampgan.system.gpus import gpu_table

ROOT = Path(__file__).resolve().parents[1]
# A committed bench of the study's network at 32x32x3 with its op tables (batch 16): projected, never re-run.
RESULTS = ROOT / "benchmarks/results/projection-composed-acgan2019-cifar32-amd-zen4-2026-12-03/bench/results.json"
PACKAGED = resources.files("ampgan.system").joinpath("gpus.csv").read_text(encoding="utf-8")
KERNELS = (
    "name,op,m,n,k,transpose_a,transpose_b,batch,c,h,w,out_channels,r,s,pad_h,pad_w,stride_h,stride_w\n"
    "fc,gemm,2048,1024,8192,0,1,,,,,,,,,,,\n"
    "conv,conv_fwd,,,,,,64,64,16,16,128,4,4,1,1,2,2\n"
)


def packaged_row(key: str) -> dict:
    return next(row for row in csv.DictReader(PACKAGED.splitlines()) if row["key"] == key)


def write_table(path: Path, rows: list[dict], drop: str | None = None) -> Path:
    """A user's GPU file in gpus.csv's columns (less `drop`)."""
    fields = [f for f in rows[0] if f != drop]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def twin(key: str = "A10G", of: str = "A10", **cells) -> dict:
    """A shipped row's figures under another key and name: it must project exactly as that row does."""
    return {**packaged_row(of), "key": key, "name": f"NVIDIA {key}", "source": "my datasheet", **cells}


def test_the_boards_a_user_rents_are_shipped_and_only_laptop_parts_stay_with_the_validation_set():
    sys.path.insert(0, str(ROOT / "benchmarks" / "validation"))
    import composition_fit as cf

    shipped = gpu_table()
    assert {"A10", "A40", "L40S", "RTX 3090", "RTX 4090", "RTX A6000", "RTX 6000 Ada", "A100 PCIe"} <= set(shipped)
    only_validation = set(cf.gpus()) - set(shipped)
    assert only_validation and all("Max-Q" in key for key in only_validation)
    assert all(cf.gpus()[key] == spec for key, spec in shipped.items())  # one row per board, read alike
    assert "A10G" not in shipped  # no source read here gives its rates: a user's --gpus row


def test_a_moved_row_projects_the_numbers_it_did_from_the_validation_table(tmp_path, capsys):
    """ms per kernel as the rows gave them when they lived in benchmarks/validation/gpus.csv (main at 452e8d0,
    composition_fit.gpus()), now through `ampgan project --kernels` from the shipped table. Values of the Volta
    calibration refitted on 2026-12-04 (tensor-core convolutions padded): both kernels are aligned, so only the
    joint refit moved them, by under 2% (1.194249, 0.0454369, 0.725007, 0.0291604, 0.140082, 2.63567, 0.0289203);
    refitted again on 2026-12-04 (DeepBench's 16-bit GEMMs padded, a GEMM named as cuBLAS's call: the fc is
    now 1024x2048x8192 TN), by under 0.1% (previously 1.19255, 0.0445465, 0.724301, 0.0288177, 0.140066,
    2.63419, 0.0285878)."""
    (tmp_path / "k.csv").write_text(KERNELS)
    code, _, err = run_cli(
        capsys,
        "project",
        "--kernels",
        str(tmp_path / "k.csv"),
        "--devices",
        "RTX 3090,A40,RTX 6000 Ada,Quadro RTX 8000",
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 0, err
    with (tmp_path / "out" / "kernels.csv").open(encoding="utf-8") as stream:
        ms = {(r["name"], r["device"], r["precision"]): float(r["ms"]) for r in csv.DictReader(stream)}
    before = {
        ("fc", "RTX 3090", "fp32"): 1.19256,
        ("conv", "RTX 3090", "fp16"): 0.0445501,
        ("fc", "A40", "tf32"): 0.724913,
        ("conv", "A40", "bf16"): 0.0288191,
        ("fc", "RTX 6000 Ada", "fp16"): 0.140165,
        ("fc", "Quadro RTX 8000", "fp32"): 2.63419,
        ("conv", "Quadro RTX 8000", "fp16"): 0.0285892,
    }
    for key, value in before.items():
        assert ms[key] == pytest.approx(value, rel=1e-5), key  # kernels.csv keeps 6 significant digits


def test_a_user_gpu_file_adds_a_board_project_projects_then_leaves_the_table_as_it_was(tmp_path, capsys):
    mine = write_table(tmp_path / "mine.csv", [twin()])
    out = tmp_path / "projection"
    code, stdout, err = run_cli(
        capsys, "project", str(RESULTS), "--gpus", str(mine), "--devices", "A10G,A10", "--out", str(out)
    )
    assert code == 0, err
    document = json.loads((out / "projection.json").read_text())
    rows = {(r["device"], r["precision"], r["batch_size"]): r for r in document["rows"]}
    assert {device for device, _, _ in rows} == {"A10G", "A10"}
    for (device, precision, batch), row in rows.items():
        if device == "A10G":  # the same figures as the A10's row: the same projection, to the digit
            assert row["status"] == "ok" and row["ms_per_step"] == rows[("A10", precision, batch)]["ms_per_step"]
    recorded = {d["key"]: d for d in document["devices"]}
    assert recorded["A10G"]["source"] == "my datasheet"  # the user's row is stated beside its numbers
    # the figure's footer no longer calls a user's row one of NVIDIA's datasheets as ampgan ships them
    text = footer(document)
    assert "; A10G: the user's rows (--gpus or registered; sources in projection.json)" in text and "A10," not in text
    assert "the user's own rows" not in footer(
        document | {"devices": [d for d in document["devices"] if d["key"] == "A10"]}
    )
    assert "A10G" in (out / "projection.csv").read_text() and "A10G" in stdout
    assert "A10G" not in gpu_table()  # for that command only
    code, _, err = run_cli(capsys, "project", str(RESULTS), "--devices", "A10G", "--out", str(tmp_path / "again"))
    assert code == 2 and "unknown GPU 'A10G'" in err and "--gpus FILE.csv" in err


def test_the_python_api_takes_the_same_gpus_setting(tmp_path):
    mine = write_table(tmp_path / "mine.csv", [twin("My A10", of="A10")])
    projected = ampgan.project(RESULTS, tmp_path / "p", gpus=mine, devices="My A10")
    assert {r["device"] for r in projected.rows} == {"My A10"} and projected.projection.is_file()


def test_project_kernels_reads_the_user_gpus_too(tmp_path, capsys):
    (tmp_path / "k.csv").write_text(KERNELS)
    mine = write_table(tmp_path / "mine.csv", [twin("A10G", of="RTX 3090")])
    code, _, err = run_cli(
        capsys, "project", "--kernels", str(tmp_path / "k.csv"), "--gpus", str(mine), "--devices", "A10G,RTX 3090"
    )
    assert code == 0, err
    with (tmp_path / "projection" / "kernels.csv").open(encoding="utf-8") as stream:
        ms = {(r["name"], r["device"], r["precision"]): r["ms"] for r in csv.DictReader(stream)}
    assert ms[("fc", "A10G", "fp16")] == ms[("fc", "RTX 3090", "fp16")]


def test_cost_projects_onto_an_instance_whose_gpu_only_the_user_file_has(tmp_path, capsys):
    """AWS g5.xlarge runs an A10G: the shipped table has no row for it (refused, naming --gpus); the user's
    row makes it a projection, labelled so."""
    code, _, err = run_cli(capsys, "cost", str(RESULTS), "--instance", "g5.xlarge", "--out", str(tmp_path / "no"))
    assert code == 2 and "no row to project onto (give yours: --gpus FILE.csv)" in err
    mine = write_table(tmp_path / "mine.csv", [twin()])
    out = tmp_path / "cost"
    code, _, err = run_cli(
        capsys, "cost", str(RESULTS), "--instance", "g5.xlarge", "--gpus", str(mine), "--out", str(out)
    )
    assert code == 0, err
    document = json.loads((out / "cost.json").read_text())
    assert document["basis"]["projection"] is True and "NVIDIA A10G (projected)" == document["measured_on"]
    assert "A10G" not in gpu_table()


@pytest.mark.parametrize(
    "row, says",
    [
        (twin("T4", of="A10"), "'T4' is ampgan's 'T4' with other figures"),  # a key the table has
        (twin("t4", of="A10"), "'t4' is ampgan's 'T4' with other figures"),  # as gpu_spec reads keys: case aside
        ({**twin("My T4", of="A10"), "name": "Tesla T4"}, "'My T4' is ampgan's 'T4'"),  # nvidia-smi's name
    ],
)
def test_a_row_that_would_shadow_a_shipped_one_is_refused_in_one_line(tmp_path, capsys, row, says):
    mine = write_table(tmp_path / "mine.csv", [row])
    code, _, err = run_cli(capsys, "project", str(RESULTS), "--gpus", str(mine), "--out", str(tmp_path / "p"))
    assert code == 2 and says in err and str(mine) in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "p").exists()
    assert "t4" not in gpu_table() and gpu_table()["T4"].bandwidth_gbs == 320


def test_a_row_identical_to_a_shipped_one_is_taken_as_that_row(tmp_path, capsys):
    mine = write_table(tmp_path / "mine.csv", [packaged_row("A100"), twin()])
    code, _, err = run_cli(
        capsys, "project", str(RESULTS), "--gpus", str(mine), "--devices", "A100,A10G", "--out", str(tmp_path / "p")
    )
    assert code == 0, err
    assert "A100" in gpu_table() and "A10G" not in gpu_table()  # the shipped row stays when the user's goes


@pytest.mark.parametrize(
    "edit, says",
    [
        ({"bandwidth_gbs": "600 GB/s"}, "mine.csv line 3: bandwidth_gbs is '600 GB/s', not a number"),
        ({"sms": "72.5"}, "mine.csv line 3: sms is '72.5', not a whole number"),
        ({"fp16_units": "yes"}, "mine.csv line 3: fp16_units is 'yes': write tensor, or half2"),
        ({"cuda_capability": "sm_86"}, "mine.csv line 3: cuda_capability is 'sm_86', not a whole number"),
        ({"key": "A10G"}, "mine.csv has the key A10G on more than one row: give each GPU its own key"),
    ],
)
def test_a_damaged_cell_is_one_line_naming_the_file_row_and_column(tmp_path, capsys, edit, says):
    mine = write_table(tmp_path / "mine.csv", [twin(), {**twin("A10X"), **edit}])
    for command in (["project", str(RESULTS)], ["cost", str(RESULTS), "--instance", "g5.xlarge"]):
        code, _, err = run_cli(capsys, *command, "--gpus", str(mine), "--out", str(tmp_path / "out"))
        assert code == 2 and says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "out").exists() and "A10G" not in gpu_table()


@pytest.mark.parametrize("column", ["sms", "generation", "source"])
def test_a_file_without_one_of_the_columns_is_refused_naming_it(tmp_path, capsys, column):
    mine = write_table(tmp_path / "mine.csv", [twin()], drop=column)
    code, _, err = run_cli(capsys, "project", str(RESULTS), "--gpus", str(mine), "--out", str(tmp_path / "p"))
    assert code == 2 and f"mine.csv has no column {column}: its first line names gpus.csv's columns" in err


def test_a_missing_or_unreadable_file_is_one_line(tmp_path, capsys):
    code, _, err = run_cli(capsys, "project", str(RESULTS), "--gpus", str(tmp_path / "none.csv"))
    assert code == 2 and "no GPU table at" in err and "give a CSV with columns key, name" in err
    (tmp_path / "binary.csv").write_bytes(b"\xff\xfe\x00key")
    code, _, err = run_cli(capsys, "project", str(RESULTS), "--gpus", str(tmp_path / "binary.csv"))
    assert code == 2 and "not a text CSV file (not UTF-8): export the GPU table as CSV" in err
    code, _, err = run_cli(capsys, "cost", str(RESULTS), "--price-per-hour", "1", "--gpus", str(tmp_path))
    assert code == 2 and "is a folder, not a regular file" in err


def test_a_user_files_rows_join_the_table_in_the_files_order(tmp_path):
    """Lookups take the first row that names a board (gpu_of_instance, gpu_table_key's ties): the rows join in
    the file's order, never a set's (which changes with the hash seed from one run to the next)."""
    from ampgan.system.gpus import user_gpus

    keys = [f"Board {letter}" for letter in "QWERTYUIOPAS"]
    path = write_table(tmp_path / "mine.csv", [twin(key) for key in keys])
    before = list(gpu_table())
    with user_gpus(path):
        assert list(gpu_table()) == before + keys
    assert list(gpu_table()) == before
