"""Where Turing's leave-one-model-out error comes from: by software era and by GPU (power-capped laptops).

    python benchmarks/results/validation-compose-amd-zen4-2026-12-03b/turing.py

Every row of rows.csv predicted by the composition fitted without its model (composition_fit.leave_one_out),
then grouped: per generation and software era (PyTorch 1.4 / NGC 20.01, Lambda's 2020 runs, against later
containers), and per Turing and Volta GPU. log errors are log(measured / projected); nothing is fitted here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))

import composition_fit as cf  # noqa: E402


def main() -> int:
    rows, _ = cf.load_rows(cf.ROWS)
    lomo = cf.leave_one_out(rows, lambda r: r.model, cf.fit(rows))
    speed, times = cf.log_errors(rows, lomo)

    def era(row):
        return "pytorch-1.4" if "1.4.0" in row.source["software"] else "later"

    head = "| generation | software | rows | median speedup error | 80th pct abs log error | log time error fp32, AMP |"
    print(head + "\n|---|---|---:|---:|---:|---|")
    for key in sorted({(r.generation, era(r)) for r in rows}):
        idx = [i for i, r in enumerate(rows) if (r.generation, era(r)) == key]
        e = np.abs([speed[i] for i in idx])
        t = np.median([times[i] for i in idx], axis=0)
        cells = [
            *key,
            len(idx),
            f"{np.exp(np.median(e)):.2f}x",
            f"{np.quantile(e, 0.8):.2f}",
            f"{t[0]:+.2f}, {t[1]:+.2f}",
        ]
        print("| " + " | ".join(map(str, cells)) + " |")
    print("\n| GPU | W per SM | rows | log speedup error | log time error fp32, AMP |\n|---|---:|---:|---:|---|")
    for gpu in sorted({r.gpu.key for r in rows if r.generation in ("turing", "volta")}):
        idx = [i for i, r in enumerate(rows) if r.gpu.key == gpu]
        spec = rows[idx[0]].gpu
        t = np.median([times[i] for i in idx], axis=0)
        cells = [gpu, f"{spec.watts / spec.sms:.1f}", len(idx), f"{np.median([speed[i] for i in idx]):+.2f}"]
        print("| " + " | ".join(map(str, cells)) + f" | {t[0]:+.2f}, {t[1]:+.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
