"""GNMT's element-wise traffic on a V100 at DLE's batch 128, by operation, from the cached op tables.

PYTHONPATH=src python benchmarks/results/validation-cudnn-lstm-backward-amd-zen4-2026-12-04/gnmt_bytes.py
"""

from __future__ import annotations

import collections
import sys

sys.path.insert(0, "benchmarks/validation")
import composition_fit as cf  # noqa: E402


def main() -> None:
    rows, _ = cf.load_rows(cf.ROWS)
    row = next(r for r in rows if r.model == "gnmt" and r.gpu.key == "V100" and r.batch == (128, 128))
    for side, (table, batch, precision) in zip(("fp32", "amp"), row.sides):
        moved, count = collections.Counter(), collections.Counter()
        for op in (op for op in table if op.unit != "matrix"):
            moved[(op.op, op.dtype)] += op.bytes_at(batch) * op.weight / 1e9
            count[(op.op, op.dtype)] += op.weight
        print(side, precision, f"total GB {sum(moved.values()):.1f}")
        for key, gb in moved.most_common(12):
            print("   ", key, f"{gb:.2f} GB", int(count[key]))


if __name__ == "__main__":
    main()
