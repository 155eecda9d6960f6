"""The timing harness: the very `train_step` that `ampgan train` runs, on resident batches.

Per batch size, every precision gets its own state (same seed, same initial weights) and one
resident batch on the device; warm-up steps are discarded; then the precisions are timed in
interleaved rounds (fp32, bf16, fp32, bf16, ...) so drift on a shared machine hits all alike.
The clock is read only after the device has finished (CUDA is synchronised around each sample).
"""

from __future__ import annotations

import gc
import resource
import signal
import time
from dataclasses import asdict, dataclass, field

import torch

from ampgan.config import TrainConfig
from ampgan.data import load_dataset
from ampgan.data.batches import BatchStream
from ampgan.system.cpu_tuning import keep_freed_memory_for_reuse
from ampgan.training.distributed import any_rank, gather_objects, world
from ampgan.training.interruption import stop_on_signals
from ampgan.system.environment import environment_stamp
from ampgan.bench.flops import count_flops
from ampgan.system.hardware import detect_hardware, peak_tflops
from ampgan.training.precision import COMPUTE_DTYPES, build_policy, time_conv
from ampgan.bench.stats import achieved_fraction_of_peak, pairwise_speedup, throughput, timing_stats
from ampgan.training.loop import model_shape_for
from ampgan.training.state import build_train_state, wrap_modules
from ampgan.training.step import train_step


@dataclass(frozen=True, kw_only=True)
class BenchSpec:
    dataset: str = "synthetic"
    batch_sizes: tuple[int, ...] = (16, 64, 256, 1024, 2048)
    precisions: tuple[str, ...] = ()  # empty: every precision this device runs at useful speed
    device: str = "auto"
    warmup: int = 2
    steps: int = 5  # timed rounds per configuration
    max_seconds: float = 120.0  # per configuration, warm-up included
    width: int = 64
    z_dim: int = 128
    image_size: int | None = None
    channels: int | None = None
    seed: int = 0
    compile: bool = False
    peak_tflops: float | None = None  # overrides the table for every precision

    def train_config(self, precision: str, batch_size: int) -> TrainConfig:
        return TrainConfig(
            dataset=self.dataset, precision=precision, batch_size=batch_size, device=self.device,
            width=self.width, z_dim=self.z_dim, image_size=self.image_size, channels=self.channels,
            seed=self.seed, steps=1, compile=self.compile,
        )


@dataclass
class ConfigResult:
    batch_size: int
    precision: str
    status: str = "ok"  # ok | too_slow | oom | error
    reason: str = ""
    samples_s: list[float] = field(default_factory=list)
    warmup_s: list[float] = field(default_factory=list)
    flops_per_step: int | None = None
    peak_memory_bytes: int | None = None
    skipped_steps: int = 0
    # With several processes: samples_s holds the slowest rank's time of each round (it bounds the
    # wall clock); per_rank_samples_s every rank's; local_samples_s each rank's step without DDP,
    # timed alongside (the "1 process" reference for scaling efficiency).
    processes: int = 1
    per_rank_samples_s: list[list[float]] = field(default_factory=list)
    local_samples_s: list[float] = field(default_factory=list)

    def to_dict(self, peak: float | None, processes_per_peak: int = 1) -> dict:
        """`processes_per_peak`: how many processes share the device whose peak is given (all
        local processes on a CPU, one per GPU)."""
        row = asdict(self)
        if self.samples_s:
            stats = timing_stats(self.samples_s)
            row["stats"] = stats.to_dict()
            row.update(throughput(self.batch_size * self.processes, stats.median_s))
            if self.flops_per_step:
                achieved, percent = achieved_fraction_of_peak(self.flops_per_step * processes_per_peak,
                                                              stats.median_s, peak)
                row["achieved_tflops"], row["percent_of_peak"] = achieved, percent
            if self.local_samples_s:
                # throughput(N) / (N x throughput(1)) with both measured per process:
                # (N B / t_ddp) / (N B / t_local) = t_local / t_ddp.
                row["scaling_efficiency"] = timing_stats(self.local_samples_s).median_s / stats.median_s
        return row


def default_precisions(device: torch.device) -> tuple[tuple[str, ...], list[dict]]:
    """(precisions to run, [{precision, reason}] left out): only modes that run at useful speed."""
    left_out = []
    if device.type == "cuda":
        chosen = ["fp32"]
        major, _ = torch.cuda.get_device_capability(device)
        if major >= 8:
            chosen.append("tf32")
        else:
            left_out.append({"precision": "tf32", "reason": "needs an Ampere or newer GPU"})
        if torch.cuda.is_bf16_supported():
            chosen.append("bf16")
        else:
            left_out.append({"precision": "bf16", "reason": "not supported by this GPU"})
        chosen.append("fp16")
        return tuple(chosen), left_out
    chosen = ["fp32"]
    left_out.append({"precision": "tf32", "reason": "a CUDA-only mode"})
    fp32_s = time_conv(None, device)
    for name in ("bf16", "fp16"):
        ratio = time_conv(COMPUTE_DTYPES[name], device) / fp32_s
        if ratio <= 1.5:
            chosen.append(name)
        else:
            left_out.append({"precision": name, "reason": f"a 3x3 convolution ran {ratio:.0f}x slower than fp32 here"})
    return tuple(chosen), left_out


