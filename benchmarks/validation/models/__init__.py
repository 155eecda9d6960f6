"""The validation set's models, built on the meta device for the projection (never trained), with the loss
and optimizer NVIDIA DeepLearningExamples trains each with, and one training step of each traced by
ampgan's op tracer (bench/ops.py) in fp32 and in fp16 mixed precision (CUDA autocast's casts, emulated on
the meta device by autocast.py, and the loss scaler's passes).

Adding a model: a Workload in FIXED below (or SIZED, when the row's input gives its length) with its network,
input shapes, loss and optimizer; `trace_models.py --models KEY` traces it into op_tables.json (the README's
"Adding a model"). torchvision is not used (its wheels pin another torch); every network is written here
from its paper and DLE's README, its exotic parts replaced by ordinary modules of the same FLOPs and bytes
(each builder's docstring says which).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import nn

from . import hifigan, speech, text, vision

F = nn.functional


# The update a run stepped where its script does not step a fused (multi-tensor) one: torch.optim before
# PyTorch 2.0 loops over the parameters in Python, a few element-wise kernels each (foreach was off unless
# asked for; every rows.csv row ran PyTorch 1.4-1.13; from 2.0 on CUDA it takes its foreach form, the same
# passes as multi-tensor kernels: TORCH_OPTIM, workload_key's ":foreach"), and DLE's BERT on SQuAD steps its
# own BertAdam (optimization.py) in fp32 where its AMP run steps apex's FusedAdam (run_squad.py). Each kernel: its name,
# its passes over the parameter's fp32 values (reads + writes), and whether it runs on every parameter or only
# on the weight-decayed matrices (DLE leaves biases and norms undecayed: ConvNets' bn_weight_decay, SSD's
# tencent_trick, BERT's no_decay). Left out, so the loops are a lower bound: gradient clipping's per-parameter
# norms (Tacotron 2, WaveGlow, GNMT, Transformer-XL clip in both precisions) and zero_grad's zero_ kernels.
Loop = tuple[tuple[str, int, bool], ...]
ADAM = (  # torch.optim.Adam's _single_tensor_adam / its 1.4 loop, no weight decay
    ("aten.mul_", 2, False),  # exp_avg.mul_(beta1)
    ("aten.add_", 3, False),  # .add_(grad, alpha=1 - beta1)
    ("aten.mul_", 2, False),  # exp_avg_sq.mul_(beta2)
    ("aten.addcmul_", 4, False),  # .addcmul_(grad, grad, value=1 - beta2)
    ("aten.sqrt", 2, False),  # denom = (exp_avg_sq.sqrt()
    ("aten.div", 2, False),  # / sqrt(bias_correction2))
    ("aten.add_", 2, False),  # .add_(eps)
    ("aten.addcdiv_", 4, False),  # param.addcdiv_(exp_avg, denom, value=-step_size)
)
ADAM_DECAYED = (("aten.add", 3, False), *ADAM)  # weight_decay > 0: grad = grad.add(param, alpha=weight_decay)
ADAMW = (("aten.mul_", 2, False), *ADAM)  # param.mul_(1 - lr * weight_decay), then Adam's
SGD = (  # torch.optim.SGD with momentum, its weight decay on the decayed group
    ("aten.add", 3, True),  # d_p = d_p.add(param, alpha=weight_decay)
    ("aten.mul_", 2, False),  # buf.mul_(momentum)
    ("aten.add_", 3, False),  # .add_(d_p, alpha=1 - dampening)
    ("aten.add_", 3, False),  # param.add_(d_p, alpha=-lr)
)
RMSPROP = (  # torch.optim.RMSprop's _single_tensor_rmsprop / its 1.9 loop, momentum > 0, not centred
    ("aten.add", 3, True),  # grad = grad.add(param, alpha=weight_decay): DLE leaves batch norms undecayed
    ("aten.mul_", 2, False),  # square_avg.mul_(alpha)
    ("aten.addcmul_", 4, False),  # .addcmul_(grad, grad, value=1 - alpha)
    ("aten.sqrt", 2, False),  # avg = square_avg.sqrt()
    ("aten.add_", 2, False),  # .add_(eps)
    ("aten.mul_", 2, False),  # buf.mul_(momentum)
    ("aten.addcdiv_", 4, False),  # .addcdiv_(grad, avg)
    ("aten.add_", 3, False),  # param.add_(buf, alpha=-lr)
)
BERT_ADAM = (  # DLE BERT's optimization.BertAdam.step, per parameter (its clipping, which changed, left out)
    *ADAM[:4],  # next_m.mul_(b1).add_(1 - b1, grad); next_v.mul_(b2).addcmul_(1 - b2, grad, grad)
    ("aten.sqrt", 2, False),  # update = next_m / (next_v.sqrt()
    ("aten.add", 2, False),  # + e)
    ("aten.div", 3, False),  # next_m / ...
    ("aten.mul", 2, True),  # weight_decay * p.data
    ("aten.add_", 3, True),  # update += ...
    ("aten.mul", 2, False),  # update_with_lr = lr_scheduled * update
    ("aten.neg", 2, False),  # -update_with_lr
    ("aten.add_", 3, False),  # p.data.add_(...)
)
JIT_LAMB = (  # Transformer-XL's lamb.JITLamb: one TorchScript lamb_kernel per parameter, its element-wise
    # chains fused on CUDA, the two norms (reductions) apart
    ("jit.lamb_moments", 7, False),  # exp_avg, exp_avg_sq, adam_step from param, grad and both moments
    ("aten.norm", 1, False),  # param.norm(p=2)
    ("aten.norm", 1, False),  # adam_step.norm(p=2)
    ("jit.lamb_trust_ratio", 0, False),  # the trust ratio's scalar arithmetic
    ("jit.lamb_apply", 3, False),  # param - step_size * trust_ratio * adam_step
)

HF_ADAMW = (  # transformers.optimization.AdamW (the Trainer's "adamw_hf", its default in 2022) at weight decay 0
    *ADAM[:5],  # the moments, denom = exp_avg_sq.sqrt()
    ("aten.add_", 2, False),  # .add_(eps): the bias corrections are folded into step_size, no division
    ("aten.addcdiv_", 4, False),  # p.addcdiv_(exp_avg, denom, value=-step_size)
)


# the loops torch.optim's own; BertAdam and JITLamb are the scripts'
TORCH_OPTIM = (ADAM, ADAM_DECAYED, ADAMW, SGD, RMSPROP)


class Lamb(torch.optim.Optimizer):
    """LAMB's state and hyperparameters, for the op tracer: never stepped here (a meta step has no values).
    Transformer-XL's runs step DLE's JITLamb, a per-weight loop (JIT_LAMB); without a loop the tracer would
    charge apex's fused LAMB update (bench/ops.py FUSED_UPDATES)."""

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
    # The per-parameter update each precision's run stepped (a Loop above), where not a fused one: fp32, mixed.
    loops: tuple[Loop | None, Loop | None] = (None, None)
    # torch.optim's loops run in their foreach form (PyTorch >= 2.0 on CUDA): trace_models.foreach_update.
    foreach: bool = False
    # False: the row timed forward and backward only (NO_UPDATE in its notes): no update, no scaler or master pass.
    update: bool = True
    # A FIXED model's one input, as a row's `input` column spells it ("3x224x224", "seq384"): a row with another
    # is not this trace (a BERT run at 512 tokens is not SQuAD's at 384), so it is left out, saying so.
    input: str = ""


