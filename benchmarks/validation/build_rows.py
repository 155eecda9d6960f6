"""Rebuild benchmarks/validation/{rows,heldout_ada_hopper}.csv: published single-GPU training throughput of
PyTorch models, fp32 or TF32 against mixed precision, for validating ampgan's projection end to end.

Two public sources, read from git snapshots (no work tree needed: every file is read with `git show`):

- NVIDIA DeepLearningExamples (Apache-2.0): the "Training performance" tables of `PyTorch/*/*/README.md`,
  the 1-GPU rows, one table per DGX system (V100 16GB/32GB, A100 40GB/80GB). SPECS below names each table
  (README, heading, which row, which columns) and what its numbers count; the numbers come from the README.
- lambdal/deeplearning-benchmark (MIT): `pytorch/pytorch-train-throughput-{fp32,fp16}.csv` with the batch
  sizes in `pytorch/pytorch-train-bs-{fp32,fp16}.csv`, the 1-GPU rows of ten DeepLearningExamples models.
  Read twice: at HEAD (their "v1": NGC pytorch:22.09-py3 and later) and at commit fe450482 (their "v0",
  NGC 20.01/20.10/21.x, the last version holding GTX 1080 Ti (Pascal), Turing cards and Mask R-CNN). The
  software of each system is read from its `results/<system>/sys_pytorch.txt`.

Ada and Hopper rows are written to heldout_ada_hopper.csv and nothing may be fitted on them.

    python benchmarks/validation/build_rows.py DLE_GIT_DIR LAMBDA_GIT_DIR

Each argument is a git directory (a bare mirror or a clone's .git) of NVIDIA/DeepLearningExamples and of
lambdal/deeplearning-benchmark. The rows are sorted, so a rebuild from the same commits is byte-identical.
"""

from __future__ import annotations

import ast
import csv
import json
import re
import subprocess
import sys
from pathlib import Path

from ampgan.precisions import FP32, TF32

HERE = Path(__file__).resolve().parent
COLUMNS = [
    "model",
    "task",
    "input",
    "gpu",
    "gpu_detail",
    "generation",
    "baseline",
    "batch_baseline",
    "batch_amp",
    "throughput_baseline",
    "throughput_amp",
    "unit",
    "items_per_sample",
    "software",
    "fp32_meaning",
    "source",
    "source_path",
    "commit",
    "heading",
    "notes",
]
HELD_OUT = ("ada", "hopper")
LAMBDA_V0_COMMIT = "fe450482b982f1790e05e0bd57724a3f692b2d0f"  # 2022-06-30 "update csv and json"

STRICT = "strict fp32 (no TF32 on this GPU)"
TF32_BOTH = "TF32 convolutions and matmuls (PyTorch 1.7-1.11 default)"
TF32_CONV = (
    "TF32 convolutions (cuDNN default); matmuls fp32 by the PyTorch >= 1.12 default unless the container's "
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE turned them to TF32 (not recorded by the source)"
)
TF32_DLE = "TF32 (DeepLearningExamples' TF32 mode: convolutions and matmuls)"

# LJSpeech: 13,100 clips, 23.92 h -> 6.57 s mean; 22,050 Hz and hop 256 give 566 mel frames per clip.
LJ_FRAMES = 566
LJ_NOTE = "items_per_sample: LJSpeech mean clip 6.57 s (23.92 h / 13,100 clips) at 22,050 Hz, hop 256 = 566 frames"


def git(gitdir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={gitdir}", *args], check=True, capture_output=True, text=True, encoding="utf-8"
    ).stdout


def show(gitdir: Path, commit: str, path: str) -> str | None:
    try:
        return git(gitdir, "show", f"{commit}:{path}")
    except subprocess.CalledProcessError:
        return None


def number(cell: str) -> float | None:
    """'938 img/s' -> 938, '41,527' -> 41527, '22.59M' -> 22.59e6; N/A, '-' and blanks -> None."""
    text = cell.replace("*", "").replace(",", "").strip()
    found = re.match(r"^([0-9]+(?:\.[0-9]+)?)\s*([MK]?)\b", text)
    if not found:
        return None
    scale = {"M": 1e6, "K": 1e3, "": 1.0}[found.group(2)]
    return float(found.group(1)) * scale


