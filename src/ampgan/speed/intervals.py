"""How sure is a speedup? Pure arithmetic on paired, interleaved timings (no clocks, no I/O).

The method, in one sentence: each round times the baseline and the candidate back to back, so the
round's ratio cancels the machine's slow drifts; the log ratios are grouped into at most ten
consecutive blocks ("batch means"), and a Student-t interval on the block means, exponentiated,
is the 95% interval of the speedup (a ratio of geometric means). Logs make 2x faster and 2x
slower symmetric; the t-interval is honest for the few rounds a benchmark can afford; and blocks
keep it honest on a shared machine, where a neighbour's load lasts tens of seconds, so
consecutive rounds are not independent: one-round "samples" would make the interval too narrow,
while block means differ when the load changed between blocks, and widen it. Two things no run's own
rounds can see are added: the spread between back-to-back runs (BETWEEN_RUN_SD, in quadrature), so an
interval describes what a rerun would find; and a minimum effect (MIN_EFFECT): a mode, layout or
compilation is "faster" only when its whole interval is above 1.02.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

# Every interval is a 95% one (t_{0.975} below).
SETTLED_WITHIN = 0.05  # an interval within +-5% of its estimate answers the question
# "Faster" needs the whole interval above this: with optional stopping (measure until the interval
# excludes 1), an interval that merely clears 1 favours "faster" for gains of a percent or two that a
# rerun does not find. A gain below 2% is not one a run would choose a precision or a layout for.
MIN_EFFECT = 1.02
# The spread of a speedup between back-to-back runs that no run's own rounds can see (a process's
# memory layout, which cores it lands on, the load in the minutes around it): a standard deviation in
# log speedup added to every interval's own, so that two runs' intervals cover each other's estimates.
# From five back-to-back benches on a 2-core Zen 5 (issue 25): 0.8% at batch 64, 3.0% at batch 256.
BETWEEN_RUN_SD = 0.015
# An interval that decides nothing and spans more than this (high/low) is no answer: two rounds under load gave
# 0.01x-95x (t_{0.975,1} = 12.7), which reads as a result and says nothing. Such a speedup is said to be
# unsettled, with what would settle it, instead of printed as a band (answers()).
MEANINGFUL_SPAN = 2.0
UNSETTLED = "more time measuring, or fewer other processes running, would settle it"
MAX_BLOCKS = 10
DRIFT_LIMIT = 0.10  # the reference moving more than this between first and last third: load changed

# Two-sided 95% quantiles of Student's t (t_{0.975, df}) for small samples, from the standard tables.
_T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    21: 2.080,
    22: 2.074,
    23: 2.069,
    24: 2.064,
    25: 2.060,
    26: 2.056,
    27: 2.052,
    28: 2.048,
    29: 2.045,
    30: 2.042,
}
_Z975 = 1.959964


def t_quantile_975(df: int) -> float:
    """t_{0.975, df}: the table up to 30, beyond it the Cornish-Fisher expansion around the normal
    quantile (error below 0.001 there)."""
    if df < 1:
        raise ValueError("a t-interval needs at least two rounds")
    if df in _T975:
        return _T975[df]
    z = _Z975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(frozen=True)
class SpeedupInterval:
    estimate: float  # baseline time / candidate time: > 1 means the candidate is faster
    low: float
    high: float
    rounds: int

    @property
    def relative_half_width(self) -> float:
        """The interval's larger distance from the estimate, as a fraction of it."""
        return max(self.high / self.estimate - 1.0, 1.0 - self.low / self.estimate)

    @property
    def settled(self) -> bool:
        return self.relative_half_width <= SETTLED_WITHIN

    @property
    def verdict(self) -> str:
        """'faster' when the whole interval is above MIN_EFFECT, 'slower' when it is below 1, else
        'no clear difference' (which includes a gain that is surely below MIN_EFFECT)."""
        if self.low > MIN_EFFECT:
            return "faster"
        if self.high < 1.0:
            return "slower"
        return "no clear difference"

    @property
    def decided(self) -> bool:
        """More rounds cannot change the answer to "is it worth choosing?": faster, slower, or a gain
        that is surely below MIN_EFFECT."""
        return self.verdict != "no clear difference" or self.high <= MIN_EFFECT

    def describe(self) -> str:
        """'1.70x (95% CI 1.62-1.79, 6 rounds)', or why there is no answer yet (answers())."""
        if not answers(self.low, self.high):
            return unsettled_text(self.rounds)
        return f"{self.estimate:.2f}x (95% CI {self.low:.2f}-{self.high:.2f}, {self.rounds} rounds)"

    def to_dict(self) -> dict:
        return asdict(self) | {
            "relative_half_width": self.relative_half_width,
            "settled": self.settled,
            "verdict": self.verdict,
        }


