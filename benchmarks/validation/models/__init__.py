"""The validation set's models, built on the meta device for the projection (never trained), with the loss
and optimizer NVIDIA DeepLearningExamples trains each with, and one training step of each traced by
ampgan's op tracer (bench/ops.py) in fp32 and in fp16 mixed precision (CUDA autocast's casts, emulated on
the meta device by autocast.py, and the loss scaler's passes).

Adding a model: a builder below with its input shapes, loss and optimizer; `trace.py --rebuild` re-traces it
into op_tables.json. torchvision is not used (its wheels pin another torch); every network is written here
from its paper and DLE's README, its exotic parts replaced by ordinary modules of the same FLOPs and bytes
(each builder's docstring says which).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from . import hifigan, speech, text, vision

F = nn.functional


class Lamb(torch.optim.Optimizer):
    """LAMB's state and hyperparameters, for the op tracer: never stepped here (a meta step has no values).
    The tracer charges apex's fused LAMB update for it (bench/ops.py FUSED_UPDATES)."""

    def __init__(self, params, lr: float = 1e-3):
        super().__init__(params, {"lr": lr})


@dataclass(frozen=True)
class Workload:
    """One validation model's training step: what a sample is, how the model is built, its loss, its optimizer."""

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[int], tuple]  # batch size -> the step's inputs (meta tensors)
    loss: Callable[[nn.Module, tuple], torch.Tensor]
    optimizer: Callable[[list], torch.optim.Optimizer]
    sample: str  # what one sample is (the throughput's unit is items_per_sample of these)
    training: str  # loss, optimizer and approximations, as DLE's README trains it
    # How its mixed precision ran: "autocast" (torch.cuda.amp, apex O1), or "O2" (apex amp.initialize at O2:
    # the whole network in fp16, layer norms and softmax included, with fp32 master weights).
    amp: str = "autocast"
    # Micro-batches per optimizer step (gradient accumulation): the traced step runs them all, and its op
    # rows are divided by it, since the rows' batch and throughput are per micro-batch.
    accumulation: int = 1


def _meta(*shape, dtype=torch.float32):
    return torch.empty(*shape, dtype=dtype, device="meta")


def _tokens(*shape):
    return torch.zeros(*shape, dtype=torch.long, device="meta")


def _sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.875, weight_decay=3.0517578125e-05)


def _adam(params):
    return torch.optim.Adam(params, lr=1e-3)


def _classify(model, batch):
    images, labels = batch
    return F.cross_entropy(model(images), labels, label_smoothing=0.1)


def _ssd(model, batch):
    images, boxes, labels = batch
    locs, confs = model(images)
    return vision.ssd_loss(locs, confs, boxes, labels)


def _squad(model, batch):
    tokens, segments, start, end = batch
    s, e = model(tokens, segments)
    return (F.cross_entropy(s, start) + F.cross_entropy(e, end)) / 2


def _bert(layers: int, hidden: int, heads: int) -> Callable[[], nn.Module]:
    return lambda: text.BertForQuestionAnswering(layers, hidden, heads)


BERT_LENGTH = 384  # DLE's SQuAD fine-tuning: max_seq_length 384
TXL = {"base": (16, 512, 8, 2048, 1), "large": (18, 1024, 16, 4096, 4)}
TACOTRON_TEXT = 140  # LJSpeech's padded batch: ~140 symbols


def _txl(size: str, length: int) -> Workload:
    layers, d_model, heads, inner, div_val = TXL[size]
    return Workload(
        f"transformerxl_{size}",
        lambda: text.TransformerXL(layers, d_model, heads, inner, div_val),
        lambda b: (_tokens(b, length), _tokens(b, length)),
        lambda model, batch: model(*batch, memory_length=length),
        Lamb,
        f"a {length}-token segment of WikiText-103 (with {length} tokens of memory)",
        "adaptive softmax cross entropy, LAMB (DLE's jitlamb); the adaptive input looked up in its head table "
        "and the tail clusters run on a fixed share of the tokens (text.AdaptiveSoftmax); apex O2 (train.py's "
        "default --amp apex, --apex_amp_opt_level O2)",
        "O2",
    )


def _gnmt(tokens: int) -> Workload:
    side = tokens // 2
    return Workload(
        "gnmt",
        text.GNMT,
        lambda b: (_tokens(b, side), _tokens(b, side)),
        lambda model, batch: text.smoothed_loss(model(*batch), batch[1]),
        _adam,
        f"one WMT16 en-de sentence pair, {side} tokens a side (the rows' {tokens} tokens per pair)",
        "label-smoothed (0.1) cross entropy, Adam; attention computed for all target steps at once after the "
        "first decoder layer (GNMT v2's recurrent attention feeds each step's context to the next layers: the "
        "same products); apex O2 (seq2seq/train/trainer.py: amp.initialize(opt_level='O2'))",
        "O2",
    )


def _tacotron2(frames: int) -> Workload:
    return Workload(
        "tacotron2",
        speech.Tacotron2,
        lambda b: (_tokens(b, TACOTRON_TEXT), _meta(b, 80, frames), _meta(b, frames)),
        lambda model, batch: speech.tacotron2_loss(*model(batch[0], batch[1]), batch[1], batch[2]),
        _adam,
        f"one LJSpeech utterance ({TACOTRON_TEXT} symbols, {frames} mel frames)",
        "mel MSE (before and after the postnet) + stop-token BCE, Adam; the decoder stepped once per frame",
    )


