"""How much a speedup moves between runs on this machine, learned from the runs themselves.

A run's rounds see the noise within the run; the spread between back-to-back runs (another process,
another memory layout, the next minutes' load) they cannot see. Every bench adds each speedup it
measured to `speedup-history.json` in ampgan's cache folder, keyed like the speed decisions (machine,
torch, threads, model and its options, data shape, layout, compile, batch size, precision). Once a key
has three or more earlier estimates, their standard deviation in log speedup (if larger than the
default, intervals.BETWEEN_RUN_SD) widens that key's intervals. The file is a convenience: a damaged or
unwritable one is ignored (a damaged one with one warning line), and the default is used.
"""

from __future__ import annotations

import math
import statistics

from ampgan.speed.cache import CacheFile
from ampgan.speed.intervals import BETWEEN_RUN_SD

FILE_NAME = "speedup-history.json"
KEPT = 20  # the latest estimates per key
LEARNED_FROM = 3  # estimates before a key's own spread is trusted


class SpeedupHistory(CacheFile):
    FORMAT, FILE_NAME, PART = "ampgan-speedup-history/1", FILE_NAME, "keys"
    WHAT, LOST = "speedup history", "intervals keep the default between-run spread"

    def _read(self) -> dict[str, list[float]]:
        return {
            key: [
                float(v)
                for v in values
                if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
            ]
            for key, values in super()._read().items()
            if isinstance(values, list)
        }

    def estimates(self, key: str) -> list[float]:
        return self._read().get(key, [])

    def between_run_sd(self, key: str) -> tuple[float, str]:
        """(sd in log speedup, where it comes from) for intervals measured under `key`."""
        earlier = self.estimates(key)
        if len(earlier) < LEARNED_FROM:
            return BETWEEN_RUN_SD, f"default {BETWEEN_RUN_SD:.1%} ({len(earlier)} earlier runs of this configuration)"
        learned = statistics.stdev(math.log(v) for v in earlier)
        if learned <= BETWEEN_RUN_SD:
            return (
                BETWEEN_RUN_SD,
                f"default {BETWEEN_RUN_SD:.1%} (the {len(earlier)} earlier runs spread {learned:.1%})",
            )
        return learned, f"learned {learned:.1%} from {len(earlier)} earlier runs of this configuration on this machine"

    def record(self, key: str, estimate: float) -> None:
        if not (math.isfinite(estimate) and estimate > 0):
            return
        keys = self._read()
        self._write(keys | {key: (keys.get(key, []) + [float(estimate)])[-KEPT:]})
