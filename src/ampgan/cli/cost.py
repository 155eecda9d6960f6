"""`ampgan cost`: what training costs per precision and batch size (the study's Figure 3)."""

from __future__ import annotations

from pathlib import Path

import click

from ampgan.cli.options import POSITIVE_NUMBER, PRICE, ShellPath, each_once
from ampgan.cost.catalog import catalog_date, find_instance, load_catalog
from ampgan.cost.report import build_cost_document, load_same_hardware, price_basis, write_cost
from ampgan.cost.skypilot import CLOUDS, find_catalogs, load_skypilot
from ampgan.errors import AmpganError, one_line, say
from ampgan.files import manifest
from ampgan.projection.from_results import results_path
from ampgan.runs.claim import FolderLock, claimed_folder, marker_kind, owning_folder
from ampgan.system.gpus import gpu_table, user_gpus


def _results_files(ctx, param, paths: tuple[Path, ...]) -> tuple[Path, ...]:
    """Each RESULTS path as `project` reads it: a bench or compare folder stands for its results.json (a folder
    and its file given both are then read once, by each_once)."""
    return each_once(ctx, param, tuple(map(results_path, paths)))


@click.command("cost")
@click.argument("results", nargs=-1, type=ShellPath(), callback=_results_files)
@click.option(
    "--instance", default=None, help="An instance from the price catalog, e.g. g4dn.xlarge or aws/p4d.24xlarge."
)
@click.option("--price-per-hour", type=PRICE, default=None, help="A one-off hourly price for the measured device.")
@click.option(
    "--batches", type=POSITIVE_NUMBER, default=None, help="Cost this many batches (default 1e6, the study's)."
)
@click.option("--samples", type=POSITIVE_NUMBER, default=None, help="Cost this many samples instead of batches.")
@click.option("--prices", type=ShellPath(), default=None, help="Your own catalog CSV (same columns).")
@click.option("--gpus", type=ShellPath(), default=None, help="Your own GPU rows CSV (system/gpus.csv's columns).")
@click.option(
    "--prices-from",
    default=None,
    metavar="skypilot[:DIR]",
    help="Read SkyPilot's catalogs (DIR default ~/.sky/catalogs): on-demand prices of AWS, GCP, Azure.",
)
@click.option("--spot", is_flag=True, help="With --prices-from: spot prices instead of on-demand (labelled so).")
@click.option(
    "--region",
    "regions",
    multiple=True,
    metavar="CLOUD=REGION",
    help="With --prices-from: the region to price in (default aws=us-east-1, gcp=us-central1, azure=eastus).",
)
@click.option("--assume-same-speed", is_flag=True, help="Allow projecting these times onto other hardware's price.")
@click.option("--list-instances", is_flag=True, help="Print the catalog and exit.")
@click.option(
    "--out",
    type=ShellPath(),
    default=None,
    help="A new folder for cost.json/csv/fig3 (default: beside the first results file).",
)
@click.option("--overwrite", is_flag=True, help="Replace --out when it holds an earlier cost (ampgan's own).")
def command(
    results,
    instance,
    price_per_hour,
    batches,
    samples,
    prices,
    gpus,
    prices_from,
    spot,
    regions,
    assume_same_speed,
    list_instances,
    out,
    overwrite,
) -> None:
    """What training costs per precision and batch size, from bench results (the study's Figure 3)."""
    if prices and prices_from:
        raise AmpganError("give --prices FILE or --prices-from skypilot[:DIR], not both")
    if (spot or regions) and not prices_from:
        raise AmpganError("--spot and --region apply to --prices-from skypilot[:DIR]: add it")
    catalog, source = (
        _catalog(prices, prices_from, spot, regions)
        if (instance or list_instances or prices or prices_from)
        else (None, None)
    )
    if list_instances:  # the catalog's instances, a line each
        say(
            f"catalog: {source}",
            *(
                f"{item.label:<28} {item.hardware:<10} x{max(1, item.gpu_count)} {item.price_per_hour:>9.4f} "
                f"{item.currency}/h  {item.region:<12} {item.date}  {item.source}"
                + ("" if item.verified else "  (unverified)")
                for item in catalog
            ),
        )
        return
    if not results:
        raise AmpganError("give at least one bench results.json (from 'ampgan bench')")
    if (instance is None) == (price_per_hour is None):
        raise AmpganError("give exactly one of --instance NAME or --price-per-hour X")
    if batches is not None and samples is not None:
        raise AmpganError("give --batches or --samples, not both")
    batches = 1e6 if batches is None and samples is None else batches  # the study's 1M batches
    documents, device = load_same_hardware(list(results))
    chosen = find_instance(catalog, instance) if instance else None
    projected = None
    with user_gpus(gpus):  # read whenever given: a damaged file is said, not skipped
        if chosen is not None and not chosen.matches_hardware(device) and not assume_same_speed:
            documents, device, projected = _projected_onto(chosen, documents, device, results)
    document = build_cost_document(
        documents,
        device,
        price_basis(chosen, price_per_hour, device, assume_same_speed, projected),
        batches,
        samples,
        catalog_date(catalog) if catalog and instance else None,
        source if catalog and instance else None,
    )
    _write(document, out, overwrite, Path(results[0]).parent)


