"""Is a precision worth using here? One rule, measured on the run's own training step (the A/B
decision of speed/ab.py, shared with the memory format and compilation).

The rule: a mode is *useful* when its real training step (the run's model, batch size and
compile setting) is faster than fp32's beyond the measurement's uncertainty, that is when the
95% interval of its speedup (the spread between runs included) lies above the minimum effect,
1.02 (speed/intervals.py). It is *slower* when the interval lies below 1 (or when its fastest step in
two rounds took more than 5x fp32's, see rounds.py, or each of its warm-up steps 20x), and otherwise there is
*no clear difference* -- not useful either. One timed step is never a verdict. The verdict is printed with
its numbers, and cached per machine, torch version, model shape, batch size and precision (cache.py), so it
is paid once.

Who uses it: `bench` leaves out modes that are slower at its first batch size (a mode that only
breaks even there may still gain at larger batches, which is what the bench charts); `compare`
races fp32 against the fastest useful mixed mode, and refuses when there is none; `doctor`
recommends the fastest useful mode; `train` warns when its precision is not useful here.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from ampgan.errors import warn
from ampgan.gan.registry import resolve_model
from ampgan.precisions import BASELINE, FP32, PRECISIONS
from ampgan.speed.ab import outcome_of
from ampgan.speed.cache import DecisionCache, StoredDecision, decision_key
from ampgan.speed.intervals import SpeedupInterval
from ampgan.speed.rounds import UNTIL_DECIDED, RoundsResult, StoppingRule, warmed_up_rounds
from ampgan.speed.step_timer import CallTooLong, StepTimer, abandoned_after, stoppable
from ampgan.system import cpu_tuning
from ampgan.system.hardware import detect_hardware

DECISION_RULE = StoppingRule(min_rounds=3, max_seconds=30.0, until=UNTIL_DECIDED)
WARMUP_STEPS = 2
# A candidate whose warm-up steps (both: one is never a verdict) each took this many times fp32's warm step is
# hopeless: one-off costs (kernel selection, allocation) never make such a gap, and more such steps cost minutes.
HOPELESS_FIRST_STEP = 20.0
# fp16 on a CPU without AMX-FP16 has no fast kernels in PyTorch (system/hardware.py: they convert to fp32): its
# warm step ran 13-17x fp32's on a Zen 4 (acgan b64, DCGAN 64 px b16) and 75x on an AMX Xeon. The low end
# foresees its first step where a call cannot be stopped (under torchrun): one past the cap is not started.
FP16_ON_CPU_SLOWDOWN = 10.0


def candidate_modes(device_type: str, cuda_capability: tuple[int, int] | None = None) -> tuple[list[str], list[dict]]:
    """(precisions worth measuring against fp32, [{precision, reason}] that cannot run here at all)."""
    why_not = {
        name: mode.unavailable_reason(device_type, cuda_capability)
        for name, mode in PRECISIONS.items()
        if name != BASELINE
    }
    return [name for name, reason in why_not.items() if reason is None], [
        {"precision": name, "reason": reason} for name, reason in why_not.items() if reason is not None
    ]


def candidates_for(device: torch.device) -> tuple[list[str], list[dict]]:
    return candidate_modes(device.type, torch.cuda.get_device_capability(device) if device.type == "cuda" else None)


@dataclass(frozen=True)
class Decision(StoredDecision):
    # verdict (StoredDecision): faster | slower | no clear difference
    fp32_step_s: float | None
    step_s: float | None
    interval: dict | None  # SpeedupInterval.to_dict(), when two or more rounds were paired
    rounds: int

    @property
    def useful(self) -> bool:
        return self.verdict == "faster"

    def describe(self) -> str:
        """'bf16: 84.1 ms per step vs fp32 143 ms at batch 64, 1.70x (95% CI 1.62-1.79, 6 rounds): faster'."""
        return f"{self.precision}: {self.reason()}"

    def reason(self) -> str:
        """describe() without the precision's name (for lines that already name it)."""
        times = (
            f"{duration_text(self.step_s)} per step vs fp32 {duration_text(self.fp32_step_s)} at batch "
            f"{self.batch_size}"
            if self.step_s and self.fp32_step_s
            else f"at batch {self.batch_size}"
        )
        return f"{times}{interval_text(self.interval)}{self.note_text}: {self.verdict}{self.cached_text}"

    def to_dict(self) -> dict:
        return asdict(self) | {"useful": self.useful, "description": self.describe()}


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.1f} ms"


