"""Rebuild benchmarks/calibration/deepbench_*.csv from DeepBench's published training results.

DeepBench (github.com/baidu-research/DeepBench, Apache-2.0) timed GEMMs and convolutions (forward and
both backward passes) on real GPUs in fp32 and in 16-bit inputs with fp32 accumulation. This script
reads its spreadsheets once and writes them in ampgan's one calibration format (docs/projection.md):

    name,op,m,n,k,transpose_a,transpose_b,batch,c,h,w,out_channels,r,s,pad_h,pad_w,stride_h,stride_w,precision,ms

plus a sidecar <file>.json naming the GPU, source, licence, date and software. The RNN and all-reduce
sections are left out (no GAN runs them). The T4 sheet is written to a file marked held out: it is never
fitted (the project's owners check the calibration against it).

    python benchmarks/calibration/build_deepbench.py DEEPBENCH_CHECKOUT   # needs openpyxl (conversion only)

DEEPBENCH_CHECKOUT is a clone of the repository, or a folder holding results/train/DeepBench_NV_*.xlsx.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

from ampgan.precisions import FP16, FP32
from ampgan.projection.kernels import CALIBRATION_COLUMNS

# The projection's calibration format, declared once (projection/kernels.py).
COLUMNS = list(CALIBRATION_COLUMNS)
HERE = Path(__file__).resolve().parent
SOURCE = "https://github.com/baidu-research/DeepBench (commit da81ba7, results/train/{sheet})"

# sheet file -> what we write; fitted: False keeps a sheet out of every fit.
SHEETS = {
    "V100": {
        "file": "DeepBench_NV_V100.xlsx",
        "out": "deepbench_v100.csv",
        "gpu": "V100",
        "architecture": "volta",
        "fitted": True,
        "fp16_sheet": "16-bit inputs, 16-bit multiplication, 32-bit accumulation (tensor cores)",
    },
    "P100": {
        "file": "DeepBench_NV_P100.xlsx",
        "out": "deepbench_p100.csv",
        "gpu": "P100",
        "architecture": "pascal",
        "fitted": True,
        "fp16_sheet": "'Pseudo FP16': 16-bit inputs, 32-bit multiplication and accumulation (no tensor cores), "
        "what autocast runs on a P100",
    },
    "T4": {
        "file": "DeepBench_NV_T4.xlsx",
        "out": "heldout_deepbench_t4.csv",
        "gpu": "T4",
        "architecture": "turing",
        "fitted": False,
        "fp16_sheet": "16-bit inputs, 16-bit multiplication, 32-bit accumulation (tensor cores)",
    },
}


def _specs(sheet) -> dict[str, str]:
    return {
        str(row[0]).strip(): str(row[1]).strip()
        for row in sheet.iter_rows(values_only=True)
        if row and row[0] is not None and row[1] is not None
    }


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _rows_of(sheet, precision: str) -> list[dict]:
    """GEMM and convolution rows of one results sheet, by the column names of each section's header."""
    rows, section, header = [], None, None
    for values in sheet.iter_rows(values_only=True):
        first = str(values[0]).strip() if values[0] is not None else ""
        if first:
            section = "gemm" if first.startswith("Dense Matrix") else "conv" if first == "Convolution" else None
            header = [str(v).strip() if v is not None else "" for v in values] if section == "gemm" else None
            continue
        if section == "conv" and header is None and "W" in values:
            header = [str(v).strip() if v is not None else "" for v in values]
            continue
        if section is None or header is None:
            continue
        cell = dict(zip(header, values))
        if section == "gemm" and _number(cell.get("M")) and _number(cell.get("Time (msec)")):
            rows.append(
                {
                    "op": "gemm",
                    "m": int(cell["M"]),
                    "n": int(cell["N"]),
                    "k": int(cell["K"]),
                    "transpose_a": int(cell["A Transpose"] == "T"),
                    "transpose_b": int(cell["B Transpose"] == "T"),
                    "precision": precision,
                    "ms": round(float(cell["Time (msec)"]), 6),
                }
            )
        elif section == "conv" and _number(cell.get("W")):
            # Column names differ between sheets (V100: "S (Filter width)"); R is the filter's height.
            named = {key.split(" ")[0]: value for key, value in cell.items() if key}
            shape = {
                "batch": int(named["N"]),
                "c": int(named["C"]),
                "h": int(named["H"]),
                "w": int(named["W"]),
                "out_channels": int(named["K"]),
                "r": int(named["R"]),
                "s": int(named["S"]),
                "pad_h": int(named["pad_h"]),
                "pad_w": int(named["pad_w"]),
                "stride_h": int(cell["Vertical stride"]),
                "stride_w": int(cell["Horizontal stride"]),
            }
            for op, column in (
                ("conv_fwd", "Forward (msec)"),
                ("conv_bwd_data", "wrt Inputs (msec)"),
                ("conv_bwd_weight", "wrt Parameters (msec)"),
            ):
                ms = _number(cell.get(column))  # "N/A*": DeepBench skipped an input layer's data gradient
                if ms:
                    rows.append({"op": op, **shape, "precision": precision, "ms": round(ms, 6)})
    return rows


