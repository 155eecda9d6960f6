"""The timing harness: the very `train_step` that `ampgan train` runs, on resident batches.

Per batch size, every precision gets its own state (same seed, same initial weights) and one
resident batch on the device (speed.step_timer); warm-up steps are discarded; then the precisions
are timed in interleaved rounds, in random order within each round, until every speedup over fp32
is known to +-5% at 95% confidence or the time cap is spent (speed.rounds) -- then it is marked
unsettled. The clock is read only after the device has finished.
"""

from __future__ import annotations

import gc
import resource
import signal
import time
from dataclasses import asdict, dataclass, field, fields, replace

import torch

from ampgan.bench.attainable import attainable_comparison, ops_alone, summarise
from ampgan.bench.deadline import CallTooLong, abandoned_after
from ampgan.bench.flops import count_flops_by_kind
from ampgan.bench.ops import TRACE_BATCH_SIZES, trace_op_table
from ampgan.bench.stats import achieved_fraction_of_peak, throughput, timing_stats
from ampgan.config import TrainConfig
from ampgan.config.flags import spec_field
from ampgan.data import DataConfig, load_dataset
from ampgan.errors import AmpganError
from ampgan.precisions import BF16, FP16, FP32
from ampgan.precisions import precision as precision_mode
from ampgan.speed.cache import decision_key
from ampgan.speed.compile_time import measure_compile_times
from ampgan.speed.decision import machine_key
from ampgan.speed.history import SpeedupHistory
from ampgan.speed.intervals import BETWEEN_RUN_SD
from ampgan.speed.plan import EVERY_USEFUL, plan_run
from ampgan.speed.rounds import UNTIL_SETTLED, RoundsResult, StoppingRule, measure_rounds
from ampgan.speed.step_timer import StepTimer
from ampgan.system import cpu_tuning
from ampgan.system.cpu_tuning import cores, load_text, oversubscribed
from ampgan.system.environment import environment_stamp
from ampgan.system.hardware import detect_hardware, peak_tflops
from ampgan.training.distributed import any_rank, gather_objects, leave_without_peers, world
from ampgan.training.interruption import stop_on_signals
from ampgan.training.memory import estimate_step_memory
from ampgan.training.out_of_memory import is_out_of_memory, out_of_memory_error
from ampgan.training.prepared import resolve_config
from ampgan.training.step import train_step


def _synthetic_data() -> TrainConfig:
    return TrainConfig(data=DataConfig(dataset="synthetic"))


@dataclass(frozen=True, kw_only=True)
class BenchSpec:
    # The run being timed: data, model and its options, optimizer, device, seed (its precision, batch
    # size, budget, memory format and compile setting are the bench's to vary). Synthetic data by
    # default, so data never limits.
    base: TrainConfig = field(default_factory=_synthetic_data)
    batch_sizes: tuple[int, ...] = spec_field((16, 64, 256, 1024, 2048), "Batch sizes to time.", "int_list")
    precisions: tuple[str, ...] = spec_field(
        (), "Comma-separated; default: every precision this device runs at useful speed.", "precision_list"
    )
    warmup: int = spec_field(2, "Discarded steps per configuration.", "whole", common=False)
    steps: int = spec_field(
        5, "The fewest timed rounds per batch size; more run until every speedup's 95% CI is within +-5%.", "whole2"
    )
    max_seconds: float = spec_field(
        60.0,
        "Cap on each batch size's warm-ups and measured rounds together (the speedup is then marked "
        "unsettled); a configuration whose warm-up projects beyond it, or runs past what is left of it, is "
        "recorded as too slow.",
        "positive",
    )
    # Per batch size, measure at least this long: neighbours' load on a shared machine shifts over
    # tens of seconds, and an answer drawn from a few seconds describes one such state only.
    min_seconds: float = spec_field(
        20.0,
        "Measure each batch size at least this long (a shared machine's load shifts over tens of seconds).",
        "nonnegative",
        common=False,
    )
    compile: tuple[str, ...] = ()  # the precisions whose step is torch.compile'd (compile time reported apart)
    # Measure the compiled precisions' compile time, cold and warm, in fresh processes (a minute or
    # more each); a comparison has its compile decisions' numbers already and skips it.
    measure_compile_times: bool = True
    # The precisions whose step runs channels-last (NHWC); None: measured per precision at the first
    # batch size, on this machine (speed/layout.py).
    channels_last: tuple[str, ...] | None = None
    peak_tflops: float | None = spec_field(
        None, "Override the device's peak (TFLOP/s) for the % of peak column.", "positive", common=False
    )
    # Trace the step's operations in fp32, bf16 and fp16 (a few steps at batch 8 and 16) for
    # `ampgan project`; a bench whose tables are not wanted (the speed decisions' own) skips it.
    trace_ops: bool = True
    # Time every operation of each configuration's real step alone, in each precision, and report the
    # attainable speedup (their sums' ratio) beside the measured one (bench/attainable.py).
    attainable: bool = spec_field(
        False,
        "Also time every operation of each configuration's step alone: the "
        "attainable speedup (what these kernels allow) beside the measured one.",
        "flag",
    )
    # Each precision's first op-trace cycle in seconds, foreseen from the bench's warm-up (run_bench fills it
    # in for the trace; not a setting, so results.json does not record it).
    trace_cycle_s: dict = field(default_factory=dict)

    @property
    def seed(self) -> int:
        return self.base.seed

    def train_config(self, precision: str, batch_size: int) -> TrainConfig:
        return self.base.with_fields(
            {
                "precision.name": precision,
                "precision.loss_scale": None,
                "budget.batch_size": batch_size,
                "budget.steps": 1,
                "budget.time_budget_s": None,
                "compute.compile": precision in self.compile,
                "compute.channels_last": precision in (self.channels_last or ()),
            }
        )

    def to_dict(self) -> dict:
        """What results.json records of the spec: the bench's own settings beside the base config."""
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("base", "trace_cycle_s")}
        return {
            "dataset": self.base.data.dataset,
            "model": self.base.model.name,
            "model_options": dict(self.base.model.options),
            "seed": self.seed,
            "config": self.base.to_dict(),
            **{k: list(v) if isinstance(v, tuple) else v for k, v in own.items()},
        }