def decisions_from_rounds(
    result: RoundsResult, batch_size: int, left_out_at_warmup: dict[str, tuple[Decision, bool]]
) -> dict[str, Decision]:
    """The verdict of every candidate measured in `result` (pure: testable with injected rounds), and of those
    `left_out_at_warmup` (candidate -> (its decision, whether it may be cached))."""
    return {name: decision for name, (decision, _) in left_out_at_warmup.items()} | {
        name: Decision.from_outcome(name, batch_size, outcome_of(result, name))
        for name in result.samples_s
        if name != result.baseline
    }


def interval_text(interval: dict | None) -> str:
    """', 1.70x (95% CI 1.62-1.79, 6 rounds)' from a stored SpeedupInterval dict; '' without one."""
    return (
        ", " + SpeedupInterval(*(interval[k] for k in ("estimate", "low", "high", "rounds"))).describe()
        if interval
        else ""
    )


Measure = Callable[[list[str]], tuple[RoundsResult, dict[str, tuple[float | None, float, str, bool]]]]


def decide(
    precisions: list[str],
    batch_size: int,
    key_parts: dict,
    measure: Measure,
    cache: DecisionCache | None,
    log: Callable[[str], None] = lambda line: None,
) -> dict[str, Decision]:
    """The decision for each of `precisions`: from the cache when it holds one for `key_parts`,
    else measured (`measure(names)` -> rounds against fp32 and the candidates hopeless at warm-up)."""
    decisions = _cached(cache, key_parts, batch_size, precisions)
    missing = [name for name in precisions if name not in decisions]
    if missing:
        log(
            f"measuring {', '.join(missing)} against fp32 on the real training step at batch {batch_size} "
            "(once for this machine and model; the answer is cached) ..."
        )
        result, at_warmup = measure(missing)
        left_out = {
            name: (_left_out(name, batch_size, step_s, fp32_s, note), kept)
            for name, (step_s, fp32_s, note, kept) in at_warmup.items()
        }
        measured = decisions_from_rounds(result, batch_size, left_out)
        for name in missing:
            decisions[name] = measured[name]
            # Kept as speed/ab.py keeps every answer: not when the machine's load changed meanwhile, nor when it
            # was crowded (a decision taken under load is the moment's, not the machine's); one left out at its
            # warm-up, only when the machine was not crowded then and more than a foresight decided it.
            # Nor a measured band that decides nothing: the next run measures it again (what doctor advises).
            kept = result.machine_answer and left_out[name][1] if name in left_out else result.worth_keeping(name)
            if cache and kept:
                cache.put(decision_key(**key_parts, batch_size=batch_size, precision=name), measured[name].to_dict())
            elif name not in left_out and not result.answered(name):
                log(f"  ({name}: its speedup is unsettled: not cached; measured again next time)")
        for name, (decision, kept) in left_out.items():
            if not kept:
                log(f"  ({name}: {decision.note}; taken under load or foreseen, not measured: not cached)")
        if result.load_changed:
            log("  (the machine's load changed during this measurement: the decision is not cached)")
        elif result.under_load:
            log(f"  ({result.load_note()}: the decision is not cached; it is measured again next time)")
    return {name: decisions[name] for name in precisions}


