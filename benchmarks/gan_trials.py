"""Why does the AC-GAN not learn digits? Train variants for the same budget and measure each.

    python benchmarks/gan_trials.py --variants baseline,real-class-only --seconds 60 --seeds 0,1

Each variant patches one thing of the step or the model (listed in VARIANTS), trains bf16 at
batch 64 on `digits` for the budget, then reports the evaluator's quality figures: accuracy on
the intended classes, precision/recall, coverage, per-class diversity relative to real images,
and the flags (collapse, permutation). Samples go to OUT/<variant>-seed<N>.png. Variants that
paid were made ampgan's defaults; this script keeps the record of what was tried.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ampgan.config import TrainConfig
from ampgan.data import load_dataset
from ampgan.quality.evaluator import evaluator_for, generate_evenly, quality_of_images
from ampgan.training.loop import prepare_run, run_training


@contextlib.contextmanager
def nothing():
    yield {}


@contextlib.contextmanager
def patched(module, name, value):
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        yield {}
    finally:
        setattr(module, name, original)


def _config_change(**changes):
    @contextlib.contextmanager
    def change():
        yield changes
    return change


def knobbed_step(d_class_on_fakes=1.0, g_class_weight=1.0, real_label=1.0, d_class_on_real=1.0, mode_seeking=0.0):
    """ampgan's train_step with the loss terms weighted (the variants' knobs); same order of work."""
    from ampgan.training.step import _class_loss, _real_fake_loss, _set_requires_grad

    def smoothed_real(logits):
        logits = logits.float()
        return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, real_label))

    def train_step(state, real, labels):
        G, D, policy = state.run_generator, state.run_discriminator, state.policy
        shape = state.generator.shape
        batch = real.shape[0]
        z = torch.randn(batch, shape.z_dim, device=real.device, generator=state.rng)
        fake_labels = torch.randint(shape.num_classes, (batch,), device=real.device, generator=state.rng)
        if mode_seeking:
            half = batch // 2  # pairs (i, i + half) share a class and differ in z
            fake_labels = torch.cat([fake_labels[:half], fake_labels[:batch - half]])
        state.optimizer_d.zero_grad(set_to_none=True)
        with policy.autocast():
            fake = G(z, fake_labels)
            rf_real, class_real = D(real)
            loss_d_real = smoothed_real(rf_real) + d_class_on_real * _class_loss(class_real, labels)
        state.scaler_d.backward(loss_d_real)
        with policy.autocast():
            rf_fake, class_fake = D(fake.detach())
            loss_d_fake = _real_fake_loss(rf_fake, False) + d_class_on_fakes * _class_loss(class_fake, fake_labels)
        state.scaler_d.backward(loss_d_fake)
        skipped_d = state.scaler_d.step(state.optimizer_d)
        _set_requires_grad(state.discriminator, False)
        try:
            with policy.autocast():
                rf_g, class_g = state.run_discriminator_for_g(fake)
                loss_g = _real_fake_loss(rf_g, True) + g_class_weight * _class_loss(class_g, fake_labels)
                if mode_seeking:
                    half = batch // 2
                    images = fake.float()
                    ratio = ((images[:half] - images[half:2 * half]).abs().mean()
                             / (z[:half] - z[half:2 * half]).abs().mean())
                    loss_g = loss_g + mode_seeking / (ratio + 1e-5)
            state.optimizer_g.zero_grad(set_to_none=True)
            skipped_g = state.scaler_g.backward_and_step(loss_g, state.optimizer_g)
        finally:
            _set_requires_grad(state.discriminator, True)
        state.step += 1
        with torch.no_grad():
            return {"loss_d": (loss_d_real + loss_d_fake).detach(), "loss_g": loss_g.detach(),
                    "d_real_acc": (rf_real > 0).float().mean(), "d_fake_acc": (rf_fake < 0).float().mean(),
                    "class_acc_real": (class_real.argmax(1) == labels).float().mean(),
                    "class_acc_fake": (class_fake.argmax(1) == fake_labels).float().mean(),
                    "skipped_d": skipped_d, "skipped_g": skipped_g}

    return train_step


def step_variant(**knobs):
    import ampgan.training.loop as loop

    return lambda: patched(loop, "train_step", knobbed_step(**knobs))


def both(*variants):
    @contextlib.contextmanager
    def combined():
        changes = {}
        with contextlib.ExitStack() as stack:
            for variant in variants:
                changes |= stack.enter_context(variant())
            yield changes
    return combined


def minibatch_std_discriminator():
    """D's heads also see the batch's mean feature standard deviation (ProGAN's minibatch stddev,
    on the flattened features): a batch of near-identical fakes is told apart by its low spread."""
    import ampgan.training.state as state_module
    from ampgan.training.models import Discriminator

    class MinibatchStdDiscriminator(Discriminator):
        def __init__(self, shape):
            super().__init__(shape)
            features = self.real_fake_head.in_features
            self.real_fake_head = torch.nn.Linear(features + 1, 1)
            self.class_head = torch.nn.Linear(features + 1, shape.num_classes)

        def forward(self, images):
            features = self.features(images)
            spread = features.float().std(dim=0, unbiased=False).mean().expand(features.shape[0], 1)
            features = torch.cat([features, spread.to(features.dtype)], dim=1)
            return self.real_fake_head(features).squeeze(1), self.class_head(features)

    return lambda: patched(state_module, "Discriminator", MinibatchStdDiscriminator)


def spectral_norm_discriminator():
    import ampgan.training.state as state_module
    from ampgan.training.models import Discriminator

    class SpectralDiscriminator(Discriminator):
        def __init__(self, shape):
            super().__init__(shape)
            for index, layer in enumerate(self.features):
                if isinstance(layer, torch.nn.Conv2d):
                    self.features[index] = torch.nn.utils.parametrizations.spectral_norm(layer)
            self.real_fake_head = torch.nn.utils.parametrizations.spectral_norm(self.real_fake_head)

    return lambda: patched(state_module, "Discriminator", SpectralDiscriminator)


VARIANTS = {
    # ampgan's defaults: D's class head on real images only, mode seeking 0.3 (config.py).
    "ampgan-default": nothing,
    # The AC-GAN as published (and ampgan 0.1): D's class head also on fakes, no mode seeking.
    "original-acgan": _config_change(mode_seeking=0.0, class_loss_on_fakes=True),
    "real-class-only": _config_change(mode_seeking=0.0),
    # Remedies for the collapse within a class, each on top of real-class-only:
    "real-class-only+g-class-0.5": step_variant(d_class_on_fakes=0.0, g_class_weight=0.5),
    "real-class-only+g-class-0.2": step_variant(d_class_on_fakes=0.0, g_class_weight=0.2),
    "real-class-only+smooth-0.9": step_variant(d_class_on_fakes=0.0, real_label=0.9),
    "real-class-only+lr-half": both(_config_change(mode_seeking=0.0), _config_change(lr=1e-4)),
    "real-class-only+mbstd": both(_config_change(mode_seeking=0.0), minibatch_std_discriminator()),
    "real-class-only+sn": both(_config_change(mode_seeking=0.0), spectral_norm_discriminator()),
    "no-class-loss-for-g": step_variant(d_class_on_fakes=0.0, g_class_weight=0.0),
    "mode-seeking-0.1": _config_change(mode_seeking=0.1),
    "mode-seeking-1": _config_change(mode_seeking=1.0),
    "mode-seeking-with-fake-class-term": _config_change(class_loss_on_fakes=True),
    # Against a discriminator that wins (Quick, Draw!: D tells real from fake 98% of the time):
    "spectral-norm-d": spectral_norm_discriminator(),
    "smooth-0.9": step_variant(d_class_on_fakes=0.0, mode_seeking=0.3, real_label=0.9),
    "lr-1e-4": _config_change(lr=1e-4),
    "spectral-norm-d+smooth-0.9": both(spectral_norm_discriminator(),
                                       step_variant(d_class_on_fakes=0.0, mode_seeking=0.3, real_label=0.9)),
}


def train_variant(name: str, seed: int, seconds: float, out: Path, base: dict) -> dict:
    with VARIANTS[name]() as changes:
        values = dict(dataset="digits", precision="bf16", batch_size=64, time_budget_s=seconds, seed=seed,
                      device="cpu", sample_every=10**9, checkpoint_every_steps=None) | base | changes
        config = TrainConfig(**values)
        dataset = load_dataset(config.dataset, config.data_request())
        prepared = prepare_run(config, dataset)
        with tempfile.TemporaryDirectory() as folder:
            result = run_training(prepared, Path(folder) / "run", show_progress=False)
            generator = result.state.train.generator
            evaluator = evaluator_for(dataset)
            images, labels = generate_evenly(generator, dataset.num_classes, 1000, config.z_dim, seed=1234,
                                             device="cpu", autocast=prepared.policy.autocast)
            quality = quality_of_images(evaluator, images, labels)
            if os.environ.get("TRIALS_TRAIN_MODE_TOO"):
                generator.train()
                with torch.no_grad(), prepared.policy.autocast():
                    rng = torch.Generator().manual_seed(1234)
                    z = torch.randn(1000, config.z_dim, generator=rng)
                    train_mode = generator(z, labels).float()
                in_train_mode = quality_of_images(evaluator, train_mode, labels)
                print("train-mode batch-norm:", json.dumps({k: round(in_train_mode[k], 3) for k in
                      ("evaluator_accuracy", "recall", "coverage", "precision")}),
                      [round(r["diversity"], 2) for r in in_train_mode["per_class"]], flush=True)
            grid_src = Path(folder) / "run" / "samples"
            grids = sorted(grid_src.glob("step-*.png"))
            if grids:
                (out / f"{name}-seed{seed}.png").write_bytes(grids[-1].read_bytes())
    diversity = [row["diversity"] for row in quality["per_class"]]
    return {"variant": name, "seed": seed, "steps": result.steps,
            "accuracy": round(quality["evaluator_accuracy"], 3), "precision": round(quality["precision"], 3),
            "recall": round(quality["recall"], 3), "coverage": round(quality["coverage"], 3),
            "density": round(quality["density"], 3), "frechet": round(quality["frechet_distance"], 2),
            "diversity_mean": round(float(np.mean([d for d in diversity if d is not None])), 3),
            "diversity_min": round(float(np.min([d for d in diversity if d is not None])), 3),
            "last": {k: result.last_record.get(k) for k in ("loss_d", "loss_g", "d_real_acc", "d_fake_acc",
                                                             "class_acc_real", "class_acc_fake")},
            "flags": quality["flags"]}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="ampgan-default", help=f"comma-separated, of: {', '.join(VARIANTS)}")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--out", type=Path, default=Path("runs/gan-trials"))
    parser.add_argument("--set", action="append", default=[],
                        help='config field=JSON value for every variant, e.g. dataset=\"quickdraw\"')
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    base = {}
    for item in args.set:
        key, value = item.split("=", 1)
        base[key] = json.loads(value)
    for name in args.variants.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            row = train_variant(name, seed, args.seconds, args.out, base)
            print(json.dumps(row), flush=True)
            with open(args.out / "trials.jsonl", "a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    sys.exit(main())