def _meta(*shape, dtype=torch.float32):
    return torch.empty(*shape, dtype=dtype, device="meta")


def _tokens(*shape):
    return torch.zeros(*shape, dtype=torch.long, device="meta")


def _sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.875, weight_decay=3.0517578125e-05)


def _rmsprop(params):  # DLE ConvNets' efficientnet_params: alpha 0.9, eps 0.01, momentum 0.9, weight decay 1e-5
    return torch.optim.RMSprop(params, lr=0.08, alpha=0.9, eps=0.01, momentum=0.9, weight_decay=1e-5)


def _convnet(name: str, build: Callable[[], nn.Module], size: int, optimizer, loop: Loop, trained: str) -> Workload:
    """A DLE ConvNets classifier (main.py): cross entropy with label smoothing 0.1, the model's optimizer as
    torch.optim's per-parameter loop (PyTorch < 2.0) in both precisions, batch norms undecayed."""
    return Workload(
        name,
        build,
        lambda b: (_meta(b, 3, size, size), _tokens(b)),
        _classify,
        optimizer,
        f"one {size}x{size}x3 ImageNet image",
        f"cross entropy with label smoothing 0.1 (its mixup of 0.2 left out, as for ResNet-50), {trained}",
        loops=(loop, loop),
        input=f"3x{size}x{size}",
    )


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
        "default --amp apex, --apex_amp_opt_level O2); JITLamb's per-parameter update in both",
        "O2",
        loops=(JIT_LAMB, JIT_LAMB),
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
        "same products); apex O2 (seq2seq/train/trainer.py: amp.initialize(opt_level='O2')); torch.optim.Adam's "
        "per-parameter update in both",
        "O2",
        loops=(ADAM, ADAM),
    )


