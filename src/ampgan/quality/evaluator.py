"""The evaluator network and the quality of a generator, measured without any download.

Inception weights cannot be fetched here, and ImageNet features say little about 28-pixel
doodles anyway, so quality is measured with a domain classifier trained on the dataset itself
(the AC-GAN paper's "Inception accuracy" with a classifier of the right domain):
- evaluator accuracy: how often the evaluator recognises the class each sample was drawn for;
- Fréchet distance and KID between the evaluator's penultimate features of generated images and
  of held-out real images; the same numbers for real training vs held-out images are the floor.

The evaluator trains on a seeded 80% of the training split and is scored on the other 20%; it
is cached per dataset content and refused below MIN_EVALUATOR_ACCURACY held-out accuracy.
"""

from __future__ import annotations

import functools
import hashlib
import io
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ampgan.data import ImageDataset
from ampgan.errors import AmpganError, one_line, warn
from ampgan.files.atomic import remove_dead_temporaries, write_atomically, write_json_atomically
from ampgan.files.cache_dir import cache_dir as ampgan_cache_dir
from ampgan.files.jsonfile import parse_json
from ampgan.files.schema import COUNT, Between, has_shape
from ampgan.quality.metrics import (
    accuracy,
    class_shares,
    confusion_matrix,
    density_coverage,
    diversity_ratio,
    intra_class_diversity,
    kernel_inception_distance,
    precision_recall,
    quality_flags,
    unconditional_flags,
)
from ampgan.quality.registry import computed
from ampgan.runs.samples import drawn
from ampgan.seeds import reference_subset_seed
from ampgan.system.memory import largest_count, refuse_unless_it_fits

MIN_EVALUATOR_ACCURACY = 0.5  # 5x chance for 10 classes; a weaker classifier's features mean little
HELD_OUT_FRACTION = 0.2
MIN_TRAINING_STEPS = 150
FEATURE_DIM = 128


class Evaluator(nn.Module):
    """A small CNN: (B, C, H, W) in [-1, 1] -> (features (B, 128), class logits (B, K))."""

    def __init__(self, channels: int, num_classes: int):
        super().__init__()

        def block(cin, cout):
            return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]

        self.trunk = nn.Sequential(
            *block(channels, 32),
            nn.MaxPool2d(2),  # (B, 32, H/2, W/2)
            *block(32, 64),
            nn.MaxPool2d(2),  # (B, 64, H/4, W/4)
            *block(64, FEATURE_DIM),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),  # (B, 128)
        )
        self.head = nn.Linear(FEATURE_DIM, num_classes)

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.trunk(images)
        return features, self.head(features)


@dataclass
class TrainedEvaluator:
    network: Evaluator
    held_out_accuracy: float
    held_out_images: torch.Tensor  # uint8, the real reference set for FD/KID
    train_images: torch.Tensor  # uint8, for the real-vs-real floor
    info: dict
    held_out_labels: torch.Tensor  # for the per-class metrics
    train_labels: torch.Tensor
    class_names: tuple[str, ...]

    @functools.cached_property
    def held_out_features(self) -> np.ndarray:
        """The real reference features, computed once (every evaluation of a comparison reuses them)."""
        return _features_and_predictions(self.network, self.held_out_images)[0]


def _to_input(images_uint8: torch.Tensor) -> torch.Tensor:
    return images_uint8.float().div(127.5).sub(1.0)


# The evaluator's features are learnt by telling the data's classes apart: with one class there is nothing to
# learn (cross-entropy is 0 from the start), and with a handful of images per class the held-out accuracy
# rests on one or two images. Either way its distances would come from a network that learnt nothing.
MIN_IMAGES_PER_CLASS = 8