def _is_out_of_memory(error: BaseException) -> bool:
    return isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower() or (
        "can't allocate memory" in str(error).lower()
    )


def _free_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


class _Contender:
    """One precision at one batch size: its state, its resident batch, its timings."""

    def __init__(self, spec: BenchSpec, precision: str, batch_size: int, dataset, device, data_parallel: bool = True,
                 batch: tuple[torch.Tensor, torch.Tensor] | None = None):
        ranks = world()
        config = spec.train_config(precision, batch_size)
        self.policy = build_policy(precision, device)
        self.policy.apply_backend_settings()
        self.state = build_train_state(config, model_shape_for(config, dataset), self.policy, rank=ranks.rank)
        self.data_parallel = data_parallel and ranks.distributed
        wrap_modules(self.state, compile=spec.compile, data_parallel=self.data_parallel)
        if batch is None:  # this rank's shard, resident on the device
            batch = BatchStream(dataset, batch_size, device, spec.seed, ranks.rank, ranks.size).next_batch()
        self.real, self.labels = batch
        self.dataset = dataset
        self.result = ConfigResult(batch_size=batch_size, precision=precision, processes=ranks.size)
        self.device = device
        self._skipped: list[torch.Tensor] = []  # per-step flags, summed once at the end

    def timed_step(self) -> float:
        """This step's time; with DDP, the slowest rank's (every rank's is kept too)."""
        self.policy.apply_backend_settings()  # TF32 is process-wide: set it for this contender
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        start = time.perf_counter()
        metrics = train_step(self.state, self.real, self.labels)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elapsed = time.perf_counter() - start
        self._skipped += [metrics["skipped_d"], metrics["skipped_g"]]  # stays on the device, no op
        if world().distributed:
            self.last_per_rank = gather_objects(elapsed)  # after the clock: not part of the measured step
            elapsed = max(self.last_per_rank)
        return elapsed

    def count_step_flops(self) -> int:
        # Counted on the eager modules: the FLOPs are the same, and the counter's global module
        # hooks would otherwise make compiled modules warn and recompile.
        with self.state.eager() as state:
            return count_flops(lambda: train_step(state, self.real, self.labels))

    def finish(self) -> ConfigResult:
        self.result.skipped_steps = int(sum(t.item() for t in self._skipped))
        return self.result


def run_bench(spec: BenchSpec, device: torch.device, on_config=lambda result: None) -> dict:
    """Measure every (batch size, precision) and return the results document."""
    hardware = detect_hardware(device)
    if device.type == "cpu":
        keep_freed_memory_for_reuse()
    precisions, left_out = (spec.precisions, []) if spec.precisions else default_precisions(device)
    peaks = {}
    for name in precisions:
        value, source = (spec.peak_tflops, "--peak-tflops") if spec.peak_tflops else peak_tflops(hardware, name)
        peaks[name] = {"tflops": value, "source": source}
    dataset = load_dataset(spec.dataset, spec.train_config("fp32", spec.batch_sizes[0]).data_request())
    results: list[ConfigResult] = []
    incomplete = None
    with stop_on_signals() as stop_request:
        for index, batch_size in enumerate(spec.batch_sizes):
            try:
                results += _bench_batch_size(spec, precisions, batch_size, dataset, device, on_config,
                                             _StopCheck(stop_request, device))
            except _StopRequested:
                # The batch size being measured has too few rounds to be compared: it is left out.
                incomplete = {"signal": signal.Signals(stop_request.signum or signal.SIGTERM).name,
                              "signum": stop_request.signum or signal.SIGTERM,
                              "finished_batch_sizes": list(spec.batch_sizes[:index]),
                              "not_measured": list(spec.batch_sizes[index:])}
                break
    sharing = world().local_size if device.type == "cpu" else 1
    rows = [r.to_dict(peaks[r.precision]["tflops"], sharing) for r in results]
    if spec.compile:
        for row in rows:  # the first warm-up step of a compiled step is mostly compilation
            row["compile_s"] = row["warmup_s"][0] if row["warmup_s"] else None
    return {
        "format": "ampgan-bench/1",
        "environment": environment_stamp(device),
        "processes": world().size,
        "spec": asdict(spec) | {"precisions": list(precisions)},
        "hardware": hardware.to_dict(),
        "peaks": peaks,
        "left_out": left_out,
        "configs": rows,
        "speedups": speedups(rows, precisions),
        "incomplete": incomplete,
    }