def fastest_useful_mixed(decisions: dict[str, Decision]) -> str | None:
    best = max(
        (d for d in decisions.values() if PRECISIONS[d.precision].mixed and d.useful),
        key=lambda d: d.interval["estimate"] if d.interval else 0.0,
        default=None,
    )
    return best.precision if best else None


def choose_for_comparison(decisions: dict[str, Decision], left_out: list[dict]) -> tuple[tuple[str, ...], list[dict]]:
    """(fp32 and the fastest useful mixed mode, or fp32 alone when no mode is faster here; what was left
    out and why)."""
    best = fastest_useful_mixed(decisions)
    return ((FP32, best) if best else (FP32,)), left_out + [
        {"precision": d.precision, "reason": d.reason()} for d in decisions.values() if d.precision != best
    ]


def machine_key(device: torch.device, config, deciding: str = "") -> dict:
    """What, besides the batch size and precision, changes a decision (cache.py's key): the machine, and
    the model by name, every option and the source of the file that defines it (a GAN that differs in
    any of them never shares a cached answer with another); `deciding`: the setting decided (the memory
    format's decision, "channels_last", or compiling's, "compile"), left out of its own key."""
    hardware = detect_hardware(device)
    model = resolve_model(config.model.name, config.model.options)
    key = {
        "hardware": hardware.name,
        "flags": hardware.cpu_flags,
        "capability": hardware.cuda_capability,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "device": device.type,
        "model": model.name,
        "model_options": model.options,
        "model_source": model.source_sha256,
        "dataset": config.data.dataset,
        "image_size": config.data.image_size,
        "channels": config.data.channels,
        "compile": config.compute.compile,
        "channels_last": config.compute.channels_last,
    }
    return {name: value for name, value in key.items() if name != deciding}


def measure_with(
    make_timer: Callable[[str], Callable[[], float]],
    rule: StoppingRule = DECISION_RULE,
    seed: int = 0,
    slowdown: Callable[[str], float] = lambda name: 1.0,
) -> Measure:
    """`measure` for decide(): fp32 and the candidates, one timer each (`make_timer(precision)`); fp32 warmed up,
    then each candidate's warm-up (_warm_up_candidate: `slowdown(name)`, its known slowdown against fp32 here),
    then interleaved rounds until decided (rounds.py). Returns the rounds and, for each candidate left out at its
    warm-up, (its step's seconds or None, fp32's, why, whether it may be cached)."""

    def measure(names: list[str]):
        timers = {name: make_timer(name) for name in [BASELINE, *names]}
        fp32_s = [timers[BASELINE]() for _ in range(WARMUP_STEPS)][-1]
        left_out = {}
        for name in names:
            verdict = _warm_up_candidate(name, timers[name], fp32_s, slowdown(name), rule.max_seconds)
            if verdict is not None:
                left_out[name] = verdict
        timers = {name: timer for name, timer in timers.items() if name not in left_out}
        if len(timers) == 1:  # every candidate left out: rounds of fp32 alone would decide nothing
            return RoundsResult(BASELINE, {BASELINE: []}, stopped_by="only a baseline"), left_out
        return warmed_up_rounds(timers, BASELINE, rule, 0, seed), left_out

    return measure


def _warm_up_candidate(name: str, timer, fp32_s: float, slowdown: float, cap: float):
    """None when `name` is warmed up and goes on to the rounds; else (its step's seconds or None, fp32's, why it
    is left out, whether that may be cached). Each call is stopped at the decision's cap `cap` where it can be
    (speed/step_timer.py); where it cannot, one foreseen past the cap (its last call's time, or fp32's warm step
    times `slowdown`) is not started. Hopeless only on every warm-up step: one step is never a verdict."""
    calls: list[float] = []
    for _ in range(WARMUP_STEPS):
        foreseen = calls[-1] if calls else fp32_s * slowdown
        if foreseen > cap and not stoppable():
            known = (
                f"its last step took {calls[-1]:.3g} s"
                if calls
                else f"fp32's step took {fp32_s:.3g} s and {name} runs at least {slowdown:g}x slower on this CPU"
            )
            return (
                calls[-1] if calls else None,
                fp32_s,
                f"not run: {known}, so a step would pass the {cap:g} s cap and cannot be stopped here",
                False,
            )
        try:
            with abandoned_after(cap):
                calls.append(timer())
        except CallTooLong:
            return cap, fp32_s, f"a warm-up step ran past the {cap:g} s cap and was stopped", _quiet()
    if min(calls) <= HOPELESS_FIRST_STEP * fp32_s:
        return None
    seen = " and ".join(f"{call:.3g} s" for call in calls)
    return min(calls), fp32_s, f"warm-up steps {seen}: each more than {HOPELESS_FIRST_STEP:g}x fp32's", _quiet()


