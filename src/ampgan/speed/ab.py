"""One A/B decision, three uses: is the candidate (a precision, channels-last, the compiled step)
faster than the baseline (fp32, NCHW, eager) on this machine's real training step?

What every use shares lives here: the verdict of interleaved rounds (`outcome_of`: the interval's
verdict against the minimum effect, the rounds' notes), and the cache (`cached_or_measured`: the
answer for a key, read back and checked, or measured, and kept unless the machine's load changed
during the measurement, which answers for that moment only). Each use adds what is its own: what is
measured (decision.py: several precisions in one set of rounds; layout.py; compilation.py with the
compile time and the break-even run length) and how its answer reads.
"""

from __future__ import annotations

import datetime
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from ampgan.speed.cache import DecisionCache
from ampgan.speed.intervals import answers
from ampgan.speed.rounds import RoundsResult
from ampgan.training.distributed import rank_zeros, world


@dataclass(frozen=True)
class Outcome:
    """What one candidate's rounds against the baseline say, in the fields every decision stores."""

    verdict: str  # faster | slower | no clear difference
    baseline_step_s: float | None
    candidate_step_s: float | None
    interval: dict | None  # SpeedupInterval.to_dict(), when two or more rounds were paired
    rounds: int
    note: str
    measured_on: str


def median_s(samples: list[float]) -> float | None:
    return statistics.median(samples) if samples else None


def outcome_of(result: RoundsResult, name: str) -> Outcome:
    """The outcome for candidate `name` in `result` (pure: testable with injected rounds): its verdict against
    the rounds' baseline (faster | slower | no clear difference) and the notes that qualify it. The one rule for
    precisions, memory formats and compilation alike."""
    interval = result.intervals.get(name)
    notes = []
    if name in result.hopeless:
        verdict = "slower"
        notes.append(result.hopeless[name])
    elif interval is None:
        verdict = "no clear difference"
        notes.append("fewer than two rounds fit in the time cap")
    else:
        verdict = interval.verdict
        # an interval that is no answer says it is unsettled itself (intervals.py describe())
        shown = answers(interval.low, interval.high)
        if result.stopped_by == "time cap" and verdict == "no clear difference" and shown:
            notes.append(f"unsettled after {result.seconds:.0f} s")
    if result.load_changed:
        notes.append(f"the machine's load changed during the measurement ({result.baseline} {result.drift:+.0%})")
    if result.under_load:
        notes.append(result.load_note() + "; not kept as this machine's answer")
    return Outcome(
        verdict,
        median_s(result.samples_s[result.baseline]),
        median_s(result.samples_s[name]),
        interval.to_dict() if interval else None,
        len(result.samples_s[name]),
        "; ".join(notes),
        datetime.date.today().isoformat(),
    )


def cached_or_measured(
    cache: DecisionCache | None,
    key: str,
    read: Callable[[dict | None], object | None],
    measure: Callable[[], tuple[object, bool]],
):
    """(decision, measured now?): `read(stored)` gives the cached decision (None when absent or not
    trusted); else `measure()` -> (decision, the moment's answer only?), kept in the cache unless the load
    changed or the machine was crowded during the measurement (RoundsResult.machine_answer), or its band
    decides nothing (RoundsResult.answered): the measurer says so in `moment_only`."""
    cached = read(cache.get(key) if cache else None)
    if cached is not None:
        return cached, False
    decision, moment_only = measure()
    if cache and not moment_only:
        cache.put(key, decision.to_dict())
    return decision, True


def on_rank_zero(precisions, decide_one: Callable[[str], dict]) -> dict[str, dict]:
    """{precision: decide_one(precision)}, measured by rank 0 alone under torchrun; every rank gets rank 0's
    answers (a timing on a shared CPU would mix the ranks' load)."""
    return rank_zeros({name: decide_one(name) for name in precisions} if world().is_main else {})