def _waveglow(samples: int) -> Workload:
    return Workload(
        "waveglow",
        speech.WaveGlow,
        lambda b: (_meta(b, 80, samples // 256 + 1), _meta(b, samples)),
        lambda model, batch: speech.waveglow_loss(*model(*batch)),
        _adam,
        f"one {samples}-sample LJSpeech segment",
        "WaveGlow's negative log-likelihood, Adam; the 1x1 invertible convolutions' log-determinants left out",
    )


def _hifigan(accumulation: int, fp32_grouped: bool) -> Workload:
    def adamw(params):
        return torch.optim.AdamW(params, lr=3e-4, betas=(0.8, 0.99))

    frames, segment = hifigan.FRAMES, hifigan.SEGMENT
    return Workload(
        "hifigan",
        lambda: hifigan.HiFiGAN(fp32_grouped),
        lambda b: (_meta(b, 80, frames), _meta(b, 1, segment), _meta(b, 80, frames)),
        lambda model, batch: hifigan.hifigan_step(model, batch, accumulation),
        adamw,
        f"one {segment}-sample LJSpeech segment ({frames} mel frames in)",
        f"v1 generator, MPD (periods 2-11) and MSD (3 scales), each update's losses as train.py computes them "
        f"(mel L1 x 45 on an STFT, feature matching, least squares); AdamW (one for all weights: the same "
        f"update as DLE's two); {accumulation} micro-batch(es) a step"
        + ("; MSD's grouped convolutions in fp32 (--no_amp_grouped_conv)" if fp32_grouped else ""),
        accumulation=accumulation,
    )


FIXED: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "resnet50",
            vision.ResNet50,
            lambda b: (_meta(b, 3, 224, 224), _tokens(b)),
            _classify,
            _sgd,
            "one 224x224x3 ImageNet image",
            "cross entropy with label smoothing 0.1, SGD with momentum 0.875 (DLE resnet50v1.5)",
        ),
        Workload(
            "ssd300",
            vision.SSD300,
            lambda b: (_meta(b, 3, 300, 300), _meta(b, 4, 8732), _tokens(b, 8732)),
            _ssd,
            _sgd,
            "one 300x300x3 COCO image",
            "smooth L1 + cross entropy with hard negative mining over 8732 boxes, SGD with momentum (DLE SSD300 "
            "v1.1, ResNet-50 backbone)",
        ),
        Workload(
            "bert_base_squad",
            _bert(12, 768, 12),
            lambda b: (_tokens(b, BERT_LENGTH), _tokens(b, BERT_LENGTH), _tokens(b), _tokens(b)),
            _squad,
            _adam,
            f"one {BERT_LENGTH}-token SQuAD sequence",
            "start/end cross entropy, Adam (DLE's BertAdam, fused); apex O2 (run_squad.py: "
            "amp.initialize(opt_level='O2', keep_batchnorm_fp32=False))",
            "O2",
        ),
        Workload(
            "bert_large_squad",
            _bert(24, 1024, 16),
            lambda b: (_tokens(b, BERT_LENGTH), _tokens(b, BERT_LENGTH), _tokens(b), _tokens(b)),
            _squad,
            _adam,
            f"one {BERT_LENGTH}-token SQuAD sequence",
            "start/end cross entropy, Adam (DLE's BertAdam, fused); apex O2 (run_squad.py: "
            "amp.initialize(opt_level='O2', keep_batchnorm_fp32=False))",
            "O2",
        ),
        Workload(
            "ncf",
            text.NeuMF,
            lambda b: (_tokens(b), _tokens(b), _meta(b)),
            lambda model, batch: F.binary_cross_entropy_with_logits(model(batch[0], batch[1]), batch[2]),
            _adam,
            "one (user, item) pair",
            "binary cross entropy on logits, Adam (DLE NCF on MovieLens-20M)",
        ),
    )
}
# Models whose sample's length the row gives (its input column's last number, or for GNMT the tokens per pair).
SIZED = {
    "gnmt": _gnmt,
    "tacotron2": _tacotron2,
    "waveglow": _waveglow,
    "transformerxl_base": lambda n: _txl("base", n),
    "transformerxl_large": lambda n: _txl("large", n),
}
MODELS = (*FIXED, *SIZED, "hifigan")


NO_AMP_GROUPED = "--no_amp_grouped_conv"  # in a hifigan row's notes: its AMP run kept MSD's grouped convolutions fp32


def workload_key(row: dict) -> str | None:
    """The traced step a row (rows.csv's columns) maps to ("tacotron2:571"), or None without a builder."""
    model, input_, items_per_sample = row["model"], row["input"], float(row["items_per_sample"] or 1)
    if model == "hifigan":
        # DLE's 1-GPU runs keep 128 examples a step (train_benchmark.sh): batch 32 accumulates 4 micro-batches
        accumulation = max(1, hifigan.DLE_GLOBAL_BATCH // int(float(row["batch_amp"] or hifigan.DLE_GLOBAL_BATCH)))
        return f"hifigan:{accumulation}" + (":fp32-grouped" if NO_AMP_GROUPED in row["notes"] else "")
    if model in FIXED:
        return model
    if model not in SIZED:
        return None
    if model == "gnmt":
        return f"gnmt:{int(items_per_sample)}"
    digits = re.findall(r"\d+", input_)
    return f"{model}:{digits[-1]}" if digits else None


def workload(key: str) -> Workload:
    model, _, length = key.partition(":")
    if model == "hifigan":
        accumulation, _, grouped = length.partition(":")
        return _hifigan(int(accumulation), grouped == "fp32-grouped")
    return FIXED[model] if model in FIXED else SIZED[model](int(length))
