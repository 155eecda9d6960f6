"""Which convolution kernels a GAN step charges at its 1-4 channel layers, against what autograd runs.

    PYTHONPATH=src python benchmarks/results/validation-study-band-amd-zen4-2026-12-04/charged_kernels.py

Runs ampgan's real training step (training/step.py: D's update, G's, the classifier's) of `acgan-2019` at
32x32x3 (the study's timing shape) and of `r1` (a penalty on real images; at a step without it and one with
it), in fp32 and bf16 (the fp16 step's stand-in), under the bench's op recorder (bench/ops.record_ops, as the
projection's trace does), with a forward hook on every convolution of 1-4 image channels noting what autograd will need of it: a data gradient
when its input requires grad, a weight gradient when its weight does. Printed per layer: the passes the trace
charged and the passes autograd needed. The trace reads autograd's own `output_mask`, so the two agree by
construction; this checks it on the study's network rather than assuming it.
"""

from __future__ import annotations

from collections import Counter

import torch
from torch import nn

from ampgan.bench.ops import record_ops
from ampgan.config import config_from_options
from ampgan.data.synthetic import make_synthetic
from ampgan.gan import DataSpec, resolve_model
from ampgan.training.precision import PrecisionPolicy
from ampgan.training.state import build_train_state
from ampgan.training.step import train_step

TINY = 4


def _image_side(module: nn.Module) -> int | None:
    """The channel count of a convolution's image side (input of a Conv2d, output of a ConvTranspose2d)."""
    if isinstance(module, nn.ConvTranspose2d):
        return module.out_channels
    return module.in_channels if isinstance(module, nn.Conv2d) else None


def needed_passes(state) -> tuple[Counter, list]:
    """Forward hooks on the 1-4 channel convolutions: (passes autograd will need, hook handles)."""
    needed: Counter = Counter()
    handles = []
    for net_name, net in (("G", state.gan.generator), ("D", state.gan.discriminator)):
        for name, module in net.named_modules():
            if (_image_side(module) or TINY + 1) > TINY:
                continue
            label = f"{net_name}.{name} ({type(module).__name__} {module.in_channels}->{module.out_channels})"

            def hook(module, inputs, _out, label=label):
                needed[(label, "forward")] += 1
                if torch.is_grad_enabled() and inputs[0].requires_grad:
                    needed[(label, "data gradient")] += 1
                if torch.is_grad_enabled() and module.weight.requires_grad:
                    needed[(label, "weight gradient")] += 1

            handles.append(module.register_forward_hook(hook))
    return needed, handles


def charged(records) -> Counter:
    """The trace's kernels whose image side has 1-4 channels, by pass (in the ordinary convolution's names)."""
    out: Counter = Counter()
    for record in records:
        for kind, dims in record.kernels:
            if kind != "gemm" and dims[1] <= TINY:
                out[kind] += 1
    return out


def run(model: str, precision: str, step: int = 0) -> None:
    config = config_from_options(
        dataset="synthetic", batch_size=8, steps=3, device="cpu", precision=precision, model=model, sets=()
    )
    data = DataSpec(image_size=32, channels=3, num_classes=10)
    state = build_train_state(
        config,
        resolve_model(config.model.name, config.model.options),
        data,
        PrecisionPolicy(precision, torch.device("cpu"), None),
    )
    images = make_synthetic(count=8, num_classes=10, channels=3, image_size=32, seed=0)
    batch = (images.images.float() / 255, images.labels)
    state.step = step  # r1 at 15: the step its lazy penalty (every 16 steps) runs in
    needed, handles = needed_passes(state)
    try:
        records = record_ops(lambda: train_step(state, lambda: batch))
    finally:
        for handle in handles:
            handle.remove()
    print(f"\n{model} {precision}, step {step}")
    for (label, kind), count in sorted(needed.items()):
        print(f"  needed  {label}: {kind} x{count}")
    # A Conv2d's passes are the ordinary convolution's; a ConvTranspose2d's forward is its data gradient.
    print(
        "  charged (ordinary-convolution passes, 1-4 channel image side): "
        + ", ".join(f"{kind} x{n}" for kind, n in sorted(charged(records).items()))
    )


if __name__ == "__main__":
    torch.manual_seed(0)
    for model, step in (("acgan-2019", 0), ("r1", 0), ("r1", 15)):
        for precision in ("fp32", "bf16"):
            run(model, precision, step)
