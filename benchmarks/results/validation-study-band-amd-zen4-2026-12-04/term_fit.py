"""The unmeasured 1-4 channel data-gradient term fitted end to end with the composition (composition_fit.TERM,
flat prior), leave one model out, after the padding: tried, not shipped.

    PYTHONPATH=src python benchmarks/results/validation-study-band-amd-zen4-2026-12-04/term_fit.py
"""

import json
import sys

sys.path.insert(0, "benchmarks/validation")
import composition_fit as cf  # noqa: E402

rows, _ = cf.load_rows(cf.ROWS)
records, bands = cf.validate(rows, cf.TERM_PRIOR)
rep = cf.report(records, len(rows))
print(json.dumps({k: rep[k] for k in ("overall", "turing", "volta", "ampere")}))
params = cf.fit(rows, None, cf.TERM_PRIOR)
print("whole-fit term", cf.term_of(params))
