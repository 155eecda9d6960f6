"""Why Turing's and Volta's bands are wide: their leave-one-model-out residuals broken down by model, source
(DLE, Lambda), software era and batch, and the bands computed both ways (per generation, as ampgan ships
them; per generation and software era).

    PYTHONPATH=src python benchmarks/results/validation-bands-amd-zen4-2026-12-03d/breakdown.py

Every number is leave-one-model-out exactly as benchmarks/validation/check.py computes it (composition_fit);
signed log errors are log(measured / projected): + where the GPU ran slower (a time) or gained more (a
speedup) than projected. Nothing is fitted here and heldout_ada_hopper.csv is not read.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

VALIDATION = Path(__file__).resolve().parents[2] / "validation"
sys.path.insert(0, str(VALIDATION))

import composition_fit as cf  # noqa: E402

rows, _ = cf.load_rows(cf.ROWS)
whole = cf.fit(rows)
lomo = cf.leave_one_out(rows, lambda r: r.model, whole)
speed, times = cf.log_errors(rows, lomo)
records, _ = cf.validate(rows)

print("## Each Turing and Volta row (leave-one-model-out; log errors are log(measured / projected))\n")
print(
    "| generation | model | GPU | source | software | batch fp32/AMP | measured | projected | speedup log err "
    "| fp32 time log err | AMP time log err | in band |"
)
print("|---|---|---|---|---|---|---:|---:|---:|---:|---:|---|")
order = sorted(
    (i for i, r in enumerate(rows) if r.generation in ("turing", "volta")),
    key=lambda i: (rows[i].generation, rows[i].model, cf.software_era(rows[i]), rows[i].gpu.key),
)
for i in order:
    r, rec = rows[i], records[i]
    print(
        f"| {r.generation} | {r.model} | {r.gpu.key} | {r.source['source']} | {r.source['software'].split(' (')[0]} "
        f"| {r.batch[0]}/{r.batch[1]} | {rec['measured_speedup']:.2f}x | {rec['projected_speedup']:.2f}x "
        f"| {speed[i]:+.2f} | {times[i][0]:+.2f} | {times[i][1]:+.2f} | {'yes' if rec['in_band'] else 'NO'} |"
    )

print("\n## Median signed log error per model, generation and software era (rows)\n")
print("| model | generation | era | rows | speedup | fp32 time | AMP time |")
print("|---|---|---|---:|---:|---:|---:|")
cells: dict[tuple, list[int]] = {}
for i, r in enumerate(rows):
    cells.setdefault((r.model, r.generation, cf.software_era(r)), []).append(i)
for key, members in sorted(cells.items()):
    print(
        f"| {key[0]} | {key[1]} | {key[2]} | {len(members)} | {np.median([speed[i] for i in members]):+.2f} "
        f"| {np.median([times[i][0] for i in members]):+.2f} | {np.median([times[i][1] for i in members]):+.2f} |"
    )

print("\n## What sets each generation's band: its ends (log) and the rows beyond the other models' 9th-91st\n")
for generation in ("turing", "volta"):
    band = next(b for g, b in cf.validate(rows)[1]["bands"].items() if g == generation)["speedup"]
    members = [i for i, r in enumerate(rows) if r.generation == generation]
    print(f"{generation}: band {band[0]:+.2f} .. {band[1]:+.2f} (high/low {math.exp(band[1] - band[0]):.2f})")
    for era in ("cuda10.2", "cuda11+"):
        errors = sorted(speed[i] for i in members if cf.software_era(rows[i]) == era)
        if errors:
            print(
                f"  {era}: {len(errors)} rows, errors {errors[0]:+.2f} .. {errors[-1]:+.2f}, "
                f"below -0.30: {sum(e < -0.30 for e in errors)}, above +0.30: {sum(e > 0.30 for e in errors)}"
            )


def bands_by(key) -> tuple[float, list[dict]]:
    """Each row's band from the other models' errors in its cell (key(row)); a cell with fewer than 2 other
    models takes its generation's; at the largest of cf.LEVELS holding cf.COVERAGE overall."""
    for level in cf.LEVELS:
        out = []
        for i, row in enumerate(rows):
            same = [j for j, r in enumerate(rows) if key(r) == key(row) and r.model != row.model]
            if len({rows[j].model for j in same}) < 2:
                same = [j for j, r in enumerate(rows) if r.generation == row.generation and r.model != row.model]
            out.append(cf.record(row, lomo[i], cf.band_of([speed[j] for j in same], level)))
        if np.mean([r["in_band"] for r in out]) >= cf.COVERAGE:
            return level, out
    return level, out


print("\n## The bands both ways (leave-one-model-out; coverage, median band high/low, rows)\n")
print("| cell | per generation (shipped): holds | its high/low | per generation and era: holds | its high/low |")
print("|---|---:|---:|---:|---:|")
level_g, by_generation = bands_by(lambda r: r.generation)
level_e, by_era = bands_by(lambda r: (r.generation, cf.software_era(r)))
names = sorted({(r.generation, cf.software_era(r)) for r in rows})
for name in [*names, *sorted({(g, None) for g, _ in names}), ("overall", None)]:
    pick = [
        i for i, r in enumerate(rows) if name[0] in ("overall", r.generation) and name[1] in (None, cf.software_era(r))
    ]
    a = cf.summary([by_generation[i] for i in pick])
    b = cf.summary([by_era[i] for i in pick])
    label = " ".join(n for n in name if n)
    print(
        f"| {label} ({len(pick)} rows) | {a['coverage']:.1%} | {a['median_band_width']:.2f} | {b['coverage']:.1%} "
        f"| {b['median_band_width']:.2f} |"
    )
print(f"\nlevels: per generation {level_g}, per generation and era {level_e}")