def plain(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


# ---------------------------------------------------------------------------------------------------------
# DeepLearningExamples READMEs


def sections(text: str) -> list[tuple[int, str, list[str]]]:
    """(level, heading, lines up to the next heading of the same or a higher level) per markdown heading."""
    lines = text.splitlines()
    marks = [
        (i, len(m.group(1)), m.group(2).strip())
        for i, line in enumerate(lines)
        if (m := re.match(r"^(#+)\s+(.*)$", line))
    ]
    out = []
    for n, (i, level, title) in enumerate(marks):
        end = next((j for j, lv, _ in marks[n + 1 :] if lv <= level), len(lines))
        out.append((level, title, lines[i + 1 : end]))
    return out


def tables(lines: list[str]) -> list[tuple[list[str], list[list[str]]]]:
    """Markdown tables in lines: (header cells, body rows), the |---| separator dropped."""
    found, current = [], []
    for line in [*lines, ""]:
        if current and re.fullmatch(r"\|?\s*:?-{3,}:?\s*(\|\s*:?-+:?\s*)*\|?", line.strip()):
            continue  # a separator row written without its leading pipe (MaskRCNN's README)
        if line.strip().startswith("|"):
            current.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif current:
            header, *body = current
            found.append((header, [row for row in body if not all(re.fullmatch(r":?-+:?|", c) for c in row)]))
            current = []
    return found


def container(text: str) -> str | None:
    found = re.search(r"(?:pytorch[-:]|PyTorch\s+|NGC\s+)?(\d\d\.\d\d)-py3", text) or re.search(
        r"pytorch[- ](\d\d\.\d\d)", text, re.IGNORECASE
    )
    return f"NGC pytorch:{found.group(1)}-py3" if found else None


def column(header: list[str], *words: str) -> int:
    # a word starting with ^ must begin the cell ('^Batch' is not 'Accumulated Batch')
    matches = [
        i
        for i, cell in enumerate(header)
        if all(
            cell.lower().startswith(w[1:].lower()) if w.startswith("^") else w.lower() in cell.lower() for w in words
        )
    ]
    if len(matches) > 1:  # the throughput, not its speedup, scaling or time-to-train columns
        matches = [i for i in matches if not re.search(r"speed-?up|scaling|time", header[i], re.IGNORECASE)]
    if len(matches) != 1:
        raise SystemExit(f"build_rows: {words} matches columns {matches} of {header}: fix SPECS")
    return matches[0]


def pick(rows: list[list[str]], header: list[str], where: dict[tuple[str, ...], str]) -> list[str]:
    chosen = [
        row
        for row in rows
        if all(row[column(header, *words)].replace("*", "").strip() == value for words, value in where.items())
    ]
    if len(chosen) != 1:
        raise SystemExit(f"build_rows: {where} selects {len(chosen)} rows of {header}: fix SPECS")
    return chosen[0]


def batches(cell: str) -> tuple[float, float]:
    """(baseline, amp) from '64', '128 and 256' (baseline first), '104@FP16, 48@FP32' or '5120/2560'
    (DeepLearningExamples' Transformer: mixed precision first, as its text says)."""
    tagged = dict((tag.upper(), float(n)) for n, tag in re.findall(r"([0-9]+)\s*@\s*(FP16|FP32|TF32)", cell))
    if tagged:
        return tagged.get("FP32", tagged.get("TF32")), tagged["FP16"]
    if " and " in cell:
        base, amp = cell.split(" and ")
        return number(base), number(amp)
    if "/" in cell:
        amp, base = cell.split("/")
        return number(base), number(amp)
    return number(cell), number(cell)


def convnet_batches(text: str, setting: str = "batch_size") -> dict[tuple[str, str, str], int | str]:
    """(model, platform, precision) -> batch_size (or another `setting`, as written: memory_format) from ConvNets'
    configs.yml, its '<<: *anchor' platforms resolved (no YAML library: the file is a fixed 4-space layout of
    model / platform / precision)."""
    found, anchors, aliases = {}, {}, {}
    model = platform = prec = None
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        word = line.strip().split("#")[0].strip()
        if not word:
            continue
        if indent == 4 and word.endswith(":"):
            model = word[:-1]
        elif indent == 8 and model:
            platform = word.split(":")[0]
            if "&" in word:
                anchors[word.split("&")[1].strip()] = (model, platform)
        elif indent == 12 and model and word.startswith("<<: *"):
            aliases[(model, platform)] = anchors.get(word[5:].strip())
        elif indent == 12 and model and word.endswith(":"):
            prec = word[:-1]
        elif indent == 16 and word.startswith(f"{setting}:"):
            value = word.split(":")[1].strip()
            found[(model, platform, prec)] = int(value) if setting == "batch_size" else value
    for (model, platform), target in aliases.items():
        for (m, p, prec), batch in list(found.items()):
            if target and (m, p) == target:
                found.setdefault((model, platform, prec), batch)
    return found


CONFIGS_YML = "PyTorch/Classification/ConvNets/configs.yml"
NNUNET_NOTE = (
    "input: MSD Task01_BrainTumour (4 MRI modalities), the benchmark's default --task 01; patch from "
    "data_preprocessing/configs.py (01_2d 192x160, 01_3d 128x128x128)"
)


# Each row's memory layout (issue 43): NCHW, PyTorch's default, or channels-last (NHWC; NDHWC for a 3-D
# network), baseline/AMP, with the source line that says so (cite() stops when it is gone). DeepBench's V100
# and T4 sheets timed 16-bit convolutions NHWC and fp32 ones NCHW (conv_bench.cu at 30c5115, USE_TENSOR_CORES:
# `format = CUDNN_TENSOR_NHWC` for half), P100's (cuDNN 6) all NCHW: benchmarks/calibration/README.md.
CONVNETS_MAIN = "PyTorch/Classification/ConvNets/main.py"
LAYOUTS = {  # model -> (baseline, AMP, [(path, the line's pattern)], why); ConvNets' come from configs.yml
    "ssd300": (
        "nhwc",
        "nhwc",
        [("PyTorch/Detection/SSD/main.py", r"'--data-layout', default=\"channels_last\"")],
        "the README's training benchmark command passes no --data-layout, so both precisions ran main.py's default",
    ),
    "efficientdet_d0": (
        "nchw",
        "nchw",
        [
            ("PyTorch/Detection/Efficientdet/scripts/D0/train-benchmark_AMP_V100-32G.sh", r"--memory-format nchw"),
            ("PyTorch/Detection/Efficientdet/scripts/D0/train-benchmark_FP32_V100-32G.sh", r"--memory-format nchw"),
        ],
        "the benchmark scripts the README names pass --memory-format nchw (A100's alike)",
    ),
    "maskrcnn_r50_fpn": (
        "nhwc",
        "nhwc",
        [("PyTorch/Segmentation/MaskRCNN/pytorch/maskrcnn_benchmark/config/defaults.py", r"_C.NHWC = True")],
        "NHWC is the default",
    ),
    "nnunet_2d": (
        "nchw",
        "nchw",
        [("PyTorch/Segmentation/nnUNet/scripts/benchmark.py", r"if args.amp and args.dim == 3:")],
        "scripts/benchmark.py sets --layout NDHWC only for 3-D AMP runs",
    ),
    "nnunet_3d": (
        "nchw",
        "nhwc",
        [
            ("PyTorch/Segmentation/nnUNet/scripts/benchmark.py", r"--layout NDHWC"),
            ("PyTorch/Segmentation/nnUNet/utils/args.py", r'arg\("--layout", type=str, default="NCDHW"\)'),
        ],
        "AMP NDHWC (channels_last_3d), fp32/TF32 the NCDHW default",
    ),
}
# Mask R-CNN's V100 fp32 row ran NCHW: the README says so under its V100 table.
MASKRCNN_V100_FP32 = r"V100 32GB FP32 runs hybrid dataloader and NHWC are disabled `bash scripts/train_benchmark"


def cite(text: str | None, pattern: str, path: str) -> str:
    """'path:line `the line`' of the first line of `text` matching `pattern`; stops when none does."""
    for number_, line in enumerate((text or "").splitlines(), start=1):
        if re.search(pattern, line):
            return f"{path}:{number_} `{line.strip()[:110]}`"
    raise SystemExit(f"build_rows: no line matching {pattern!r} in {path}: check the row's layout in LAYOUTS")


def yml_lines(text: str, model: str, platform: str) -> str:
    """The configs.yml lines that give `model` on `platform` its memory_format: the platform's own, or its
    '<<: *anchor' line and the anchor platform's (the model's first memory_format, where anchors are defined)."""
    lines = list(enumerate(text.splitlines(), start=1))
    start = next(i for i, (_, line) in enumerate(lines) if line.rstrip() == f"    {model}: # {{{{{{")
    section = []
    for number_, line in lines[start + 1 :]:
        if line.startswith("    ") and not line.startswith("     ") and line.strip():
            break  # the next model
        section.append((number_, line))
    own = [i for i, (_, line) in enumerate(section) if line.startswith(f"        {platform}:")]
    if not own:
        raise SystemExit(f"build_rows: no {platform} under {model} in {CONFIGS_YML}: fix the row's platform")
    block = []
    for number_, line in section[own[0] + 1 :]:
        if line.startswith("        ") and not line.startswith("         "):
            break
        block.append((number_, line))
    alias = "            <<: *"  # the platform's own alias of another platform (a precision's anchors sit deeper)
    cited = [
        f"{CONFIGS_YML}:{n} `{line.strip()}`" for n, line in block if "memory_format:" in line or line.startswith(alias)
    ]
    if not any("memory_format" in c for c in cited):
        cited += [f"{CONFIGS_YML}:{n} `{line.strip()}`" for n, line in section if "memory_format:" in line][:1]
    return ", ".join(cited)


def dle_layout(gitdir: Path, commit: str, s: dict, generation: str, platform: str) -> str:
    """The notes' `layout:` part of a DLE row: baseline/AMP and the source lines that say so ('' for a model
    without 2-D or 3-D convolutions). `platform`: the row's in ConvNets' configs.yml."""
    if s.get("yml"):
        text = show(gitdir, commit, CONFIGS_YML)
        formats = convnet_batches(text, "memory_format")
        base_precision = "TF32" if generation == "ampere" else "FP32"
        base, amp = (formats.get((s["yml"], platform, p), "nchw") for p in (base_precision, "AMP"))
        where = yml_lines(text, s["yml"], platform)
        default = cite(show(gitdir, commit, CONVNETS_MAIN), r'default="nchw"', CONVNETS_MAIN)
        return (
            f"layout: {base}/{amp} (baseline/AMP): configs.yml sets {s['yml']} {platform} AMP memory_format {amp} "
            f"({where}), {base_precision} none: main.py's default ({default})"
        )
    if s["model"] not in LAYOUTS:
        return ""
    base, amp, lines, why = LAYOUTS[s["model"]]
    cited = [cite(show(gitdir, commit, path), pattern, path) for path, pattern in lines]
    if s["model"] == "maskrcnn_r50_fpn" and generation == "volta":
        base = "nchw"
        why += ", but the V100 fp32 run disabled it"
        cited.append(cite(show(gitdir, commit, s["path"]), re.escape(MASKRCNN_V100_FP32), s["path"]))
    return f"layout: {base}/{amp} (baseline/AMP): {why} ({', '.join(cited)})"


# GPU systems of the README headings: (heading words, gpu key as src/ampgan/system/gpus.csv spells it, detail).
DGX = [
    (("A100 80",), "A100-80GB", "80GB SXM4 400 W (DGX A100)", "ampere"),
    (("A100 40",), "A100", "40GB SXM4 400 W (DGX A100)", "ampere"),
    (("DGX-2H",), "V100", "32GB SXM3 450 W (DGX-2H)", "volta"),
    (("DGX-2",), "V100", "32GB SXM3 350 W (DGX-2)", "volta"),
    (("V100 32",), "V100", "32GB SXM2 300 W (DGX-1)", "volta"),
    (("V100 16",), "V100", "16GB SXM2 300 W (DGX-1)", "volta"),
]


def dgx(heading: str) -> tuple[str, str, str]:
    for words, key, detail, generation in DGX:
        if all(w in heading for w in words):
            return key, detail, generation
    raise SystemExit(f"build_rows: no GPU known for heading {heading!r}: add it to DGX")


def spec(model, task, inp, unit, items, path, headings, **kw) -> dict:
    return dict(model=model, task=task, input=inp, unit=unit, items=items, path=path, headings=headings, **kw)


CONVNETS = "PyTorch/Classification/ConvNets/{}/README.md"
CONV_BATCH = (
    "batch: the training tables give none; taken from configs.yml (the platform's AMP and FP32/TF32 batch_size)"
)
A100_80, V100_16, V100_32 = (
    "Training performance: NVIDIA DGX A100 (8x A100 80GB)",
    "Training performance: NVIDIA DGX-1 16GB (8x V100 16GB)",
    "Training performance: NVIDIA DGX-1 32GB (8x V100 32GB)",
)

# DLE's HiFi-GAN counts x.size(0) * x.size(1) "frames" a micro-batch (train.py), and x is (batch, 80 mels, 32
# frames): 80 per example, not its 32 frames. The recipe's time to train agrees: 6,500 epochs of ~12,400
# LJSpeech segments in 604.6 h on one V100 (fp32) is 37 examples/s, x 80 = 2,970 against the table's 3,018.
HIFIGAN_ITEMS = 80
HIFIGAN_NOTE = (
    "items_per_sample: 80, what train.py counts per example (x.size(1) of the (batch, 80, 32) mel input, its "
    "mel bins: 32 frames each), matching the README's time to train; an example is a segment of 8192 samples"
)

SPECS = [
    *(
        spec(
            key,
            "classification",
            "3x224x224",
            "images/s",
            1,
            CONVNETS.format(folder),
            [A100_80, V100_16, V100_32],
            where={("GPUs",): "1"},
            base=("Throughput", "32"),
            amp=("Throughput", "mixed"),
            batch=None,
            yml=key.replace("_", "-"),
            note=CONV_BATCH,
        )
        for key, folder in (
            ("resnet50", "resnet50v1.5"),
            ("resnext101_32x4d", "resnext101-32x4d"),
            ("se_resnext101_32x4d", "se-resnext101-32x4d"),
        )
    ),
    *(
        spec(
            key,
            "classification",
            shape,
            "images/s",
            1,
            CONVNETS.format("efficientnet"),
            [
                "Training performance: NVIDIA A100 (8x A100 80GB)",
                "Training performance: NVIDIA DGX-1 (8x V100 16GB)",
                "Training performance: NVIDIA DGX-1 (8x V100 32GB)",
            ],
            where={("Model",): name, ("GPUs",): "1"},
            base=("32",),
            amp=("Throughput", "mixed"),
            batch=None,
            yml=name,
            note=CONV_BATCH,
        )
        for key, name, shape in (
            ("efficientnet_b0", "efficientnet-b0", "3x224x224"),
            ("efficientnet_b4", "efficientnet-b4", "3x380x380"),
        )
    ),
    *(
        spec(
            "ssd300",
            "detection",
            "3x300x300",
            "images/s",
            1,
            "PyTorch/Detection/SSD/README.md",
            [
                "Training performance: NVIDIA DGX A100 (8x A100 80GB)",
                "Training performance: NVIDIA DGX-1 (8x V100 16GB)",
            ],
            where={("GPUs",): "1", ("Batch",): bs},
            base=("Throughput", "32"),
            amp=("Throughput", "mixed"),
            batch_col=("Batch",),
        )
        for bs in ("32", "64", "128")
    ),
    spec(
        "efficientdet_d0",
        "detection",
        "3x512x512",
        "images/s",
        1,
        "PyTorch/Detection/Efficientdet/README.md",
        ["Training performance: NVIDIA DGX A100 (8x A100 80GB)", "Training performance: NVIDIA DGX-1 (8x V100 32GB)"],
        where={("GPUs",): "1"},
        base=("Throughput", "32"),
        amp=("Throughput", "mixed"),
        batch=None,
        script="PyTorch/Detection/Efficientdet/scripts/D0/train-benchmark_{precision}_{platform}.sh",
        note="batch: the -b of the benchmark scripts the README names (scripts/D0/train-benchmark_*.sh); "
        "input 512x512 is EfficientDet-D0's resolution",
    ),
    spec(
        "maskrcnn_r50_fpn",
        "segmentation",
        "3x800x1333",
        "images/s",
        1,
        "PyTorch/Segmentation/MaskRCNN/README.md",
        ["Training performance: NVIDIA DGX A100 (8x A100 80GB)", "Training performance: NVIDIA DGX-1 (8x V100 32GB)"],
        where={("GPUs",): "1"},
        base=("Throughput", "32"),
        amp=("Throughput", "mixed"),
        batch_col=("Batch",),
        note="input: COCO resized to shorter side 800, longer at most 1333 (Mask R-CNN's 1x recipe); "
        "sizes vary per image",
    ),
    *(
        spec(
            "nnunet_2d",
            "segmentation",
            "4x192x160",
            "images/s",
            1,
            "PyTorch/Segmentation/nnUNet/README.md",
            ["Training performance: NVIDIA DGX A100 (8x A100 80G)", "Training performance: NVIDIA DGX-1 (8x V100 32G)"],
            where={("Dimension",): "2", ("GPUs",): "1", ("Batch",): bs},
            base=("Throughput", "32"),
            amp=("Throughput", "mixed"),
            batch_col=("Batch",),
            note=NNUNET_NOTE,
        )
        for bs in ("32", "64", "128")
    ),
    *(
        spec(
            "nnunet_3d",
            "segmentation",
            "4x128x128x128",
            "images/s",
            1,
            "PyTorch/Segmentation/nnUNet/README.md",
            ["Training performance: NVIDIA DGX A100 (8x A100 80G)", "Training performance: NVIDIA DGX-1 (8x V100 32G)"],
            where={("Dimension",): "3", ("GPUs",): "1", ("Batch",): bs},
            base=("Throughput", "32"),
            amp=("Throughput", "mixed"),
            batch_col=("Batch",),
            note=NNUNET_NOTE,
        )
        for bs in ("1", "2", "4")
    ),
    spec(
        "gnmt",
        "translation",
        "tokens<=50 per side (WMT16 en-de BPE)",
        "tokens/s",
        48,
        "PyTorch/Translation/GNMT/README.md",
        [
            "Training throughput: NVIDIA DGX A100 (8x A100 40GB)",
            "Training throughput: NVIDIA DGX-1 (8x V100 16GB)",
            "Training throughput: NVIDIA DGX-2H (16x V100 32GB)",
        ],
        where={("GPUs",): "1"},
        base=("Throughput", "32"),
        amp=("Throughput", "Mixed"),
        batch_col=("Batch",),
        note="items_per_sample: ~48 source+target tokens per sentence pair, from lambdal's GNMT log on A100 80GB SXM4 "
        "(Tok/s 130377 x 0.378 s per step / batch 1024)",
    ),
    spec(
        "transformer_big",
        "translation",
        "tokens (batch counted in tokens)",
        "tokens/s",
        1,
        "PyTorch/Translation/Transformer/README.md",
        [
            "Training performance: NVIDIA DGX A100 (8x A100 40GB)",
            "Training performance: NVIDIA DGX-1 (8x V100 16GB)",
            "Training performance: NVIDIA DGX-2 (16x V100 32GB)",
        ],
        where={("GPUs",): "1"},
        base=("Throughput", "32"),
        amp=("Throughput", "mixed"),
        batch_col=("Batch",),
        note="batch in tokens ('5120/2560': mixed precision / fp32, as scripts/run_DGX1_{AMP,FP32}.sh); "
        "items_per_sample 1 as batch and throughput both count tokens",
    ),
    *(
        spec(
            key,
            "lm",
            f"tokens{tgt}",
            "tokens/s",
            tgt,
            "PyTorch/LanguageModeling/Transformer-XL/README.md",
            [heading],
            sub=sub,
            where={("GPUs",): "1", ("Batch",): bs},
            base=("Throughput", "32"),
            amp=("Throughput", "Mixed"),
            batch_col=("Batch",),
            note=f"items_per_sample: tgt_len {tgt} of the README's {sub.lower()} configuration",
        )
        for key, sub, tgt, heading, bs in (
            ("transformerxl_base", "Base model", 192, "Training performance: NVIDIA DGX A100 (8x A100 40GB)", "32"),
            ("transformerxl_base", "Base model", 192, "Training performance: NVIDIA DGX-1 (8x V100 16GB)", "16"),
            ("transformerxl_base", "Base model", 192, "Training performance: NVIDIA DGX-2H (16x V100 32GB)", "16"),
            ("transformerxl_large", "Large model", 384, "Training performance: NVIDIA DGX A100 (8x A100 40GB)", "8"),
            ("transformerxl_large", "Large model", 384, "Training performance: NVIDIA DGX-1 (8x V100 16GB)", "2"),
            ("transformerxl_large", "Large model", 384, "Training performance: NVIDIA DGX-2H (16x V100 32GB)", "8"),
        )
    ),
    *(
        spec(
            "bert_large_pretraining",
            "lm",
            f"seq{seq}",
            "sequences/s",
            1,
            "PyTorch/LanguageModeling/BERT/README.md",
            [heading],
            sub=sub,
            where={("GPUs",): "1", ("Sequence length",): str(seq)},
            base=("Throughput", "32"),
            amp=("Throughput", "mixed"),
            batch_col=("^Batch size / GPU",),
            batch_div=accum,
            note="batch: per-step micro-batch (accumulated batch / accumulation steps); throughput counts sequences",
        )
        for heading, sub, seq, accum in (
            (
                "Training performance: NVIDIA DGX A100 (8x A100 80GB)",
                "Pre-training NVIDIA DGX A100 (8x A100 80GB)",
                128,
                None,
            ),
            (
                "Training performance: NVIDIA DGX A100 (8x A100 80GB)",
                "Pre-training NVIDIA DGX A100 (8x A100 80GB)",
                512,
                None,
            ),
            (
                "Training performance: NVIDIA DGX-1 (8x V100 32G)",
                "Pre-training NVIDIA DGX-1 With 32G",
                128,
                ("Accumulation",),
            ),
            (
                "Training performance: NVIDIA DGX-1 (8x V100 32G)",
                "Pre-training NVIDIA DGX-1 With 32G",
                512,
                ("Accumulation",),
            ),
        )
    ),
    *(
        spec(
            "bert_large_squad",
            "qa",
            "seq384",
            "sequences/s",
            1,
            "PyTorch/LanguageModeling/BERT/README.md",
            [heading],
            sub=sub,
            where={("GPUs",): "1"},
            base=("Throughput", "32"),
            amp=("Throughput", "mixed"),
            batch_col=("Batch",),
            note="input: SQuAD v1.1 fine-tuning at max_seq_length 384 (the README's run_squad.sh default)",
        )
        for heading, sub in (
            ("Training performance: NVIDIA DGX A100 (8x A100 80GB)", "Fine-tuning NVIDIA DGX A100 (8x A100 80GB)"),
            ("Training performance: NVIDIA DGX-1 (8x V100 32G)", "Fine-tuning NVIDIA DGX-1 With 32G"),
        )
    ),
    spec(
        "ncf",
        "recommendation",
        "user-item pair",
        "samples/s",
        1,
        "PyTorch/Recommendation/NCF/README.md",
        [
            "Training performance: NVIDIA DGX A100 (8x A100 40GB)",
            "Training performance: NVIDIA DGX-1 (8x V100 16GB)",
            "Training performance: NVIDIA DGX-1 (8x V100 32GB)",
            "Training performance: NVIDIA DGX-2 (16x V100 32GB)",
        ],
        where={("GPUs",): "1"},
        base=("Throughput", "32"),
        amp=("Throughput", "mixed"),
        batch_col=("Batch",),
    ),
    spec(
        "dlrm_small",
        "recommendation",
        "Criteo sample (13 dense + 26 sparse)",
        "samples/s",
        1,
        "PyTorch/Recommendation/DLRM/README.md",
        [
            "Training performance: NVIDIA DGX A100 (8x A100 80GB)",
            "Training performance: NVIDIA DGX-1 (8x V100 32GB)",
            "Training performance: NVIDIA DGX-2 (16x V100 32GB)",
        ],
        where={("GPUs",): "1", ("Model size",): "small"},
        base=("Throughput", "32"),
        amp=("Throughput", "mixed"),
        batch=(65536, 65536),
        note="batch: the table's '64k' is DLRM's default batch 65536",
    ),
    spec(
        "tacotron2",
        "tts",
        f"mel80x{LJ_FRAMES}",
        "mel frames/s",
        LJ_FRAMES,
        "PyTorch/SpeechSynthesis/Tacotron2/README.md",
        ["Training performance: NVIDIA DGX A100 (8x A100 40GB)", "Training performance: NVIDIA DGX-1 (8x V100 16GB)"],
        table=0,
        where={("Number of GPUs",): "1"},
        first=True,
        base=("mels", "32"),
        amp=("mels", "mixed"),
        batch_col=("Batch",),
        note=LJ_NOTE,
    ),
    spec(
        "waveglow",
        "vocoder",
        "audio8000",
        "audio samples/s",
        8000,
        "PyTorch/SpeechSynthesis/Tacotron2/README.md",
        ["Training performance: NVIDIA DGX A100 (8x A100 40GB)", "Training performance: NVIDIA DGX-1 (8x V100 16GB)"],
        table=1,
        where={("Number of GPUs",): "1"},
        first=True,
        base=("samples", "32"),
        amp=("samples", "mixed"),
        batch_col=("Batch",),
        note="items_per_sample: WaveGlow's training segment of 8,000 audio samples (README's --segment-length 8000)",
    ),
    *(
        spec(
            "hifigan",
            "vocoder",
            "mel80x32",
            "mel frames/s",
            HIFIGAN_ITEMS,
            "PyTorch/SpeechSynthesis/HiFiGAN/README.md",
            [heading],
            where={("GPUs",): "1"},
            first=True,
            base=("Throughput", "32"),
            amp=("Throughput", "mixed"),
            batch_col=("Batch",),
            note=f"{script}; GAN (generator + two discriminators); {HIFIGAN_NOTE}",
        )
        for heading, script in (
            (
                "Training performance: NVIDIA DGX A100 (8x A100 80GB)",
                "platform/DGXA100_HiFi-GAN_AMP_1GPU.sh: batch 128, no accumulation, --no_amp_grouped_conv: MSD's "
                "grouped convolutions in fp32",
            ),
            (
                "Training performance: NVIDIA DGX-1 (8x V100 16GB)",
                "platform/DGX1_HiFi-GAN_{AMP,FP32}_1GPU.sh as the table runs them: batch 32, 4 micro-batches a step",
            ),
        )
    ),
    spec(
        "fastpitch",
        "tts",
        "mel80 (LJSpeech utterance)",
        "mel frames/s",
        LJ_FRAMES,
        "PyTorch/SpeechSynthesis/FastPitch/README.md",
        ["Training performance: NVIDIA DGX A100 (8x A100 80GB)", "Training performance: NVIDIA DGX-1 (8x V100 16GB)"],
        where={("GPUs",): "1"},
        base=("Throughput", "32"),
        amp=("Throughput", "mixed"),
        batch_col=("Batch",),
        note=LJ_NOTE + "; throughput counts output mel frames; 1 GPU runs with gradient accumulation (see the table)",
    ),
    *(
        spec(
            "jasper",
            "speech",
            "audio (LibriSpeech utterance)",
            "sequences/s",
            1,
            "PyTorch/SpeechRecognition/Jasper/README.md",
            [
                "Training performance: NVIDIA DGX A100 (8x A100 80GB)",
                "Training performance: NVIDIA DGX-1 (8x V100 16GB)",
                "Training performance: NVIDIA DGX-1 (8x V100 32GB)",
            ],
            where={("GPUs",): "1", ("Batch",): bs},
            base=("Throughput", "32"),
            amp=("Throughput", "mixed"),
            batch_col=("Batch",),
            note="input: LibriSpeech utterances of varying length (the README gives no fixed shape)",
        )
        for bs in ("16", "32", "64")
    ),
]


def dle_rows(gitdir: Path) -> list[dict]:
    commit = git(gitdir, "rev-parse", "HEAD").strip()
    out = []
    for s in SPECS:
        text = show(gitdir, commit, s["path"])
        if text is None:
            raise SystemExit(f"build_rows: {s['path']} is not in {gitdir} at {commit[:8]}")
        secs = sections(text)
        for heading in s["headings"]:
            found = [(lvl, body) for lvl, title, body in secs if title == heading]
            if not found:
                raise SystemExit(f"build_rows: heading {heading!r} not in {s['path']}: fix SPECS")
            level, body = found[0]
            where_text = "\n".join(body)
            if "sub" in s:
                body = next(b for lvl, t, b in sections("\n".join(body)) if t == s["sub"])
            parent = "\n".join(
                next(b for lvl, t, b in secs if re.search(r"Training (performance|throughput) results", t))
                if any(re.search(r"Training (performance|throughput) results", t) for _, t, _ in secs)
                else []
            )
            header, rows = tables(body)[s.get("table", 0)]
            row = [
                r
                for r in rows
                if all(r[column(header, *w)].replace("*", "").strip() == v for w, v in s["where"].items())
            ]
            if not row:
                continue  # this system's table has no such batch (the specs list every batch any system shows)
            if len(row) > 1 and not s.get("first"):
                raise SystemExit(f"build_rows: {s['where']} selects {len(row)} rows under {heading!r}: fix SPECS")
            row = row[0]
            base = number(row[column(header, *s["base"])])
            amp = number(row[column(header, *s["amp"])])
            if base is None or amp is None:
                continue  # one precision only at this batch (the other did not fit): no pair to compare
            if s.get("batch_col"):
                b_base, b_amp = batches(row[column(header, *s["batch_col"])])
                if s.get("batch_div"):
                    a_base, a_amp = batches(row[column(header, *s["batch_div"])])
                    b_base, b_amp = b_base / a_base, b_amp / a_amp
            else:
                b_base, b_amp = s["batch"] or (None, None)
            gpu, detail, generation = dgx(heading)
            if s.get("yml"):
                yml = convnet_batches(show(gitdir, commit, CONFIGS_YML))
                platform = "DGXA100" if generation == "ampere" else ("DGX1V-32G" if "32" in detail[:4] else "DGX1V-16G")
                b_base = yml.get((s["yml"], platform, "TF32" if generation == "ampere" else "FP32"))
                b_amp = yml.get((s["yml"], platform, "AMP"))
            if s.get("script"):
                platform = "A100-80G" if generation == "ampere" else "V100-32G"
                b_base, b_amp = (
                    number(
                        re.search(
                            r"\s-b\s+(\d+)", show(gitdir, commit, s["script"].format(precision=p, platform=platform))
                        ).group(1)
                    )
                    for p in ("TF32" if generation == "ampere" else "FP32", "AMP")
                )
            eight = [
                r
                for r in rows
                if r[column(header, "GPUs")].replace("*", "").strip() == "8"
                and all(
                    r[column(header, *w)].replace("*", "").strip() == v for w, v in s["where"].items() if w != ("GPUs",)
                )
            ]
            per_gpu = (
                [number(eight[0][column(header, *s[k])]) for k in ("base", "amp")]
                if eight and ("GPUs",) in s["where"]
                else []
            )
            suspect = any(p and v < 0.5 * p / 8 for p, v in zip(per_gpu, (base, amp)))
            baseline = TF32 if generation != "volta" else FP32
            software = container(where_text) or container(parent)
            if not software:  # the results' text names none: the README's requirements are the best guess
                guess = container(
                    "\n".join(line for _, t, body in secs if t.lower() == "requirements" for line in body)
                )
                software = f"{guess} (the README's requirements; the results' text names no container)" if guess else ""
            software = software or "NGC container, version not stated"
            platform = "DGXA100" if generation == "ampere" else ("DGX1V-32G" if "32" in detail[:4] else "DGX1V-16G")
            notes = [s.get("note", ""), dle_layout(gitdir, commit, s, generation, platform)]
            if suspect:
                notes.append("suspect: a 1-GPU throughput below half the per-GPU rate of the same table's 8-GPU row")
            out.append(
                {
                    "model": s["model"],
                    "task": s["task"],
                    "input": s["input"],
                    "gpu": gpu,
                    "gpu_detail": detail,
                    "generation": generation,
                    "baseline": baseline,
                    "batch_baseline": plain(b_base) if b_base else "",
                    "batch_amp": plain(b_amp) if b_amp else "",
                    "throughput_baseline": plain(base),
                    "throughput_amp": plain(amp),
                    "unit": s["unit"],
                    "items_per_sample": plain(s["items"]) if s["items"] else "",
                    "software": software,
                    "fp32_meaning": TF32_DLE if baseline == TF32 else STRICT,
                    "source": "DLE",
                    "source_path": s["path"],
                    "commit": commit,
                    "heading": heading + (f" / {s['sub']}" if "sub" in s else ""),
                    "notes": "; ".join(
                        n for n in ["amp: torch.cuda.amp or apex AMP as the README's mixed precision mode", *notes] if n
                    ),
                }
            )
    return out


# ---------------------------------------------------------------------------------------------------------
# lambdal/deeplearning-benchmark

# name_gpu -> (gpu key as src/ampgan/system/gpus.csv spells it where it has one, else benchmarks/validation/gpus.csv
# (which adds the PCIe A100s: their 250-300 W and bandwidth are not the SXM part's), detail, generation)
LAMBDA_GPUS = {
    "GTX 1080Ti": ("GTX 1080 Ti", "11GB GDDR5X 250 W (GP102: fp16 at 1/64 rate, no tensor cores)", "pascal"),
    "RTX 2080Ti": ("RTX 2080 Ti", "11GB 250 W", "turing"),
    "Titan RTX": ("Titan RTX", "24GB 280 W", "turing"),
    "RTX 8000": ("Quadro RTX 8000", "48GB 260 W", "turing"),
    "Quadro RTX 8000": ("Quadro RTX 8000", "48GB 260 W", "turing"),
    "RTX 6000": ("Quadro RTX 6000", "24GB 260 W", "turing"),
    "RTX 5000": ("Quadro RTX 5000", "16GB 230 W", "turing"),
    "RTX 2080 SUPER MAX-Q": ("RTX 2080 Super Max-Q", "8GB laptop 80 W", "turing"),
    "RTX 2080 MAX-Q": ("RTX 2080 Max-Q", "8GB laptop 90 W", "turing"),
    "RTX 2070 MAX-Q": ("RTX 2070 Max-Q", "8GB laptop 90 W", "turing"),
    "V100 32GB": ("V100", "32GB SXM2", "volta"),
    "LambdaCloud V100 16GB": ("V100", "16GB SXM2 (Lambda Cloud)", "volta"),
    "RTX 3070": ("RTX 3070", "8GB 220 W", "ampere"),
    "RTX 3080": ("RTX 3080", "10GB 320 W", "ampere"),
    "RTX 3080 Max-Q": ("RTX 3080 Max-Q", "16GB laptop 80 W", "ampere"),
    "RTX 3090": ("RTX 3090", "24GB 350 W", "ampere"),
    "RTX 3090Ti": ("RTX 3090 Ti", "24GB 450 W", "ampere"),
    "LambdaCloud A10": ("A10", "24GB PCIe 150 W (Lambda Cloud)", "ampere"),
    "A100 40GB PCIe": ("A100 PCIe", "40GB PCIe 250 W", "ampere"),
    "LambdaCloud A100 40GB PCIe": ("A100 PCIe", "40GB PCIe 250 W (Lambda Cloud)", "ampere"),
    "A100 40GB SXM4": ("A100", "40GB SXM4 400 W", "ampere"),
    "A100 80GB PCIe": ("A100-80GB PCIe", "80GB PCIe 300 W", "ampere"),
    "A100 80GB SXM4": ("A100-80GB", "80GB SXM4 400 W", "ampere"),
    "RTX A4000": ("RTX A4000", "16GB 140 W", "ampere"),
    "RTX A4500": ("RTX A4500", "20GB 200 W", "ampere"),
    "RTX A5000": ("RTX A5000", "24GB 230 W", "ampere"),
    "RTX A5500": ("RTX A5500", "24GB 230 W", "ampere"),
    "RTX A6000": ("RTX A6000", "48GB 300 W", "ampere"),
    "Lambda Cloud — RTX A6000": ("RTX A6000", "48GB 300 W (Lambda Cloud)", "ampere"),
    "RTX A40": ("A40", "48GB 300 W", "ampere"),
    "RTX 4090": ("RTX 4090", "24GB 450 W", "ada"),
    "RTX 6000 Ada": ("RTX 6000 Ada", "48GB 300 W", "ada"),
    "H100 80GB PCIe Gen5": ("H100 PCIe", "80GB PCIe Gen5 350 W", "hopper"),
    "LambdaCloud H100 80GB PCIe Gen5": ("H100 PCIe", "80GB PCIe Gen5 350 W (Lambda Cloud)", "hopper"),
}
for _vendor in ("", "Dell ", "DellTexas ", "SMC ", "1CC ", "RAIDZ1 "):
    LAMBDA_GPUS[f"{_vendor}H100 80GB SXM5"] = (
        "H100",
        f"80GB SXM5 700 W ({_vendor.strip() or 'Lambda'} server)",
        "hopper",
    )

# Lambda's column -> (task, input, unit, items_per_sample, note)
LAMBDA_MODELS = {
    "resnet50": ("resnet50", "classification", "3x224x224", "images/s", 1, ""),
    "ssd": ("ssd300", "detection", "3x300x300", "images/s", 1, ""),
    "maskrcnn": (
        "maskrcnn_r50_fpn",
        "segmentation",
        "3x800x1333",
        "images/s",
        1,
        "input: COCO at shorter side 800, longer at most 1333 (e2e_mask_rcnn_R_50_FPN_1x)",
    ),
    "bert_base_squad": (
        "bert_base_squad",
        "qa",
        "seq384",
        "sequences/s",
        1,
        "input: run_squad.sh's max_seq_length 384 (assumed: Lambda's patch does not set it)",
    ),
    "bert_large_squad": (
        "bert_large_squad",
        "qa",
        "seq384",
        "sequences/s",
        1,
        "input: run_squad.sh's max_seq_length 384 (assumed: Lambda's patch does not set it)",
    ),
    "gnmt": (
        "gnmt",
        "translation",
        "tokens<=50 per side (WMT16 en-de BPE)",
        "tokens/s",
        48,
        "items_per_sample: ~48 source+target tokens per sentence pair, from Lambda's own log "
        "(A100_80GB_SXM4_v1 PyTorch_gnmt_FP32: Tok/s 130377 x 0.378 s per step / batch 1024)",
    ),
    "ncf": ("ncf", "recommendation", "user-item pair", "samples/s", 1, ""),
    "tacotron2": (
        "tacotron2",
        "tts",
        "mel80x571",
        "mel frames/s",
        571,
        "items_per_sample: 571 mel frames per utterance, from Lambda's own log "
        "(A100_80GB_SXM4_v1 PyTorch_tacotron2_FP32: "
        "59632 items/s x 2.4527 s per step / batch 256) on its 625-clip LJSpeech subset",
    ),
    "waveglow": (
        "waveglow",
        "vocoder",
        "audio8000",
        "audio samples/s",
        8000,
        "items_per_sample: --segment-length 8000 audio samples",
    ),
    "transformerxlbase": ("transformerxl_base", "lm", "tokens192", "tokens/s", 192, "items_per_sample: --tgt_len 192"),
    "transformerxllarge": (
        "transformerxl_large",
        "lm",
        "tokens256",
        "tokens/s",
        256,
        "items_per_sample: --tgt_len 256",
    ),
}

# What Lambda's "fp16" runs were, per version (config_v0/config_v1 and compile_results_pytorch*.py).
AMP_V1 = {
    "resnet50": "run PyTorch_resnet50_AMP (--amp; its log: amp : True)",
    "ssd": "run PyTorch_SSD_AMP (--amp; its log: AMP : True, precision : amp)",
    "gnmt": "run PyTorch_gnmt_FP16 (--math fp16; its log: math='fp16')",
    "ncf": "run PyTorch_ncf_FP16 (--amp where the config passes it; its log: amp : True)",
    "tacotron2": "run PyTorch_tacotron2_FP16 (--amp-run)",
    "waveglow": "run PyTorch_waveglow_FP16 (--amp-run)",
    "bert_base_squad": "run PyTorch_bert_base_squad_FP16 (run_squad.sh fp16; its log: fp16=True)",
    "bert_large_squad": "run PyTorch_bert_large_squad_FP16 (run_squad.sh fp16; its log: fp16=True)",
    "transformerxlbase": "run PyTorch_transformerxlbase_FP16 (--fp16; its log: amp='apex', apex AMP)",
    "transformerxllarge": "run PyTorch_transformerxllarge_FP16 (--fp16; its log: amp='apex', apex AMP)",
}
AMP_V0 = {
    **AMP_V1,
    "resnet50": "run PyTorch_resnet50_FP16 (--fp16 --static-loss-scale 256: half-precision network with fp32 master "
    "weights, not autocast)",
    "ncf": "run PyTorch_ncf_FP16 (--opt_level O2: apex, half-precision model with fp32 master weights)",
    "maskrcnn": "run PyTorch_maskrcnn_FP16 (DTYPE float16: the Mask R-CNN benchmark's apex AMP mode)",
    "tacotron2": "run PyTorch_tacotron2_FP16 (--amp-run: apex AMP in the 20.x scripts)",
    "waveglow": "run PyTorch_waveglow_FP16 (--amp-run: apex AMP in the 20.x scripts)",
}


# Lambda's layouts (issue 43): ResNet-50's logs print it (`memory_format : nchw`; NGC 20.01's script predates
# the option and PyTorch 1.4 channels-last); SSD and Mask R-CNN print none.
LAMBDA_LAYOUT = {
    ("v1", "ssd"): "layout: nchw/nchw (baseline/AMP): the config passes no layout and the SSD of Lambda's "
    "DeepLearningExamples fork (LambdaLabsML/DeepLearningExamples lambda/benchmark c1781a37, the v1 README's "
    "checkout) has no --data-layout, no channels_last",
    ("v0", "ssd"): "layout: nchw/nchw (baseline/AMP): the NGC container's bundled SSD (20.01-21.07) predates "
    "DLE's switch to channels-last (SSD README changelog: November 2021), and the config passes no layout",
    ("v0", "maskrcnn"): "layout: nchw/nchw (baseline/AMP): the NGC container's bundled Mask R-CNN (20.01-21.07) "
    "predates DLE's native NHWC (MaskRCNN README changelog: May 2022)",
}


def logged_layout(gitdir: Path, commit: str, folder: str, runs: tuple[str, str]) -> str:
    """`layout:` of a ResNet-50 row from its two runs' logs (baseline, AMP): what each says as `memory_format : X`,
    or NCHW where a log names none (a script before --memory-format)."""
    said = []
    for run in runs:
        listing = show(gitdir, commit, f"pytorch/results/{folder}/{run}") or ""
        logs = [show(gitdir, commit, f"pytorch/results/{folder}/{run}/{n}") or "" for n in listing.split("\n")]
        found = sorted({m for log in logs for m in re.findall(r"memory_format : (\w+)", log)})
        said.append("/".join(found) if found else "")
    formats = "/".join(f or "nchw" for f in said)
    how = (
        "each run's log says memory_format : " + " and ".join(f for f in said if f)
        if all(said)
        else "the logs name no memory_format (a script before --memory-format): PyTorch's default"
        if not any(said)
        else "memory_format as logged, PyTorch's default where a log names none"
    )
    return f"layout: {formats} (baseline/AMP): {how} (results/{folder}/{runs[0]}, {runs[1]})"


SUSPECT_SLOW = "suspect: mixed precision below half the baseline's throughput (a failed or misconfigured run?)"


LAMBDA_FILES = "pytorch/pytorch-train-throughput-fp32.csv, -fp16.csv, pytorch-train-bs-fp32.csv, -fp16.csv"


def lambda_software(gitdir: Path, commit: str, system: str) -> str:
    text = show(gitdir, commit, f"pytorch/results/{system}/sys_pytorch.txt") or ""
    torch = re.search(r"PyTorch Version:\s*(\S+)", text)
    cuda = re.search(r"CUDA Version:\s*V?(\S+)", text)
    if not torch:
        return "not recorded (no sys_pytorch.txt)"
    return f"PyTorch {torch.group(1)}, CUDA {cuda.group(1) if cuda else '?'} (results/{system}/sys_pytorch.txt)"


def systems(gitdir: Path, commit: str, script: str) -> dict[str, str]:
    """Lambda's display name -> its results folder, from list_system_single in its compile script."""
    tree = ast.parse(show(gitdir, commit, script))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "list_system_single":
            return {value[1]: key for key, value in ast.literal_eval(node.value).items()}
    raise SystemExit(f"build_rows: no list_system_single in {script} at {commit[:8]}")


def amp_flag_off(gitdir: Path, commit: str, system: str, run: str) -> bool:
    """True when the run's own log says it ran without AMP ('amp : False': NCF prints its arguments, the
    20.x+ Tacotron 2 / WaveGlow scripts 'PARAMETER amp : False': v0's Ampere runs, whose --amp-run those
    scripts no longer read). Every version's logs are read, v0's too (their folders have no benchmark.para)."""
    folder = f"pytorch/results/{system}/{run}"
    listing = show(gitdir, commit, folder) or ""  # `git show` of a tree: its header line, then its entries
    names = [n for n in listing.split("\n") if n.endswith(".txt")]
    logs = [show(gitdir, commit, f"{folder}/{n}") or "" for n in names]
    # v0's ResNet-50 logs 'amp : False' beside 'fp16 : True': a half-precision network (FP16_Optimizer), kept
    return any(re.search(r"\bamp : False", log) and not re.search(r"\bfp16 : True", log) for log in logs)


def lambda_rows(gitdir: Path, commit: str, script: str, version: str) -> tuple[list[dict], list[str]]:
    read = {
        name: list(csv.DictReader(show(gitdir, commit, f"pytorch/pytorch-train-{name}.csv").splitlines()))
        for name in ("throughput-fp32", "throughput-fp16", "bs-fp32", "bs-fp16")
    }
    by_name = {name: {row["name_gpu"]: row for row in rows} for name, rows in read.items()}
    folders = systems(gitdir, commit, script)
    out, skipped = [], []
    for row in read["throughput-fp32"]:
        name = row["name_gpu"]
        if float(row["num_gpu"]) != 1:
            continue
        if name not in LAMBDA_GPUS:
            raise SystemExit(f"build_rows: Lambda's GPU {name!r} is not in LAMBDA_GPUS: add it")
        gpu, detail, generation = LAMBDA_GPUS[name]
        folder = folders.get(name, "")
        software = lambda_software(gitdir, commit, folder)
        torch_minor = re.search(r"PyTorch (\d+)\.(\d+)", software)
        old_torch = torch_minor and (int(torch_minor.group(1)), int(torch_minor.group(2))) < (1, 12)
        for col, (model, task, inp, unit, items, note) in LAMBDA_MODELS.items():
            if col not in row:
                continue
            values = [
                by_name[n].get(name, {}).get(col, "")
                for n in ("throughput-fp32", "throughput-fp16", "bs-fp32", "bs-fp16")
            ]
            if any(not v or float(v) <= 0 for v in values):
                skipped.append(f"{version} {name} {col}: a zero or missing throughput or batch")
                continue
            amp_runs = AMP_V0 if version == "v0" else AMP_V1
            run = re.search(r"run (\S+)", amp_runs[col]).group(1)
            if amp_flag_off(gitdir, commit, folder, run):
                skipped.append(f"{version} {name} {col}: the '{run}' log says amp : False (fp32 at a larger batch)")
                continue
            ampere_up = generation not in ("pascal", "volta", "turing")
            if not ampere_up:
                baseline, meaning = FP32, STRICT
            else:
                baseline, meaning = TF32, TF32_BOTH if old_torch else TF32_CONV
            out.append(
                {
                    "model": model,
                    "task": task,
                    "input": inp,
                    "gpu": gpu,
                    "gpu_detail": detail,
                    "generation": generation,
                    "baseline": baseline,
                    "batch_baseline": plain(float(values[2])),
                    "batch_amp": plain(float(values[3])),
                    "throughput_baseline": plain(float(values[0])),
                    "throughput_amp": plain(float(values[1])),
                    "unit": unit,
                    "items_per_sample": plain(items),
                    "software": software,
                    "fp32_meaning": meaning,
                    "source": "Lambda",
                    "source_path": LAMBDA_FILES,
                    "commit": commit,
                    "heading": f"{version} name_gpu={name!r}, column {col!r}",
                    "notes": "; ".join(
                        n
                        for n in (
                            f"amp: {amp_runs[col]}",
                            note,
                            logged_layout(gitdir, commit, folder, ("PyTorch_resnet50_FP32", run))
                            if col == "resnet50"
                            else LAMBDA_LAYOUT.get((version, col), ""),
                            SUSPECT_SLOW if float(values[1]) < 0.5 * float(values[0]) else "",
                            "throughput: mean of Lambda's runs (compile script), batch per GPU"
                            + (
                                ""
                                if version == "v1"
                                else "; v0 table, superseded at HEAD for this GPU by v1 where it has one"
                            ),
                        )
                        if n
                    ),
                }
            )
    return out, skipped


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not all(Path(a).is_dir() for a in argv):
        print(
            "usage: build_rows.py DLE_GIT_DIR LAMBDA_GIT_DIR (git directories of NVIDIA/DeepLearningExamples "
            "and lambdal/deeplearning-benchmark)",
            file=sys.stderr,
        )
        return 2
    dle, lam = (Path(a) for a in argv)
    for gitdir, wanted, commit in ((dle, CONFIGS_YML, "HEAD"), (lam, LAMBDA_FILES.split(",")[0], LAMBDA_V0_COMMIT)):
        if show(gitdir, commit, wanted) is None:  # not a git directory, the wrong repository, or history cut
            print(
                f"build_rows: {gitdir} has no {wanted} at {commit[:8]}: pass the git directory of "
                "NVIDIA/DeepLearningExamples first and of lambdal/deeplearning-benchmark (full history) second",
                file=sys.stderr,
            )
            return 2
    rows = dle_rows(dle)
    head = git(lam, "rev-parse", "HEAD").strip()
    v1, skipped1 = lambda_rows(lam, head, "pytorch/scripts/compile_results_pytorch.py", "v1")
    v0, skipped0 = lambda_rows(lam, LAMBDA_V0_COMMIT, "pytorch/scripts/compile_results_pytorch_throughput.py", "v0")
    rows += v1 + v0
    rows.sort(key=lambda r: (r["source"], r["model"], r["generation"], r["gpu"], r["gpu_detail"], r["heading"]))
    kept = [r for r in rows if r["generation"] not in HELD_OUT]
    held = [r for r in rows if r["generation"] in HELD_OUT]
    dle_head = git(dle, "rev-parse", "HEAD").strip()
    for name, part, fitted in (("rows.csv", kept, True), ("heldout_ada_hopper.csv", held, False)):
        with open(HERE / name, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(part)
        sidecar = {
            "sources": {
                "DLE": f"https://github.com/NVIDIA/DeepLearningExamples (commit {dle_head}, "
                "PyTorch/*/*/README.md 'Training performance' tables)",
                "Lambda": f"https://github.com/lambdal/deeplearning-benchmark (v1 at commit {head}, v0 at commit "
                f"{LAMBDA_V0_COMMIT}; {LAMBDA_FILES})",
            },
            "licence": "DeepLearningExamples: each model folder's LICENSE (Apache-2.0 or BSD-3-Clause); "
            "lambdal/deeplearning-benchmark: no licence file (published measurements, cited with their source)",
            "measured_by": "NVIDIA (DGX systems, NGC containers) and Lambda (its own and partners' servers)",
            "fitted": fitted,
            "note": "fit and choose on this file"
            if fitted
            else "KEPT ASIDE: Ada and Hopper; nothing may be fitted on it",
            "rebuilt_by": "benchmarks/validation/build_rows.py",
            "rows": len(part),
            "models": sorted({r["model"] for r in part}),
            "generations": sorted({r["generation"] for r in part}),
        }
        (HERE / f"{name}.json").write_text(json.dumps(sidecar, indent=2) + "\n", encoding="utf-8")
    for line in skipped1 + skipped0:
        print("skipped:", line)
    print(f"rows.csv: {len(kept)} rows; heldout_ada_hopper.csv: {len(held)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
