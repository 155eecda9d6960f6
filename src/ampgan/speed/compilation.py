"""Compiled or eager: does torch.compile pay for itself over this run? Measured, then paid once.

Compiling the step (fusing batch-norm with its activation, the element-wise tail) can make it faster,
but a run pays first: half a minute to a minute the first time on a 2-core CPU, then seconds from the
compile cache (training/compile_cache.py), and the time budget counts it, since the first step
compiles. So the question is not "is the compiled step faster" but "does the gain over this run's
length repay what a new run pays to compile". The answer comes from three measured numbers,
cached per machine, model, batch size, precision and memory format like the other decisions:

- the compiled step's speedup over the eager one (interleaved rounds, decision.py's rule);
- the compile time a new run pays with the cache warm (a fresh process, compile_time.py);
- hence the break-even: the run length beyond which the faster steps win back the compile time,
  compile / (1 - 1/speedup), taken at the low end of the speedup's 95% interval.

A run compiles when it is expected to run longer than the break-even. Measuring costs a first
compile; a short run with no answer cached does not pay for it (it trains eager and says how to
measure): runs of MEASURE_FROM_RUN_S or more measure, once per machine and model.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from ampgan.errors import AmpganError
from ampgan.speed.ab import cached_or_measured, median_s, on_rank_zero, outcome_of
from ampgan.speed.cache import DecisionCache, StoredDecision, decision_key
from ampgan.speed.compile_time import measure_warm_compile_s
from ampgan.speed.decision import DECISION_RULE, WARMUP_STEPS, duration_text, interval_text, machine_key
from ampgan.speed.rounds import RoundsResult, warmed_up_rounds
from ampgan.speed.step_timer import StepTimer
from ampgan.training.loop import Budget

EAGER, COMPILED = "eager", "compiled"
CANNOT_COMPILE = "cannot compile here"
# A run this long (expected, in eager seconds) may spend a first compile (~1 min on 2 cores) on
# learning whether compiling pays; shorter runs train eager unless an answer is cached.
MEASURE_FROM_RUN_S = 300.0
ESTIMATE_STEPS = 2  # eager steps timed (after one warm-up) to estimate a step-budgeted run's length


@dataclass(frozen=True)
class CompileDecision(StoredDecision):
    # verdict (StoredDecision): the compiled step is faster | slower | no clear difference | cannot compile here
    eager_step_s: float | None
    compiled_step_s: float | None
    interval: dict | None  # the compiled step's speedup over the eager one (SpeedupInterval.to_dict())
    rounds: int
    compile_s: float | None  # what a new run pays before its first step, compile cache warm
    first_compile_s: float | None = None  # what the measuring process paid (cold unless cached before)

    @property
    def break_even_s(self) -> float | None:
        """The run length (eager training seconds) beyond which compiling pays; None: never."""
        if self.verdict != "faster" or not self.interval or self.compile_s is None or self.interval["low"] <= 1:
            return None
        return self.compile_s / (1.0 - 1.0 / self.interval["low"])

    def pays_for(self, run_s: float | None) -> bool:
        """`run_s`: the run's expected length in eager seconds (None: unbounded)."""
        return self.break_even_s is not None and (run_s is None or run_s > self.break_even_s)

    def describe(self) -> str:
        """'bf16 at batch 64: compiled 61.0 ms vs eager 80.2 ms per step, 1.31x (95% CI 1.22-1.41, 8 rounds),
        7.4 s to compile in a new run: pays after 32 s of training'."""
        head = f"{self.precision} at batch {self.batch_size}"
        if self.verdict == CANNOT_COMPILE:
            return f"{head}: {CANNOT_COMPILE}{self.note_text}{self.cached_text}"
        compile_s = f", {self.compile_s:.1f} s to compile in a new run" if self.compile_s is not None else ""
        pays = (
            f"pays after {self.break_even_s:.0f} s of training"
            if self.break_even_s is not None
            else f"never pays (compiled step: {self.verdict})"
        )
        return (
            f"{head}: compiled {duration_text(self.compiled_step_s)} vs eager {duration_text(self.eager_step_s)} "
            f"per step{interval_text(self.interval)}{compile_s}{self.note_text}: {pays}{self.cached_text}"
        )

    def to_dict(self) -> dict:
        return asdict(self) | {"break_even_s": self.break_even_s, "description": self.describe()}


@dataclass(frozen=True)
class CompileMeasurement:
    """What measure() found: the eager-vs-compiled rounds and the two compile times."""

    rounds: RoundsResult
    first_compile_s: float
    compile_s: float


class CompileProbe:
    """The measuring hands of decide_compile(), replaceable in tests: a quick eager estimate of the
    step, and the full measurement."""

    def eager_step_s(self) -> float:
        raise NotImplementedError

    def measure(self) -> CompileMeasurement:
        raise NotImplementedError


def compile_from_measurement(found: CompileMeasurement, precision: str, batch_size: int) -> CompileDecision:
    """The decision from rounds of eager (the baseline) against compiled (pure)."""
    return CompileDecision.from_outcome(
        precision,
        batch_size,
        outcome_of(found.rounds, COMPILED),
        compile_s=round(found.compile_s, 2),
        first_compile_s=round(found.first_compile_s, 2),
    )


def expected_run_s(steps: int | None, seconds: float | None, eager_step_s: float) -> float | None:
    """A run's length in eager seconds: its time budget, or its steps at the eager step's pace,
    whichever ends it first (None: neither bounds it)."""
    by_steps = steps * eager_step_s if steps is not None else None
    return min((b for b in (by_steps, seconds) if b is not None), default=None)


