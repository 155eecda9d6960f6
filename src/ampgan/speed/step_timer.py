"""One precision's real training step, timed: both updates, forward, backward, optimizer.

The step is `training.step.train_step`, the very function `ampgan train` runs, on one batch kept
resident on the device (so data loading never enters the clock). The clock is read after the
device has finished (CUDA is synchronised around the step). With data parallelism the step's time
is the slowest rank's, the one that bounds the wall clock, and every rank's is kept.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from ampgan.config import TrainConfig
from ampgan.data.batches import BatchStream
from ampgan.files.signals import handlers_kept
from ampgan.system.cpu_tuning import keep_freed_memory_for_reuse
from ampgan.training.distributed import gather_objects, world
from ampgan.training.precision import build_policy
from ampgan.training.prepared import prepare_run
from ampgan.training.state import build_train_state, wrap_modules
from ampgan.training.step import train_step


class StepTimer:
    """`config`: the run's (precision, batch size, model, seed, compile); `data_parallel`: wrap in
    DDP (under torchrun); `across_ranks`: report the slowest rank's time (a collective: every rank
    must time the same steps); `batch`: reuse another timer's resident batch.

    One call times one *cycle* of the GAN's schedule (gan.cycle_steps training steps: every lazy
    update runs once in it) and returns its mean seconds per step, so a precision is never judged on
    the steps where a penalty does not run. It runs one step of each kind the cycle has (plain, with
    the penalty, ...) and weights each by its share of the cycle: a lazy R1 every 16 steps costs two
    steps per call, not sixteen.
    """

    def __init__(
        self,
        config: TrainConfig,
        dataset,
        device: torch.device,
        data_parallel: bool = True,
        batch: tuple[torch.Tensor, torch.Tensor] | None = None,
        across_ranks: bool = True,
    ):
        ranks = world()
        self.dataset, self.device = dataset, device
        if device.type == "cpu":
            # The runs' malloc setting (training/loop.py): a decision timed without it measures page
            # faults (fp32 at batch 1024 was 4.65 s without it against 2.4 s with it), not the step.
            keep_freed_memory_for_reuse()
        prepared = prepare_run(config, dataset, device)  # the model resolved, nothing else of a run (no folder)
        self.config = config = prepared.config
        self.policy = build_policy(config.precision.name, device, config.precision.loss_scale)
        self.policy.apply_backend_settings()
        self.state = build_train_state(config, prepared.model, prepared.data, self.policy, rank=ranks.rank)
        self.cycle_steps = self.state.gan.cycle_steps
        self.step_kinds = self.state.gan.cycle_kinds()
        self.data_parallel = data_parallel and ranks.distributed
        self.across_ranks = across_ranks and ranks.distributed
        wrap_modules(self.state, compile=config.compute.compile, data_parallel=self.data_parallel)
        if batch is None:  # this rank's shard, resident on the device
            batch = BatchStream(
                dataset,
                config.budget.batch_size,
                device,
                config.seed,
                ranks.rank,
                ranks.size,
                image_range=self.state.gan.image_range,
            ).next_batch()
        self.real, self.labels = batch
        self.last_per_rank: list[float] = []
        # The last call's wall seconds, every step of its cycle (the slowest rank's): what a budget spends, where
        # the returned figure is one step's mean (a StyleGAN2-like cycle's call ran 3 steps for 1 counted).
        self.last_call_s = 0.0
        self.skipped: list[torch.Tensor] = []  # per-step flags, summed once at the end (no sync per step)

    def resident_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.real, self.labels

    def __call__(self) -> float:
        """Seconds per step over one cycle; with DDP, the slowest rank's."""
        self.policy.apply_backend_settings()  # TF32 is process-wide: set it for this precision
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elapsed, called = 0.0, time.perf_counter()
        for before, count in self.step_kinds:
            self.state.step = before  # which extra updates are due depends on the step count only
            start = time.perf_counter()
            metrics = train_step(self.state, self.resident_batch)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            elapsed += (time.perf_counter() - start) * count
            self.skipped += [value for name, value in metrics.items() if name.startswith("skipped")]
        elapsed /= self.cycle_steps
        self.last_call_s = time.perf_counter() - called
        if self.across_ranks:  # after the clock: not part of the measured step
            gathered = gather_objects((elapsed, self.last_call_s))
            self.last_per_rank = [each for each, _ in gathered]
            elapsed, self.last_call_s = max(self.last_per_rank), max(call for _, call in gathered)
        return elapsed

    def skipped_steps(self) -> int:
        return int(sum(flag.item() for flag in self.skipped))


class CallTooLong(BaseException):
    """Raised inside the abandoned call. A BaseException, as KeyboardInterrupt is, so that no `except
    Exception` on the way (the step's one-line error for the user's code) takes it for the model's failure."""


def stoppable() -> bool:
    """Whether a step's call can be stopped midway here: by an alarm, in the main thread of a single process (a
    rank abandoning a step inside a collective would leave the others waiting), where the caller's program has no
    alarm of its own pending and a SIGALRM handler Python can put back (not None: set from C before it started)."""
    main_thread = threading.current_thread() is threading.main_thread()
    return (
        hasattr(signal, "setitimer")
        and main_thread
        and not world().distributed
        and signal.getitimer(signal.ITIMER_REAL)[0] == 0
        and signal.getsignal(signal.SIGALRM) is not None
    )


@contextmanager
def abandoned_after(seconds: float | None) -> Iterator[None]:
    """CallTooLong inside the block once `seconds` have passed (None, or where no alarm can stop it, off the main
    thread or under torchrun: the block runs to its end)."""
    if seconds is None or seconds <= 0 or not stoppable():
        yield
        return

    def expire(signum, frame):
        raise CallTooLong()

    with handlers_kept([signal.SIGALRM]):
        signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
