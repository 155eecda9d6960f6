"""The budgeted training loop: prepare a run, train it until the budget is spent, save as it goes.

prepare_run(config)          validate everything (device, precision, data, model); no files (prepared.py)
run_training(prepared, dir)  build or restore the RunState, train, log, sample, checkpoint
                             -> RunResult (the final state in memory, and the summary)
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ampgan.config import TrainConfig
from ampgan.data.batches import BatchStream
from ampgan.errors import AmpganError, say, warn
from ampgan.files.signals import stop_on_signals
from ampgan.runs.run_folder import NullWriter, RunWriter, finished_at
from ampgan.seeds import CURRENT_SCHEME, step_noise_seed
from ampgan.system.cpu_tuning import ThreadWatch, cores, keep_freed_memory_for_reuse, threads_given
from ampgan.system.memory import is_out_of_memory
from ampgan.training.distributed import any_rank, average_over_ranks, gather_objects, leave_without_peers, world
from ampgan.training.faults import FaultMonitor, FaultRules, NumericFault
from ampgan.training.interruption import TrainingInterrupted
from ampgan.training.out_of_memory import out_of_memory_error
from ampgan.training.prepared import PreparedRun, prepare_run
from ampgan.training.state import (
    TrainState,
    build_train_state,
    capture_global_rngs,
    restore_global_rngs,
    set_generator_state,
    wrap_modules,
)
from ampgan.training.step import FAILED, train_step

__all__ = ["DEFAULT_STEPS", "PreparedRun", "RunResult", "RunState", "prepare_run", "run_training"]

DEFAULT_STEPS = 1000  # when neither --steps nor --time-budget is given


# A lazy update (a penalty every 4 or 16 steps) that is skipped or non-finite at this many applications in a
# row stops the run: each skip has halved its network's loss scale (256-fold by now) without one update
# applied, so it will not recover, and its share of the steps is too small for the skip-fraction rule.
FAILED_APPLICATIONS_TO_STOP = 8


class MetricWindow:
    """Sums step metrics on the device between log points; flush() averages and reads them. Per extra
    update it also counts how many of its latest applications in a row were skipped or non-finite (on the
    device, no sync per step; read at the log points by failing_reason)."""

    def __init__(self) -> None:
        self._streaks: dict[str, torch.Tensor] = {}
        self._sums: dict[str, torch.Tensor] = {}
        self._counts: dict[str, int] = {}  # a lazy update's metrics appear only on the steps it runs
        self.count = 0
        self.skipped_total = {"skipped_d": 0, "skipped_g": 0}
        self.last_skipped = 0  # optimizer updates skipped in the window just flushed (D and G)

    def add(self, metrics: dict[str, torch.Tensor]) -> None:
        for name, value in metrics.items():
            if name.startswith(FAILED):
                streak = self._streaks.get(name[len(FAILED) :])
                self._streaks[name[len(FAILED) :]] = value.clone() if streak is None else (streak + 1) * value
                continue
            self._sums[name] = self._sums[name] + value if name in self._sums else value.clone()
            self._counts[name] = self._counts.get(name, 0) + 1
        self.count += 1

    def failing_reason(self, step: int, precision: str) -> str | None:
        """Why the run must stop, or None; the same answer on every rank (all must have failed)."""
        failing = average_over_ranks(
            {name: (streak >= FAILED_APPLICATIONS_TO_STOP).float() for name, streak in self._streaks.items()}
        )
        names = sorted(name for name, value in failing.items() if value.item() == 1.0)
        if not names:
            return None
        return (
            f"update {names[0]!r} was skipped or non-finite at each of its last {FAILED_APPLICATIONS_TO_STOP} "
            f"applications (by step {step}, {precision}): it trains nothing and drags its network's loss scale "
            "down; 'ampgan preflight --model ...' names the cause (a penalty given a pre-summed tensor or taken "
            "from the scaled score: pass ctx.input_gradients the unreduced outputs)"
        )

    def flush(self, state: TrainState) -> dict:
        values = {name: total.item() for name, total in average_over_ranks(self._sums).items()}
        record = {}
        self.last_skipped = 0
        for name, total in values.items():
            if name.startswith("skipped"):
                self.skipped_total[name] = self.skipped_total.get(name, 0) + int(round(total))
                self.last_skipped += int(round(total))
                record[f"{name}_total"] = self.skipped_total[name]
            else:
                record[name] = round(total / self._counts[name], 5)
        if state.scaler_d.enabled:
            record.update({f"loss_scale_{name}": scaler.scale() for name, scaler in state.loss_scalers().items()})
        self._sums, self._counts, self.count = {}, {}, 0
        return record


@dataclass
class RunState:
    """Everything a checkpoint holds, saving and restoring itself: the train state, every rank's
    data position and noise generator, the process RNGs, the training time spent, the metrics."""

    config: TrainConfig
    train: TrainState
    stream: BatchStream
    window: MetricWindow = field(default_factory=MetricWindow)
    train_seconds: float = 0.0  # the training clock: the wall clock of the steps, or what they were charged
    wall_seconds: float = 0.0  # the steps' wall clock (equal to train_seconds unless steps are charged)
    metrics_last_step: int = 0
    seed_scheme: int = CURRENT_SCHEME
    thread_changes: list[str] = field(default_factory=list)  # what the thread watch changed, said in words
    # The count the run was planned on, taken before a resume restores the checkpoint's: the thread watch's
    # ceiling, so a checkpoint written while the watch had dropped to 1 thread can still go back up.
    planned_threads: int = field(default_factory=torch.get_num_threads)

    def state_dict(self) -> dict:
        """Collective under torchrun: every rank contributes its data position, noise generator and RNGs."""
        device = self.train.policy.device
        per_rank = gather_objects(
            {
                "data": self.stream.state_dict(),
                "step_generator": self.train.rng.get_state(),
                "rng": capture_global_rngs(device),
            }
        )
        return {
            **self.train.state_dict(),
            "seed_scheme": self.seed_scheme,
            "rng": per_rank[0]["rng"],  # rank 0's, where checkpoints before per-rank RNGs kept them
            "progress": {
                "train_seconds": self.train_seconds,
                "wall_seconds": self.wall_seconds,
                "skipped_total": dict(self.window.skipped_total),
                "data": {"world_size": world().size, "ranks": [r["data"] for r in per_rank]},
                "step_generators": [r["step_generator"] for r in per_rank],
                "step_generator_device": device.type,
                "rngs": [r["rng"] for r in per_rank],
                "metrics_last_step": self.metrics_last_step,
                "threads": torch.get_num_threads(),  # a CPU sum's order, so its last bits, follows it
            },
        }

    def load_state_dict(self, saved: dict, origin: str) -> list[str]:
        """Continue where `saved` left off; returns what could not be restored, in words (empty: all of it).

        Always restored: weights, optimizers, loss scalers, the step, the training time, the data order.
        On the same number of processes each rank takes its own data position, noise generator and RNGs
        back; on another number the shards are cut anew (every rank starts the epoch after the furthest
        one saved), noise generators are re-seeded from (seed, rank, step) and every rank takes rank 0's
        CPU-side RNGs. A generator saved on another device kind (a run saved on the CPU resumed on a GPU,
        or the reverse) cannot continue: the noise generator is re-seeded from (seed, rank, step) and the
        CUDA global generator keeps what the seed gave it. The run goes on correctly; its losses then
        differ from the uninterrupted run's."""
        self.train.load_state_dict(saved, origin)
        progress, ranks = saved["progress"], world()
        device = self.train.policy.device
        same_world = progress["data"]["world_size"] == ranks.size
        not_restored = restore_global_rngs(saved_rngs_for(saved, ranks.rank, ranks.size), device)
        generators = progress.get("step_generators", [])
        saved_kind = progress.get("step_generator_device", saved.get("step_generator_device"))
        if not (
            same_world
            and len(generators) == ranks.size
            and saved_kind in (None, device.type)
            and set_generator_state(self.train.rng, generators[ranks.rank])
        ):
            self.train.rng.manual_seed(step_noise_seed(self.config.seed, ranks.rank, self.train.step, self.seed_scheme))
            why = "another number of processes" if not same_world else saved_kind or "another device kind"
            not_restored.append(f"the noise generator (saved on {why}: re-seeded from seed, rank and step)")
        saved_ranks = progress["data"]["ranks"]
        if same_world:
            self.stream.load_state_dict(saved_ranks[ranks.rank])
        else:
            self.stream.start_epoch(max(r["epoch"] for r in saved_ranks) + 1)
        if same_world:  # on another number of processes each has another share of the cores
            not_restored += restore_threads(progress.get("threads"), device)
        self.window.skipped_total = dict(progress["skipped_total"])
        self.train_seconds = progress["train_seconds"]
        self.wall_seconds = progress.get("wall_seconds", self.train_seconds)  # checkpoints before charged steps
        return not_restored


