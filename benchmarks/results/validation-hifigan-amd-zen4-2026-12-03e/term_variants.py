"""The validation's leave-one-model-out summary with the 1-4 channel data-gradient term (Volta calibration,
16-bit path) fixed at a value instead of fitted, and the term each left-out fit chose.

    PYTHONPATH=src python benchmarks/results/validation-hifigan-amd-zen4-2026-12-03e/term_variants.py [fitted|0|-3.04]

`fitted`: fitted with the composition (composition_fit.TERM_PRIOR: flat), each left-out fit choosing its
own. A number: the term held there (0 is what ships: the kernel calibration's value). Prints the summary
(overall and per generation), then each model's left-out term and its rows' errors. CPU only, no timing:
about a minute on 2 cores.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "validation"))

import composition_fit as cf  # noqa: E402


def main(argv: list[str]) -> int:
    variant = argv[0] if argv else "fitted"
    prior = cf.TERM_PRIOR if variant == "fitted" else (float(variant), 1e-4)
    rows, _ = cf.load_rows(cf.ROWS)
    records, _ = cf.validate(rows, prior)
    summary = cf.report(records, len(rows))
    keys = ("median_speedup_error", "p90_speedup_error", "coverage", "median_band_width", "median_time_error")
    print(f"variant: term {variant}")
    for name in [*summary["generations"], "overall"]:
        print(f"  {name:<8} rows {summary[name]['rows']:>3}  " + "  ".join(f"{k} {summary[name][k]}" for k in keys))
    whole = cf.fit(rows, term_prior=prior)
    print(f"term fitted on every row: {cf.term_of(whole):.3f}")
    for model in sorted({r.model for r in rows if abs(r.term_s).sum() > 0}):
        left = cf.fit([r for r in rows if r.model != model], whole, prior)
        errors = [r for r in records if r["model"] == model]
        worst = sorted(errors, key=lambda r: -r["speedup_error"])[:3]
        print(
            f"  without {model:<10} term {cf.term_of(left):7.3f}; its {len(errors)} rows: median speedup error "
            f"{sorted(r['speedup_error'] for r in errors)[len(errors) // 2]:.3f}, in band "
            f"{sum(r['in_band'] for r in errors)}/{len(errors)}; worst "
            + ", ".join(f"{r['gpu']} {r['measured_speedup']:.2f}x vs {r['projected_speedup']:.2f}x" for r in worst)
        )
    print(json.dumps({"variant": variant, "summary": summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
