"""The `ampgan` command: parse, validate, call one function per subcommand.

Every user-fixable problem becomes one `error:` line and exit code 2; warnings are one
`warning:` line each. Tracebacks are for bugs only.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sys
import warnings
from pathlib import Path

import click

from ampgan.config import PRECISIONS, TrainConfig, parse_duration, parse_loss_scale
from ampgan.errors import AmpganError, AmpganWarning
from ampgan.interruption import TrainingInterrupted
from ampgan.precision import build_policy, resolve_device

EXIT_USAGE = 2


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    if issubclass(category, AmpganWarning):
        click.echo(f"warning: {message}", err=True)
    else:
        click.echo(warnings.formatwarning(message, category, filename, lineno, line).rstrip(), err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ampgan")
def cli() -> None:
    """Does mixed precision make my GAN train faster and cheaper, without making it worse?"""


# CLI option name -> TrainConfig field, for options that map one to one.
_TRAIN_FIELDS = {
    "dataset": "dataset", "precision": "precision", "batch_size": "batch_size", "steps": "steps",
    "seed": "seed", "device": "device", "sample_every": "sample_every", "log_every": "log_every",
    "image_size": "image_size", "channels": "channels", "data_dir": "data_dir", "width": "width",
    "z_dim": "z_dim", "lr": "lr", "tensorboard": "tensorboard", "keep": "keep",
    "channels_last": "channels_last", "compile": "compile", "classes": "classes",
    "max_per_class": "max_per_class", "download": "download", "cache": "cache", "sync_bn": "sync_bn",
}


def _train_config_values(options: dict) -> dict:
    """TrainConfig fields from the parsed options (durations and loss scale parsed here)."""
    values = {field: options[name] for name, field in _TRAIN_FIELDS.items() if name in options}
    values["loss_scale"] = parse_loss_scale(options["loss_scale"]) if (
        options["precision"] == "fp16" or options["loss_scale"] != "dynamic") else None
    values["time_budget_s"] = parse_duration(options["time_budget"]) if options["time_budget"] else None
    every = options["checkpoint_every"].strip().lower()
    if every.isdigit():
        values["checkpoint_every_steps"], values["checkpoint_every_s"] = int(every), None
    else:
        values["checkpoint_every_steps"], values["checkpoint_every_s"] = None, parse_duration(every)
    return values


def _relaunch_under_torchrun(nproc: int) -> None:
    """`--nproc N` outside torchrun: start N processes of the same command; inside: refuse."""
    from ampgan.distributed import launch_with_torchrun, launched_by_torchrun

    if nproc < 1:
        raise AmpganError(f"--nproc must be at least 1, got {nproc}")
    if launched_by_torchrun():
        raise AmpganError("--nproc is for launching on this machine; under torchrun use its --nproc-per-node instead")
    argv = []
    skip = False
    for index, word in enumerate(_ARGV):
        if skip:
            skip = False
            continue
        if word == "--nproc":
            skip = True
            continue
        if word.startswith("--nproc="):
            continue
        argv.append(word)
    sys.exit(launch_with_torchrun(nproc, argv))


_ARGV: list[str] = []


def _claim_on_main_rank(out: Path, overwrite: bool, device) -> None:
    """Rank 0 alone claims the run folder; the other ranks learn whether it could, instead of
    waiting in the first collective for a rank that has already exited."""
    from ampgan.distributed import any_rank, world
    from ampgan.run_folder import claim_run_dir

    failure = None
    if world().is_main:
        try:
            claim_run_dir(out, overwrite)
        except AmpganError as error:
            failure = error
    (failed,) = any_rank([failure is not None], device)
    if failure is not None:
        raise failure
    if failed:
        raise AmpganError("rank 0 could not claim the run folder (see its message)")


def _given_on_command_line(ctx: click.Context) -> set[str]:
    return {name for name in ctx.params
            if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE}


def _resumed_config(run_dir: Path, options: dict, given: set[str]) -> TrainConfig:
    """The run's own config, with only the options that are safe to change taken from the command line."""
    from ampgan.config import SAFE_TO_CHANGE_ON_RESUME
    from ampgan.run_folder import read_run_config

    saved = read_run_config(run_dir)["config"]
    requested = _train_config_values(options)
    option_of = {field: name for name, field in _TRAIN_FIELDS.items()} | {
        "loss_scale": "loss_scale", "time_budget_s": "time_budget",
        "checkpoint_every_steps": "checkpoint_every", "checkpoint_every_s": "checkpoint_every"}
    merged = dict(saved)
    for field, value in requested.items():
        if option_of.get(field) not in given or value == saved.get(field):
            continue
        if field not in SAFE_TO_CHANGE_ON_RESUME:
            raise AmpganError(
                f"--{option_of[field].replace('_', '-')} {value} differs from the run's {saved.get(field)} and would make "
                f"the resumed run a different experiment: drop it, or start a new run with --out"
            )
        merged[field] = value
    if "time_budget" in given and "steps" not in given:
        merged["steps"] = None  # a new budget given as time alone replaces the run's step budget
    return TrainConfig.from_dict(merged)


