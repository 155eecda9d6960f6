"""The moving average of G a model declares (gan/ema.py), kept by ampgan: made, updated, loaded.

The average is a copy of G in fp32 (the master precision: the training weights are fp32 in every mode,
and an average in fp16/bf16 would round away updates smaller than its last bit, 1/1024 of the weight
in fp16, which a decay of 0.999 makes every update). Its parameters need no gradient and no optimizer
holds them; floating parameters are averaged, buffers (batch norm's running statistics, spectral norm's
power-iteration vectors) copied from G, as StyleGAN2-ADA does: they are running estimates already.
"""

from __future__ import annotations

import copy

import torch

from ampgan.errors import AmpganError, first_words
from ampgan.gan.contract import GAN
from ampgan.runs.checkpoint import load_weights


def attach_average(gan: GAN) -> None:
    """Give `gan` the fp32 average of its generator when its model declares one (a copy of G as it is
    now: its place, memory format and weights), in eval mode; nothing otherwise."""
    if gan.ema is None:
        gan.averaged_generator = None
        return
    try:
        average = copy.deepcopy(gan.generator)
    except Exception as error:  # noqa: BLE001 - a generator that cannot be copied is the user's to fix
        raise AmpganError(
            f"model {gan.name}: GAN.ema needs a copy of the generator, and copy.deepcopy(generator) failed "
            f"({type(error).__name__}: {first_words(str(error), 200)}): make it copyable"
        ) from None
    for tensor in average.parameters():  # buffers keep their dtype (an fp64 count stays fp64: docs/your-gan.md)
        if tensor.is_floating_point():
            tensor.data = tensor.data.float()
    average.requires_grad_(False)
    gan.averaged_generator = average.eval()


@torch.no_grad()
def update_average(gan: GAN, step: int) -> None:
    """After the step that made the step count `step`: average = decay x average + (1 - decay) x G, at the
    decay `gan.ema` gives that step (a copy of G up to its `start`), when an update is due."""
    average = gan.averaged_generator
    if average is None or not gan.ema.due(step):
        return
    # (the average's, G's) of each parameter and each buffer, by name
    theirs, theirs_buffers = dict(gan.generator.named_parameters()), dict(gan.generator.named_buffers())
    parameters = [(mine, theirs[name]) for name, mine in average.named_parameters()]
    buffers = [(mine, theirs_buffers[name]) for name, mine in average.named_buffers()]
    floating = [(a, g) for a, g in parameters if a.is_floating_point()]
    if floating:
        # lerp: a + (1 - decay) (g - a), one multi-tensor kernel for every parameter
        torch._foreach_lerp_(
            [a for a, _ in floating], [g.detach().float() for _, g in floating], 1.0 - gan.ema.decay_at(step)
        )
    for a, g in [(a, g) for a, g in parameters if not a.is_floating_point()] + buffers:
        a.copy_(g)


def load_average(gan: GAN, saved: dict, origin: str) -> None:
    """The average a checkpoint holds, into `gan`'s (bit for bit); one line when the model declares an
    average and the checkpoint holds none, or the reverse (a checkpoint of another model's run)."""
    has = "ema_generator" in saved
    if gan.averaged_generator is None and not has:
        return
    if gan.averaged_generator is None:
        raise AmpganError(
            f"{origin} holds an EMA of G, and this model declares none (GAN.ema): it is a checkpoint of "
            "another model; resume with the model that wrote it"
        )
    if not has:
        raise AmpganError(
            f"{origin} holds no EMA of G, and this model declares one (GAN.ema): it was written before the "
            "model declared it; start a new run (or drop GAN.ema to continue this one)"
        )
    load_weights(gan.averaged_generator, saved["ema_generator"], f"{origin} (EMA of the generator)")
