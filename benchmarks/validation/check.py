"""How good the projection is on whole training steps: leave-one-model-out on the validation rows.

    python benchmarks/validation/check.py [--json] [--rows FILE.csv]

Without --rows: every row of rows.csv that has a model builder is projected by a composition fitted on the
other models' rows (composition_fit.py), its band from the other models' errors in its GPU generation; the
errors are ratios >= 1, max(projected / measured, measured / projected). With --rows FILE.csv: that file's
rows projected with the composition fitted on all of rows.csv, nothing fitted on them (the Ada and Hopper
rows kept aside: heldout_ada_hopper.csv). Prints a table, then (with --json) one JSON object last:
rows, models, generations, and overall and per generation median_speedup_error, p90_speedup_error,
coverage, median_band_width, median_time_error; under by_software the same per generation and software era
(composition_fit.software_era: Lambda's 2020 CUDA 10.2 runs, and CUDA 11 onwards). These bands are around
the mid only; `ampgan project` also spans the speedup with the kernel terms no calibration measured at their
other value: each record carries that band too (spanned_band, in_spanned_band, spanned_factor), and under
"spanned" the JSON gives its coverage and the rows whose speedup it moves.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import composition_fit as cf  # noqa: E402

from ampgan.projection.composition import compose, load_composition, step_parts  # noqa: E402
from ampgan.projection.kernel_model import unmeasured_terms  # noqa: E402


def evaluate(rows_file: Path | None) -> tuple[dict, list[dict], list]:
    """(the summary, each row's record, the rows left out with why). With `rows_file`: its rows projected
    with the composition ampgan ships (calibration/composition.json, fitted on rows.csv), as `ampgan
    project` would; nothing is fitted on them."""
    shipped = load_composition()
    if rows_file is None:
        rows, skipped = cf.load_rows(cf.ROWS)
        records, _ = cf.validate(rows)
    else:
        rows, skipped = cf.load_rows(rows_file)
        bands = {"bands": shipped.bands, "uncalibrated_band": shipped.uncalibrated}
        records = cf.held_out(rows, shipped.params, bands)
    for record, row in zip(records, rows):
        _span(record, row, shipped.params)
    return cf.report(records, len(rows)), records, skipped


def spanned(records: list[dict]) -> dict:
    """The coverage of the bands as `ampgan project` spans them, and the rows whose speedup the unmeasured
    kernel terms move (by their factor): the JSON's "spanned" (the shipped validation summary has the rest)."""
    return {
        "coverage": round(float(sum(r["in_spanned_band"] for r in records) / len(records)), 3),
        "moved": {
            f"{r['model']} {r['gpu']}": round(r["spanned_factor"], 3) for r in records if r["spanned_factor"] != 1
        },
    }


def _span(record: dict, row: cf.Row, params: dict) -> None:
    """Add to `record` its band as `ampgan project` spans it (composition.composed_step): also around the
    speedup with the kernel terms no calibration measured at their other value, the factor that moves the
    speedup (spanned_factor, rounded to 3 places) taken with the shipped composition."""
    terms = unmeasured_terms(row.gpu, cublas11=cf.software_era(row) == "cuda11+")  # the row's own cuBLAS
    other = tuple(
        compose(step_parts(t, b, row.gpu, p, terms, row.baseline), row.gpu, params)["seconds"] for t, b, p in row.sides
    )
    mid = tuple(compose(parts, row.gpu, params)["seconds"] for parts in row.parts)
    factor = round(cf.per_sample_ratio(other, row.batch) / cf.per_sample_ratio(mid, row.batch), 3)
    record["spanned_factor"] = factor
    low, high = record["band"]
    record["spanned_band"] = [min(low, low * factor), max(high, high * factor)]
    record["in_spanned_band"] = record["spanned_band"][0] <= record["measured_speedup"] <= record["spanned_band"][1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object, last")
    parser.add_argument("--rows", type=Path, help="project this file's rows without fitting on them")
    args = parser.parse_args(argv)
    if args.rows is not None and not args.rows.is_file():
        print(f"error: no rows file at {args.rows}: give a CSV in rows.csv's columns", file=sys.stderr)
        return 2
    try:
        summary, records, skipped = evaluate(args.rows)
    except cf.RowsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not records:
        _left_out(skipped)
        print(f"error: none of the {len(skipped)} rows of {args.rows} could be projected (why: above)", file=sys.stderr)
        return 2
    print(
        f"{'generation':<16} {'rows':>5} {'models':>6} {'speedup err':>11} {'p90':>6} {'band holds':>10} "
        f"{'band hi/lo':>10} {'time err':>8}"
    )
    # Per generation, overall, then each generation split by the software its rows ran (the same bands).
    named = [(g, summary[g]) for g in [*summary["generations"], "overall"]] + list(summary["by_software"].items())
    for name, s in named:
        print(
            f"{name:<16} {s['rows']:>5} {s['models']:>6} {s['median_speedup_error']:>10.2f}x "
            f"{s['p90_speedup_error']:>5.2f}x {s['coverage']:>10.0%} {s['median_band_width']:>10.2f} "
            f"{s['median_time_error']:>7.2f}x"
        )
    _left_out(skipped)
    if args.json:
        print(json.dumps({**summary, "spanned": spanned(records)}))
    return 0


def _left_out(skipped: list) -> None:
    reasons: dict[str, int] = {}
    for row, why in skipped:
        reasons[f"{row['model']}: {why}"] = reasons.get(f"{row['model']}: {why}", 0) + 1
    for why, count in sorted(reasons.items()):
        print(f"left out: {count} rows of {why}")


if __name__ == "__main__":
    raise SystemExit(main())
