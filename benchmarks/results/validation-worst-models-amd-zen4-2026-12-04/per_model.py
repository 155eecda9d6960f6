"""Per GPU generation and model: the median of log(measured / projected speedup) and of the two step times,
each model left out of the fit (composition_fit.validate, as check.py), with the generation's band; with a
cache file argument, the op tables of that file instead of op_tables.json (the before state: git show
HEAD~N:benchmarks/validation/op_tables.json > FILE).

    PYTHONPATH=src python benchmarks/results/validation-worst-models-amd-zen4-2026-12-04/per_model.py [CACHE]
"""

import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))
import composition_fit as cf  # noqa: E402

cache = json.loads(Path(sys.argv[1]).read_text()) if len(sys.argv) > 1 else None
rows, _ = cf.load_rows(cf.ROWS, cache)
records, _ = cf.validate(rows)
cells = defaultdict(list)
for row, rec in zip(rows, records):
    predicted = rec["projected_speedup"]
    cells[(rec["generation"], rec["model"])].append(
        (math.log(row.speedup / predicted), rec["in_band"], rec["band_width"])
    )
print(f"{'generation':<8} {'model':<20} {'rows':>4} {'median log err':>14} {'in band':>7}")
for generation in sorted({g for g, _ in cells}):
    mine = sorted(
        ((m, v) for (g, m), v in cells.items() if g == generation), key=lambda x: np.median([e for e, *_ in x[1]])
    )
    for model, values in mine:
        errors = [e for e, *_ in values]
        inside = sum(v[1] for v in values)
        print(f"{generation:<8} {model:<20} {len(values):>4} {np.median(errors):>+14.2f} {inside:>4}/{len(values)}")
    errors = [e for (g, _), v in cells.items() if g == generation for e, *_ in v]
    widths = [w for (g, _), v in cells.items() if g == generation for *_, w in v]
    low, high = np.percentile(errors, 10), np.percentile(errors, 90)
    print(
        f"{generation:<8} {'(all) 10th-90th':<20} {len(errors):>4} {low:+.2f} .. {high:+.2f} "
        f"(x{math.exp(high - low):.2f}); median band {np.median(widths):.2f}"
    )