def _named(rows: list[dict]) -> list[dict]:
    """Each kernel named by its shape; a shape listed twice in a sheet gets #2 (names pair fp32 and fp16)."""
    seen: dict[tuple, int] = {}
    for row in rows:
        if row["op"] == "gemm":
            base = (
                f"gemm_{row['m']}x{row['n']}x{row['k']}_{'TN'[row['transpose_a'] == 0]}{'TN'[row['transpose_b'] == 0]}"
            )
        else:
            base = (
                f"{row['op']}_n{row['batch']}_c{row['c']}_{row['h']}x{row['w']}_k{row['out_channels']}_"
                f"{row['r']}x{row['s']}_p{row['pad_h']}x{row['pad_w']}_s{row['stride_h']}x{row['stride_w']}"
            )
        count = seen[(base, row["precision"])] = seen.get((base, row["precision"]), 0) + 1
        row["name"] = base if count == 1 else f"{base}#{count}"
    return rows


def convert(checkout: Path, key: str) -> Path:
    import openpyxl  # noqa: PLC0415 - only this conversion needs it

    about = SHEETS[key]
    book = openpyxl.load_workbook(checkout / "results" / "train" / about["file"], data_only=True)
    fp32_sheet, fp16_sheet = book.worksheets[0], book.worksheets[1]
    specs = _specs(book["Specs"])
    rows = _named(_rows_of(fp32_sheet, FP32)) + _named(_rows_of(fp16_sheet, FP16))
    out = HERE / about["out"]
    with out.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        writer.writerows(rows)
    sidecar = {
        "gpu": about["gpu"],
        "architecture": about["architecture"],
        "source": SOURCE.format(sheet=about["file"]),
        "licence": "Apache-2.0 (DeepBench's LICENSE)",
        "date": "V100 and T4 sheets committed 2019-10-07, P100 sheet 2018-05-21 (the repository's history)",
        "software": {
            "cuda": specs.get("CUDA Version"),
            "cudnn": specs.get("Cudnn Version"),
            "driver": specs.get("Nvidia Driver"),
            "gpu_model": specs.get("GPU Model"),
            "host_cpu": specs.get("CPU Model"),
        },
        "measured_by": "Baidu Research / NVIDIA for DeepBench (DeepBench's gemm_bench and conv_bench, "
        "one kernel timed in isolation)",
        "precisions": {
            FP32: f"sheet '{fp32_sheet.title}': fp32 inputs and arithmetic",
            FP16: f"sheet '{fp16_sheet.title}': {about['fp16_sheet']}",
        },
        "fitted": about["fitted"],
        "note": (
            "held out, never fitted: kept aside to check the calibration"
            if not about["fitted"]
            else "fitted: src/ampgan/projection/calibration/ is fitted on this file by benchmarks/calibration/fit.py"
        ),
        "rebuilt_by": "benchmarks/calibration/build_deepbench.py",
        "kernels": len(rows),
    }
    out.with_name(out.name + ".json").write_text(json.dumps(sidecar, indent=2) + "\n", encoding="utf-8")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: build_deepbench.py DEEPBENCH_CHECKOUT", file=sys.stderr)
        return 2
    for key in SHEETS:
        print(convert(Path(argv[0]), key))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
