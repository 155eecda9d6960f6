"""Why does the AC-GAN not learn digits? Train variants for the same budget and measure each.

    python benchmarks/gan_trials.py --variants ampgan-default,real-class-only --seconds 60 --seeds 0,1

Each variant changes the config (or, for the minibatch-std D, patches the model; listed in VARIANTS),
trains bf16 at batch 64 on `digits` (or `--set 'dataset="quickdraw"' ...`) for the budget, then reports the evaluator's quality figures: accuracy on
the intended classes, precision/recall, coverage, per-class diversity relative to real images,
and the flags (collapse, permutation). Samples go to OUT/<variant>-seed<N>.png. Variants that
paid were made ampgan's defaults; this script keeps the record of what was tried.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

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
        def __init__(self, shape, **options):
            super().__init__(shape, **options)
            features = self.real_fake_head.in_features
            self.real_fake_head = torch.nn.Linear(features + 1, 1)
            self.class_head = torch.nn.Linear(features + 1, shape.num_classes)

        def forward(self, images):
            features = self.features(images)
            spread = features.float().std(dim=0, unbiased=False).mean().expand(features.shape[0], 1)
            features = torch.cat([features, spread.to(features.dtype)], dim=1)
            return self.real_fake_head(features).squeeze(1), self.class_head(features)

    return lambda: patched(state_module, "Discriminator", MinibatchStdDiscriminator)


# The defaults before spectral norm and smoothing became ampgan's (the digits rows of the README's table
# were measured on top of these): a plain D and real labels of 1.
_PLAIN_D = dict(spectral_norm_d=False, real_label=1.0)


VARIANTS = {
    # ampgan's defaults (config.py): D's class head on real images only, mode seeking 0.3, spectral
    # norm in D, real labels 0.9.
    "ampgan-default": nothing,
    # The AC-GAN as published (and ampgan 0.1): D's class head also on fakes, no mode seeking.
    "original-acgan": _config_change(**_PLAIN_D, mode_seeking=0.0, class_loss_on_fakes=True),
    "real-class-only": _config_change(**_PLAIN_D, mode_seeking=0.0),
    # Remedies for the collapse within a class, each on top of real-class-only:
    "real-class-only+g-class-0.5": _config_change(**_PLAIN_D, mode_seeking=0.0, class_weight_g=0.5),
    "real-class-only+g-class-0.2": _config_change(**_PLAIN_D, mode_seeking=0.0, class_weight_g=0.2),
    "real-class-only+smooth-0.9": _config_change(spectral_norm_d=False, mode_seeking=0.0, real_label=0.9),
    "real-class-only+lr-half": _config_change(**_PLAIN_D, mode_seeking=0.0, lr=1e-4),
    "real-class-only+mbstd": both(_config_change(**_PLAIN_D, mode_seeking=0.0), minibatch_std_discriminator()),
    "real-class-only+sn": _config_change(real_label=1.0, mode_seeking=0.0),
    "no-class-loss-for-g": _config_change(**_PLAIN_D, mode_seeking=0.0, class_weight_g=0.0),
    "mode-seeking-0.1": _config_change(**_PLAIN_D, mode_seeking=0.1),
    "plain-d-mode-seeking-0.3": _config_change(**_PLAIN_D),  # the defaults before spectral norm
    "mode-seeking-1": _config_change(**_PLAIN_D, mode_seeking=1.0),
    "mode-seeking-with-fake-class-term": _config_change(**_PLAIN_D, class_loss_on_fakes=True),
    # Against a discriminator that wins (Quick, Draw!: D tells real from fake 98% of the time):
    "spectral-norm-d": _config_change(real_label=1.0),
    "smooth-0.9": _config_change(spectral_norm_d=False),
    "lr-1e-4": _config_change(**_PLAIN_D, lr=1e-4),
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