def restore_threads(saved, device: torch.device) -> list[str]:
    """The thread count the checkpoint's steps ran on, taken back on the CPU: ampgan fits it to the load
    (speed/threads.py), and a float sum's order, so the weights' last bits, follows it. Under torchrun each rank
    keeps its share (torchrun exports OMP_NUM_THREADS, but distributed.py set the count); a count the user fixed
    (OMP_NUM_THREADS) is obeyed; more than this machine's cores is capped to them. Each is said when it differs."""
    running = torch.get_num_threads()
    if device.type != "cpu" or not isinstance(saved, int) or saved < 1 or saved == running:
        return []
    fixed_by = "torchrun's share of the cores" if world().distributed else threads_given()
    if fixed_by is not None:
        return [f"the thread count (the checkpoint's steps ran on {saved}, {fixed_by} fixes {running})"]
    torch.set_num_threads(min(saved, cores()))
    if saved <= cores():
        return []
    return [f"the thread count (the checkpoint's steps ran on {saved}, this machine has {cores()} cores: {cores()})"]


def saved_rngs_for(saved: dict, rank: int, world_size: int) -> dict:
    """The process RNG states a rank restores: its own when the checkpoint was saved by as many processes
    (each saved its own), else rank 0's (checkpoints before per-rank states hold rank 0's alone)."""
    progress = saved["progress"]
    rngs = progress.get("rngs") or [saved["rng"]]
    return rngs[rank] if progress["data"]["world_size"] == world_size == len(rngs) else rngs[0]