def check_evaluable(dataset: ImageDataset) -> None:
    """One error line when no evaluator can be trained on `dataset`, before anything is measured or trained
    (never metrics from an untrained network)."""
    counts = torch.bincount(dataset.labels, minlength=len(dataset.class_names)).tolist()
    if len(counts) < 2:
        raise AmpganError(
            f"the data has one class ({dataset.class_names[0] if dataset.class_names else 'unnamed'}): "
            "ampgan's evaluator learns its features by telling the classes apart, so it would learn "
            "nothing and its Fréchet distance, KID, precision/recall and accuracy would mean nothing; "
            "give data with two or more classes (folder:PATH, one sub-folder per class), or measure "
            "speed alone with 'ampgan bench'"
        )
    fewest = min(range(len(counts)), key=counts.__getitem__)
    if counts[fewest] < MIN_IMAGES_PER_CLASS:
        raise AmpganError(
            f"class {dataset.class_names[fewest]!r} has {counts[fewest]} image(s): the evaluator needs at "
            f"least {MIN_IMAGES_PER_CLASS} per class to learn and check its features; add images or "
            "merge the small classes, or measure speed alone with 'ampgan bench'"
        )


def split_for_evaluation(dataset: ImageDataset, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(train indices, held-out indices): a seeded, class-stratified 80/20 split."""
    generator = torch.Generator().manual_seed(seed)
    train, held_out = [], []
    for label in range(dataset.num_classes):
        indices = torch.nonzero(dataset.labels == label).flatten()
        indices = indices[torch.randperm(len(indices), generator=generator)]
        cut = max(1, int(round(len(indices) * HELD_OUT_FRACTION)))
        held_out.append(indices[:cut])
        train.append(indices[cut:])
    return torch.cat(train), torch.cat(held_out)


def evaluator_for(
    dataset: ImageDataset,
    cache_dir: Path | None = None,
    epochs: int = 8,
    seed: int = 0,
    min_accuracy: float = MIN_EVALUATOR_ACCURACY,
    device: torch.device | None = None,
) -> TrainedEvaluator:
    """The cached evaluator of this dataset (by content hash), trained first if there is none."""
    device = device or torch.device("cpu")
    check_evaluable(dataset)
    train_idx, held_idx = split_for_evaluation(dataset, seed)
    # v4: entries carry their weights' digest (v3: the one-cycle schedule, shifts and minimum steps of
    # _train_classifier); older ones are not reused.
    key = hashlib.sha256(f"{dataset.content_sha256()}:{epochs}:{seed}:v4".encode()).hexdigest()[:20]
    cache_dir = Path(cache_dir) if cache_dir else ampgan_cache_dir() / "evaluators"
    weights_path, info_path = cache_dir / f"{key}.pt", cache_dir / f"{key}.json"
    # Its first weights and its training from `seed` alone: the network was made from whatever the process's
    # random state was (a cache's retrained evaluator differed from the first: 0.72 against 0.91 held out), and
    # the training reseeded the caller's random state.
    with torch.random.fork_rng(devices=[]):  # the CPU's generator only: the network is made there, its batches drawn
        torch.random.default_generator.manual_seed(seed)
        network = Evaluator(dataset.channels, dataset.num_classes)
        info = _cached_evaluator(network, weights_path, info_path, dataset) or _train_and_keep(
            network, dataset, (train_idx, held_idx), epochs, seed, device, min_accuracy, weights_path
        )
    info = dict(info, cache=str(weights_path))
    if info["held_out_accuracy"] < min_accuracy:
        raise AmpganError(
            f"the evaluator reaches only {info['held_out_accuracy']:.2f} accuracy on held-out real images "
            f"(threshold {min_accuracy:.2f}): its features cannot judge samples of this dataset; use more data "
            f"or epochs"
        )
    network.eval().to(device)
    return TrainedEvaluator(
        network,
        info["held_out_accuracy"],
        dataset.images[held_idx],
        dataset.images[train_idx],
        info,
        dataset.labels[held_idx],
        dataset.labels[train_idx],
        tuple(dataset.class_names),
    )


def _train_and_keep(network, dataset, split, epochs, seed, device, min_accuracy, weights_path: Path) -> dict:
    """Train the evaluator on the split's first part, score it on the second, and keep it in the cache (its
    weights, then its description beside them); the description."""
    train_idx, held_idx = split
    started = time.perf_counter()
    ran = _train_classifier(network, dataset.images[train_idx], dataset.labels[train_idx], epochs, seed, device)
    network.cpu()
    _, predicted = _features_and_predictions(network, dataset.images[held_idx])
    info = {
        "held_out_accuracy": accuracy(predicted, dataset.labels[held_idx].numpy()),
        "epochs": ran,
        "train_images": len(train_idx),
        "held_out_images": len(held_idx),
        "train_seconds": round(time.perf_counter() - started, 2),
        "dataset_sha256": dataset.content_sha256(),
        "min_accuracy": min_accuracy,
    }
    buffer = io.BytesIO()
    torch.save(network.state_dict(), buffer)
    info["weights_sha256"] = hashlib.sha256(buffer.getvalue()).hexdigest()
    try:
        write_atomically(weights_path, lambda stream: stream.write(buffer.getvalue()))
        write_json_atomically(weights_path.with_suffix(".json"), info)  # last: an entry without it is never reused
    except OSError as error:  # only a cache: the trained evaluator is used all the same
        warn(
            f"cannot keep the evaluator in its cache {one_line(weights_path.parent)} ({error.strerror or error}): it "
            "is used without being kept, and trained again next time; set AMPGAN_CACHE_DIR to a writable folder"
        )
    return info


# Its figures are copied into quality.json: a damaged one (train_seconds -8.07 or "x") was written there as the
# evaluator's, the entry trusted (the damage fuzzer's checked "ok").
_INFO_SHAPE = {
    "held_out_accuracy": Between(0.0, 1.0),
    "epochs": COUNT,
    "train_images": COUNT,
    "held_out_images": COUNT,
    "dataset_sha256": str,
    "weights_sha256": str,
    "?train_seconds": Between(0.0, math.inf),
    "?min_accuracy": Between(0.0, 1.0),
}


def _cached_evaluator(network: Evaluator, weights_path: Path, info_path: Path, dataset: ImageDataset) -> dict | None:
    """The cached evaluator's info with its weights loaded into `network`, or None (trained anew) when
    there is none, or the entry does not hold what it claims: weights of another digest (replaced, cut
    short or damaged), info of another dataset or of the wrong shape. The cache is ampgan's own and
    rebuildable: a bad entry is replaced, with a warning line, never trusted and never fatal."""
    remove_dead_temporaries(weights_path.parent)  # an entry's write killed midway left its temporary file
    if not (weights_path.is_file() and info_path.is_file()):
        return None
    try:
        blob = weights_path.read_bytes()
        info = parse_json(info_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        info, blob = None, b""
    reason = None
    if not has_shape(info, _INFO_SHAPE):
        reason = "its description is damaged or from an older ampgan"
    elif info["weights_sha256"] != hashlib.sha256(blob).hexdigest():
        reason = "its weights are not the ones it was saved with"
    elif info["dataset_sha256"] != dataset.content_sha256():
        reason = "it was trained on other data"
    else:
        try:
            network.load_state_dict(torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True))
        except Exception:  # noqa: BLE001 - any unreadable weights mean: train anew
            reason = "its weights cannot be loaded"
    if reason is not None:
        warn(f"the cached evaluator {weights_path} is not usable ({reason}): training it anew")
        return None
    return info


def _train_classifier(network, images, labels, epochs, seed, device, batch_size=128) -> int:
    """Adam under a one-cycle learning-rate schedule, each batch shifted by up to 2 pixels; returns the
    epochs it ran (at least MIN_TRAINING_STEPS steps in all).

    Measured on the six-class Quick, Draw! sample (16200 drawings, 8 epochs, seed 0): a constant
    learning rate reached 0.742 held-out accuracy, the one-cycle schedule 0.946, with the shifts 0.952
    (16 epochs: 0.957, for twice the time). A judge that misreads a quarter of real drawings would cap
    every accuracy it reports."""
    network.to(device).train()
    optimizer = torch.optim.Adam(network.parameters(), lr=2e-3)
    batches_per_epoch = (len(labels) + batch_size - 1) // batch_size
    # A one-cycle schedule spends its first and last steps at a small learning rate: a small dataset
    # gets more epochs, so that the schedule has room (digits: 17 epochs of 9 batches).
    epochs = max(epochs, -(-MIN_TRAINING_STEPS // batches_per_epoch))
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=epochs * batches_per_epoch)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        order = torch.randperm(len(labels), generator=generator)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            shift_y, shift_x = torch.randint(-2, 3, (2,), generator=generator).tolist()
            inputs = torch.roll(_to_input(images[batch]), shifts=(shift_y, shift_x), dims=(2, 3))
            _, logits = network(inputs.to(device))
            loss = torch.nn.functional.cross_entropy(logits, labels[batch].to(device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
    network.eval()
    return epochs


@torch.no_grad()
def _features_and_predictions(network: Evaluator, images: torch.Tensor, batch_size: int = 500):
    device = next(network.parameters()).device
    features, predictions = [], []
    for start in range(0, len(images), batch_size):
        batch = images[start : start + batch_size]
        batch = _to_input(batch) if batch.dtype == torch.uint8 else batch.float()
        f, logits = network(batch.to(device))
        features.append(f.cpu())
        predictions.append(logits.argmax(1).cpu())
    return torch.cat(features).numpy().astype(np.float64), torch.cat(predictions).numpy()


def refuse_samples_that_cannot_fit(count: int, image_shape: tuple[int, int, int], request: str) -> None:
    """One error line, before any sample is drawn, when `count` samples cannot be held at once (the images
    in fp32 and their labels, a lower bound: the evaluator's features come on top). `request`: the setting
    as the user gives it: '--samples' or '--set compare.eval_samples='."""
    bytes_each = math.prod(image_shape) * 4 + 8
    largest = largest_count(bytes_each)
    given = "" if request.endswith("=") else " "
    refuse_unless_it_fits(
        f"{request}{given}{count}",
        count * bytes_each,
        "the samples, held at once to be scored",
        f"use {request}{given}{largest} or fewer" if largest >= 2 else "free memory, or use a machine with more",
    )


def generate_evenly(
    gan, num_classes: int, count: int, seed: int, device, autocast=None, batch_size: int = 500, real=None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`count` samples of the GAN (gan/contract.py) from seeded noise (its own distribution), float images
    in [-1, 1] on the CPU (runs/samples.py drawn), with the classes they were drawn for in equal shares (None
    for an unconditional GAN: its samples have no intended class). `real`: uint8 images an image-to-image G
    translates (GAN.inputs_for: the evaluator's held-out set)."""
    labels = torch.arange(count) % num_classes if gan.conditional else None
    z = gan.inputs_for(count, torch.Generator().manual_seed(seed), real)
    return drawn(gan, z, labels, device, autocast, batch_size), labels


def quality_of_images(
    evaluator: TrainedEvaluator, images: torch.Tensor, intended: torch.Tensor | None, translated: bool = False
) -> dict:
    """Every quality figure of generated images against the held-out real set: Fréchet distance, KID,
    precision/recall and density/coverage; for a conditional GAN (`intended`: the classes the images
    were drawn for) the evaluator's accuracy on them, the same per class, each class's diversity, the
    confusion matrix and its flags; for an unconditional one (`intended` None) the overall diversity,
    the share of each class the evaluator reads, and flags for collapse and dropped modes (`translated`: the
    images are an image-to-image G's translations of the held-out images, and the flags say so)."""
    features, predicted = _features_and_predictions(evaluator.network, images)
    real_features = evaluator.held_out_features
    kid, kid_std = kernel_inception_distance(features, real_features)
    quality = computed(images, features, real_features) | {"kid": kid, "kid_std": kid_std, "samples": len(images)}
    if intended is None:
        return quality | unconditional_metrics(features, predicted, real_features, evaluator, translated)
    return (
        {"evaluator_accuracy": accuracy(predicted, intended.numpy())}
        | quality
        | manifold_and_class_metrics(
            features,
            intended.numpy(),
            predicted,
            real_features,
            evaluator.held_out_labels.numpy(),
            evaluator.class_names,
        )
    )


def unconditional_metrics(
    features: np.ndarray,
    predicted: np.ndarray,
    real_features: np.ndarray,
    evaluator: TrainedEvaluator,
    translated: bool = False,
) -> dict:
    """Precision/recall, density/coverage, diversity against real images, and the classes read."""
    diversity = diversity_ratio(features, real_features)
    names = list(evaluator.class_names)
    shares = class_shares(predicted, len(names))
    return _manifold(features, real_features) | {
        "diversity": diversity,
        "class_shares": [round(float(s), 4) for s in shares],
        "flags": unconditional_flags(
            diversity, shares, class_shares(evaluator.held_out_labels.numpy(), len(names)), names, translated
        ),
    }


_MANIFOLD_K = 5  # the larger of the two k's: precision/recall use 3, density/coverage 5


def _manifold(features: np.ndarray, real_features: np.ndarray) -> dict:
    """Precision/recall (k=3) and density/coverage (k=5) on as many samples as real images (the k-NN radii
    depend on the set sizes, so equal sizes keep them comparable); none when k-NN radii cannot be had (they
    need more than k points: tiny datasets have fewer)."""
    chosen = np.random.default_rng(0).choice(len(features), min(len(features), len(real_features)), replace=False)
    if len(chosen) <= _MANIFOLD_K:
        return {}
    return precision_recall(real_features, features[chosen]) | density_coverage(real_features, features[chosen])


def manifold_and_class_metrics(
    features: np.ndarray,
    intended: np.ndarray,
    predicted: np.ndarray,
    real_features: np.ndarray,
    real_labels: np.ndarray,
    class_names,
) -> dict:
    """Precision/recall (k=3) and density/coverage (k=5) on as many samples as real images (the
    k-NN radii depend on the set sizes, so equal sizes keep them comparable), overall and per class."""
    num_classes = len(class_names)
    diversity = intra_class_diversity(features, intended, real_features, real_labels, num_classes)
    confusion = confusion_matrix(intended, predicted, num_classes)
    per_class = []
    for label in range(num_classes):
        mine, reals = features[intended == label], real_features[real_labels == label]
        row = {
            "class": class_names[label],
            "accuracy": float((predicted[intended == label] == label).mean()) if len(mine) else None,
            "diversity": diversity[label],
        }
        if len(mine) > _MANIFOLD_K and len(reals) > _MANIFOLD_K:
            mine = mine[: len(reals)]  # as many samples as real images
            row |= precision_recall(reals, mine) | {"coverage": density_coverage(reals, mine)["coverage"]}
        per_class.append(row)
    return _manifold(features, real_features) | {
        "per_class": per_class,
        "confusion": confusion.tolist(),
        "flags": quality_flags(diversity, confusion, list(class_names)),
    }


def reference_floor(evaluator: TrainedEvaluator, count: int) -> dict:
    """The same metrics for real training images vs the held-out set: what a perfect generator scores."""
    count = min(count, len(evaluator.train_images))
    chosen = torch.randperm(
        len(evaluator.train_images), generator=torch.Generator().manual_seed(reference_subset_seed())
    )[:count]
    real_features, predicted = _features_and_predictions(evaluator.network, evaluator.train_images[chosen])
    held_features = evaluator.held_out_features
    kid, kid_std = kernel_inception_distance(real_features, held_features)
    metrics = manifold_and_class_metrics(
        real_features,
        evaluator.train_labels[chosen].numpy(),
        predicted,
        held_features,
        evaluator.held_out_labels.numpy(),
        evaluator.class_names,
    )
    return computed(_to_input(evaluator.train_images[chosen]), real_features, held_features) | {
        "evaluator_accuracy": evaluator.held_out_accuracy,
        "kid": kid,
        "kid_std": kid_std,
        "samples": count,
        **{key: metrics[key] for key in ("precision", "recall", "density", "coverage") if key in metrics},
        "diversity": [row["diversity"] for row in metrics["per_class"]],
        "class_shares": [
            round(float(v), 4) for v in class_shares(evaluator.held_out_labels.numpy(), len(evaluator.class_names))
        ],
    }