@cli.command()
@click.option("--dataset", default="digits", show_default=True, help="digits (embedded), synthetic, ...")
@click.option("--precision", default="fp32", show_default=True, help=f"One of {', '.join(PRECISIONS)}.")
@click.option("--loss-scale", default="dynamic", show_default=True,
              help="fp16 only: 'dynamic' (GradScaler) or a fixed number such as 128.")
@click.option("--batch-size", type=int, default=64, show_default=True)
@click.option("--steps", type=int, default=None, help="Stop after this many steps (default 1000 if no --time-budget).")
@click.option("--time-budget", default=None, help="Stop after this much training wall time, e.g. 7m, 90s, 1h.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default="auto", show_default=True, help="auto, cpu or cuda.")
@click.option("--out", "out", type=click.Path(path_type=Path), default=None,
              help="Run folder (default runs/<dataset>-<precision>-<time>).")
@click.option("--overwrite", is_flag=True, help="Replace an existing, non-empty run folder.")
@click.option("--resume", type=click.Path(path_type=Path), default=None,
              help="Continue the run in this folder from its last checkpoint.")
@click.option("--checkpoint-every", default="500", show_default=True,
              help="Steps (500) or training time (10m) between checkpoints.")
@click.option("--keep", type=int, default=3, show_default=True, help="How many recent checkpoints to keep.")
@click.option("--sample-every", type=int, default=500, show_default=True, help="Steps between sample grids.")
@click.option("--log-every", type=int, default=10, show_default=True, help="Steps between metric records.")
@click.option("--image-size", type=int, default=None, help="28, 32 or 64 (default: the dataset's).")
@click.option("--channels", type=int, default=None, help="1 or 3 (default: the dataset's).")
@click.option("--data-dir", default=None, help="Where a file-based dataset lives (cifar10, quickdraw, mnist).")
@click.option("--classes", default=None, help="Quick, Draw! classes, comma-separated (default: the study's ten).")
@click.option("--max-per-class", type=int, default=None, help="Quick, Draw!: rows read per class (default 10000).")
@click.option("--download", is_flag=True, help="Fetch missing dataset files (cifar10, quickdraw).")
@click.option("--cache", is_flag=True, help="folder:PATH: keep a verified .npz cache next to the images.")
@click.option("--width", type=int, default=64, show_default=True, help="Network width w (channels w, 2w, 4w).")
@click.option("--z-dim", type=int, default=128, show_default=True, help="Noise size.")
@click.option("--lr", type=float, default=2e-4, show_default=True)
@click.option("--channels-last", is_flag=True, help="NHWC memory format for the convolutions.")
@click.option("--compile", is_flag=True, help="torch.compile the networks.")
@click.option("--nproc", type=int, default=1, show_default=True,
              help="Data-parallel processes on this machine (launches torchrun); --batch-size is per process.")
@click.option("--sync-bn", is_flag=True, help="With several processes: SyncBatchNorm (CUDA only).")
@click.option("--tensorboard", is_flag=True, help="Also write TensorBoard event files.")
@click.option("--dry-run", is_flag=True, help="Print the resolved config and exit.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.pass_context
def train(ctx: click.Context, **options) -> None:
    """Train an AC-GAN in one precision and write a run folder."""
    from ampgan.checkpoint import latest_checkpoint, load_checkpoint
    from ampgan.train import DEFAULT_STEPS, prepare_run, run_training

    if options["nproc"] != 1:
        _relaunch_under_torchrun(options["nproc"])
    resume_dir = options["resume"]
    if resume_dir is not None:
        if options["out"] is not None and Path(options["out"]) != resume_dir:
            raise AmpganError("--resume continues the run in its own folder: drop --out")
        config = _resumed_config(resume_dir, options, _given_on_command_line(ctx))
        out = resume_dir
    else:
        config = TrainConfig(**_train_config_values(options))
        out = options["out"] or Path("runs") / f"{config.dataset}-{config.precision}-{dt.datetime.now():%Y%m%d-%H%M%S}"
    prepared = prepare_run(config)
    if options["dry_run"]:
        budget = config.to_dict()
        if not config.budget_is_set:
            budget["steps"] = DEFAULT_STEPS
        click.echo(json.dumps({
            "config": budget,
            "precision": prepared.policy.describe(),
            "device": str(prepared.policy.device),
            "dataset": {"images": len(prepared.dataset), "classes": list(prepared.dataset.class_names),
                        "image_shape": [prepared.dataset.channels, prepared.dataset.image_size,
                                        prepared.dataset.image_size]},
            "out": str(out),
            "resume": str(resume_dir) if resume_dir else None,
        }, indent=2))
        return
    payload = None
    if resume_dir is not None:
        checkpoint = latest_checkpoint(resume_dir)
        payload = load_checkpoint(checkpoint, map_location=prepared.policy.device)
        if config.steps is not None and payload["step"] >= config.steps and config.time_budget_s is None:
            raise AmpganError(f"{resume_dir} already reached step {payload['step']} of --steps {config.steps}: "
                              "give a larger --steps to train further")
    else:
        _claim_on_main_rank(out, options["overwrite"], prepared.policy.device)
    summary = run_training(prepared, out, show_progress=not options["quiet"], resume_from=payload)
    from ampgan.distributed import world

    if not world().is_main:
        return
    last = summary["last"]
    click.echo(
        f"trained {summary['steps']} steps in {summary['train_seconds']:.1f} s "
        f"({last.get('images_per_second', 0):.0f} img/s); D class accuracy on fakes "
        f"{last.get('class_acc_fake', float('nan')):.2f} | {summary['stamp']}"
    )
    resumed = f" (resumed from {checkpoint.name})" if payload is not None else ""
    click.echo(f"run folder: {summary['run_dir']}{resumed}")


def _data_options(function):
    """The dataset options shared by the `data` subcommands."""
    for decorator in reversed([
        click.argument("dataset"),
        click.option("--data-dir", default=None, help="Where the dataset's files are."),
        click.option("--split", default="train", show_default=True, help="train or test."),
        click.option("--classes", default=None, help="Quick, Draw! classes, comma-separated."),
        click.option("--max-per-class", type=int, default=None),
        click.option("--image-size", type=int, default=None),
        click.option("--channels", type=int, default=None),
        click.option("--download", is_flag=True),
        click.option("--cache", is_flag=True),
        click.option("--seed", type=int, default=0, show_default=True),
    ]):
        function = decorator(function)
    return function


def _load_for_data_command(options: dict):
    from ampgan.data import load_dataset

    config = TrainConfig(dataset=options["dataset"], data_dir=options["data_dir"], classes=options["classes"],
                         max_per_class=options["max_per_class"], image_size=options["image_size"],
                         channels=options["channels"], download=options["download"], cache=options["cache"],
                         seed=options["seed"])
    return load_dataset(config.dataset, config.data_request(options["split"]))


@cli.group()
def data() -> None:
    """Look at a dataset before training on it."""


@data.command("info")
@_data_options
def data_info(**options) -> None:
    """Classes, counts, image size, source and checksum state."""
    dataset = _load_for_data_command(options)
    source = dataset.source
    click.echo(f"{options['dataset']} ({options['split']}): {len(dataset)} images, "
               f"{dataset.channels}x{dataset.image_size}x{dataset.image_size} uint8, "
               f"{dataset.images.numel() / 2**20:.1f} MiB in memory")
    width = max(len(name) for name in dataset.class_names)
    for name, count in zip(dataset.class_names, dataset.counts_per_class()):
        click.echo(f"  {name:<{width}}  {count:>7}")
    click.echo(f"source: {source.get('origin', source.get('generator', source.get('name')))}")
    if "md5" in source:
        click.echo(f"checksums: MD5 of {len(source['md5'])} files verified against the published values")
    elif "manifest" in source:
        click.echo(f"checksums: SHA-256 of {len(source['sha256'])} files match the manifest {source['manifest']}")
    elif isinstance(source.get("sha256"), dict):
        click.echo(f"checksums: SHA-256 recorded for {', '.join(source['sha256'])} (no published values to check against)")
    if "cache" in source:
        click.echo(f"cache: {source['cache']} ({'hit' if source.get('cache_hit') else 'written'})")
    click.echo(f"content SHA-256: {dataset.content_sha256()}")


@data.command("grid")
@_data_options
@click.option("--out", type=click.Path(path_type=Path), required=True, help="PNG file to write.")
@click.option("--per-class", type=int, default=8, show_default=True)
def data_grid(out, per_class, **options) -> None:
    """Save a grid of real images, one row per class."""
    import torch

    from ampgan.samples import image_grid, save_png

    if per_class < 1:
        raise AmpganError(f"--per-class must be at least 1, got {per_class}")
    dataset = _load_for_data_command(options)
    rows = []
    generator = torch.Generator().manual_seed(options["seed"])
    for label in range(dataset.num_classes):
        indices = torch.nonzero(dataset.labels == label).flatten()
        chosen = indices[torch.randperm(len(indices), generator=generator)[:per_class]]
        picked = dataset.images[chosen]
        if len(picked) < per_class:  # a small class: pad its row with black
            picked = torch.cat([picked, torch.zeros(per_class - len(picked), *picked.shape[1:], dtype=torch.uint8)])
        rows.append(picked)
    grid = image_grid(torch.cat(rows).permute(0, 2, 3, 1).numpy(), rows=dataset.num_classes)
    save_png(grid, out)
    click.echo(f"wrote {out}: {dataset.num_classes} classes x {per_class} images ({', '.join(dataset.class_names)})")


def _int_list(text: str, option: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise AmpganError(f"{option} takes whole numbers separated by commas, e.g. 16,64,256; got {text!r}") from None
    if not values or min(values) < 1:
        raise AmpganError(f"{option} needs at least one value, each at least 1; got {text!r}")
    return values


@cli.command()
@click.option("--dataset", default="synthetic", show_default=True, help="Synthetic by default, so data never limits.")
@click.option("--batch-sizes", default="16,64,256,1024,2048", show_default=True)
@click.option("--precisions", default=None,
              help="Comma-separated; default: every precision this device runs at useful speed.")
@click.option("--device", default="auto", show_default=True)
@click.option("--warmup", type=int, default=2, show_default=True, help="Discarded steps per configuration.")
@click.option("--steps", type=int, default=5, show_default=True, help="Timed, interleaved rounds per configuration.")
@click.option("--max-seconds", type=float, default=120.0, show_default=True,
              help="Per configuration; one that would take longer is recorded as too slow.")
@click.option("--width", type=int, default=64, show_default=True)
@click.option("--z-dim", type=int, default=128, show_default=True)
@click.option("--image-size", type=int, default=None)
@click.option("--channels", type=int, default=None)
@click.option("--compile", "compile_", is_flag=True, help="torch.compile the networks (compile time reported apart).")
@click.option("--peak-tflops", type=float, default=None, help="Override the device's peak for the % of peak column.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Output folder (default runs/bench-<time>).")
@click.option("--overwrite", is_flag=True, help="Replace an existing, non-empty output folder.")
@click.option("--from", "from_", type=click.Path(path_type=Path), default=None,
              help="Re-draw figures and table from an existing results.json; measures nothing.")
def bench(**options) -> None:
    """Time per batch vs batch size for each precision (the study's Figures 1 and 2)."""
    from ampgan.bench import BenchSpec, run_bench
    from ampgan.bench_output import load_results, render, write_results

    if options["from_"]:
        results = load_results(options["from_"])
        out = options["out"] or Path(options["from_"]).parent
        click.echo(render(results, out))
        click.echo(f"figures and results.csv re-drawn in {out}")
        return
    precisions = tuple(p.strip() for p in options["precisions"].split(",")) if options["precisions"] else ()
    for precision in precisions:
        TrainConfig(precision=precision)  # validates the name with the usual message
    for option in ("warmup", "steps"):
        if options[option] < 1:
            raise AmpganError(f"--{option} must be at least 1, got {options[option]}")
    if not options["max_seconds"] > 0:
        raise AmpganError(f"--max-seconds must be positive, got {options['max_seconds']}")
    spec = BenchSpec(
        dataset=options["dataset"], batch_sizes=_int_list(options["batch_sizes"], "--batch-sizes"),
        precisions=precisions, device=options["device"], warmup=options["warmup"], steps=options["steps"],
        max_seconds=options["max_seconds"], width=options["width"], z_dim=options["z_dim"],
        image_size=options["image_size"], channels=options["channels"], seed=options["seed"],
        compile=options["compile_"], peak_tflops=options["peak_tflops"],
    )
    from ampgan.distributed import init_from_environment, world

    _, distributed_device = init_from_environment(spec.device)  # under torchrun: join, pick this rank's device
    device = distributed_device or resolve_device(spec.device)
    for precision in precisions:
        build_policy(precision, device)  # refuses tf32 on a CPU before anything runs
    spec.train_config(precisions[0] if precisions else "fp32", spec.batch_sizes[0])  # validates sizes
    out = options["out"] or Path("runs") / f"bench-{dt.datetime.now():%Y%m%d-%H%M%S}"
    _claim_on_main_rank(out, options["overwrite"], device)

    def report(result) -> None:
        if not world().is_main:
            return
        if result.samples_s:
            median = sorted(result.samples_s)[len(result.samples_s) // 2]
            click.echo(f"  batch {result.batch_size:>5} {result.precision:>5}: {median * 1e3:9.2f} ms/step", err=True)
        else:
            click.echo(f"  batch {result.batch_size:>5} {result.precision:>5}: {result.status} ({result.reason})", err=True)

    results = run_bench(spec, device, on_config=report)
    if not world().is_main:
        return
    write_results(results, out)
    click.echo(render(results, out))
    click.echo(f"results: {out / 'results.json'}")


def _count(text: str | None, option: str) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise AmpganError(f"{option} takes a number such as 1e6, got {text!r}") from None
    if not value > 0:
        raise AmpganError(f"{option} must be positive, got {text}")
    return value


@cli.command()
@click.argument("results", nargs=-1, type=click.Path(path_type=Path))
@click.option("--instance", default=None, help="An instance from the price catalog, e.g. g4dn.xlarge or aws/p4d.24xlarge.")
@click.option("--price-per-hour", type=float, default=None, help="A one-off hourly price for the measured device.")
@click.option("--batches", default=None, help="Cost this many batches (default 1e6, the study's).")
@click.option("--samples", default=None, help="Cost this many samples instead of batches.")
@click.option("--prices", type=click.Path(path_type=Path), default=None, help="Your own catalog CSV (same columns).")
@click.option("--assume-same-speed", is_flag=True, help="Allow projecting these times onto other hardware's price.")
@click.option("--list-instances", is_flag=True, help="Print the catalog and exit.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Where cost.json/csv/fig3 go (default: beside the first results file).")
def cost(results, instance, price_per_hour, batches, samples, prices, assume_same_speed, list_instances, out) -> None:
    """What training costs per precision and batch size, from bench results (the study's Figure 3)."""
    from ampgan.catalog import catalog_date, find_instance, load_catalog
    from ampgan.cost_report import build_cost_document, load_same_hardware, price_basis, write_cost

    catalog = load_catalog(prices) if (instance or list_instances or prices) else None
    if list_instances:
        for item in catalog:
            click.echo(f"{item.label:<28} {item.hardware:<10} x{max(1, item.gpu_count)} {item.price_per_hour:>9.4f} "
                       f"{item.currency}/h  {item.region:<12} {item.date}  {item.source}")
        return
    if not results:
        raise AmpganError("give at least one bench results.json (from 'ampgan bench')")
    if (instance is None) == (price_per_hour is None):
        raise AmpganError("give exactly one of --instance NAME or --price-per-hour X")
    if batches is not None and samples is not None:
        raise AmpganError("give --batches or --samples, not both")
    batch_count = _count(batches, "--batches") if samples is None else None
    sample_count = _count(samples, "--samples")
    if batch_count is None and sample_count is None:
        batch_count = 1e6
    documents, device = load_same_hardware(list(results))
    basis = price_basis(find_instance(catalog, instance) if instance else None, price_per_hour, device, assume_same_speed)
    document = build_cost_document(documents, device, basis, batch_count, sample_count,
                                   catalog_date(catalog) if catalog and instance else None)
    target = out or Path(results[0]).parent
    click.echo(write_cost(document, target))
    click.echo(f"cost: {target / 'cost.json'}")


@cli.command()
@click.option("--dataset", default="digits", show_default=True)
@click.option("--precisions", default=None, help="Comma-separated; default fp32 and this device's best mixed mode.")
@click.option("--time-budget", default="60s", show_default=True, help="Training wall time per precision (the study: 7m).")
@click.option("--batch-size", type=int, default=64, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default="auto", show_default=True)
@click.option("--width", type=int, default=64, show_default=True)
@click.option("--z-dim", type=int, default=128, show_default=True)
@click.option("--eval-points", type=int, default=6, show_default=True, help="Evaluations during training.")
@click.option("--eval-samples", type=int, default=1000, show_default=True, help="Generated samples per evaluation.")
@click.option("--bench", "bench_file", type=click.Path(path_type=Path), default=None,
              help="Reuse these bench results instead of measuring.")
@click.option("--bench-batch-sizes", default="16,64,256", show_default=True)
@click.option("--instance", default=None, help="Price the runs on this catalog instance.")
@click.option("--price-per-hour", type=float, default=None)
@click.option("--target-accuracy", type=float, default=None, help="Quality target (default: 80% of the best final).")
@click.option("--data-dir", default=None)
@click.option("--classes", default=None)
@click.option("--max-per-class", type=int, default=None)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Default runs/compare-<time>.")
@click.option("--overwrite", is_flag=True)
@click.option("--doctor", "with_doctor", is_flag=True, help="Also run 'ampgan doctor' and put its summary in the report.")
@click.option("--quiet", is_flag=True)
def compare(**options) -> None:
    """FP32 vs mixed precision: same start, same budget; speed, quality, cost and a report."""
    from ampgan.compare import CompareSpec, run_compare
    from ampgan.report import render_report
    from ampgan.run_folder import claim_run_dir

    precisions = tuple(p.strip() for p in options["precisions"].split(",")) if options["precisions"] else ()
    for precision in precisions:
        TrainConfig(precision=precision)
    for option in ("eval_points", "eval_samples"):
        if options[option] < 1:
            raise AmpganError(f"--{option.replace('_', '-')} must be at least 1, got {options[option]}")
    if options["target_accuracy"] is not None and not 0 < options["target_accuracy"] <= 1:
        raise AmpganError(f"--target-accuracy is a fraction in (0, 1], got {options['target_accuracy']}")
    spec = CompareSpec(
        dataset=options["dataset"], precisions=precisions, time_budget_s=parse_duration(options["time_budget"]),
        batch_size=options["batch_size"], seed=options["seed"], device=options["device"], width=options["width"],
        z_dim=options["z_dim"], eval_points=options["eval_points"], eval_samples=options["eval_samples"],
        bench=options["bench_file"], bench_batch_sizes=_int_list(options["bench_batch_sizes"], "--bench-batch-sizes"),
        instance=options["instance"], price_per_hour=options["price_per_hour"],
        target_accuracy=options["target_accuracy"], data_dir=options["data_dir"], classes=options["classes"],
        max_per_class=options["max_per_class"],
    )
    spec.train_config(precisions[0] if precisions else "fp32")  # validates the shared options
    out = options["out"] or Path("runs") / f"compare-{dt.datetime.now():%Y%m%d-%H%M%S}"
    claim_run_dir(out, options["overwrite"])
    document = run_compare(spec, out, show_progress=not options["quiet"], log=lambda line: click.echo(line, err=True))
    if options["with_doctor"]:
        from ampgan.doctor_run import diagnose_gan, write_doctor

        click.echo("doctor: recording ranges over 3 fp32 steps ...", err=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AmpganWarning)
            report = diagnose_gan(spec.train_config("fp32"), steps=3, fp16_steps=0 if resolve_device(spec.device).type == "cpu" else 30)
        write_doctor(report, out / "doctor")
    md_path, html_path = render_report(out)
    from ampgan.report import verdict

    for line in verdict(document | {"bench_speedups": json.loads((out / "bench" / "results.json").read_text())["speedups"]}):
        click.echo(line)
    click.echo(f"report: {html_path} (and {md_path.name})")


@cli.command()
@click.argument("out_dir", type=click.Path(path_type=Path))
def report(out_dir) -> None:
    """Re-render report.md and report.html of a comparison from its files."""
    from ampgan.report import render_report

    md_path, html_path = render_report(out_dir)
    click.echo(f"report: {html_path} (and {md_path.name})")


@cli.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--samples", type=int, default=1000, show_default=True, help="Generated samples, classes in equal shares.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--evaluator-cache", type=click.Path(path_type=Path), default=None)
def evaluate(run_dirs, samples, seed, evaluator_cache) -> None:
    """Quality of trained generators: evaluator accuracy, Fréchet distance, KID -> quality.json."""
    from ampgan.atomic import write_json_atomically
    from ampgan.data import load_dataset
    from ampgan.evaluate import evaluator_for, generate_evenly, quality_of_images, reference_floor
    from ampgan.runs import load_run

    if samples < 2:
        raise AmpganError(f"--samples must be at least 2, got {samples}")
    loaded = [load_run(run_dir) for run_dir in run_dirs]
    rows, evaluators = [], {}
    for run in loaded:
        key = (run.config.dataset, run.config.data_dir, run.config.classes, run.config.image_size, run.config.channels)
        if key not in evaluators:
            dataset = load_dataset(run.config.dataset, run.config.data_request())
            evaluators[key] = evaluator_for(dataset, cache_dir=evaluator_cache, seed=seed)
        evaluator = evaluators[key]
        images, labels = generate_evenly(run.generator, len(run.class_names), samples, run.config.z_dim, seed + 12345, "cpu")
        quality = quality_of_images(evaluator, images, labels)
        write_json_atomically(run.run_dir / "quality.json", {"final": quality | {"step": run.step},
                                                              "evaluator": evaluator.info,
                                                              "floor": reference_floor(evaluator, samples)})
        rows.append((str(run.run_dir), run.config.precision, run.step, quality))
    click.echo(f"{'run':<40} {'precision':>9} {'step':>7} {'eval acc':>9} {'Fréchet':>9} {'KID':>8}")
    for run_dir, precision, step, quality in rows:
        click.echo(f"{run_dir[-40:]:<40} {precision:>9} {step:>7} {quality['evaluator_accuracy']:>9.3f} "
                   f"{quality['frechet_distance']:>9.2f} {quality['kid']:>8.4f}")
    click.echo(f"{samples} samples each | evaluator held-out accuracy {next(iter(evaluators.values())).held_out_accuracy:.3f}")


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--class", "class_", required=True, help="Class name or index.")
@click.option("--n", type=int, default=64, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.option("--format", "format_", type=click.Choice(["png", "npz"]), default="png", show_default=True)
def generate(run_dir, class_, n, seed, out, format_) -> None:
    """Samples of one class from a trained generator; the same seed gives the same images."""
    import io

    import numpy as np
    import torch

    from ampgan.atomic import write_atomically
    from ampgan.runs import class_index, load_run
    from ampgan.samples import image_grid, save_png, to_uint8

    if n < 1:
        raise AmpganError(f"--n must be at least 1, got {n}")
    run = load_run(run_dir)
    label = class_index(run.class_names, class_)
    z = torch.randn(n, run.config.z_dim, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        images = to_uint8(run.generator(z, torch.full((n,), label, dtype=torch.long)))  # (n, H, W, C)
    if format_ == "npz":
        buffer = io.BytesIO()
        np.savez(buffer, images=images, labels=np.full(n, label), class_name=np.array(run.class_names[label]))
        write_atomically(out, lambda stream: stream.write(buffer.getvalue()))
    else:
        save_png(image_grid(images, rows=max(1, int(np.sqrt(n)))), out)
    click.echo(f"wrote {out}: {n} samples of class {run.class_names[label]!r} from step {run.step} of {run_dir}")


@cli.command()
@click.option("--dataset", default="digits", show_default=True)
@click.option("--run", "run_dir", type=click.Path(path_type=Path), default=None,
              help="Diagnose this run's model (its config and latest weights).")
@click.option("--steps", type=int, default=5, show_default=True, help="FP32 steps recorded.")
@click.option("--fp16-steps", type=int, default=None,
              help="Real fp16 steps to see where dynamic scaling settles (default 50 on CUDA, 8 on CPU; 0: skip).")
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--width", type=int, default=64, show_default=True)
@click.option("--z-dim", type=int, default=128, show_default=True)
@click.option("--device", default="auto", show_default=True)
@click.option("--data-dir", default=None)
@click.option("--classes", default=None)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Default runs/doctor-<time>.")
@click.option("--overwrite", is_flag=True)
def doctor(**options) -> None:
    """Will this model train in fp16 or bf16? Ranges per layer, a loss scale, alignment, hardware."""
    from ampgan.doctor_run import diagnose_gan, write_doctor
    from ampgan.run_folder import claim_run_dir, read_run_config

    if options["steps"] < 1:
        raise AmpganError(f"--steps must be at least 1, got {options['steps']}")
    if options["run_dir"] is not None:
        config = TrainConfig.from_dict(read_run_config(options["run_dir"])["config"])
        config = dataclasses.replace(config, batch_size=options["batch_size"], device=options["device"])
    else:
        config = TrainConfig(dataset=options["dataset"], batch_size=options["batch_size"], width=options["width"],
                             z_dim=options["z_dim"], device=options["device"], data_dir=options["data_dir"],
                             classes=options["classes"], seed=options["seed"])
    device = resolve_device(config.device)
    fp16_steps = options["fp16_steps"]
    if fp16_steps is None:
        fp16_steps = 50 if device.type == "cuda" else 8
    out = options["out"] or Path("runs") / f"doctor-{dt.datetime.now():%Y%m%d-%H%M%S}"
    claim_run_dir(out, options["overwrite"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AmpganWarning)  # fp16-on-CPU speed is part of the report itself
        report = diagnose_gan(config, options["steps"], fp16_steps, options["run_dir"])
    write_doctor(report, out)
    for line in report["summary_lines"]:
        click.echo(f"- {line}")
    click.echo(f"{report['environment']['hardware_summary']} | batch {config.batch_size} | "
               f"torch {report['environment']['versions']['torch']}")
    click.echo(f"doctor: {out / 'doctor.json'} (figures doctor_gradients.png, doctor_layers.png)")


def main(argv: list[str] | None = None) -> None:
    global _ARGV
    _ARGV = list(sys.argv[1:] if argv is None else argv)
    with warnings.catch_warnings():
        warnings.simplefilter("default", AmpganWarning)
        warnings.showwarning = _show_warning
        _run(argv)


def _run(argv: list[str] | None) -> None:
    from ampgan.distributed import shutdown

    try:
        _dispatch(argv)
    finally:
        shutdown()


def _rank_prefix() -> str:
    from ampgan.distributed import world

    return f" (rank {world().rank})" if world().distributed else ""


def _dispatch(argv: list[str] | None) -> None:
    try:
        cli.main(args=argv, prog_name="ampgan", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.UsageError as error:
        hint = f" (see 'ampgan {error.ctx.command.name} --help')" if error.ctx and error.ctx.command.name != "cli" else " (see 'ampgan --help')"
        click.echo(f"error: {error.format_message()}{hint}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as error:
        click.echo(f"error: {error.format_message()}", err=True)
        sys.exit(error.exit_code)
    except TrainingInterrupted as stop:
        click.echo(f"stopped{_rank_prefix()}: {stop}", err=True)
        sys.exit(stop.exit_code)
    except AmpganError as error:
        click.echo(f"error{_rank_prefix()}: {error}", err=True)
        sys.exit(getattr(error, "exit_code", EXIT_USAGE))
