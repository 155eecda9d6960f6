"""Why does the AC-GAN not learn digits? Train variants for the same budget and measure each.

    python benchmarks/gan_trials.py --variants ampgan-default,real-class-only --seconds 60 --seeds 0,1

Each variant is a set of config changes (model options by their path, `model.mode_seeking`; the
minibatch-std D is a model of its own, `acgan_with_minibatch_std` below, reached through the model seam
as a user's model would be), trained bf16 at batch 64 on `digits` (or `--set data.dataset=quickdraw
...`) for the budget. Then the evaluator's quality figures: accuracy on the intended classes,
precision/recall, coverage, per-class diversity relative to real images, and the flags (collapse,
permutation). Samples go to OUT/<variant>-seed<N>.png. Variants that paid were made ampgan's
defaults; this script keeps the record of what was tried.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from ampgan.config import config_from_options, parse_set
from ampgan.data import load_dataset
from ampgan.gan.models.acgan import Discriminator, acgan
from ampgan.precisions import BF16
from ampgan.quality.evaluator import evaluator_for, generate_evenly, quality_of_images
from ampgan.training.loop import prepare_run, run_training


class MinibatchStdDiscriminator(Discriminator):
    """D's heads also see the batch's mean feature standard deviation (ProGAN's minibatch stddev,
    on the flattened features): a batch of near-identical fakes is told apart by its low spread."""

    def __init__(self, data, width, **options):
        super().__init__(data, width, **options)
        features = self.real_fake_head.in_features
        self.real_fake_head = torch.nn.Linear(features + 1, 1)
        self.class_head = torch.nn.Linear(features + 1, data.num_classes)

    def forward(self, images):
        features = self.features(images)
        spread = features.float().std(dim=0, unbiased=False).mean().expand(features.shape[0], 1)
        features = torch.cat([features, spread.to(features.dtype)], dim=1)
        return self.real_fake_head(features).squeeze(1), self.class_head(features)


def acgan_with_minibatch_std(data, **options):
    """ampgan's AC-GAN with the minibatch-std D (a model function, as a user would write one)."""
    gan = acgan(data, **options)
    gan.discriminator = MinibatchStdDiscriminator(
        data, options.get("width", 64), spectral_norm=options.get("spectral_norm_d", True)
    )
    return gan


# The defaults before spectral norm and smoothing became ampgan's (the digits rows of the README's table
# were measured on top of these): a plain D and real labels of 1.
_PLAIN_D = {"model.spectral_norm_d": False, "model.real_label": 1.0}
_NO_MS = {"model.mode_seeking": 0.0}
_MBSTD = {"model.name": f"{__file__}:acgan_with_minibatch_std"}

VARIANTS = {
    # ampgan's defaults (gan/acgan.py): D's class head on real images only, mode seeking 0.3, spectral
    # norm in D, real labels 0.9.
    "ampgan-default": {},
    # The AC-GAN as published (and ampgan 0.1): D's class head also on fakes, no mode seeking.
    "original-acgan": _PLAIN_D | _NO_MS | {"model.class_loss_on_fakes": True},
    "real-class-only": _PLAIN_D | _NO_MS,
    # Remedies for the collapse within a class, each on top of real-class-only:
    "real-class-only+g-class-0.5": _PLAIN_D | _NO_MS | {"model.class_weight_g": 0.5},
    "real-class-only+g-class-0.2": _PLAIN_D | _NO_MS | {"model.class_weight_g": 0.2},
    "real-class-only+smooth-0.9": _NO_MS | {"model.spectral_norm_d": False, "model.real_label": 0.9},
    "real-class-only+lr-half": _PLAIN_D | _NO_MS | {"optim.lr_g": 1e-4, "optim.lr_d": 1e-4},
    "real-class-only+mbstd": _MBSTD | _PLAIN_D | _NO_MS,
    "real-class-only+sn": _NO_MS | {"model.real_label": 1.0},
    "no-class-loss-for-g": _PLAIN_D | _NO_MS | {"model.class_weight_g": 0.0},
    "mode-seeking-0.1": _PLAIN_D | {"model.mode_seeking": 0.1},
    "plain-d-mode-seeking-0.3": _PLAIN_D,  # the defaults before spectral norm
    "mode-seeking-1": _PLAIN_D | {"model.mode_seeking": 1.0},
    "mode-seeking-with-fake-class-term": _PLAIN_D | {"model.class_loss_on_fakes": True},
    # Against a discriminator that wins (Quick, Draw!: D tells real from fake 98% of the time):
    "spectral-norm-d": {"model.real_label": 1.0},
    "smooth-0.9": {"model.spectral_norm_d": False},
    "lr-1e-4": _PLAIN_D | {"optim.lr_g": 1e-4, "optim.lr_d": 1e-4},
}


def train_variant(name: str, seed: int, seconds: float, out: Path, base: dict) -> dict:
    changes = VARIANTS[name]
    defaults = config_from_options(
        dataset="digits",
        precision=BF16,
        batch_size=64,
        time_budget=seconds,
        seed=seed,
        device="cpu",
        sample_every=10**9,
        checkpoint_every_steps=None,
    )
    model = {k: v for k, v in changes.items() if k == "model.name"}  # a new model first, its options after
    config = defaults.with_fields(model).with_fields(base | {k: v for k, v in changes.items() if k != "model.name"})
    dataset = load_dataset(config.data, seed=config.seed)
    prepared = prepare_run(config, dataset)
    with tempfile.TemporaryDirectory() as folder:
        result = run_training(prepared, Path(folder) / "run", show_progress=False)
        evaluator = evaluator_for(dataset)
        images, labels = generate_evenly(
            result.state.train.gan,
            dataset.num_classes,
            1000,
            seed=1234,
            device="cpu",
            autocast=prepared.policy.autocast,
        )
        quality = quality_of_images(evaluator, images, labels)
        grid_src = Path(folder) / "run" / "samples"
        grids = sorted(grid_src.glob("step-*.png"))
        if grids:
            (out / f"{name}-seed{seed}.png").write_bytes(grids[-1].read_bytes())
    diversity = [row["diversity"] for row in quality["per_class"]]
    return {
        "variant": name,
        "seed": seed,
        "steps": result.steps,
        "accuracy": round(quality["evaluator_accuracy"], 3),
        "precision": round(quality["precision"], 3),
        "recall": round(quality["recall"], 3),
        "coverage": round(quality["coverage"], 3),
        "density": round(quality["density"], 3),
        "frechet": round(quality["frechet_distance"], 2),
        "diversity_mean": round(float(np.mean([d for d in diversity if d is not None])), 3),
        "diversity_min": round(float(np.min([d for d in diversity if d is not None])), 3),
        "last": {
            k: result.last_record.get(k)
            for k in ("loss_d", "loss_g", "d_real_acc", "d_fake_acc", "class_acc_real", "class_acc_fake")
        },
        "flags": quality["flags"],
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="ampgan-default", help=f"comma-separated, of: {', '.join(VARIANTS)}")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--out", type=Path, default=Path("runs/gan-trials"))
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        help="section.field=value for every variant, as ampgan's --set, e.g. data.dataset=quickdraw",
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    base = dict(parse_set(item) for item in args.set)
    for name in args.variants.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            row = train_variant(name, seed, args.seconds, args.out, base)
            print(json.dumps(row), flush=True)
            with open(args.out / "trials.jsonl", "a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    sys.exit(main())
