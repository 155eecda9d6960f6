"""Rows not in rows.csv or heldout_ada_hopper.csv: Lambda's "v2" tables (H100 SXM5, H100 PCIe, H200, GH200, B200),
the 1-GPU systems, read from a git snapshot of lambdal/deeplearning-benchmark with `git show`.

    PYTHONPATH=src python benchmarks/results/validation-unseen-rows-amd-zen4-2026-12-03/build_lambda_v2.py \
        LAMBDA_GIT_DIR > benchmarks/results/validation-unseen-rows-amd-zen4-2026-12-03/lambda_v2.csv

Throughput: pytorch/pytorch-train-throughput-v2-{fp32,fp16}.csv (one row per system, no num_gpu column: the
folder name says 1x). Batch: GLOBAL_BATCH in each run's results_v2/<system>/<run>/benchmark.para (GPU 1).
Software: results_v2/<system>/sys_pytorch.txt. A run whose log says `amp : False` is left out (v2's Tacotron 2
and WaveGlow "FP16" runs, as in v1). Nothing here is fitted: check.py --rows projects these rows as they are.
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))
import build_rows as br  # noqa: E402

COMMIT = "aa5addb6a53675a649a80036dad548f1c27cbcc4"
# One 1-GPU system per GPU kind (the 30 H100 SXM5 1x machines agree within 3%: the first is taken).
SYSTEMS = {
    "LambdaOD_1x_1xH100_80GB_SXM5_192-222-52-83_v2": ("H100", "80GB SXM5 HBM3 (Lambda on-demand)", "hopper"),
    "LambdaOD_1x_Texas_1xH100_80GB_PCIe_209-20-158-50_v2": ("H100 PCIe", "80GB PCIe (Lambda on-demand)", "hopper"),
    "LambdaBM_ENG04_1xH200_140GB_SXM_h200_v2": ("H200", "141GB SXM (Lambda bare metal)", "hopper"),
    "LambdaOD_1x_1xGH200_96GB_192-222-57-0_v2": ("GH200", "96GB HBM3 Grace Hopper (Lambda on-demand)", "hopper"),
    "LambdaOD_1x_1xGH200_80GB_192-222-58-35_v2": ("GH200", "80GB Grace Hopper (Lambda on-demand)", "hopper"),
    "LambdaOD_test_1xB200_192GB_129-213-83-251_v2": ("B200", "192GB SXM (Lambda on-demand)", "blackwell"),
}
# Lambda's column -> (baseline run, mixed-precision run)
RUNS = {
    "resnet50": ("PyTorch_resnet50_FP32", "PyTorch_resnet50_AMP"),
    "ssd": ("PyTorch_SSD_FP32", "PyTorch_SSD_AMP"),
    "bert_base_squad": ("PyTorch_bert_base_squad_FP32", "PyTorch_bert_base_squad_FP16"),
    "bert_large_squad": ("PyTorch_bert_large_squad_FP32", "PyTorch_bert_large_squad_FP16"),
    "gnmt": ("PyTorch_gnmt_FP32", "PyTorch_gnmt_FP16"),
    "tacotron2": ("PyTorch_tacotron2_FP32", "PyTorch_tacotron2_FP16"),
    "waveglow": ("PyTorch_waveglow_FP32", "PyTorch_waveglow_FP16"),
}


def batch(git: Path, system: str, run: str) -> int:
    para = br.show(git, COMMIT, f"pytorch/results_v2/{system}/{run}/benchmark.para") or ""
    gpus = re.search(r"GPU (\d+)", para)
    assert gpus and gpus.group(1) == "1", f"{system}/{run}: not a 1-GPU run"
    return int(re.search(r"GLOBAL_BATCH (\d+)", para).group(1))


def amp_off(git: Path, system: str, run: str) -> bool:
    folder = f"pytorch/results_v2/{system}/{run}"
    names = [n for n in (br.show(git, COMMIT, folder) or "").split("\n") if n.endswith(".txt")]
    return any(re.search(r"\bamp : False", br.show(git, COMMIT, f"{folder}/{n}") or "") for n in names)


def software(git: Path, system: str) -> str:
    text = br.show(git, COMMIT, f"pytorch/results_v2/{system}/sys_pytorch.txt") or ""
    torch = re.search(r"PyTorch Version:\s*(\S+)", text).group(1)
    cuda = re.search(r"CUDA Version:\s*V?(\S+)", text).group(1)
    return f"PyTorch {torch}, CUDA {cuda} (results_v2/{system}/sys_pytorch.txt)"


def main(argv: list[str]) -> int:
    git = Path(argv[0])
    tables = {
        p: {
            r[""]: r
            for r in csv.DictReader(br.show(git, COMMIT, f"pytorch/pytorch-train-throughput-v2-{p}.csv").splitlines())
        }
        for p in ("fp32", "fp16")
    }
    out = csv.DictWriter(sys.stdout, br.COLUMNS, lineterminator="\n")
    out.writeheader()
    for system, (gpu, detail, generation) in SYSTEMS.items():
        soft = software(git, system)
        for col, (base_run, amp_run) in RUNS.items():
            model, task, inp, unit, items, note = br.LAMBDA_MODELS[col]
            if amp_off(git, system, amp_run):
                print(f"skipped: {system} {col}: the {amp_run} log says amp : False", file=sys.stderr)
                continue
            thr32, thr16 = float(tables["fp32"][system][col]), float(tables["fp16"][system][col])
            out.writerow(
                {
                    "model": model,
                    "task": task,
                    "input": inp,
                    "gpu": gpu,
                    "gpu_detail": detail,
                    "generation": generation,
                    "baseline": br.TF32,
                    "batch_baseline": batch(git, system, base_run),
                    "batch_amp": batch(git, system, amp_run),
                    "throughput_baseline": br.plain(thr32),
                    "throughput_amp": br.plain(thr16),
                    "unit": unit,
                    "items_per_sample": br.plain(items),
                    "software": soft,
                    "fp32_meaning": br.TF32_CONV,
                    "source": "Lambda v2",
                    "source_path": "pytorch/pytorch-train-throughput-v2-fp32.csv, -v2-fp16.csv; "
                    f"results_v2/{system}/<run>/benchmark.para (GLOBAL_BATCH)",
                    "commit": COMMIT,
                    "heading": f"v2 row {system!r}, column {col!r}",
                    "notes": "; ".join(n for n in (f"amp: {br.AMP_V1[col]}", note) if n),
                }
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