class _StopRequested(Exception):
    """SIGINT/SIGTERM arrived: stop measuring, keep the batch sizes already finished."""


class _StopCheck:
    """Asked between steps; every rank stops at the same point (the answer is OR-ed over ranks)."""

    def __init__(self, request, device: torch.device):
        self.request, self.device = request, device

    def __call__(self) -> None:
        if any_rank([bool(self.request)], self.device)[0]:
            raise _StopRequested


def _bench_batch_size(spec, precisions, batch_size, dataset, device, on_config, stop_check) -> list[ConfigResult]:
    contenders: list[_Contender] = []
    finished: list[ConfigResult] = []
    for precision in precisions:
        stop_check()
        contender = None
        try:
            rss_before = _peak_rss_bytes()
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            contender = _Contender(spec, precision, batch_size, dataset, device)
            _warm_up(spec, contender, stop_check)
            if contender.result.status == "ok":
                contender.result.flops_per_step = contender.count_step_flops()
                contender.result.peak_memory_bytes = (
                    torch.cuda.max_memory_allocated(device) if device.type == "cuda"
                    else max(0, _peak_rss_bytes() - rss_before)
                )
                contenders.append(contender)
            else:
                finished.append(contender.finish())
        except _StopRequested:
            raise
        except Exception as error:  # noqa: BLE001 - a failed configuration is a result, not a crash
            result = contender.result if contender else ConfigResult(batch_size=batch_size, precision=precision)
            result.status = "oom" if _is_out_of_memory(error) else "error"
            result.reason = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
            finished.append(result)
            contender = None
            _free_memory(device)
    _time_interleaved(spec, contenders, stop_check)
    finished += [c.finish() for c in contenders]
    contenders.clear()
    _free_memory(device)
    finished.sort(key=lambda r: precisions.index(r.precision))
    for result in finished:
        on_config(result)
    return finished


def _warm_up(spec: BenchSpec, contender: _Contender, stop_check=lambda: None) -> None:
    """Discarded steps (kernel selection, compilation, allocator growth). The first one also
    tells whether the configuration fits in --max-seconds at all."""
    for index in range(max(1, spec.warmup)):
        if index:
            stop_check()
        elapsed = contender.timed_step()
        contender.result.warmup_s.append(elapsed)
        projected = elapsed * (spec.warmup + spec.steps + 1)  # +1: the FLOP-counting step
        if index == 0 and not spec.compile and any_rank([projected > spec.max_seconds], contender.device)[0]:
            contender.result.status = "too_slow"
            contender.result.reason = (
                f"one step took {elapsed:.2f} s; {spec.warmup + spec.steps + 1} steps would exceed "
                f"--max-seconds {spec.max_seconds:g}"
            )
            return


def _time_interleaved(spec: BenchSpec, contenders: list[_Contender], stop_check=lambda: None) -> None:
    spent = {id(c): sum(c.result.warmup_s) for c in contenders}
    active = list(contenders)
    locals_ = {id(c): _local_twin(spec, c) for c in contenders} if world().distributed else {}
    for _ in range(spec.steps):
        for contender in list(active):
            elapsed = contender.timed_step()
            contender.result.samples_s.append(elapsed)
            if contender.data_parallel:
                contender.result.per_rank_samples_s.append(contender.last_per_rank)
            if id(contender) in locals_:
                contender.result.local_samples_s.append(locals_[id(contender)].timed_step())
            spent[id(contender)] += elapsed
            if spent[id(contender)] > spec.max_seconds:
                contender.result.reason = f"stopped after {len(contender.result.samples_s)} timed steps: --max-seconds reached"
                active.remove(contender)
        stop_check()


def _local_twin(spec: BenchSpec, contender: _Contender) -> _Contender:
    """The same configuration without DDP, warmed up: every rank steps alone, all at once."""
    twin = _Contender(spec, contender.result.precision, contender.result.batch_size, contender.dataset,
                      contender.device, data_parallel=False, batch=(contender.real, contender.labels))
    for _ in range(max(1, spec.warmup)):
        twin.timed_step()
    return twin


def speedups(rows: list[dict], precisions) -> list[dict]:
    """Per batch size, each precision's pairwise median speedup over the first (fp32 if run)."""
    baseline = "fp32" if "fp32" in precisions else precisions[0]
    by_key = {(r["batch_size"], r["precision"]): r for r in rows if r["samples_s"]}
    out = []
    for (batch_size, precision), row in sorted(by_key.items()):
        base = by_key.get((batch_size, baseline))
        if precision == baseline or base is None:
            continue
        out.append({"batch_size": batch_size, "precision": precision, "baseline": baseline,
                    **pairwise_speedup(base["samples_s"], row["samples_s"])})
    return out
