"""`ampgan data info|grid`: look at a dataset before training on it."""

from __future__ import annotations

import click

from ampgan.cli.options import ShellPath, WholeNumber, compose, spec_options
from ampgan.data import DataConfig, ImageDataset, load_dataset
from ampgan.errors import one_line, say

_options = compose(
    click.argument("dataset"),
    click.option("--split", type=click.Choice(["train", "test"]), default="train", show_default=True),
    # Every data setting but the dataset (the argument), each with a flag: this command has no --set.
    spec_options(parts=tuple(f"data.{name}" for name in DataConfig.field_names()[1:]) + ("seed",), with_set=False),
)


def _load(options: dict) -> ImageDataset:
    return load_dataset(
        DataConfig(
            dataset=options["dataset"],
            data_dir=options["data_dir"],
            classes=options["classes"],
            max_per_class=options["max_per_class"],
            image_size=options["image_size"],
            channels=options["channels"],
            download=bool(options["download"]),
            cache=bool(options["cache"]),
        ),
        options["split"],
        seed=options["seed"] or 0,
    )


@click.group("data")
def command() -> None:
    """Look at a dataset before training on it."""


@command.command("info")
@_options
def info(**options) -> None:
    """Classes, counts, image size, source and checksum state."""
    dataset = _load(options)
    source = dataset.source
    say(
        f"{options['dataset']} ({options['split']}): {len(dataset)} images, "
        f"{dataset.channels}x{dataset.image_size}x{dataset.image_size} uint8, "
        f"{dataset.images.numel() / 2**20:.1f} MiB in memory"
    )
    names = [one_line(name) for name in dataset.class_names]  # escaped first: the column fits what is shown
    width = max(len(name) for name in names)
    say(
        *(f"  {name:<{width}}  {count:>7}" for name, count in zip(names, dataset.counts_per_class())),
        f"source: {source.get('origin', source.get('generator', source.get('name')))}",
    )
    if "md5" in source:
        say(f"checksums: MD5 of {len(source['md5'])} files verified against the published values")
    elif "manifest" in source:
        say(f"checksums: SHA-256 of {len(source['sha256'])} files match the manifest {source['manifest']}")
    elif isinstance(source.get("sha256"), dict):
        say(f"checksums: SHA-256 recorded for {', '.join(source['sha256'])} (no published values to check against)")
    if "cache" in source:
        say(f"cache: {source['cache']} ({'hit' if source.get('cache_hit') else 'written'})")
    say(f"content SHA-256: {dataset.content_sha256()}")


@command.command("grid")
@_options
@click.option("--out", type=ShellPath(), required=True, help="PNG file to write.")
@click.option("--overwrite", is_flag=True, help="Replace --out if it exists.")
@click.option("--per-class", type=WholeNumber(), default=8, show_default=True)
def grid(out, overwrite, per_class, **options) -> None:
    """Save a grid of real images, one row per class."""
    from ampgan.data.grid import class_rows_grid
    from ampgan.files.images import save_png
    from ampgan.runs.claim import output_file, outside_data

    out = output_file(out, (".png",), overwrite)  # checked before the data is read; never replaced by surprise
    outside_data(out, DataConfig(dataset=options["dataset"]).folders_read, "data grid")
    dataset = _load(options)
    save_png(class_rows_grid(dataset, per_class, options["seed"] or 0), out)
    say(f"wrote {out}: {dataset.num_classes} classes x {per_class} images ({', '.join(dataset.class_names)})")