@dataclass
class ConfigResult:
    batch_size: int
    precision: str
    status: str = "ok"  # ok | too_slow | oom | error
    reason: str = ""
    samples_s: list[float] = field(default_factory=list)
    warmup_s: list[float] = field(default_factory=list)
    warmup_call_s: list[float] = field(default_factory=list)  # each warm-up call: one step of each kind of the cycle
    flops_per_step: int | None = None
    flops_by_kind: dict[str, int] = field(default_factory=dict)  # convolution / matmul / other, per step
    peak_memory_bytes: int | None = None
    skipped_steps: int = 0
    # With several processes: samples_s holds the slowest rank's time of each round (it bounds the
    # wall clock); per_rank_samples_s every rank's; local_samples_s each rank's step without DDP,
    # timed alongside (the "1 process" reference for scaling efficiency).
    processes: int = 1
    per_rank_samples_s: list[list[float]] = field(default_factory=list)
    local_samples_s: list[float] = field(default_factory=list)
    attainable: dict = field(default_factory=dict)  # the step's operations timed alone (bench/attainable.py)
    # A too_slow verdict taken while the machine was crowded (system/cpu_tuning.py): what the load was. Such a
    # verdict is the moment's: no larger batch size is foreseen too slow from it.
    under_load: str = ""

    def to_dict(self, peak: float | None, processes_per_peak: int = 1) -> dict:
        """`processes_per_peak`: how many processes share the device whose peak is given (all
        local processes on a CPU, one per GPU)."""
        row = asdict(self)
        if self.samples_s:
            stats = timing_stats(self.samples_s)
            row["stats"] = stats.to_dict()
            row.update(throughput(self.batch_size * self.processes, stats.median_s))
            if self.flops_per_step:
                row["matmul_share"] = self.flops_by_kind.get("matmul", 0) / self.flops_per_step
                achieved, percent = achieved_fraction_of_peak(
                    self.flops_per_step * processes_per_peak, stats.median_s, peak
                )
                row["achieved_tflops"], row["percent_of_peak"] = achieved, percent
            if self.local_samples_s:
                # throughput(N) / (N x throughput(1)) with both measured per process:
                # (N B / t_ddp) / (N B / t_local) = t_local / t_ddp.
                row["scaling_efficiency"] = timing_stats(self.local_samples_s).median_s / stats.median_s
        return row


def _free_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


