"""What a bench found: one configuration's record (its status, its timings and what follows from them),
and each batch size's speedups over the baseline."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ampgan.bench.stats import achieved_fraction_of_peak, throughput, timing_stats
from ampgan.files.schema import BATCH_SIZE, COUNT, Between
from ampgan.system.memory import is_out_of_memory
from ampgan.training.precision import PRECISION_NAME

COUNT_OR_NULL = Between(0, COUNT.high, or_null=True, whole=True, says=f"{COUNT.says}, or null")


# Why a configuration has no timing, as tables and figures say it. too_slow: its steps were shown not to fit
# --max-seconds; out_of_time: the batch size's --max-seconds ran out before it could be judged (a verdict on
# the budget, not on its speed: a first call's kernel selection stopped at what was left is no step time).
STATUS_WORDS = {"too_slow": "too slow", "out_of_time": "out of time", "oom": "out of memory", "error": "failed"}


@dataclass
class ConfigResult:
    batch_size: int = field(metadata={"shape": BATCH_SIZE})  # results.json read back: refused unless one
    precision: str = field(metadata={"shape": PRECISION_NAME})
    status: str = "ok"  # ok, or a key of STATUS_WORDS
    reason: str = ""
    samples_s: list[float] = field(default_factory=list)
    warmup_s: list[float] = field(default_factory=list)
    warmup_call_s: list[float] = field(default_factory=list)  # each warm-up call: one step of each kind of the cycle
    flops_per_step: int | None = field(default=None, metadata={"shape": COUNT_OR_NULL})
    flops_by_kind: dict[str, int] = field(default_factory=dict)  # convolution / matmul / other, per step
    peak_memory_bytes: int | None = field(default=None, metadata={"shape": COUNT_OR_NULL})
    skipped_steps: int = field(default=0, metadata={"shape": COUNT})
    # With several processes: samples_s holds the slowest rank's time of each round (it bounds the
    # wall clock); per_rank_samples_s every rank's; local_samples_s each rank's step without DDP,
    # timed alongside (the "1 process" reference for scaling efficiency).
    processes: int = field(default=1, metadata={"shape": BATCH_SIZE})  # a multiplier of throughput: at least 1
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
                row["achieved_tflops"], row["percent_of_peak"] = achieved_fraction_of_peak(
                    self.flops_per_step * processes_per_peak, stats.median_s, peak
                )
            if self.local_samples_s:
                # throughput(N) / (N x throughput(1)) with both measured per process:
                # (N B / t_ddp) / (N B / t_local) = t_local / t_ddp.
                row["scaling_efficiency"] = timing_stats(self.local_samples_s).median_s / stats.median_s
        return row


def failure(error: BaseException) -> tuple[str, str]:
    """(status, reason) of a configuration that failed with `error`: oom or error, and its first line."""
    reason = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
    return ("oom" if is_out_of_memory(error) else "error", reason)


def speedups(measurements: list[dict]) -> list[dict]:
    """Per batch size, each precision's speedup over the baseline with its 95% interval."""
    return [
        {
            "batch_size": measured["batch_size"],
            "precision": precision,
            "baseline": measured["baseline"],
            **interval,
            "stopped_by": measured["stopped_by"],
            "load_changed": measured["load_changed"],
            "under_load": measured.get("under_load", False),
            "baseline_step_s": measured.get("median_s", {}).get(measured["baseline"]),
            "step_s": measured.get("median_s", {}).get(precision),
        }
        for measured in measurements
        for precision, interval in measured["intervals"].items()
        if interval is not None
    ]