def _tacotron2(frames: int) -> Workload:
    return Workload(
        "tacotron2",
        speech.Tacotron2,
        lambda b: (_tokens(b, TACOTRON_TEXT), _meta(b, 80, frames), _meta(b, frames)),
        lambda model, batch: speech.tacotron2_loss(*model(batch[0], batch[1]), batch[1], batch[2]),
        _adam,
        f"one LJSpeech utterance ({TACOTRON_TEXT} symbols, {frames} mel frames)",
        "mel MSE (before and after the postnet) + stop-token BCE, Adam (weight decay 1e-6: train.py, "
        "DGX1_tacotron2_*_train.sh; torch.optim's per-parameter update in both); the decoder stepped once per frame",
        loops=(ADAM_DECAYED, ADAM_DECAYED),
    )


def _waveglow(samples: int) -> Workload:
    return Workload(
        "waveglow",
        speech.WaveGlow,
        lambda b: (_meta(b, 80, samples // 256 + 1), _meta(b, samples)),
        lambda model, batch: speech.waveglow_loss(*model(*batch)),
        _adam,
        f"one {samples}-sample LJSpeech segment",
        "WaveGlow's negative log-likelihood, Adam (no weight decay; torch.optim's per-parameter update in both); "
        "the 1x1 invertible convolutions' log-determinants left out",
        loops=(ADAM, ADAM),
    )


def _bert_large_cls(length: int) -> Workload:
    return Workload(
        "bert_large_cls",
        lambda: text.BertForSequenceClassification(24, 1024, 16),
        lambda b: (_tokens(b, length), _tokens(b, length), _tokens(b)),
        lambda model, batch: F.cross_entropy(model(batch[0], batch[1]), batch[2]),
        _adam,
        f"one {length}-token sequence",
        "Hugging Face Trainer's sequence classification (bert-large-uncased): cross entropy over 2 labels, "
        "transformers' AdamW (weight decay 0, the Trainer default; its per-parameter loop in both), fp16 as "
        "Trainer(fp16=True) runs it: torch.cuda.amp autocast and GradScaler; the Trainer's gradient clipping "
        "left out, as for the other models",
        loops=(HF_ADAMW, HF_ADAMW),
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
        f"update as DLE's two; torch.optim.AdamW, train.py's default --optimizer adamw, its per-parameter update in "
        f"both); {accumulation} micro-batch(es) a step"
        + ("; MSD's grouped convolutions in fp32 (--no_amp_grouped_conv)" if fp32_grouped else ""),
        accumulation=accumulation,
        loops=(ADAMW, ADAMW),
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
            "cross entropy with label smoothing 0.1, SGD with momentum 0.875 (DLE resnet50v1.5; torch.optim.SGD's "
            "per-parameter update in both, batch norms undecayed)",
            loops=(SGD, SGD),
            input="3x224x224",
        ),
        _convnet(
            "resnext101_32x4d",
            vision.ResNeXt101,
            224,
            lambda params: torch.optim.SGD(params, lr=1.024, momentum=0.875, weight_decay=6.103515625e-05),
            SGD,
            "SGD with momentum 0.875 (DLE resnext101-32x4d, resnet_params_1k)",
        ),
        _convnet(
            "se_resnext101_32x4d",
            lambda: vision.ResNeXt101(squeeze=16),
            224,
            lambda params: torch.optim.SGD(params, lr=1.024, momentum=0.875, weight_decay=6.103515625e-05),
            SGD,
            "SGD with momentum 0.875 (DLE se-resnext101-32x4d, resnet_params_1k)",
        ),
        _convnet(
            "efficientnet_b0",
            lambda: vision.EfficientNet(1.0, 1.0, 0.2, 1.0),
            224,
            _rmsprop,
            RMSPROP,
            "RMSprop with momentum 0.9 (DLE efficientnet-b0, efficientnet_params)",
        ),
        _convnet(
            "efficientnet_b4",
            lambda: vision.EfficientNet(1.4, 1.8, 0.4, 0.8),
            380,
            _rmsprop,
            RMSPROP,
            "RMSprop with momentum 0.9 (DLE efficientnet-b4, efficientnet_params)",
        ),
        Workload(
            "vgg16",
            vision.VGG16,
            lambda b: (_meta(b, 3, 224, 224), _tokens(b)),
            lambda model, batch: F.cross_entropy(model(batch[0]), batch[1]),
            lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4),
            "one 224x224x3 ImageNet image",
            "cross entropy, SGD with momentum 0.9 (pytorch/examples imagenet/main.py, torchvision's vgg16; "
            "torch.optim.SGD's per-parameter update in both, its weight decay charged on the weight matrices only)",
            loops=(SGD, SGD),
            input="3x224x224",
        ),
        Workload(
            "ssd300",
            vision.SSD300,
            lambda b: (_meta(b, 3, 300, 300), _meta(b, 4, 8732), _tokens(b, 8732)),
            _ssd,
            _sgd,
            "one 300x300x3 COCO image",
            "smooth L1 + cross entropy with hard negative mining over 8732 boxes, SGD with momentum (DLE SSD300 "
            "v1.1, ResNet-50 backbone; torch.optim.SGD's per-parameter update in both, biases and batch norms "
            "undecayed: main.py's tencent_trick)",
            loops=(SGD, SGD),
            input="3x300x300",
        ),
        Workload(
            "bert_base_squad",
            _bert(12, 768, 12),
            lambda b: (_tokens(b, BERT_LENGTH), _tokens(b, BERT_LENGTH), _tokens(b), _tokens(b)),
            _squad,
            _adam,
            f"one {BERT_LENGTH}-token SQuAD sequence",
            "start/end cross entropy; fp32: DLE's BertAdam, a per-parameter loop (optimization.py), AMP: apex's "
            "FusedAdam and apex O2 (run_squad.py: amp.initialize(opt_level='O2', keep_batchnorm_fp32=False))",
            "O2",
            loops=(BERT_ADAM, None),
            input=f"seq{BERT_LENGTH}",
        ),
        Workload(
            "bert_large_squad",
            _bert(24, 1024, 16),
            lambda b: (_tokens(b, BERT_LENGTH), _tokens(b, BERT_LENGTH), _tokens(b), _tokens(b)),
            _squad,
            _adam,
            f"one {BERT_LENGTH}-token SQuAD sequence",
            "start/end cross entropy; fp32: DLE's BertAdam, a per-parameter loop (optimization.py), AMP: apex's "
            "FusedAdam and apex O2 (run_squad.py: amp.initialize(opt_level='O2', keep_batchnorm_fp32=False))",
            "O2",
            loops=(BERT_ADAM, None),
            input=f"seq{BERT_LENGTH}",
        ),
        Workload(
            "ncf",
            text.NeuMF,
            lambda b: (_tokens(b), _tokens(b), _meta(b)),
            lambda model, batch: F.binary_cross_entropy_with_logits(model(batch[0], batch[1]), batch[2]),
            _adam,
            "one (user, item) pair",
            "binary cross entropy on logits, apex's FusedAdam in both (DLE NCF on MovieLens-20M, ncf.py)",
            input="user-item pair",
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
    "bert_large_cls": _bert_large_cls,
}
MODELS = (*FIXED, *SIZED, "hifigan")


NO_AMP_GROUPED = "--no_amp_grouped_conv"  # in a hifigan row's notes: its AMP run kept MSD's grouped convolutions fp32
# In a row's notes: its mixed-precision run was a half-precision network with fp32 master weights, whatever the
# model's script does today (Lambda's NCF runs passed apex's --opt_level O2; its ResNet-50 v0 runs --fp16 with
# FP16_Optimizer): traced as O2 ("resnet50:O2"), not under autocast's casts.
HALF_NETWORK = ("--opt_level O2", "half-precision network with fp32 master weights", "model.half()")
# In a row's notes: the step it timed ran no optimizer update (benchmark scripts that time forward and backward
# only, ryujaehun/pytorch-gpu-benchmark's): traced ":noupdate", without the update's and the scaler's passes.
NO_UPDATE = "no optimizer step"


def torch_2(software: str) -> bool:
    """Whether a row's software (rows.csv's column) is PyTorch 2.0 or later: named, or an NGC container from 23.xx
    (22.12 shipped PyTorch 1.14.0a0, 23.03 the first 2.0)."""
    named = re.search(r"PyTorch (\d+)\.", software)
    ngc = re.search(r"pytorch:(\d+)\.(\d+)", software)
    return int(named[1]) >= 2 if named else bool(ngc) and int(ngc[1]) >= 23


def workload_key(row: dict) -> str | None:
    """The traced step a row (rows.csv's columns) maps to ("tacotron2:571"), or None without a builder; with
    ":noupdate" after it where the row timed no update (NO_UPDATE), else ":foreach" where the row ran PyTorch >= 2.0
    and the model steps a torch.optim loop."""
    key = _plain_key(row)
    if key is not None and NO_UPDATE in row["notes"]:
        return f"{key}:noupdate"
    if key is None or not torch_2(row.get("software", "")):  # no software named: the loop, as every rows.csv row
        return key
    return f"{key}:foreach" if any(loop in TORCH_OPTIM for loop in workload(key).loops) else key


def _plain_key(row: dict) -> str | None:
    model, input_, items_per_sample = row["model"], row["input"], float(row["items_per_sample"] or 1)
    if model == "hifigan":
        # DLE's 1-GPU runs keep 128 examples a step (train_benchmark.sh): batch 32 accumulates 4 micro-batches
        accumulation = max(1, hifigan.DLE_GLOBAL_BATCH // int(float(row["batch_amp"] or hifigan.DLE_GLOBAL_BATCH)))
        if not same_input(input_, HIFIGAN_INPUT):
            return None
        return f"hifigan:{accumulation}" + (":fp32-grouped" if NO_AMP_GROUPED in row["notes"] else "")
    if model in FIXED:
        if not same_input(input_, FIXED[model].input):
            return None
        half = FIXED[model].amp != "O2" and any(flag in row["notes"] for flag in HALF_NETWORK)
        return f"{model}:O2" if half else model
    if model not in SIZED:
        return None
    if model == "gnmt":
        return f"gnmt:{int(items_per_sample)}"
    digits = re.findall(r"\d+", input_)
    return f"{model}:{digits[-1]}" if digits else None


HERE_ADD = "benchmarks/validation/models/__init__.py"  # where a model is added: a Workload in FIXED or SIZED
HIFIGAN_INPUT = f"mel80x{hifigan.FRAMES}"  # its builder's segment: the mel frames one example feeds G


def same_input(written: str, built: str) -> bool:
    """Whether a row's `input` names the input a builder was made for: the same numbers in any order
    (3x224x224, 224x224x3), or without numbers the same words ("user-item pair", any case)."""
    numbers = [sorted(map(int, re.findall(r"\d+", text))) for text in (written, built)]
    if numbers[1]:
        return numbers[0] == numbers[1]
    return " ".join(written.lower().split()) == " ".join(built.lower().split())


def unbuilt(row: dict) -> str:
    """Why no traced step stands for a row that workload_key maps to none, and the one place a builder for it goes
    (check.py prints it after the row's model)."""
    model, input_ = row["model"], row["input"]
    built = HIFIGAN_INPUT if model == "hifigan" else FIXED[model].input if model in FIXED else None
    if built is not None:
        return (
            f"built for input {built!r}, not this row's {input_!r}: if the row ran {built!r}, write it so; "
            f"else a Workload for its input goes in {HERE_ADD} (FIXED, or SIZED to read the length from the row)"
        )
    if model in SIZED:
        return f"reads its length from the row's input, and {input_!r} has no number: give it as rows.csv does"
    return f"no builder: add a Workload for it to FIXED or SIZED in {HERE_ADD}"


def workload(key: str) -> Workload:
    if key.endswith(":noupdate"):
        timed = workload(key.removesuffix(":noupdate"))
        omitted = "no optimizer step timed: update and scaler omitted"
        return replace(timed, update=False, training=f"{timed.training}; {omitted}")
    if key.endswith(":foreach"):
        return replace(workload(key.removesuffix(":foreach")), foreach=True)
    model, _, length = key.partition(":")
    if model == "hifigan":
        accumulation, _, grouped = length.partition(":")
        return _hifigan(int(accumulation), grouped == "fp32-grouped")
    if model in FIXED:
        return replace(FIXED[model], amp="O2") if length == "O2" else FIXED[model]
    return SIZED[model](int(length))