class _Contender:
    """One precision at one batch size: its step timer and its results."""

    def __init__(
        self,
        spec: BenchSpec,
        precision: str,
        batch_size: int,
        dataset,
        device,
        data_parallel: bool = True,
        batch: tuple[torch.Tensor, torch.Tensor] | None = None,
    ):
        self.timer = StepTimer(spec.train_config(precision, batch_size), dataset, device, data_parallel, batch)
        self.result = ConfigResult(batch_size=batch_size, precision=precision, processes=world().size)
        self.device = device

    def timed_step(self) -> float:
        return self.timer()

    def count_step_flops(self) -> dict[str, int]:
        """FLOPs per step by kind (a cycle's over its steps). Counted on the eager modules: the FLOPs are
        the same, and the counter's global module hooks would otherwise make compiled modules recompile."""
        timer = self.timer
        total: dict[str, int] = {}
        with timer.state.eager() as state:
            for before, count in timer.step_kinds:
                state.step = before
                for kind, flops in count_flops_by_kind(lambda: train_step(state, timer.resident_batch)).items():
                    total[kind] = total.get(kind, 0) + flops * count
        return {kind: flops // timer.cycle_steps for kind, flops in total.items()}

    def finish(self) -> ConfigResult:
        self.result.skipped_steps = self.timer.skipped_steps()
        return self.result


def run_bench(
    spec: BenchSpec, device: torch.device, on_config=lambda result: None, log=lambda line: None, dataset=None
) -> dict:
    """Measure every (batch size, precision) and return the results document. `log`: progress lines
    (the speed decision's, when the precisions are chosen here); `dataset`: one already loaded
    (a comparison's), else loaded from the spec."""
    hardware = detect_hardware(device)
    if dataset is None:
        dataset = load_dataset(spec.base.data, seed=spec.seed)
    # The decisions made before anything is measured (speed/plan.py: timed and said, with how to skip each):
    # every precision not measured slower at the first batch size (a bench charts where a mode starts to
    # gain), and each one's memory format; whether to compile is the user's (--compile).
    spent = {}  # seconds per stage, printed beside the budget (output.time_spent_text)
    started = time.perf_counter()
    plan = plan_run(
        lambda precision: spec.train_config(precision, spec.batch_sizes[0]),
        dataset,
        device,
        precisions=spec.precisions,
        choose=EVERY_USEFUL,
        channels_last=spec.channels_last,
        compile=spec.compile,
        warn_named=False,
        decision_seconds=DECISION_SHARE * budget_s(spec),
        log=log,
    )
    precisions, left_out, layouts = plan.precisions, plan.left_out, plan.layouts
    spec = replace(spec, channels_last=plan.channels_last)
    spent["decisions"], started = time.perf_counter() - started, time.perf_counter()
    # Compile time as the next run meets it (fresh processes, cold then warm cache): rank 0 alone.
    compile_times = (
        {
            name: measure_compile_times(spec.train_config(name, spec.batch_sizes[0]))
            for name in precisions
            if name in spec.compile
        }
        if spec.measure_compile_times and world().is_main
        else {}
    )
    spent["compile_times"], started = time.perf_counter() - started, time.perf_counter()
    peaks = {}
    for name in precisions:
        value, source = (spec.peak_tflops, "bench.peak_tflops") if spec.peak_tflops else peak_tflops(hardware, name)
        peaks[name] = {"tflops": value, "source": source}
    results: list[ConfigResult] = []
    measurements: list[dict] = []
    incomplete = None
    slow_per_image: dict[str, tuple[int, float]] = {}  # precision -> (batch size, seconds per image) when too slow
    with stop_on_signals() as stop_request:
        for index, batch_size in enumerate(spec.batch_sizes):
            try:
                finished, rounds = _bench_batch_size(
                    spec,
                    precisions,
                    batch_size,
                    dataset,
                    device,
                    on_config,
                    _StopCheck(stop_request, device),
                    slow_per_image,
                    spent,
                )
                results += finished
                for result in finished:
                    if result.status == "too_slow" and result.warmup_s and not result.under_load:
                        slow_per_image.setdefault(result.precision, (batch_size, result.warmup_s[-1] / batch_size))
                if rounds is not None:
                    measurements.append({"batch_size": batch_size, **rounds.to_dict()})
            except _StopRequested:
                # The batch size being measured has too few rounds to be compared: it is left out.
                incomplete = _stopped(stop_request, spec.batch_sizes[:index], spec.batch_sizes[index:])
                break
        # What building the configurations took is model building, not measuring (said apart).
        spent["measuring"] = time.perf_counter() - started - spent.get("building", 0.0)
        started = time.perf_counter()
        # The op tables, inside the same guard: a signal now stops them (between precisions), never the
        # process, so what was measured is written.
        traced = {}
        if incomplete is None and not stop_request and spec.trace_ops and world().is_main:
            # Each precision's first trace cycle, foreseen from its warm-up (a cycle at the smaller trace batch).
            foreseen = {}
            for result in results:
                for call_s in result.warmup_call_s[:1]:
                    cycle_s = call_s * TRACE_BATCH_SIZES[0] / result.batch_size
                    foreseen[result.precision] = min(foreseen.get(result.precision, cycle_s), cycle_s)
            traced = trace_op_tables(
                replace(spec, trace_cycle_s=foreseen), dataset, device, log, stop_check=lambda: bool(stop_request)
            )
        spent["trace"] = time.perf_counter() - started
        if incomplete is None and stop_request:  # after the last check: everything measured, but asked to stop
            incomplete = _stopped(stop_request, spec.batch_sizes, ())
    sharing = world().local_size if device.type == "cpu" else 1
    rows = [r.to_dict(peaks[r.precision]["tflops"], sharing) for r in results]
    pairs = speedups(measurements)
    for row in rows:  # the first warm-up step of a compiled step is mostly compilation
        if row["precision"] in spec.compile:
            row["compile_s"] = row["warmup_s"][0] if row["warmup_s"] else None
    return {
        "format": "ampgan-bench/1",
        "environment": environment_stamp(device),
        "processes": world().size,
        "spec": spec.to_dict()
        | {"precisions": list(precisions), "decision_share": DECISION_SHARE, "trace_share": TRACE_SHARE},
        "hardware": hardware.to_dict(),
        "peaks": peaks,
        "left_out": left_out,
        "layouts": layouts,
        "threads": plan.threads,  # the thread count measured with, and why (speed/threads.py)
        # per compiled precision at the first batch size: {cold_s, warm_s, compiled_step_s}
        "compile_times": compile_times,
        "configs": rows,
        "measurements": measurements,
        "speedups": pairs,
        "attainable": attainable_rows(rows, pairs),
        "incomplete": incomplete,
        "seconds": {stage: round(value, 2) for stage, value in spent.items()},
        **traced,
    }


def _stopped(stop_request, finished, not_measured) -> dict:
    return {
        "signal": signal.Signals(stop_request.signum or signal.SIGTERM).name,
        "signum": stop_request.signum or signal.SIGTERM,
        "finished_batch_sizes": list(finished),
        "not_measured": list(not_measured),
    }


OP_TABLE_PRECISIONS = (FP32, BF16, FP16)
# The op tables (for `ampgan project`) may take this share of the bench's own budget (--max-seconds per
# batch size), never more: a precision whose trace would not fit is left out and says so.
TRACE_SHARE = 0.5


# The decisions before measuring (precisions, memory format) may take this share of it: one whose answer
# is not cached and whose time cap does not fit takes its default and says so (speed/plan.py).
DECISION_SHARE = 0.25


def budget_s(spec: BenchSpec) -> float:
    """What the bench was asked to spend measuring: --max-seconds per batch size."""
    return spec.max_seconds * len(spec.batch_sizes)


def trace_budget_s(spec: BenchSpec) -> float:
    return TRACE_SHARE * budget_s(spec)


def trace_op_tables(
    spec: BenchSpec, dataset, device: torch.device, log=lambda line: None, stop_check=lambda: False
) -> dict:
    """{"op_tables": {precision: table}, "op_tables_failed": [...], "op_tables_seconds"}: the step's
    operations per precision (bench/ops.py), traced eager on this rank alone: the precisions the bench was
    asked for (--precisions) first, then the others a projection onto GPUs reads, all within TRACE_SHARE of
    the bench's budget (a trace stops before a cycle that would end past it, and says so). `stop_check()` true:
    the precisions not traced yet are left out (a signal arrived)."""
    tables, failed = {}, []
    budget = trace_budget_s(spec)
    started = time.perf_counter()
    deadline = started + budget
    asked = tuple(spec.precisions) or OP_TABLE_PRECISIONS
    for name in (*asked, *(p for p in OP_TABLE_PRECISIONS if p not in asked)):
        if name not in asked and deadline - time.perf_counter() < budget / 2:
            failed.append(
                {
                    "precision": name,
                    "reason": "not traced: --precisions left it out and under half the "
                    "trace's share of the budget was left for it",
                }
            )
            continue
        if stop_check():
            failed.append({"precision": name, "reason": "not traced: the bench was asked to stop"})
            continue

        def make_timer(batch_size, name=name):
            config = spec.train_config(name, batch_size).with_fields({"compute.compile": False})
            return StepTimer(config, dataset, device, data_parallel=False, across_ranks=False)

        # A precision the bench did not run is foreseen as slow as the slowest it did.
        foreseen = spec.trace_cycle_s.get(name, max(spec.trace_cycle_s.values(), default=None))
        left = deadline - time.perf_counter()
        if foreseen is not None and foreseen > left:
            failed.append(
                {
                    "precision": name,
                    "reason": f"not traced: its warm-up foresees {foreseen:.1f} s per trace "
                    f"cycle, more than the {max(left, 0):.1f} s left of the trace's "
                    "share of the budget; give a larger --max-seconds",
                }
            )
            continue
        try:
            tables[name] = trace_op_table(make_timer, name, deadline=deadline, first_cycle_s=foreseen or 0.0).to_dict()
        except AmpganError as error:
            failed.append({"precision": name, "reason": str(error)})
        except Exception as error:  # noqa: BLE001 - a step that cannot be traced is reported, not fatal
            failed.append(
                {
                    "precision": name,
                    "reason": f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
                    if str(error)
                    else type(error).__name__,
                }
            )
    spent = time.perf_counter() - started
    log(
        f"op tables: {', '.join(tables) or 'none'} traced in {spent:.1f} s (their share: at most {TRACE_SHARE:.0%} of "
        f"the bench's --max-seconds x batch sizes = {budget:.0f} s; skip them with --no-trace)"
    )
    if failed:
        log("op tables not traced for " + "; ".join(f"{f['precision']}: {f['reason']}" for f in failed))
    return {
        "op_tables": tables,
        "op_tables_failed": failed,
        "op_tables_seconds": round(spent, 3),
        "step_memory": step_memory(spec, dataset),
    }


def step_memory(spec: BenchSpec, dataset) -> dict | None:
    """A lower bound on one step's memory as a function of the batch (training/memory.py's estimate on
    the meta device): {"parameters_bytes", "activation_bytes_per_sample": {precision: bytes}}; None when
    the model cannot be traced there."""
    try:
        _, _, gan, data = resolve_config(spec.train_config(FP32, TRACE_BATCH_SIZES[0]), dataset)
        if not any(p.is_meta for p in gan.generator.parameters()):
            return None
        per_precision = {
            name: estimate_step_memory(gan, data, 1, precision_mode(name).element_bytes) for name in OP_TABLE_PRECISIONS
        }
    except Exception:  # noqa: BLE001 - a model the meta trace cannot follow has no estimate, not an error
        return None
    return {
        "parameters_bytes": per_precision[FP32].parameters_bytes,
        "activation_bytes_per_sample": {name: e.activations_bytes_per_sample for name, e in per_precision.items()},
        "what": "a lower bound (training/memory.py): weights, gradients and Adam's moments in fp32, every layer's "
        "output; no temporaries, no allocator slack",
    }


class _StopRequested(Exception):
    """SIGINT/SIGTERM arrived: stop measuring, keep the batch sizes already finished."""


class _StopCheck:
    """Asked between steps; every rank stops at the same point (the answer is OR-ed over ranks)."""

    def __init__(self, request, device: torch.device):
        self.request, self.device = request, device

    def __call__(self) -> None:
        if any_rank([bool(self.request)])[0]:
            raise _StopRequested


# A precision too slow at a smaller batch size is not run at a larger one when even twice its per-image
# speed there (larger batches use the machine better) would not fit --max-seconds: a bf16 step that
# took 10 s at batch 64 on a CPU without bf16 instructions would take minutes at batch 1024, to no end.
BETTER_AT_LARGER_BATCHES = 2.0


def _projected_too_slow(
    spec: BenchSpec, precision: str, batch_size: int, slow_per_image: dict[str, tuple[int, float]], device
) -> ConfigResult | None:
    if precision not in slow_per_image or precision in spec.compile:
        return None
    measured_batch, per_image = slow_per_image[precision]
    projected = per_image * batch_size / BETTER_AT_LARGER_BATCHES
    steps = spec.warmup + spec.steps + 1
    if not any_rank([projected * steps > spec.max_seconds])[0]:
        return None
    return ConfigResult(
        batch_size=batch_size,
        precision=precision,
        status="too_slow",
        reason=f"not run: a step took {per_image * measured_batch:.2f} s at batch {measured_batch}, so "
        f"one here would take at least {projected:.1f} s; {steps} steps would exceed "
        f"--max-seconds {spec.max_seconds:g}",
    )


def _bench_batch_size(
    spec,
    precisions,
    batch_size,
    dataset,
    device,
    on_config,
    stop_check,
    slow_per_image: dict | None = None,
    spent: dict | None = None,
) -> tuple[list[ConfigResult], RoundsResult | None]:
    """`spent["building"]` (when given) gains the seconds spent building each configuration (its networks,
    optimizers and resident batch: model building, which no measuring budget bounds)."""
    spent = spent if spent is not None else {}
    # The batch size's --max-seconds, shared by its warm-ups and its measured rounds (building each
    # configuration and a compiled step's compilation are not counted: both are said apart).
    allowance = {"left": spec.max_seconds}
    contenders: list[_Contender] = []
    finished: list[ConfigResult] = []
    for precision in precisions:
        stop_check()
        skipped = _projected_too_slow(spec, precision, batch_size, slow_per_image or {}, device)
        if skipped is not None:
            finished.append(skipped)
            continue
        if world().distributed:
            # A configuration that fails on one rank only (out of memory on the fullest GPU, say) must fail
            # on every rank before any of them enters a collective the failed one would never join.
            refused = _agreed_local_trial(spec, precision, batch_size, dataset, device)
            if refused is not None:
                finished.append(refused)
                continue
        contender = None
        try:
            # This contender's own peak: the contenders before it stay allocated while it warms up.
            rss_before = _peak_rss_bytes()
            held_before = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            built = time.perf_counter()
            contender = _Contender(spec, precision, batch_size, dataset, device)
            spent["building"] = spent.get("building", 0.0) + time.perf_counter() - built
            _warm_up(
                spec,
                contender,
                stop_check,
                after_first=lambda: _forget_autotuning_peak(spec, device),
                allowance=allowance,
            )
            if contender.result.status == "ok":
                contender.result.peak_memory_bytes = (
                    torch.cuda.max_memory_allocated(device) - held_before
                    if device.type == "cuda"
                    else max(0, _peak_rss_bytes() - rss_before)
                )
                contender.result.flops_by_kind = contender.count_step_flops()
                contender.result.flops_per_step = sum(contender.result.flops_by_kind.values())
                if spec.attainable:
                    contender.result.attainable = summarise(ops_alone(contender.timer))
                contenders.append(contender)
            else:
                finished.append(contender.finish())
        except _StopRequested:
            raise
        except Exception as error:  # noqa: BLE001 - a failed configuration is a result, not a crash
            if world().distributed:
                # Past the agreed trial, a failure may be this rank's alone, inside a collective: it ends the
                # job in one line (torchrun stops the other ranks) rather than leave them waiting.
                if is_out_of_memory(error):
                    leave_without_peers()
                    raise out_of_memory_error(error, batch_size, device, f"the {precision} bench step") from None
                raise
            result = contender.result if contender else ConfigResult(batch_size=batch_size, precision=precision)
            result.status = "oom" if is_out_of_memory(error) else "error"
            result.reason = _first_line(error)
            finished.append(result)
            contender = None
            _free_memory(device)
    rounds = _time_interleaved(spec, contenders, stop_check, seconds=allowance["left"])
    finished += [c.finish() for c in contenders]
    contenders.clear()
    _free_memory(device)
    finished.sort(key=lambda r: precisions.index(r.precision))
    for result in finished:
        on_config(result)
    return finished, rounds


def _warm_up(
    spec: BenchSpec, contender: _Contender, stop_check=lambda: None, after_first=lambda: None, allowance=None
) -> None:
    """Discarded steps (kernel selection, compilation, allocator growth). Whether the configuration fits
    in --max-seconds at all is judged on a step after the first: the first one also autotunes cuDNN's
    (or creates oneDNN's) kernels for each shape, several times a step's own time, and judged on it the
    large batches where mixed precision pays would be dropped. One more step is run when needed to judge.
    `allowance` ({"left": seconds}, shared by a batch size's configurations): a call is stopped when it runs
    past what is left, and spends it; None: only a first call is stopped, at --max-seconds."""
    steps = spec.warmup + spec.steps + 1  # +1: the FLOP-counting step
    judged = contender.result.precision in spec.compile  # compilation dominates its first step: never judged
    over_after_first: list[float] = []  # steps after the first that foresaw the budget exceeded, in a row
    index = 0
    while index < max(1, spec.warmup) or not judged:
        if index:
            stop_check()
        compiling = index == 0 and contender.result.precision in spec.compile  # compile time is said apart
        if allowance is None:  # the first call of a configuration not yet judged may take the whole budget
            limit = spec.max_seconds if index == 0 and not judged else None
        else:
            # Nothing left: not even a compiling call is started (its compile would be spent on a too_slow row).
            if allowance["left"] <= 0:
                _abandoned(spec, contender, spent_before=True)
                return
            limit = None if compiling else allowance["left"]  # a compile is not stopped: its time is said apart
        started = time.perf_counter()
        try:
            with abandoned_after(limit):
                elapsed = contender.timed_step()  # per step, averaged over the cycle's kinds of step
        except CallTooLong:
            _abandoned(spec, contender, limit=limit)
            return
        finally:
            if allowance is not None and not compiling:
                allowance["left"] -= time.perf_counter() - started
        # What one measurement really costs: a call runs one step of each kind in the cycle (a lazy penalty's
        # too), so a model with lazy updates spends several steps' time per call, not one.
        call_s = time.perf_counter() - started
        contender.result.warmup_s.append(elapsed)
        contender.result.warmup_call_s.append(call_s)
        if index == 0:
            after_first()
        if not judged:
            # The first step is the slowest: when even it fits, every later one does. A call of a model with
            # lazy updates runs one step of each kind, and costs that (call_s), not one step.
            over = any_rank([max(elapsed, call_s) * steps > spec.max_seconds])[0]
            if not over:
                judged = True
                over_after_first.clear()
            elif index == 0 and any_rank([call_s > spec.max_seconds])[0]:
                # One warm-up call spent the whole of this batch size's --max-seconds: however much faster
                # the next were (kernel selection is done), a second would be spent past the budget.
                contender.result.status = "too_slow"
                contender.result.reason = (
                    f"its first warm-up call took {call_s:.2f} s, more than --max-seconds {spec.max_seconds:g} alone"
                )
                return
            elif index > 0:
                over_after_first.append(elapsed)
                if len(over_after_first) < TOO_SLOW_CONFIRMED_BY:
                    index += 1  # one slow step is a hiccup (a neighbour's burst) until another confirms it
                    continue
                per_call = f" (one of each kind of step in its cycle: {call_s:.2f} s)" if call_s > 1.5 * elapsed else ""
                seen = " and ".join(f"{value:.2f} s" for value in over_after_first)
                contender.result.status = "too_slow"
                contender.result.reason = (
                    f"{len(over_after_first)} steps in a row after the first (which selects kernels) took {seen}"
                    f"{per_call}; {steps} steps would exceed --max-seconds {spec.max_seconds:g}"
                )
                _mark_if_crowded(contender.result)
                return
        index += 1


# Steps after the first that must each foresee the budget exceeded, in a row, before a configuration is too slow.
TOO_SLOW_CONFIRMED_BY = 2


def _mark_if_crowded(result: ConfigResult) -> None:
    """A too_slow verdict taken while other processes crowd the cores says so, and is the moment's answer only
    (no larger batch size is foreseen too slow from it)."""
    threads, machine_cores, others = torch.get_num_threads(), cores(), cpu_tuning.others_running()
    if oversubscribed(threads, machine_cores, others):
        result.under_load = load_text(others, threads, machine_cores)
        result.reason += f" (measured under load: {result.under_load}; a rerun on free cores may fit)"


def _abandoned(spec: BenchSpec, contender: _Contender, limit: float | None = None, spent_before: bool = False) -> None:
    """A warm-up call stopped when it ran past what was left of the batch size's --max-seconds (`limit`
    seconds), or not started because nothing was left: too slow. A stopped call's time is known to be at
    least `limit`, so a larger batch size of this precision is foreseen too slow without running."""
    contender.result.status = "too_slow"
    if spent_before:
        contender.result.reason = (
            f"not warmed up: the warm-ups before it spent this batch size's --max-seconds {spec.max_seconds:g} "
            "(warm-ups and measured rounds share it)"
        )
        return
    limit = spec.max_seconds if limit is None else limit
    kinds = len(getattr(getattr(contender, "timer", None), "step_kinds", None) or [None])
    if not contender.result.warmup_s:  # what is known of a step here: at least this
        contender.result.warmup_call_s.append(limit)
        contender.result.warmup_s.append(limit / kinds)
    contender.result.reason = (
        f"its warm-up call ran past the {limit:.3g} s left of --max-seconds {spec.max_seconds:g} for this batch "
        "size (warm-ups and measured rounds share it) and was stopped there"
    )
    _mark_if_crowded(contender.result)


def _forget_autotuning_peak(spec: BenchSpec, device: torch.device) -> None:
    """After the first step: the peak memory from here on is the step's own, without the workspaces
    cuDNN's autotuner tried in the first one. With a single warm-up step there is no later one to
    measure, and the peak keeps them (a bench's --warmup is at least 2 by default)."""
    if device.type == "cuda" and spec.warmup >= 2:
        torch.cuda.reset_peak_memory_stats(device)


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0][:300] if str(error) else type(error).__name__