def _quiet() -> bool:
    """Whether no other process crowds our threads now: a verdict from warm-up steps is the machine's only then."""
    return not cpu_tuning.oversubscribed(torch.get_num_threads(), cpu_tuning.cores(), cpu_tuning.others_running())


def _left_out(name: str, batch_size: int, step_s: float | None, fp32_s: float, note: str) -> Decision:
    return Decision(
        name, batch_size, "slower", fp32_s, step_s, None, 0, measured_on=datetime.date.today().isoformat(), note=note
    )


def known_slowdown(device: torch.device, name: str) -> float:
    """How many times fp32's step `name`'s is known to take at least on this device (1: nothing known)."""
    if device.type != "cpu" or PRECISIONS[name].compute_dtype != torch.float16:
        return 1.0
    return 1.0 if "amx_fp16" in detect_hardware(device).cpu_flags else FP16_ON_CPU_SLOWDOWN


def measure_on_training_step(config, dataset, device: torch.device) -> Measure:
    """measure_with() on the real step: a StepTimer per precision at the config's batch size and
    model, timing this process alone."""
    return measure_with(
        lambda name: StepTimer(
            config.with_fields({"precision.name": name, "precision.loss_scale": None}),
            dataset,
            device,
            data_parallel=False,
            across_ranks=False,
        ),
        seed=config.seed,
        slowdown=lambda name: known_slowdown(device, name),
    )


def decide_for_run(
    config,
    dataset,
    device: torch.device,
    precisions: list[str] | None = None,
    use_cache: bool = True,
    log: Callable[[str], None] = lambda line: None,
) -> tuple[dict[str, Decision], list[dict]]:
    """Decisions for this machine at the config's batch size: (decisions, modes that cannot run here)."""
    candidates, cannot_run = candidates_for(device)
    return decide(
        [p for p in (precisions or candidates) if p != BASELINE],
        config.budget.batch_size,
        machine_key(device, config),
        measure_on_training_step(config, dataset, device),
        DecisionCache() if use_cache else None,
        log,
    ), cannot_run


def _cached(
    cache: DecisionCache | None, key_parts: dict, batch_size: int, precisions: list[str]
) -> dict[str, Decision]:
    """The decisions `cache` holds (and trusts) for these modes, by name."""
    return {
        name: found
        for name in precisions
        if cache
        and (found := Decision.from_cache(cache.get(decision_key(**key_parts, batch_size=batch_size, precision=name))))
    }


def cached_decisions(config, device: torch.device, precisions: list[str]) -> dict[str, Decision]:
    """The decisions the cache already holds for these modes at the config's batch size (no measuring)."""
    return _cached(
        DecisionCache(),
        machine_key(device, config),
        config.budget.batch_size,
        [name for name in precisions if name != BASELINE],
    )


def warn_about_named_modes(config, device: torch.device, precisions: list[str]) -> None:
    """An explicit --precisions is obeyed; a named mode already measured as no faster than fp32 at
    this batch size gets a warning with the measurement."""
    for decision in cached_decisions(config, device, precisions).values():
        if not decision.useful:
            warn(f"{decision.describe()}; it is run because --precisions names it")
