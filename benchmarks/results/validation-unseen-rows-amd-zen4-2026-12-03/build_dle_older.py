"""Rows not in rows.csv: DeepLearningExamples' 1-GPU training tables as older commits published them (other NGC
containers, 2019-2021), for models the validation set builds. rows.csv reads each README at 729963dd (2024-04)
only; these tables were replaced since, so their numbers are separate measurements on other software.

    python benchmarks/results/validation-unseen-rows-amd-zen4-2026-12-03/build_dle_older.py \
        > benchmarks/results/validation-unseen-rows-amd-zen4-2026-12-03/dle_older.csv

Each row below was copied from the table its `heading` names, in the README at its commit (read with
`git show COMMIT:PATH` on a snapshot of NVIDIA/DeepLearningExamples); nothing is fitted on them.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))
import build_rows as br  # noqa: E402

RN50 = "PyTorch/Classification/ConvNets/resnet50v1.5/README.md"
SSD = "PyTorch/Detection/SSD/README.md"
TACO = "PyTorch/SpeechSynthesis/Tacotron2/README.md"
GNMT = "PyTorch/Translation/GNMT/README.md"
NCF = "PyTorch/Recommendation/NCF/README.md"
BERT = "PyTorch/LanguageModeling/BERT/README.md"
TXL = "PyTorch/LanguageModeling/Transformer-XL/README.md"
C_RN50 = "9061083098da527671529366315f5bc0e16493c4"  # 2020-10-21
C_SSD21 = "0b3f770b0a87a5bfc549c2ecaaf140f749f24ce0"  # 2021-11-09
C_SSD20 = "437b950d5be2cc5d8044378ebf02976d5a21fc13"  # 2020-09-14
C_SSD19 = "4cce4d88e61c916ecd4cc1755d805b1b5323ff12"  # 2019-09-12
C_TACO20 = "387f700c4c100ecb36ece112e5d0f548a404dadc"  # 2020-05-07
C_TACO19 = "2992264d3a22d9e3a7af43e7f5ed993746e5b3bc"  # 2019-12-16
C_GNMT1905 = "b09ce9831bfa296dd56eaa3e2516eb2b76db010e"  # 2019-10-21
C_GNMT1901 = "0663b67c1afe9979c9767ed63c7e719b1d0629b9"  # 2019-07-08
C_NCF = "17bc6aac816cbada40e799b06735c309f9b7043a"  # 2020-06-27
C_BERT = "78ec680207ad61bb2644f39dd2f117b80f893fa8"  # 2021-08-26
C_TXL1911 = "a38deff61eedc813c8813c2bc21e8fe6aa6c12e1"  # 2020-02-05
C_TXL1909 = "ca28f554765aeb14b391ac951f7b17de50fdb483"  # 2019-11-28

V16 = ("V100", "16GB SXM2 300 W (DGX-1)", "volta")
V32 = ("V100", "32GB SXM2 300 W (DGX-1)", "volta")
V32H = ("V100", "32GB SXM3 (DGX-2)", "volta")
A40 = ("A100", "40GB SXM4 400 W (DGX A100)", "ampere")
A80 = ("A100-80GB", "80GB SXM4 400 W (DGX A100)", "ampere")
KIND = {
    "resnet50": ("classification", "3x224x224", "images/s", 1),
    "ssd300": ("detection", "3x300x300", "images/s", 1),
    "tacotron2": ("tts", "mel80x566", "mel frames/s", br.LJ_FRAMES),
    "waveglow": ("vocoder", "audio8000", "audio samples/s", 8000),
    "gnmt": ("translation", "tokens<=50 per side (WMT16 en-de BPE)", "tokens/s", 48),
    "ncf": ("recommendation", "user-item pair", "samples/s", 1),
    "bert_large_squad": ("qa", "seq384", "sequences/s", 1),
    "transformerxl_base": ("lm", "tokens192", "tokens/s", 192),
    "transformerxl_large": ("lm", "tokens384", "tokens/s", 384),
}
ITEMS_NOTE = {
    "tacotron2": br.LJ_NOTE,
    "waveglow": "items_per_sample: WaveGlow's training segment of 8,000 audio samples (README's --segment-length 8000)",
    "bert_large_squad": "input: SQuAD v1.1 fine-tuning at max_seq_length 384 (the README's run_squad.sh default)",
    "transformerxl_base": "items_per_sample: tgt_len 192 of the README's base model configuration",
    "transformerxl_large": "items_per_sample: tgt_len 384 of the README's large model configuration",
    "gnmt": "items_per_sample: ~48 source+target tokens per sentence pair, as rows.csv (lambdal's GNMT log)",
}
RN50_A = "batch: the README's benchmark table (DGXA100 AMP 256, TF32 256)"
RN50_V = "batch: the README's benchmark table (DGX-1 AMP 256, FP32 128)"
TXL_NA = (
    "batch: mixed precision at twice the batch (the table's FP32 cell there is N/A; its speedup is over FP32 at half)"
)
# (model, gpu, batch fp32/tf32, batch amp, throughput fp32/tf32, throughput amp, software, path, commit, heading, note)
# fmt: off
ROWS = [
    ("resnet50", A40, 256, 256, 680.15, 1240.81, "NGC pytorch:20.06-py3 or newer (README requirements)", RN50, C_RN50,
     "Training performance: NVIDIA DGX A100 (8x A100 40GB)", RN50_A),
    ("resnet50", V16, 128, 256, 373.21, 856.52, "NGC pytorch:20.06-py3 or newer (README requirements)", RN50, C_RN50,
     "Training performance: NVIDIA DGX-1 16GB (8x V100 16GB)", RN50_V),
    ("resnet50", V32, 128, 256, 359.76, 816.00, "NGC pytorch:20.06-py3 or newer (README requirements)", RN50, C_RN50,
     "Training performance: NVIDIA DGX-1 32GB (8x V100 32GB)", RN50_V),
    ("ssd300", A80, 64, 64, 279.85, 428.30, "NGC pytorch:21.05-py3 (README)", SSD, C_SSD21,
     "Training performance: NVIDIA DGX A100 (8x A100 80GB)", ""),
    ("ssd300", A80, 128, 128, 286.17, 440.74, "NGC pytorch:21.05-py3 (README)", SSD, C_SSD21,
     "Training performance: NVIDIA DGX A100 (8x A100 80GB)", ""),
    ("ssd300", V16, 32, 32, 108.27, 212.95, "NGC pytorch:21.05-py3 (README)", SSD, C_SSD21,
     "Training performance: NVIDIA DGX-1 (8x V100 16GB)", ""),
    ("ssd300", A40, 64, 64, 201.43, 367.15, "NGC pytorch:20.06-py3 (README)", SSD, C_SSD20,
     "Training performance: NVIDIA DGX A100 (8x A100 40GB)", ""),
    ("ssd300", A40, 128, 128, 206.28, 387.95, "NGC pytorch:20.06-py3 (README)", SSD, C_SSD20,
     "Training performance: NVIDIA DGX A100 (8x A100 40GB)", ""),
    ("ssd300", V16, 32, 32, 133.67, 215.30, "NGC pytorch:19.08-py3 (README)", SSD, C_SSD19,
     "Training performance results / NVIDIA DGX-1 (8x V100 16G)", "the 2020 README repeats this V100 row unchanged"),
    ("tacotron2", V16, 48, 104, 9674, 15313, "NGC pytorch:20.03-py3 (README)", TACO, C_TACO20,
     "Training performance: NVIDIA DGX-1 (8x V100 16G) / Tacotron 2", ""),
    ("waveglow", V16, 4, 10, 36671, 81503, "NGC pytorch:20.03-py3 (README; first published 2019 with 19.06)", TACO,
     C_TACO20, "Training performance: NVIDIA DGX-1 (8x V100 16G) / WaveGlow", ""),
    ("tacotron2", V16, 64, 128, 12933, 20992, "NGC pytorch:19.06-py3 (README)", TACO, C_TACO19,
     "Training performance: NVIDIA DGX-1 (8x V100 16G) / Tacotron 2", ""),
    ("gnmt", V16, 128, 128, 21424, 68312, "NGC pytorch:19.05-py3 (README)", GNMT, C_GNMT1905,
     "Training throughput: NVIDIA DGX-1 (8x V100 16G)", ""),
    ("gnmt", V32H, 128, 128, 22742, 72684, "NGC pytorch:19.05-py3 (README)", GNMT, C_GNMT1905,
     "Training throughput: NVIDIA DGX-2 (16x V100 32G)", ""),
    ("gnmt", V16, 128, 128, 21346, 66050, "NGC pytorch:19.01-py3 (README)", GNMT, C_GNMT1901,
     "Training performance results / NVIDIA DGX-1 (8x Tesla V100 16G)", ""),
    ("gnmt", V32H, 128, 128, 22695, 65830, "NGC pytorch:19.01-py3 (README)", GNMT, C_GNMT1901,
     "Training performance results / NVIDIA DGX-2 (16x Tesla V100 32G)", ""),
    ("ncf", A40, 1048576, 1048576, 22.64e6, 33.59e6, "NGC pytorch:20.06-py3 (README)", NCF, C_NCF,
     "Training performance: NVIDIA DGX A100 (8x A100 40GB)", ""),
    ("ncf", V16, 1048576, 1048576, 10.32e6, 21.90e6, "NGC pytorch:20.06-py3 (README)", NCF, C_NCF,
     "Training performance: NVIDIA DGX-1 (8x V100 16GB)", ""),
    ("ncf", V32, 1048576, 1048576, 10.15e6, 20.66e6, "NGC pytorch:20.06-py3 (README)", NCF, C_NCF,
     "Training performance: NVIDIA DGX-1 (8x V100 32GB)", ""),
    ("ncf", V32H, 1048576, 1048576, 10.83e6, 22.18e6, "NGC pytorch:20.06-py3 (README)", NCF, C_NCF,
     "Training performance: NVIDIA DGX-2 (16x V100 32GB)", ""),
    ("bert_large_squad", A40, 16, 32, 44, 116, "NGC pytorch:20.06-py3 (README)", BERT, C_BERT,
     "Training performance: NVIDIA DGX A100 (8x A100 40GB) / Fine-tuning NVIDIA DGX A100 (8x A100 40GB)", ""),
    ("bert_large_squad", V32H, 8, 10, 12, 53, "NGC pytorch:20.06-py3 (README)", BERT, C_BERT,
     "Training performance: NVIDIA DGX-2 (16x V100 32G) / Fine-tuning NVIDIA DGX-2 With 32G", ""),
    ("bert_large_squad", V32, 8, 10, 12, 49, "NGC pytorch:20.06-py3 (README)", BERT, C_BERT,
     "Training performance: NVIDIA DGX-1 (8x V100 32G) / Fine-tuning NVIDIA DGX-1 With 32G", ""),
    ("bert_large_squad", V16, 4, 10, 9, 50, "NGC pytorch:20.06-py3 (README)", BERT, C_BERT,
     "Training performance: NVIDIA DGX-1 (8x V100 16G) / Fine-tuning NVIDIA DGX-1 With 16G", ""),
    ("transformerxl_base", V16, 16, 16, 12180, 25365, "NGC pytorch:19.11-py3 (README)", TXL, C_TXL1911,
     "Training performance: NVIDIA DGX-1 (8x V100 16G) / Base model", ""),
    ("transformerxl_base", V16, 16, 32, 12180, 34771, "NGC pytorch:19.11-py3 (README)", TXL, C_TXL1911,
     "Training performance: NVIDIA DGX-1 (8x V100 16G) / Base model", TXL_NA),
    ("transformerxl_large", V16, 2, 2, 2976, 5810, "NGC pytorch:19.11-py3 (README)", TXL, C_TXL1911,
     "Training performance: NVIDIA DGX-1 (8x V100 16G) / Large model", ""),
    ("transformerxl_large", V16, 2, 4, 2976, 8549, "NGC pytorch:19.11-py3 (README)", TXL, C_TXL1911,
     "Training performance: NVIDIA DGX-1 (8x V100 16G) / Large model", TXL_NA),
    ("transformerxl_base", V16, 16, 16, 11499.8, 24028.9, "NGC pytorch:19.09-py3 (README)", TXL, C_TXL1909,
     "Training performance: NVIDIA DGX-1 (8x V100 16G)", ""),
    ("transformerxl_base", V16, 16, 32, 11499.8, 31072.4, "NGC pytorch:19.09-py3 (README)", TXL, C_TXL1909,
     "Training performance: NVIDIA DGX-1 (8x V100 16G)", TXL_NA),
]
# fmt: on


def main() -> int:
    out = csv.DictWriter(sys.stdout, br.COLUMNS, lineterminator="\n")
    out.writeheader()
    for model, (gpu, detail, generation), b32, b16, t32, t16, software, path, commit, heading, note in ROWS:
        task, inp, unit, items = KIND[model]
        ampere = generation == "ampere"
        notes = [
            "amp: torch.cuda.amp or apex AMP as the README's mixed precision mode",
            ITEMS_NOTE.get(model, ""),
            note,
        ]
        out.writerow(
            {
                "model": model,
                "task": task,
                "input": inp,
                "gpu": gpu,
                "gpu_detail": detail,
                "generation": generation,
                "baseline": br.TF32 if ampere else br.FP32,
                "batch_baseline": b32,
                "batch_amp": b16,
                "throughput_baseline": br.plain(t32),
                "throughput_amp": br.plain(t16),
                "unit": unit,
                "items_per_sample": items,
                "software": software,
                "fp32_meaning": br.TF32_DLE if ampere else br.STRICT,
                "source": "DLE (older commit)",
                "source_path": path,
                "commit": commit,
                "heading": heading,
                "notes": "; ".join(n for n in notes if n),
            }
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
