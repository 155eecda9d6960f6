"""NCHW or channels-last: which memory format makes this run's step faster here? Measured, not assumed.

oneDNN's AMX kernels and cuDNN's tensor-core kernels work in NHWC ("channels-last"): with NCHW
tensors they reorder around each convolution. That is worth 1.15x per bf16 step at batch 256 on a
2-core Xeon with AMX, yet it did not pay on a Zen 4 EPYC (AVX-512, no AMX), where NCHW kernels
are as fast. So the format is a per-machine decision, made like the precision decision
(decision.py): the run's real step in both formats, interleaved rounds, a 95% interval of the
speedup, channels-last only when the interval lies above 1.02 (else NCHW, the format every other
code path is written for), cached per machine, model, batch size and precision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from ampgan.errors import AmpganError, first_words
from ampgan.speed.ab import cached_or_measured, on_rank_zero, outcome_of
from ampgan.speed.cache import DecisionCache, StoredDecision, decision_key
from ampgan.speed.decision import DECISION_RULE, WARMUP_STEPS, duration_text, interval_text, machine_key
from ampgan.speed.rounds import RoundsResult, StoppingRule, warmed_up_rounds
from ampgan.speed.step_timer import StepTimer

NCHW, CHANNELS_LAST = "nchw", "channels-last"


@dataclass(frozen=True)
class LayoutDecision(StoredDecision):
    # verdict (StoredDecision): channels-last is faster | slower | no clear difference | failed (the step raised)
    nchw_step_s: float | None
    channels_last_step_s: float | None
    interval: dict | None  # channels-last's speedup over NCHW (SpeedupInterval.to_dict())
    rounds: int

    @property
    def channels_last(self) -> bool:
        return self.verdict == "faster"

    @property
    def chosen(self) -> str:
        return CHANNELS_LAST if self.channels_last else NCHW

    def describe(self) -> str:
        """'bf16 at batch 64: channels-last 70.1 ms vs NCHW 80.6 ms per step, 1.15x (95% CI 1.10-1.20,
        6 rounds): channels-last'."""
        return (
            f"{self.precision} at batch {self.batch_size}: channels-last {duration_text(self.channels_last_step_s)} "
            f"vs NCHW {duration_text(self.nchw_step_s)} per step{interval_text(self.interval)}{self.note_text}: "
            f"{self.chosen}{self.cached_text}"
        )

    def to_dict(self) -> dict:
        return asdict(self) | {"channels_last": self.channels_last, "description": self.describe()}


def layout_from_rounds(result: RoundsResult, precision: str, batch_size: int) -> LayoutDecision:
    """The decision from interleaved rounds of NCHW (the baseline) and channels-last (pure)."""
    return LayoutDecision.from_outcome(precision, batch_size, outcome_of(result, CHANNELS_LAST))


def decide_layout(
    precision: str,
    batch_size: int,
    key_parts: dict,
    measure: Callable[[], RoundsResult],
    cache: DecisionCache | None,
    log: Callable[[str], None] = lambda line: None,
) -> LayoutDecision:
    """From the cache when it holds this question's answer, else measured (`measure()`: rounds of
    NCHW against channels-last) and cached unless the machine's load changed meanwhile (speed/ab.py)."""
    key = decision_key(**key_parts, batch_size=batch_size, precision=precision, question="memory format")

    def measured() -> tuple[LayoutDecision, bool]:
        log(
            f"measuring channels-last against NCHW for {precision} at batch {batch_size} "
            "(once for this machine and model; the answer is cached) ..."
        )
        try:
            result = measure()
        except ChannelsLastFailed as error:  # user code that NHWC weights break (BigGAN's weight.view(out, -1)): NCHW
            note = f"the step failed channels-last: {first_words(str(error))}"
            return LayoutDecision(precision, batch_size, "failed", None, None, None, 0, note=note), True  # not cached
        return layout_from_rounds(result, precision, batch_size), not (
            result.machine_answer and result.answered(CHANNELS_LAST)
        )

    return cached_or_measured(cache, key, LayoutDecision.from_cache, measured)[0]


# A format gain worth having shows within seconds; a tie is answered NCHW after at most this long.
LAYOUT_RULE = StoppingRule(min_rounds=3, max_seconds=20.0, until=DECISION_RULE.until)
# ... or after TIE_MAX_ROUNDS rounds when they take less (speed/rounds.py capped_for).


def measure_layouts_with(
    make_timer: Callable[[str], Callable[[], float]], rule: StoppingRule = LAYOUT_RULE, seed: int = 0
) -> Callable[[], RoundsResult]:
    """`measure` for decide_layout(): one timer per format (`make_timer(NCHW or CHANNELS_LAST)`), a
    warm-up, then interleaved rounds until decided (rounds.py)."""

    def measure() -> RoundsResult:
        timers = {NCHW: make_timer(NCHW), CHANNELS_LAST: _failing_as_channels_last(lambda: make_timer(CHANNELS_LAST))}
        return warmed_up_rounds(timers, NCHW, rule, WARMUP_STEPS, seed, tie_capped=True)

    return measure


class ChannelsLastFailed(AmpganError):
    """The step that runs NCHW fails channels-last: the format is decided NCHW (an NCHW failure is the user's
    to see, as it is: it would fail the run in either format)."""


def _failing_as_channels_last(make: Callable[[], Callable[[], float]]) -> Callable[[], float]:
    """The channels-last timer, its failures (building it, or any of its steps) raised as ChannelsLastFailed."""
    try:
        timer = make()
    except AmpganError as error:
        raise ChannelsLastFailed(str(error)) from None

    def timed() -> float:
        try:
            return timer()
        except AmpganError as error:
            raise ChannelsLastFailed(str(error)) from None

    return timed


def measure_layouts_on_training_step(config, dataset, device: torch.device) -> Callable[[], RoundsResult]:
    """measure_layouts_with() on the run's real step, this process alone."""
    return measure_layouts_with(
        lambda name: StepTimer(
            config.with_fields({"compute.channels_last": name == CHANNELS_LAST}),
            dataset,
            device,
            data_parallel=False,
            across_ranks=False,
        ),
        seed=config.seed,
    )


def cached_layout(config, device: torch.device) -> LayoutDecision | None:
    """The memory-format decision the cache holds for the config's precision and batch size (no measuring)."""
    return LayoutDecision.from_cache(
        DecisionCache().get(
            decision_key(
                **machine_key(device, config, deciding="channels_last"),
                batch_size=config.budget.batch_size,
                precision=config.precision.name,
                question="memory format",
            )
        )
    )


def decide_layout_for_run(
    config, dataset, device: torch.device, use_cache: bool = True, log: Callable[[str], None] = lambda line: None
) -> LayoutDecision:
    """The memory format for the config's precision and batch size on this machine."""
    return decide_layout(
        config.precision.name,
        config.budget.batch_size,
        machine_key(device, config, deciding="channels_last"),
        measure_layouts_on_training_step(config, dataset, device),
        DecisionCache() if use_cache else None,
        log,
    )


def channels_last_precisions(config_for, precisions, dataset, device, log=lambda line: None) -> tuple[tuple, dict]:
    """(the precisions that run faster channels-last here, {precision: its decision as a dict}).
    `config_for(precision)`: the run's config in that precision; rank 0 measures (speed/ab.py on_rank_zero)."""

    def decided(precision: str) -> dict:
        decision = decide_layout_for_run(config_for(precision), dataset, device, log=log)
        log(f"  {decision.describe()}")
        return decision.to_dict()

    decisions = on_rank_zero(precisions, decided)
    return tuple(p for p in precisions if decisions[p]["channels_last"]), decisions
