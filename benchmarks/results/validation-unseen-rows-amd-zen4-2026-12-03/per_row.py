"""Each projected row of a rows file: measured and projected speedup, band, time errors (check.py's records).

PYTHONPATH=src python benchmarks/results/validation-unseen-rows-amd-zen4-2026-12-03/per_row.py FILE.csv
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))
import check  # noqa: E402

_, records, _ = check.evaluate(Path(sys.argv[1]))
print(
    f"{'model':<18} {'gpu':<10} {'software':<10} {'measured':>8} {'projected':>9} {'band':>13} {'in':>3} "
    f"{'t32 err':>7} {'amp err':>7}"
)
for r in records:
    t32, t16 = r["time_errors"]
    print(
        f"{r['model']:<18} {r['gpu']:<10} {r['software']:<10} "
        f"{r['measured_speedup']:>7.2f}x {r['projected_speedup']:>8.2f}x "
        f"{r['band'][0]:>6.2f}-{r['band'][1]:<5.2f} {'yes' if r['in_band'] else 'NO':>3} {t32:>6.2f}x {t16:>6.2f}x"
    )
