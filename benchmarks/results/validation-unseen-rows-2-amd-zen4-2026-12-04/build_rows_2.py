"""Published single-GPU training rows in none of rows.csv, heldout_ada_hopper.csv or the 2026-12-03 unseen rows:
ryujaehun/pytorch-gpu-benchmark's fp32 and half training steps (torchvision CNNs, batch 12, 224x224x3) and the
Hugging Face single-GPU performance guide's BERT-large runs, as a new user would bring them to check.py --rows.

    PYTHONPATH=src python benchmarks/results/validation-unseen-rows-2-amd-zen4-2026-12-04/build_rows_2.py \
        RYUJAEHUN_GIT_DIR > benchmarks/results/validation-unseen-rows-2-amd-zen4-2026-12-04/rows_2.csv

RYUJAEHUN_GIT_DIR is a git directory of github.com/ryujaehun/pytorch-gpu-benchmark (read with `git show`); each
of its rows is the mean of the 50 timed steps its CSV holds (the mean is what its script prints), as images/s at
its batch of 12. The Hugging Face rows are copied from the guide's printed output, cited. Nothing is fitted on them.
"""

from __future__ import annotations

import csv
import io
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))
import build_rows as br  # noqa: E402

RYU_COMMIT = "3f47a9e"  # 2021-01-07, HEAD
RYU_BATCH = 12  # benchmark_models.py --BATCH_SIZE default; each 1-GPU folder's config.json says 12 where it has one
# The step it times: model.zero_grad(), forward of img.to('cuda'), CrossEntropyLoss, backward; no optimizer step.
# "half" is model.half() and img.half(): the whole network in fp16 (batch norms too), no loss scaling, no fp32 copy.
RYU_NOTE = (
    "amp: none: model.half() (whole network fp16, batch norms included), no loss scaling; the timed step is "
    "zero_grad + forward (with the batch's host-to-device copy) + loss + backward, no optimizer step "
    "(benchmark_models.py train()); throughput: batch 12 / the mean of 50 timed steps after 5 warm-up"
)
# (folder, file stem, gpu key, gpu detail, generation, software, fp32 meaning)
RYU_GPUS = [
    (
        "dgx-a100",
        "A100-SXM4-40GB_1_gpus_",
        "A100",
        "40GB SXM4 400 W (DGX A100)",
        "ampere",
        "CUDA 11.1, cuDNN 8.0.4 (system_info.txt); NGC pytorch:20.10-py3 (README: PyTorch 1.7)",
        "TF32 convolutions and matmuls (PyTorch 1.7-1.11 default)",
    ),
    (
        "TitanRTX",
        "TITAN RTX_1_gpus_",
        "Titan RTX",
        "24GB 280 W",
        "turing",
        "CUDA 10.2, cuDNN 7.6.5 (system_info.txt); PyTorch version not recorded",
        "strict fp32 (no TF32 on this GPU)",
    ),
    (
        "2080ti(2)",
        "GeForce RTX 2080 Ti_1_gpus_",
        "RTX 2080 Ti",
        "11GB 250 W",
        "turing",
        "CUDA 10.0, cuDNN 7.6.0 (system_info.txt); PyTorch version not recorded",
        "strict fp32 (no TF32 on this GPU)",
    ),
    (
        "TITANXP",
        "TITAN Xp_1_gpus_",
        "Titan Xp",
        "12GB 250 W",
        "pascal",
        "CUDA 10.2, cuDNN 7.6.5 (system_info.txt); PyTorch version not recorded",
        "strict fp32 (no TF32 on this GPU)",
    ),
]
RYU_MODELS = {"resnet50": "resnet50", "vgg16": "vgg16", "densenet121": "densenet121"}

HF = "docs/source/en/perf_train_gpu_one.mdx"
HF_COMMIT = "0016acf7ef421c7fe8eff7945de52c71896c3b01"
HF_NOTE = (
    "amp: Trainer fp16=True (torch.cuda.amp autocast + GradScaler); AutoModelForSequenceClassification "
    "bert-large-uncased, 512 random token ids a sequence, 512 sequences, 1 epoch (128 steps), AdamW (Trainer default); "
    "throughput: train_samples_per_second (512 / train_runtime, first step included)"
)


def ryu_rows(git_dir: str) -> list[dict]:
    rows = []
    for folder, stem, gpu, detail, generation, software, meaning in RYU_GPUS:
        means = {
            p: _means(git_dir, f"results/{folder}/{stem}_{p}_model_train_benchmark.csv") for p in ("float", "half")
        }
        for column, model in RYU_MODELS.items():
            rows.append(
                {
                    "model": model,
                    "task": "classification",
                    "input": "3x224x224",
                    "gpu": gpu,
                    "gpu_detail": detail,
                    "generation": generation,
                    "baseline": "tf32" if generation == "ampere" else "fp32",
                    "batch_baseline": RYU_BATCH,
                    "batch_amp": RYU_BATCH,
                    "throughput_baseline": round(RYU_BATCH / means["float"][column] * 1000, 2),
                    "throughput_amp": round(RYU_BATCH / means["half"][column] * 1000, 2),
                    "unit": "images/s",
                    "items_per_sample": 1,
                    "software": software,
                    "fp32_meaning": meaning,
                    "source": "ryujaehun/pytorch-gpu-benchmark",
                    "source_path": f"results/{folder}/{stem}_{{float,half}}_model_train_benchmark.csv",
                    "commit": RYU_COMMIT,
                    "heading": f"column {column}",
                    "notes": RYU_NOTE,
                }
            )
    return rows


def _means(git_dir: str, path: str) -> dict[str, float]:
    text = subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{RYU_COMMIT}:{path}"], capture_output=True, text=True, check=True
    ).stdout
    table = list(csv.reader(io.StringIO(text)))
    return {name: statistics.mean(float(r[i]) for r in table[1:] if r) for i, name in enumerate(table[0])}


def hf_rows() -> list[dict]:
    # "Vanilla Training": Time 57.82, Samples/second 8.86; "FP16 Training": Time 27.46, Samples/second 18.64;
    # both per_device_train_batch_size=4; the guide's nvidia-smi shows a Tesla V100-SXM2 16GB, driver 460.91.03.
    # First brought as bert_large_squad (the set's BERT-large): left out, its builder is SQuAD's at 384 tokens.
    return [
        {
            "model": "bert_large_cls",
            "task": "classification",
            "input": "seq512",
            "gpu": "V100",
            "gpu_detail": "16GB SXM2 300 W",
            "generation": "volta",
            "baseline": "fp32",
            "batch_baseline": 4,
            "batch_amp": 4,
            "throughput_baseline": 8.86,
            "throughput_amp": 18.64,
            "unit": "sequences/s",
            "items_per_sample": 1,
            "software": "transformers 4.16-4.17 era (2022-01), driver 460.91.03 (CUDA 11.2); PyTorch version not stated",
            "fp32_meaning": "strict fp32 (no TF32 on this GPU)",
            "source": "huggingface/transformers",
            "source_path": HF,
            "commit": HF_COMMIT,
            "heading": "Vanilla Training / Floating Data Types: FP16 Training",
            "notes": HF_NOTE,
        }
    ]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: build_rows_2.py RYUJAEHUN_GIT_DIR", file=sys.stderr)
        return 2
    out = csv.DictWriter(sys.stdout, br.COLUMNS, lineterminator="\n")
    out.writeheader()
    for row in ryu_rows(argv[0]) + hf_rows():
        out.writerow(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