def build_run_state(
    prepared: PreparedRun, resume_from: dict | None, run_dir: Path, refuse_spent_budget: bool = False
) -> RunState:
    """A fresh RunState, or the one `resume_from` (a loaded checkpoint of `run_dir`) saved, with this run's
    seed scheme. `refuse_spent_budget`: see run_training."""
    config, policy, ranks = prepared.config, prepared.policy, world()
    scheme = resume_from["seed_scheme"] if resume_from is not None else CURRENT_SCHEME
    train = build_train_state(config, prepared.model, prepared.data, policy, rank=ranks.rank, seed_scheme=scheme)
    stream = BatchStream(
        prepared.dataset,
        config.budget.batch_size,
        policy.device,
        config.seed,
        ranks.rank,
        ranks.size,
        seed_scheme=scheme,
        image_range=train.gan.image_range,
    )
    state = RunState(config=config, train=train, stream=stream, seed_scheme=scheme)
    if resume_from is not None:
        not_restored = state.load_state_dict(resume_from, f"the checkpoint in {run_dir}")
        if not_restored and ranks.is_main:
            warn(
                f"resumed with everything but {'; '.join(not_restored)}: training continues correctly, but its "
                "losses will not match an uninterrupted run's"
            )
        # A resumed run whose budget is already spent would train nothing and exit 0: say so instead. Budgets
        # count the whole run (steps from 0, training time since its start), not this resumption.
        budget = Budget.of(config)
        if refuse_spent_budget and budget.spent(train.step, state.train_seconds) and finished_at(run_dir, train.step):
            spent = (
                f"{train.step} steps"
                if budget.steps is not None and train.step >= budget.steps
                else f"{state.train_seconds:.0f} s of training"
            )
            raise AmpganError(
                f"{run_dir} has already trained {spent}, all of the budget asked for (it counts the whole "
                "run from its start): resume with a larger --steps or --time-budget"
            )
    wrap_modules(train, compile=config.compute.compile, sync_batch_norm=config.compute.sync_bn)
    return state