def _agreed_local_trial(spec: BenchSpec, precision: str, batch_size: int, dataset, device) -> ConfigResult | None:
    """One step of the configuration on this rank alone (no DDP, no collective inside), then every rank
    learns whether any failed: None when it ran everywhere, else the result every rank records."""
    outcome = None
    try:
        trial = StepTimer(
            spec.train_config(precision, batch_size), dataset, device, data_parallel=False, across_ranks=False
        )
        trial()
    except Exception as error:  # noqa: BLE001 - reported on every rank below
        outcome = ("oom" if is_out_of_memory(error) else "error", _first_line(error))
    trial = None
    _free_memory(device)
    outcomes = gather_objects(outcome)
    failed = [(rank, found) for rank, found in enumerate(outcomes) if found is not None]
    if not failed:
        return None
    rank, (status, reason) = failed[0]
    return ConfigResult(
        batch_size=batch_size,
        precision=precision,
        status=status,
        processes=world().size,
        reason=f"rank {rank}: {reason}",
    )


def _time_interleaved(
    spec: BenchSpec, contenders: list[_Contender], stop_check=lambda: None, seconds: float | None = None
) -> RoundsResult | None:
    """Rounds in random order until every speedup over fp32 is settled (speed.rounds), at least
    --steps of them (and 2), at most `seconds` of measured steps: what the warm-ups left of the batch
    size's --max-seconds (all of it when None)."""
    seconds = spec.max_seconds if seconds is None else seconds
    twins = _local_twins(spec, contenders) if world().distributed else {}
    contenders = [c for c in contenders if c.result.status == "ok"]  # a failed twin's: an oom row, not measured
    if not contenders:
        return None

    def timer_of(contender: _Contender):
        def timed() -> float:
            elapsed = contender.timed_step()
            contender.result.samples_s.append(elapsed)
            if contender.timer.data_parallel:
                contender.result.per_rank_samples_s.append(contender.timer.last_per_rank)
            if id(contender) in twins:
                contender.result.local_samples_s.append(twins[id(contender)]())
            return elapsed

        return timed

    names = [c.result.precision for c in contenders]
    baseline = FP32 if FP32 in names else names[0]
    history, keys = (
        SpeedupHistory(),
        {c.result.precision: _history_key(c) for c in contenders if c.result.precision != baseline},
    )
    learned = max((history.between_run_sd(key) for key in keys.values()), default=(BETWEEN_RUN_SD, "default"))
    if world().distributed:  # rank 0's history for every rank: the ranks must stop at the same round
        learned = gather_objects(learned)[0]
    # Under DDP each sample is two steps: the data-parallel one the rounds count, then the same step alone
    # on every rank (its local twin, for the scaling efficiency). The measured steps get half the seconds,
    # so that the two together keep to --max-seconds.
    seconds = max(seconds, 0.0) / (2 if twins else 1)
    rule = StoppingRule(
        min_rounds=max(2, spec.steps),
        max_seconds=seconds,
        until=UNTIL_SETTLED,
        min_seconds=min(spec.min_seconds, seconds),
        between_run_sd=learned[0],
    )
    rounds = measure_rounds(
        {c.result.precision: timer_of(c) for c in contenders}, baseline, rule, seed=spec.seed, stop_check=stop_check
    )
    rounds.between_run_source = learned[1]
    if world().is_main and rounds.machine_answer:  # a crowded moment's spread is not this machine's
        for name, key in keys.items():
            interval = rounds.intervals.get(name)
            if interval is not None and name not in rounds.hopeless:
                history.record(key, interval.estimate)
    for contender in contenders:  # after a re-measurement only the last attempt's rounds count
        result, kept = contender.result, len(rounds.samples_s[contender.result.precision])
        result.samples_s = result.samples_s[len(result.samples_s) - kept :]
        result.per_rank_samples_s = result.per_rank_samples_s[len(result.per_rank_samples_s) - kept :]
        result.local_samples_s = result.local_samples_s[len(result.local_samples_s) - kept :]
        if result.precision in rounds.hopeless:
            result.reason = f"left out after {kept} round(s): {rounds.hopeless[result.precision]}"
    return rounds


