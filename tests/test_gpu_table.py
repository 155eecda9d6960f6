"""system/gpus.csv is input (edited by hand, saved by a spreadsheet): every cell reads as its column says, or the
table is refused with one line naming the file, the GPU, the column and the value."""

from __future__ import annotations

import csv
import dataclasses
import io
from importlib import resources

import pytest

from ampgan.errors import AmpganError
from ampgan.system.gpus import COLUMNS, gpu_table, parse_gpu_table

PACKAGED = resources.files("ampgan.system").joinpath("gpus.csv").read_text(encoding="utf-8")


def edited(column: str, value: str, key: str = "V100") -> str:
    """gpus.csv with one cell of row `key` replaced."""
    rows = list(csv.DictReader(PACKAGED.splitlines()))
    for row in rows:
        if row["key"] == key:
            row[column] = value
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def test_the_packaged_table_reads_every_column_into_its_row():
    v100 = gpu_table()["V100"]
    assert (v100.cuda_capability, v100.sms, v100.bandwidth_gbs, v100.watts) == ((7, 0), 80, 900.0, 300.0)
    assert v100.peak_tflops == {"fp32": 15.7, "tf32": None, "bf16": None, "fp16": 125.0} and v100.tensor_cores
    assert parse_gpu_table(PACKAGED) == gpu_table()  # the same rows, in the file's order
    assert list(parse_gpu_table(PACKAGED)) == list(gpu_table())


@pytest.mark.parametrize(("written", "read"), [("8", (8, 0)), ("8.6", (8, 6)), (" 9.0 ", (9, 0)), ("10.0", (10, 0))])
def test_a_compute_capability_saved_without_its_minor_reads_as_minor_0(written, read):
    """A spreadsheet saves 8.0 as "8": that is (8, 0), not the one-element (8,) no capability check compares."""
    assert parse_gpu_table(edited("cuda_capability", written))["V100"].cuda_capability == read


@pytest.mark.parametrize(
    ("column", "value", "named", "says"),
    [
        ("cuda_capability", "8.0.1", "cuda_capability's minor", "is '0.1', not a whole number"),
        ("cuda_capability", "sm_80", "cuda_capability", "is 'sm_80', not a whole number"),
        ("cuda_capability", "", "cuda_capability", "is '', not a whole number"),
        ("sms", "80.5", "sms", "is '80.5', not a whole number"),
        ("sms", "0", "sms", "is 0; it must be from 1 to 100000"),
        ("bandwidth_gbs", "900 GB/s", "bandwidth_gbs", "is '900 GB/s', not a number"),
        ("bandwidth_gbs", "inf", "bandwidth_gbs", "is 'inf', not a number"),
        # 0 read, then divided by in the projection: a ZeroDivisionError traceback from `project --gpus`
        ("bandwidth_gbs", "0", "bandwidth_gbs", "is 0; it must be from 1 to 100000"),
        ("memory_gib", "0", "memory_gib", "is 0; it must be from 1 to 100000"),
        ("cuda_capability", "0.0", "cuda_capability", "is 0; it must be from 1 to 99"),
        ("memory_gib", "", "memory_gib", "is '', not a number"),
        ("fp16_tflops", "n/a", "fp16_tflops", "is 'n/a', not a number"),
        ("fp16_tflops", "-125", "fp16_tflops", "is -125; it must be from 0 to 100000"),
        ("watts", "300W", "watts", "is '300W', not a number"),
        ("watts", "0", "watts", "is 0; it must be from 1 to 100000"),
        ("clock_share", "0", "clock_share", "is 0; it must be from 0.01 to 1"),
        ("clock_share", "57%", "clock_share", "is '57%', not a number"),
        ("clock_share", "1.2", "clock_share", "is 1.2; it must be from 0.01 to 1"),
    ],
)
def test_a_cell_that_does_not_read_as_its_column_is_one_line_naming_it(column, value, named, says):
    """files/schema.py's table_number, as the price catalog's cells are read: the file, its line, the column."""
    with pytest.raises(AmpganError) as raised:
        parse_gpu_table(edited(column, value), "my-gpus.csv")
    assert str(raised.value).startswith(f"my-gpus.csv line 5: {named} {says}")  # V100 is the table's 4th row


def test_fp16_units_is_tensor_or_half2():
    with pytest.raises(AmpganError, match="^my-gpus.csv line 5: fp16_units is 'Tensor': write tensor, or half2"):
        parse_gpu_table(edited("fp16_units", "Tensor"), "my-gpus.csv")


@pytest.mark.parametrize("column", ["sms", "cuda_capability", "watts"])
def test_a_table_without_one_of_the_columns_is_refused_naming_it(column):
    header, rest = PACKAGED.split("\n", 1)
    with pytest.raises(AmpganError, match=f"^src/ampgan/system/gpus.csv has no column {column}: its first line"):
        parse_gpu_table(header.replace(column, "renamed") + "\n" + rest)


def test_an_empty_rate_is_no_fast_path_and_a_precision_without_a_column_has_no_entry():
    rows = list(csv.DictReader(PACKAGED.splitlines()))
    out = io.StringIO()
    fields = [f for f in rows[0] if f != "tf32_tflops"]
    writer = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    t4 = parse_gpu_table(out.getvalue())["T4"]
    assert "tf32" not in t4.peak_tflops and t4.peak_tflops["bf16"] is None and t4.cannot_run("bf16")
    assert set(COLUMNS) <= {f.name for f in dataclasses.fields(t4)}


def test_a_row_with_a_cell_too_many_or_too_few_is_read_or_refused_in_one_line():
    lines = PACKAGED.splitlines()
    extra = "\n".join([*lines[:4], lines[4] + ",a stray cell", *lines[5:]])
    assert parse_gpu_table(extra)["V100"] == gpu_table()["V100"]  # the stray cell is left aside
    short = "\n".join([*lines[:4], "V100,Tesla V100", *lines[5:]])
    with pytest.raises(AmpganError, match="^src/ampgan/system/gpus.csv line 5: fp16_units is ''"):
        parse_gpu_table(short)