def answers(low: float, high: float) -> bool:
    """Whether a speedup's 95% interval is an answer to show: it decides (faster, slower, or surely below
    MIN_EFFECT), or it is at most MEANINGFUL_SPAN wide."""
    return low > MIN_EFFECT or high <= MIN_EFFECT or high <= MEANINGFUL_SPAN * low


def unsettled_text(rounds) -> str:
    """What is printed for a speedup whose interval is no answer (answers()), instead of its band."""
    return f"speedup unsettled after {rounds} rounds (95% CI wider than {MEANINGFUL_SPAN:g}x: {UNSETTLED})"


def speedup_band(estimate: float, low: float, high: float, between: str = " ") -> str:
    """A table's cell: '1.84x [1.79-1.90]', or 'unsettled' where the interval is no answer."""
    return f"{estimate:.2f}x{between}[{low:.2f}-{high:.2f}]" if answers(low, high) else "unsettled"


def speedup_interval(
    baseline_s: Sequence[float], candidate_s: Sequence[float], between_run_sd: float = BETWEEN_RUN_SD
) -> SpeedupInterval:
    """The candidate's speedup over the baseline from paired rounds (round i of each): the rounds'
    own t-interval widened by the between-run spread (their half-widths add in quadrature)."""
    rounds = min(len(baseline_s), len(candidate_s))
    if rounds < 2:
        raise ValueError("a speedup interval needs at least two paired rounds")
    logs = np.log(
        np.asarray(baseline_s[:rounds], dtype=np.float64) / np.asarray(candidate_s[:rounds], dtype=np.float64)
    )
    blocks = block_means(logs, MAX_BLOCKS)
    mean = float(logs.mean())
    within = t_quantile_975(len(blocks) - 1) * float(np.std(blocks, ddof=1)) / math.sqrt(len(blocks))
    half = math.hypot(within, _Z975 * between_run_sd)
    return SpeedupInterval(
        estimate=math.exp(mean), low=math.exp(mean - half), high=math.exp(mean + half), rounds=rounds
    )


def block_means(values: Sequence[float], max_blocks: int) -> np.ndarray:
    """Means of up to `max_blocks` consecutive blocks of near-equal size (every value in one block;
    with fewer values than blocks, the values themselves)."""
    values = np.asarray(values, dtype=np.float64)
    return np.array([chunk.mean() for chunk in np.array_split(values, min(len(values), max_blocks))])


def reference_drift(reference_s: Sequence[float]) -> float | None:
    """How much the reference's step time moved from the first third of the rounds to the last
    (mean of each; +0.2 = 20% slower at the end). None with fewer than 6 rounds."""
    if len(reference_s) < 6:
        return None
    third = len(reference_s) // 3
    first, last = float(np.mean(reference_s[:third])), float(np.mean(reference_s[-third:]))
    return last / first - 1.0


def load_changed(reference_s: Sequence[float]) -> bool:
    drift = reference_drift(reference_s)
    return drift is not None and abs(drift) > DRIFT_LIMIT