def _history_key(contender: _Contender) -> str:
    """The speedup history's key (speed/history.py): the decisions' machine and model key, the batch
    size, the precision, the number of processes."""
    config = contender.timer.config
    return decision_key(
        **machine_key(contender.device, config),
        batch_size=contender.result.batch_size,
        precision=contender.result.precision,
        processes=world().size,
    )


def _local_twins(spec: BenchSpec, contenders: list[_Contender]) -> dict:
    """{id(contender): its local twin} for the contenders whose twin every rank built and warmed up. A twin
    allocates a second state beside every data-parallel one: one that fails on any rank (out of memory, say)
    makes its contender an oom (or error) row on every rank, agreed before any round, never a traceback."""
    twins = {}
    for contender in contenders:
        outcome = None
        try:
            twins[id(contender)] = _local_twin(spec, contender)
        except Exception as error:  # noqa: BLE001 - agreed over the ranks below, then recorded
            outcome = ("oom" if is_out_of_memory(error) else "error", _first_line(error))
        failed = [(rank, found) for rank, found in enumerate(gather_objects(outcome)) if found is not None]
        if failed:
            twins.pop(id(contender), None)
            _free_memory(contender.device)  # the failed twin's tensors, once nothing refers to them
            rank, (status, reason) = failed[0]
            contender.result.status = status
            contender.result.reason = (
                f"rank {rank}: its single-process twin (the scaling efficiency's reference, built beside the "
                f"data-parallel step) failed: {reason}"
            )
    return twins