@dataclass(frozen=True)
class Budget:
    steps: int | None
    seconds: float | None

    @classmethod
    def of(cls, config: TrainConfig) -> Budget:
        return cls(config.budget.steps if config.budget_is_set else DEFAULT_STEPS, config.budget.time_budget_s)

    def spent(self, step: int, train_seconds: float) -> bool:
        return (self.steps is not None and step >= self.steps) or (
            self.seconds is not None and train_seconds >= self.seconds
        )


@dataclass
class RunResult:
    """What a finished run leaves in memory: its final state (a comparison evaluates it directly)
    and the summary the command prints."""

    state: RunState
    run_dir: Path | None  # None on ranks other than 0, which write nothing
    last_record: dict
    stamp: str
    steps: int
    train_seconds: float  # rounded to 0.01 s, as printed and recorded
    wall_seconds: float
    thread_changes: list[str]

    @classmethod
    def of(cls, state: RunState, run_dir: Path | None, writer) -> RunResult:
        return cls(
            state,
            run_dir,
            writer.last_record,
            writer.stamp,
            state.train.step,
            round(state.train_seconds, 2),
            round(state.wall_seconds, 2),
            list(state.thread_changes),
        )


def run_training(
    prepared: PreparedRun,
    run_dir: Path,
    *,
    show_progress: bool = True,
    resume_from: dict | None = None,
    fault_rules: FaultRules = FaultRules(),
    on_log: Callable[[TrainState, dict], None] | None = None,
    refuse_spent_budget: bool = False,
    step_charge_s: float | None = None,
) -> RunResult:
    """Train until the budget is spent, writing the run folder as it goes.

    `resume_from`: a loaded checkpoint of this run folder; the run continues exactly where it left
    off (weights, optimizers, scalers, RNGs, data order, wall time, metrics).
    `on_log(state, record)`: called at each log point outside the timed region (evaluation during
    a comparison happens there, so it never eats into the training budget).
    `refuse_spent_budget`: a resumption whose budget is already spent is an error (`train --resume` with
    a budget the run has used up), not a run of zero steps; a comparison finishing its runs keeps it off.
    `step_charge_s`: each step adds this to the training clock instead of its wall time (a comparison charges
    its bench's settled step time, so that other work on the machine cannot tilt its race; study/race.py); the
    wall clock is kept beside it (`wall_seconds`, in metrics.jsonl and the checkpoints).
    Raises NumericFault or TrainingInterrupted after saving what should be saved.
    """
    prepared.policy.apply_backend_settings()
    if prepared.policy.device.type == "cpu":
        keep_freed_memory_for_reuse()
    # From here a signal only asks to stop: one that arrives while the state is built or compiled is acted
    # on right after the step-0 checkpoint, so the run can still be resumed.
    with stop_on_signals() as stop_request:
        state = build_run_state(prepared, resume_from, run_dir, refuse_spent_budget)
        ranks = world()
        writer = (
            RunWriter(run_dir, prepared, state.train, ranks.size, state.train.step if resume_from is not None else None)
            if ranks.is_main
            else NullWriter(state.train)
        )
        state.metrics_last_step = writer.last_logged_step
        loop = _Loop(
            prepared, state, writer, Path(run_dir), fault_rules, on_log, show_progress and ranks.is_main, step_charge_s
        )
        try:
            loop.run(stop_request, fresh=resume_from is None)
        except Exception as error:
            if not is_out_of_memory(error):
                raise
            # This rank alone failed, maybe inside a collective the others now wait in: it leaves without
            # waiting for them, and torchrun stops them when it exits.
            leave_without_peers()
            raise out_of_memory_error(
                error, prepared.config.budget.batch_size, prepared.policy.device, "a training step"
            ) from None
        finally:
            loop.progress.close()
            writer.close()
    return RunResult.of(state, Path(run_dir) if ranks.is_main else None, writer)


