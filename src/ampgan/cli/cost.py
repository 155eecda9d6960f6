"""`ampgan cost`: what training costs per precision and batch size (the study's Figure 3)."""

from __future__ import annotations

from pathlib import Path

import click

from ampgan.cli.options import PositiveNumber
from ampgan.errors import AmpganError


@click.command("cost")
@click.argument("results", nargs=-1, type=click.Path(path_type=Path))
@click.option("--instance", default=None, help="An instance from the price catalog, e.g. g4dn.xlarge or aws/p4d.24xlarge.")
@click.option("--price-per-hour", type=PositiveNumber(), default=None, help="A one-off hourly price for the measured device.")
@click.option("--batches", type=PositiveNumber(), default=None, help="Cost this many batches (default 1e6, the study's).")
@click.option("--samples", type=PositiveNumber(), default=None, help="Cost this many samples instead of batches.")
@click.option("--prices", type=click.Path(path_type=Path), default=None, help="Your own catalog CSV (same columns).")
@click.option("--assume-same-speed", is_flag=True, help="Allow projecting these times onto other hardware's price.")
@click.option("--list-instances", is_flag=True, help="Print the catalog and exit.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Where cost.json/csv/fig3 go (default: beside the first results file).")
def command(results, instance, price_per_hour, batches, samples, prices, assume_same_speed, list_instances, out) -> None:
    """What training costs per precision and batch size, from bench results (the study's Figure 3)."""
    from ampgan.cost.catalog import catalog_date, find_instance, load_catalog
    from ampgan.cost.report import build_cost_document, load_same_hardware, price_basis, write_cost

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
    if batches is None and samples is None:
        batches = 1e6
    documents, device = load_same_hardware(list(results))
    basis = price_basis(find_instance(catalog, instance) if instance else None, price_per_hour, device, assume_same_speed)
    document = build_cost_document(documents, device, basis, batches, samples,
                                   catalog_date(catalog) if catalog and instance else None)
    target = out or Path(results[0]).parent
    click.echo(write_cost(document, target))
    click.echo(f"cost: {target / 'cost.json'}")