def _write(document: dict, out: Path | None, overwrite: bool, beside: Path) -> None:
    """The cost files in --out (a folder of its own, claimed like every output folder: runs/claim.py), or
    beside the first results.json when ampgan's own cost files are all that is there."""
    if out is not None:
        with claimed_folder(out, overwrite, "cost", unfinished=lambda folder: not (folder / "fig3_cost.png").is_file()):
            say(*write_cost(document, out).splitlines())
    else:
        # Beside results in an ampgan folder (a bench's, a study's bench/), under that folder's lock: a compare
        # --resume writing the same study meanwhile is refused here in one line, not raced.
        holder = beside if marker_kind(beside) else owning_folder(beside)
        lock = FolderLock(holder, mention_leftovers=False) if holder is not None else None
        try:
            _refuse_foreign_cost_files(beside)
            say(*write_cost(document, beside).splitlines())
        finally:
            if lock is not None:
                lock.release()
    say(f"cost: {(out or beside) / 'cost.json'}")


def _refuse_foreign_cost_files(folder: Path) -> None:
    """Beside the results, the cost files are rewritten only in ampgan's own folder: a cost.json of
    someone else's there is never replaced by surprise. Those its manifest shows ampgan wrote are its own (a study's
    bench/ has no marker of its own: the second cost there refused the first one's files)."""
    present = [
        name
        for name in ("cost.json", "cost.csv", "fig3_cost.png")
        if (folder / name).exists() and manifest.recorded(folder / name) is not True
    ]
    if present and marker_kind(folder) is None:  # not written by ampgan: no valid marker
        raise AmpganError(
            f"{one_line(folder)} holds {present[0]}, which ampgan did not write (or which changed since): give --out "
            "for the cost files"
        )


def _projected_onto(chosen, documents, device, paths):
    """The results projected onto the instance's GPU (ampgan project's kernel model) instead of charging
    another machine's times to it; one error line when its GPU is not in the table (or the user's --gpus)."""
    from ampgan.projection.assumptions import launch_assumption, measure_dispatch_seconds
    from ampgan.projection.document import as_bench_document, gpu_of_instance
    from ampgan.projection.tables import op_tables_of

    gpu = gpu_of_instance(chosen, list(gpu_table().values()))
    untraced = not all(d.get("op_tables") for d in documents)
    if gpu is None or untraced:
        why = (
            "the GPU table has no row to project onto (give yours: --gpus FILE.csv)"
            if gpu is None
            else "these results hold no op tables to project from (re-run 'ampgan bench': it traces them)"
        )
        raise AmpganError(
            f"{chosen.label} runs on {chosen.hardware}, but these times were measured on {device} and {why}: add "
            "--assume-same-speed to charge these times to its price (labelled as a projection), or bench on that "
            "hardware"
        )
    launch = launch_assumption(measure_dispatch_seconds(), device)
    projected = [
        as_bench_document(d, op_tables_of(d, Path(p), log=lambda line: say(line, err=True)), gpu, launch)
        for d, p in zip(documents, paths)
    ]
    say(
        f"{chosen.label} runs on {gpu.key}, not on {device}: costing PROJECTED times (kernel model), not measured ones",
        err=True,
    )
    return [document for document, _ in projected], f"{gpu.name} (projected)", projected[0][1]


def _catalog(prices, prices_from, spot, regions):
    """(instances, where they came from): the built-in catalog, a CSV, or SkyPilot's catalogs."""
    if not prices_from:
        return load_catalog(prices), (
            str(prices) if prices else "ampgan's built-in catalog (src/ampgan/cost/prices.csv)"
        )
    kind, _, folder = prices_from.partition(":")
    if kind != "skypilot":
        raise AmpganError(f"--prices-from {prices_from}: the one catalog kind read is skypilot[:DIR]")
    chosen = {}
    for item in regions:
        cloud, _, region = item.partition("=")
        if cloud not in CLOUDS or not region:
            raise AmpganError(f"--region {item}: give CLOUD=REGION with CLOUD one of {', '.join(CLOUDS)}")
        chosen[cloud] = region
    source = find_catalogs(folder or None)
    return load_skypilot(source, spot=spot, regions=chosen), (
        f"{source.describe()} ({'spot' if spot else 'on-demand'} prices)"
    )
