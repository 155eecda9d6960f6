"""Each projected row's two steps split into the composition's terms (composition.compose): matrix, memory,
launch and host seconds, baseline then AMP, with the measured step time; to see which term sets a row's error.

    PYTHONPATH=src python benchmarks/results/validation-unseen-rows-amd-zen4-2026-12-03/breakdown.py \
        FILE.csv [GPU ...]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))
import composition_fit as cf  # noqa: E402

from ampgan.projection.composition import compose, load_composition  # noqa: E402

params = load_composition().params
rows, _ = cf.load_rows(Path(sys.argv[1]))
wanted = set(sys.argv[2:])
print(
    f"{'model':<17} {'gpu':<10} side  {'measured ms':>11} {'step':>8} {'matrix':>8} {'memory':>8} "
    f"{'launch':>7} {'host':>7}"
)
for row in rows:
    if wanted and row.gpu.key not in wanted:
        continue
    for side, parts, measured in zip(("base", "amp"), row.parts, row.measured):
        c = compose(parts, row.gpu, params)
        print(
            f"{row.model:<17} {row.gpu.key:<10} {side:<5} {measured * 1e3:>11.1f} {c['seconds'] * 1e3:>8.1f} "
            f"{c['matrix_s'] * 1e3:>8.1f} {c['memory_s'] * 1e3:>8.1f} {c['launch_s'] * 1e3:>7.1f} "
            f"{c['host_s'] * 1e3:>7.1f}"
        )