class _Loop:
    """The loop's moving parts; each method is one decision of a step's bookkeeping."""

    def __init__(
        self,
        prepared: PreparedRun,
        state: RunState,
        writer,
        run_dir: Path,
        fault_rules: FaultRules,
        on_log,
        show_progress: bool,
        step_charge_s: float | None = None,
    ):
        self.config, self.charge = prepared.config, step_charge_s
        # A neighbour that crowds the cores mid-run: the threads are fitted to what it leaves, and it is said.
        self.threads = ThreadWatch(
            reference_s=step_charge_s,
            active=prepared.policy.device.type == "cpu" and not threads_given() and not world().distributed,
            say=lambda line: warn(f"threads: {line}") if world().is_main else None,
            most=state.planned_threads,
        )
        state.thread_changes = self.threads.changes
        self.state, self.writer, self.run_dir, self.on_log = state, writer, run_dir, on_log
        self.faults = FaultMonitor(
            prepared.policy.mode.loss_scaling,
            fault_rules,
            static_scale=prepared.policy.loss_scale is not None,
            d_updates_per_step=state.train.gan.d_steps,
        )
        self.budget = Budget.of(self.config)
        # tqdm on stderr, only when stderr is a terminal: in a CI log or through `| tee` its carriage-return
        # redraws would pile up as one line of step/s fragments between the log lines.
        self.progress = tqdm(
            total=self.budget.steps,
            initial=state.train.step,
            unit="step",
            disable=not (show_progress and sys.stderr.isatty()),
            dynamic_ncols=True,
            leave=True,
        )
        # Not on a terminal (a CI log, `| tee`): a plain line every LOG_LINE_EVERY_S of training instead.
        self.log_lines = show_progress and self.progress.disable and world().is_main
        self.next_line_at = state.train_seconds + LOG_LINE_EVERY_S
        self.last_checkpoint = {"step": state.train.step, "seconds": state.train_seconds}

    def run(self, stop_request, fresh: bool) -> None:
        train = self.state.train
        if fresh:
            self.save_checkpoint()  # step 0: from here on a crash at any moment leaves a resumable run
        if any_rank([bool(stop_request)])[0]:  # asked to stop while the run was being set up
            raise TrainingInterrupted(
                stop_request.signum or signal.SIGTERM, train.step, str(self.run_dir), self.config.model.name
            )
        finished = self.budget.spent(train.step, self.state.train_seconds)
        while not finished:
            finished = self.one_step(stop_request)
        if train.step != self.last_checkpoint["step"]:
            self.save_checkpoint()  # before the last samples: a G that fails drawing them loses no trained step
        if train.step % self.config.logging.sample_every:
            self.writer.save_samples(train.step)
        self.writer.export_generator()

    def one_step(self, stop_request) -> bool:
        """Train one step and do what is due after it; True when the run is over."""
        config, train = self.config, self.state.train
        started = time.perf_counter()
        self.state.window.add(train_step(train, self.state.stream.next_batch))
        # Without a device sync this undercounts on CUDA; the flush below syncs and recounts.
        seconds_so_far = self.state.train_seconds + (
            self.charge if self.charge is not None else time.perf_counter() - started
        )
        # Every branch below must be taken by all ranks alike (flushes and checkpoints are
        # collective), so the per-rank clock- and signal-driven decisions are OR-ed over ranks.
        stopping, out_of_budget, checkpoint_by_time = any_rank(
            [
                bool(stop_request),
                self.budget.spent(train.step, seconds_so_far),
                # a checkpoint due by training time (checkpoints.every_s)
                self.config.checkpoints.every_s is not None
                and seconds_so_far - self.last_checkpoint["seconds"] >= self.config.checkpoints.every_s,
            ]
        )
        checkpoint_due = checkpoint_by_time or (
            config.checkpoints.every_steps is not None and train.step % config.checkpoints.every_steps == 0
        )
        finished = out_of_budget or stopping
        if train.step % config.logging.log_every == 0 or checkpoint_due or finished:
            self.log(started)
        else:
            self.clock(started)
        if checkpoint_due or (stopping and train.step != self.last_checkpoint["step"]):
            self.save_checkpoint()  # before the samples, as at the end of the run
        if train.step % config.logging.sample_every == 0:
            self.writer.save_samples(train.step)
        if stopping:
            raise TrainingInterrupted(
                stop_request.signum or signal.SIGTERM, train.step, str(self.run_dir), self.config.model.name
            )
        return finished

    def log(self, started: float) -> None:
        """Read the window's metrics (the loop's only device sync), record them, check for faults."""
        state, train = self.state, self.state.train
        steps_in_window = state.window.count
        record = state.window.flush(train)
        self.clock(started)
        images = train.step * self.config.budget.batch_size * world().size
        record.update(
            step=train.step,
            train_seconds=round(state.train_seconds, 4),
            images_per_second=round(images / state.train_seconds, 2) if state.train_seconds else 0.0,
        )
        if self.charge is not None:
            record.update(wall_seconds=round(state.wall_seconds, 4), threads=torch.get_num_threads())
        self.writer.log_metrics(record)
        state.metrics_last_step = self.writer.last_logged_step
        self.progress.update(train.step - self.progress.n)
        self.progress.set_postfix_str(_postfix(record), refresh=False)
        if self.log_lines and state.train_seconds >= self.next_line_at:
            total = f"/{self.budget.steps}" if self.budget.steps else ""
            say(f"  step {train.step}{total}, {state.train_seconds:.0f} s: {_postfix(record)}", err=True)
            self.next_line_at = state.train_seconds + LOG_LINE_EVERY_S
        reason = (
            self.faults.check(record, steps_in_window, state.window.last_skipped)
            or state.window.failing_reason(train.step, train.policy.describe())
            or self.faults.check_weights({"G": train.generator, "D": train.discriminator}, train.step)
        )
        if reason:
            # The weights may already be poisoned: keep the last good checkpoint, add none. A new run's folder
            # with no step past 0 holds nothing worth keeping (training/start.py).
            kept = self.last_checkpoint["step"]
            raise NumericFault(
                f"{reason}; the last good checkpoint is step {kept} in {self.run_dir}"
                if kept
                else f"{reason}; it stopped before saving any training, so its folder is not kept"
            )
        if self.on_log is not None:
            self.on_log(train, record)

    def clock(self, started: float) -> None:
        """The step's time on both clocks (charged or wall, and wall), and to the thread watch."""
        wall = time.perf_counter() - started
        self.state.wall_seconds += wall
        self.state.train_seconds += self.charge if self.charge is not None else wall
        self.threads.step(wall, self.state.train.step)

    def save_checkpoint(self) -> None:
        self.writer.save_checkpoint(self.state.state_dict())  # collective: every rank takes part
        self.last_checkpoint.update(step=self.state.train.step, seconds=self.state.train_seconds)


LOG_LINE_EVERY_S = 30.0


def _postfix(record: dict) -> str:
    text = f"{record['images_per_second']:.0f} img/s D {record['loss_d']:.3f} G {record['loss_g']:.3f}"
    if "loss_scale_d" in record:
        text += (
            f" scale {record['loss_scale_d']:g}/{record['loss_scale_g']:g}"
            f" skipped {record['skipped_d_total']}/{record['skipped_g_total']}"
        )
    return text
