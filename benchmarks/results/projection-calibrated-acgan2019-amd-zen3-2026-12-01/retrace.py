"""Re-trace the op tables of an earlier acgan-2019 bench (projection-acgan2019-amd-zen3-2026-12-01) so that they
record each matrix op's kernels by shape, without re-benching: the trace runs a few steps at batch 8 and 16
(about 4 minutes on the 2-core Zen 3 while other jobs ran), the bench's timings are kept as they were.

    python benchmarks/results/projection-calibrated-acgan2019-amd-zen3-2026-12-01/retrace.py
"""

import json
import sys
from pathlib import Path

from ampgan.projection.tables import _trace_from_config

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "projection-acgan2019-amd-zen3-2026-12-01" / "bench" / "results.json"

results = json.loads(SOURCE.read_text())
results.pop("op_tables")  # traced before kernels were recorded: trace again from the results' own config
results["op_tables"] = _trace_from_config(results, SOURCE, lambda line: print(line, file=sys.stderr))
(HERE / "bench").mkdir(exist_ok=True)
(HERE / "bench" / "results.json").write_text(json.dumps(results))