def _local_twin(spec: BenchSpec, contender: _Contender) -> StepTimer:
    """The same configuration without DDP, warmed up: every rank steps alone, all at once. Warmed up with no
    collective inside (a rank failing here must not leave the others in one); its timed calls then report the
    slowest rank's time, as the data-parallel step's do."""
    timer = contender.timer
    twin = StepTimer(
        spec.train_config(contender.result.precision, contender.result.batch_size),
        timer.dataset,
        contender.device,
        data_parallel=False,
        batch=(timer.real, timer.labels),
        across_ranks=False,
    )
    for _ in range(max(1, spec.warmup)):
        twin()
    twin.across_ranks = world().distributed
    return twin


def attainable_rows(rows: list[dict], pairs: list[dict]) -> list[dict]:
    """Per batch size and mixed precision with operations timed alone: attainable against achieved."""
    by_key = {(r["batch_size"], r["precision"]): r for r in rows if r.get("attainable")}
    achieved = {(p["batch_size"], p["precision"]): p["estimate"] for p in pairs}
    out = []
    for (batch_size, precision), row in by_key.items():
        base = by_key.get((batch_size, FP32))
        if precision == FP32 or base is None:
            continue
        out.append(
            {
                "batch_size": batch_size,
                "precision": precision,
                "baseline": FP32,
                **attainable_comparison(base["attainable"], row["attainable"], achieved.get((batch_size, precision))),
            }
        )
    return out


def speedups(measurements: list[dict]) -> list[dict]:
    """Per batch size, each precision's speedup over the baseline with its 95% interval."""
    out = []
    for measured in measurements:
        for precision, interval in measured["intervals"].items():
            if interval is None:
                continue
            medians = measured.get("median_s", {})
            out.append(
                {
                    "batch_size": measured["batch_size"],
                    "precision": precision,
                    "baseline": measured["baseline"],
                    **interval,
                    "stopped_by": measured["stopped_by"],
                    "load_changed": measured["load_changed"],
                    "under_load": measured.get("under_load", False),
                    "baseline_step_s": medians.get(measured["baseline"]),
                    "step_s": medians.get(precision),
                }
            )
    return out