def decide_compile(
    precision: str,
    batch_size: int,
    key_parts: dict,
    budget: tuple[int | None, float | None],
    probe: CompileProbe,
    cache: DecisionCache | None,
    log: Callable[[str], None] = lambda line: None,
) -> tuple[bool, CompileDecision | None]:
    """(compile this run?, the decision behind it: None when not measured). `budget`: the run's
    (steps, seconds). From the cache when it holds this question's answer; else measured when the
    run is long enough to repay a first compile (and cached unless the load changed or compiling failed)."""
    steps, seconds = budget
    key = decision_key(**key_parts, batch_size=batch_size, precision=precision, question="compile")
    decision = CompileDecision.from_cache(cache.get(key) if cache else None)
    if decision is not None:
        return decision.pays_for(expected_run_s(steps, seconds, decision.eager_step_s or 0.0)), decision
    run_s = seconds if steps is None else expected_run_s(steps, seconds, probe.eager_step_s())
    if run_s is not None and run_s < MEASURE_FROM_RUN_S:
        log(
            f"compile: not measured for a run of about {run_s:.0f} s ({precision} at batch {batch_size}): runs of "
            f"{MEASURE_FROM_RUN_S / 60:g} minutes or more measure once per machine whether compiling pays; "
            "--compile compiles anyway: eager"
        )
        return False, None
    log(
        f"measuring the compiled step against the eager one for {precision} at batch {batch_size} "
        "(a first compile; once for this machine and model, the answer is cached) ..."
    )

    def measured() -> tuple[CompileDecision, bool]:
        found = probe.measure()
        return compile_from_measurement(found, precision, batch_size), not found.rounds.worth_keeping(COMPILED)

    try:
        decision, _ = cached_or_measured(cache, key, lambda stored: None, measured)  # the cache was read above
    except AmpganError as error:
        return False, _cannot_compile(precision, batch_size, str(error))
    except Exception as error:  # noqa: BLE001 - a compiler failure of any kind means: train eager
        return False, _cannot_compile(
            precision, batch_size, f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        )
    return decision.pays_for(run_s), decision


def _cannot_compile(precision: str, batch_size: int, reason: str) -> CompileDecision:
    # Not cached: the cause (a missing C++ compiler, a full disk) may be fixed before the next run.
    return CompileDecision(
        precision,
        batch_size,
        CANNOT_COMPILE,
        None,
        None,
        None,
        0,
        None,
        note=reason[:300],
        measured_on=datetime.date.today().isoformat(),
    )


class TrainingStepCompileProbe(CompileProbe):
    """The run's real step (speed/step_timer.py), this process alone: eager rounds against compiled
    ones (the compiled timer's first step is the compile this process pays), then the compile a new
    run pays, timed in a fresh process with the cache this one filled."""

    def __init__(self, config, dataset, device: torch.device):
        self.config, self.dataset, self.device = config, dataset, device
        self._eager = None

    def _eager_timer(self):
        if self._eager is None:
            self._eager = StepTimer(
                self.config.with_fields({"compute.compile": False}),
                self.dataset,
                self.device,
                data_parallel=False,
                across_ranks=False,
            )
            self._eager()  # the first step allocates and selects kernels
        return self._eager

    def eager_step_s(self) -> float:
        return median_s([self._eager_timer()() for _ in range(ESTIMATE_STEPS)])

    def measure(self) -> CompileMeasurement:
        eager = self._eager_timer()
        eager_first = eager()
        compiled = StepTimer(
            self.config.with_fields({"compute.compile": True}),
            self.dataset,
            self.device,
            data_parallel=False,
            across_ranks=False,
        )
        first_compile_s = max(compiled() - eager_first, 0.0)
        # A compile that changes nothing ties: answered eager soon (tie_capped).
        rounds = warmed_up_rounds(
            {EAGER: eager, COMPILED: compiled}, EAGER, DECISION_RULE, WARMUP_STEPS, self.config.seed, tie_capped=True
        )
        return CompileMeasurement(
            rounds,
            first_compile_s,
            measure_warm_compile_s(
                self.config.with_fields({"compute.compile": True}), fix="pass --no-compile to train eager"
            ),
        )


def compile_probe_for(config, dataset, device: torch.device) -> CompileProbe:
    """The seam tests replace (tests/conftest.py): the real probe times real steps."""
    return TrainingStepCompileProbe(config, dataset, device)


def compiled_precisions(
    config_for: Callable[[str], object], precisions, dataset, device: torch.device, log=lambda line: None
) -> tuple[tuple[str, ...], dict[str, dict]]:
    """(the precisions whose runs compile, {precision: its decision as a dict, when there is one}).
    `config_for(precision)`: the run's config in that precision (its budget, batch size, memory
    format); rank 0 measures (speed/ab.py on_rank_zero)."""

    def decided(precision: str) -> dict:
        config = config_for(precision)
        budget = Budget.of(config)
        compile_it, decision = decide_compile(
            precision,
            config.budget.batch_size,
            machine_key(device, config, deciding="compile"),
            (budget.steps, budget.seconds),
            compile_probe_for(config, dataset, device),
            DecisionCache(),
            log,
        )
        if decision is not None:
            log(f"  {decision.describe()}: {'compiled' if compile_it else 'eager'}")
        return {"compile": compile_it, "decision": decision.to_dict() if decision else None}

    answers = on_rank_zero(precisions, decided)
    return tuple(p for p in precisions if answers[p]["compile"]), {
        p: answers[p]["decision"] for p in precisions if answers[p]["decision"] is not None
    }
