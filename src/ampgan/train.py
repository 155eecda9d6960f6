"""The training state, the training step, and the loop that runs it against a budget."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from ampgan.config import TrainConfig
from ampgan.cpu_tuning import keep_freed_memory_for_reuse
from ampgan.data import ImageDataset, load_dataset
from ampgan.data.batches import BatchStream
from ampgan.checkpoint import restore_train_state
from ampgan.distributed import average_over_ranks, any_rank, gather_objects, init_from_environment, world, wrap_for_data_parallel
from ampgan.errors import warn
from ampgan.faults import FaultMonitor, FaultRules, NumericFault
from ampgan.interruption import TrainingInterrupted, stop_on_signals
from ampgan.models import Discriminator, Generator, ModelShape, misaligned_dimensions
from ampgan.precision import LossScaler, PrecisionPolicy, build_policy, resolve_device


@dataclass
class TrainState:
    generator: Generator
    discriminator: Discriminator
    optimizer_g: torch.optim.Optimizer
    optimizer_d: torch.optim.Optimizer
    scaler_g: LossScaler
    scaler_d: LossScaler
    policy: PrecisionPolicy
    rng: torch.Generator  # noise and fake labels, on the training device
    step: int = 0
    # What the step calls: the modules themselves, or their torch.compile'd wrappers (kept apart
    # so checkpoints always hold the plain modules' state dicts).
    # Under DDP, run_generator/run_discriminator are the DDP wrappers; D's pass inside G's update
    # uses run_discriminator_for_g, never wrapped.
    run_generator: Callable | None = None
    run_discriminator: Callable | None = None
    run_discriminator_for_g: Callable | None = None

    def __post_init__(self) -> None:
        if self.run_generator is None:
            self.run_generator = self.generator
        if self.run_discriminator is None:
            self.run_discriminator = self.discriminator
        if self.run_discriminator_for_g is None:
            self.run_discriminator_for_g = self.run_discriminator

    @contextmanager
    def eager(self):
        """Run the step on the plain modules (no DDP, no torch.compile) inside the block."""
        wrapped = self.run_generator, self.run_discriminator, self.run_discriminator_for_g
        self.run_generator, self.run_discriminator = self.generator, self.discriminator
        self.run_discriminator_for_g = self.discriminator
        try:
            yield self
        finally:
            self.run_generator, self.run_discriminator, self.run_discriminator_for_g = wrapped


def model_shape_for(config: TrainConfig, dataset: ImageDataset) -> ModelShape:
    return ModelShape(
        image_size=dataset.image_size,
        channels=dataset.channels,
        num_classes=dataset.num_classes,
        z_dim=config.z_dim,
        width=config.width,
    )


def noise_seed(seed: int, rank: int, step: int = 0) -> int:
    """The seed of a rank's noise generator: distinct per rank, and per step for a rank that
    joins a resumed run without a saved generator of its own."""
    return seed + 1 + 7919 * rank + 1_000_003 * step


def build_train_state(config: TrainConfig, shape: ModelShape, policy: PrecisionPolicy, rank: int = 0) -> TrainState:
    """Fresh networks and optimizers; the initial weights depend on the seed alone (the same on
    every rank), the noise generator on the seed and the rank (each rank draws its own fakes)."""
    device = policy.device
    torch.manual_seed(config.seed)
    generator = Generator(shape).to(device)
    discriminator = Discriminator(shape).to(device)
    if config.channels_last:
        # NHWC lets oneDNN/cuDNN pick their fastest convolution kernels without layout reorders.
        generator.to(memory_format=torch.channels_last)
        discriminator.to(memory_format=torch.channels_last)

    def adam(module: torch.nn.Module) -> torch.optim.Optimizer:
        # foreach: one multi-tensor kernel per update instead of one per parameter.
        return torch.optim.Adam(
            module.parameters(), lr=config.lr, betas=(config.beta1, config.beta2), foreach=True
        )

    rng = torch.Generator(device=device).manual_seed(noise_seed(config.seed, rank))
    return TrainState(
        generator=generator,
        discriminator=discriminator,
        optimizer_g=adam(generator),
        optimizer_d=adam(discriminator),
        scaler_g=policy.make_loss_scaler(),
        scaler_d=policy.make_loss_scaler(),
        policy=policy,
        rng=rng,
        run_generator=torch.compile(generator) if config.compile else None,
        run_discriminator=torch.compile(discriminator) if config.compile else None,
    )


def _real_fake_loss(logits: torch.Tensor, is_real: bool) -> torch.Tensor:
    # .float(): the sigmoid/log-sum-exp of the losses run in FP32 whatever the compute dtype.
    logits = logits.float()
    target = torch.ones_like(logits) if is_real else torch.zeros_like(logits)
    return F.binary_cross_entropy_with_logits(logits, target)


def _class_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float(), labels)


def _set_requires_grad(module: torch.nn.Module, flag: bool) -> None:
    for parameter in module.parameters():
        parameter.requires_grad_(flag)


def train_step(state: TrainState, real: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """One D update then one G update on B real and B generated images.

    Returns 0-dim tensors (never Python numbers): reading them would make the host wait for the
    device, so the loop reads them only when it logs.
    """
    G, D, policy = state.run_generator, state.run_discriminator, state.policy
    shape = state.generator.shape
    batch = real.shape[0]
    z = torch.randn(batch, shape.z_dim, device=real.device, generator=state.rng)
    fake_labels = torch.randint(shape.num_classes, (batch,), device=real.device, generator=state.rng)

    # (1) Update D: real -> 1, fake -> 0, and the class of both. The real and the fake half each get
    # their own backward pass, as in dcgan/main.py: the real half's graph is freed before the fake
    # half is built, and under DDP each pass is one complete forward/backward of the wrapped D.
    state.optimizer_d.zero_grad(set_to_none=True)
    with policy.autocast():
        fake = G(z, fake_labels)  # (B, C, H, W)
        real_fake_real, class_real = D(real)
        loss_d_real = _real_fake_loss(real_fake_real, True) + _class_loss(class_real, labels)
    state.scaler_d.backward(loss_d_real)
    with policy.autocast():
        real_fake_fake, class_fake = D(fake.detach())
        loss_d_fake = _real_fake_loss(real_fake_fake, False) + _class_loss(class_fake, fake_labels)
    state.scaler_d.backward(loss_d_fake)
    skipped_d = state.scaler_d.step(state.optimizer_d)

    # (2) Update G: make D call the fakes real, and of the class they were drawn for.
    # D's weights are frozen for this pass: G's backward needs D's input gradients only, and
    # skipping D's weight gradients (discarded anyway) saves about a third of D's backward work.
    # D runs unwrapped here (never DDP): no D gradient is reduced in G's update.
    _set_requires_grad(state.discriminator, False)
    try:
        with policy.autocast():
            real_fake_g, class_g = state.run_discriminator_for_g(fake)
            loss_g = _real_fake_loss(real_fake_g, True) + _class_loss(class_g, fake_labels)
        state.optimizer_g.zero_grad(set_to_none=True)
        skipped_g = state.scaler_g.backward_and_step(loss_g, state.optimizer_g)
    finally:
        _set_requires_grad(state.discriminator, True)

    state.step += 1
    with torch.no_grad():
        return {
            "loss_d": (loss_d_real + loss_d_fake).detach(),
            "loss_g": loss_g.detach(),
            # D's accuracy: real/fake head on each half, class head on real and on fake images.
            "d_real_acc": (real_fake_real > 0).float().mean(),
            "d_fake_acc": (real_fake_fake < 0).float().mean(),
            "class_acc_real": (class_real.argmax(1) == labels).float().mean(),
            "class_acc_fake": (class_fake.argmax(1) == fake_labels).float().mean(),
            "skipped_d": skipped_d,
            "skipped_g": skipped_g,
        }


@dataclass(frozen=True)
class PreparedRun:
    """Everything a run needs, resolved and validated before anything is written."""

    config: TrainConfig
    policy: PrecisionPolicy
    dataset: ImageDataset
    shape: ModelShape


def prepare_run(config: TrainConfig, dataset: ImageDataset | None = None) -> PreparedRun:
    """Validate everything a run needs; `dataset`: one already loaded (a comparison loads it once).
    Under torchrun this also joins the process group and picks this rank's device."""
    _, distributed_device = init_from_environment(config.device)
    device = distributed_device or resolve_device(config.device)
    policy = build_policy(config.precision, device, config.loss_scale)
    dataset = dataset if dataset is not None else load_dataset(config.dataset, config.data_request())
    shape = model_shape_for(config, dataset)
    if config.tensorboard:
        from ampgan.run_folder import require_tensorboard

        require_tensorboard()
    misaligned = misaligned_dimensions(shape)
    if misaligned:
        warn(
            "dimensions that are not multiples of 8 keep tensor cores/AMX from full speed: "
            + ", ".join(misaligned)
        )
    return PreparedRun(config=config, policy=policy, dataset=dataset, shape=shape)


def run_training(prepared: PreparedRun, run_dir: Path, *, show_progress: bool = True,
                 resume_from: dict | None = None, fault_rules: FaultRules = FaultRules(),
                 on_log: Callable[[TrainState, dict], None] | None = None) -> dict:
    """Train until the budget is spent, writing the run folder as it goes. Returns a summary.

    `resume_from`: a loaded checkpoint of this run folder; the run continues exactly where it left
    off (weights, optimizers, scalers, RNGs, data order, wall time, metrics).
    `on_log(state, record)`: called at each log point outside the timed region (evaluation during
    a comparison happens there, so it never eats into the training budget).
    Raises NumericFault or TrainingInterrupted after saving what should be saved.
    """
    from ampgan.run_folder import NullWriter, RunWriter

    config, policy = prepared.config, prepared.policy
    ranks = world()
    policy.apply_backend_settings()
    if policy.device.type == "cpu":
        keep_freed_memory_for_reuse()
    state = build_train_state(config, prepared.shape, policy, rank=ranks.rank)
    stream = BatchStream(prepared.dataset, config.batch_size, policy.device, config.seed, ranks.rank, ranks.size)
    window = MetricWindow()
    train_seconds = 0.0
    if resume_from is not None:
        restore_train_state(state, resume_from, run_dir, rank=ranks.rank, world_size=ranks.size)
        progress_state = resume_from["progress"]
        _restore_data_position(stream, progress_state["data"], ranks)
        window.skipped_total = dict(progress_state["skipped_total"])
        train_seconds = progress_state["train_seconds"]
    wrap_for_data_parallel(state, config.sync_bn)
    resumed_at = state.step if resume_from else None
    writer = RunWriter(run_dir, prepared, state, resumed_at) if ranks.is_main else NullWriter(state)
    budget = Budget(config.steps if config.budget_is_set else DEFAULT_STEPS, config.time_budget_s)
    faults = FaultMonitor(policy.uses_loss_scaling, fault_rules)
    progress = _progress_bar(budget, show_progress and ranks.is_main, initial=state.step)
    last_checkpoint = {"step": state.step, "seconds": train_seconds}

    def save_checkpoint_now() -> None:
        # Collective: every rank contributes its data position and noise generator.
        per_rank = gather_objects({"data": stream.state_dict(), "step_generator": state.rng.get_state()})
        writer.save_checkpoint(progress={
            "train_seconds": train_seconds, "skipped_total": dict(window.skipped_total),
            "data": {"world_size": ranks.size, "ranks": [r["data"] for r in per_rank]},
            "step_generators": [r["step_generator"] for r in per_rank],
            "metrics_last_step": writer.last_logged_step,
        })
        last_checkpoint.update(step=state.step, seconds=train_seconds)

    try:
        with stop_on_signals() as stop_request:
            if resume_from is None:
                save_checkpoint_now()  # step 0: from here on a crash at any moment leaves a resumable run
            finished = budget.spent(state.step, train_seconds)
            while not finished:
                started = time.perf_counter()
                real, labels = stream.next_batch()
                window.add(train_step(state, real, labels))
                # Without a device sync this undercounts on CUDA; the flush below syncs and recounts.
                seconds_so_far = train_seconds + time.perf_counter() - started
                # Every branch below must be taken by all ranks alike (flushes and checkpoints are
                # collective), so the per-rank clock- and signal-driven decisions are OR-ed over ranks.
                stopping, out_of_budget, checkpoint_by_time = any_rank(
                    [bool(stop_request), budget.spent(state.step, seconds_so_far),
                     _checkpoint_due_by_time(config, seconds_so_far, last_checkpoint)], policy.device)
                checkpoint_due = checkpoint_by_time or _checkpoint_due_by_steps(config, state.step)
                finished = out_of_budget or stopping
                if state.step % config.log_every == 0 or checkpoint_due or finished:
                    steps_in_window = window.count
                    record = window.flush(state)  # reads the device: the only sync point
                    train_seconds += time.perf_counter() - started
                    record.update(step=state.step, train_seconds=round(train_seconds, 4),
                                  images_per_second=round(state.step * config.batch_size * ranks.size / train_seconds, 2)
                                  if train_seconds else 0.0)
                    writer.log_metrics(record)
                    progress.update(state.step - progress.n)
                    progress.set_postfix_str(_postfix(record), refresh=False)
                    reason = faults.check(record, steps_in_window, window.last_skipped)
                    if reason:
                        # The weights may already be poisoned: keep the last good checkpoint, add none.
                        raise NumericFault(f"{reason}; the last good checkpoint is step {last_checkpoint['step']} in {run_dir}")
                    if on_log is not None:
                        on_log(state, record)
                else:
                    train_seconds += time.perf_counter() - started
                if state.step % config.sample_every == 0:
                    writer.save_samples(state.step)
                if checkpoint_due or (stopping and state.step != last_checkpoint["step"]):
                    save_checkpoint_now()
                if stopping:
                    raise TrainingInterrupted(stop_request.signum or signal.SIGTERM, state.step, str(run_dir))
            if state.step % config.sample_every:
                writer.save_samples(state.step)
            if state.step != last_checkpoint["step"]:
                save_checkpoint_now()
            writer.export_generator()
    finally:
        progress.close()
        writer.close()
    return writer.summary(train_seconds)


def _restore_data_position(stream: BatchStream, saved: dict, ranks) -> None:
    """Same number of processes: each rank continues its own shard exactly. Another number: the
    shards are cut anew, so every rank starts the epoch after the furthest one saved."""
    if saved["world_size"] == ranks.size:
        stream.load_state_dict(saved["ranks"][ranks.rank])
    else:
        stream.start_epoch(max(r["epoch"] for r in saved["ranks"]) + 1)


def _checkpoint_due_by_steps(config: TrainConfig, step: int) -> bool:
    return config.checkpoint_every_steps is not None and step % config.checkpoint_every_steps == 0


def _checkpoint_due_by_time(config: TrainConfig, train_seconds: float, last: dict) -> bool:
    return config.checkpoint_every_s is not None and train_seconds - last["seconds"] >= config.checkpoint_every_s


DEFAULT_STEPS = 1000  # when neither --steps nor --time-budget is given


@dataclass(frozen=True)
class Budget:
    steps: int | None
    seconds: float | None

    def spent(self, step: int, train_seconds: float) -> bool:
        return (self.steps is not None and step >= self.steps) or (
            self.seconds is not None and train_seconds >= self.seconds
        )


class MetricWindow:
    """Sums step metrics on the device between log points; flush() averages and reads them."""

    def __init__(self) -> None:
        self._sums: dict[str, torch.Tensor] = {}
        self.count = 0
        self.skipped_total = {"skipped_d": 0, "skipped_g": 0}
        self.last_skipped = 0  # optimizer updates skipped in the window just flushed (D and G)

    def add(self, metrics: dict[str, torch.Tensor]) -> None:
        for name, value in metrics.items():
            self._sums[name] = self._sums[name] + value if name in self._sums else value.clone()
        self.count += 1

    def flush(self, state: TrainState) -> dict:
        values = {name: total.item() for name, total in average_over_ranks(self._sums).items()}
        record = {}
        self.last_skipped = 0
        for name, total in values.items():
            if name.startswith("skipped"):
                self.skipped_total[name] += int(round(total))
                self.last_skipped += int(round(total))
                record[f"{name}_total"] = self.skipped_total[name]
            else:
                record[name] = round(total / self.count, 5)
        if state.scaler_d.enabled:
            record["loss_scale_d"] = state.scaler_d.scale()
            record["loss_scale_g"] = state.scaler_g.scale()
        self._sums, self.count = {}, 0
        return record


def _progress_bar(budget: Budget, enabled: bool, initial: int = 0):
    from tqdm.auto import tqdm

    return tqdm(total=budget.steps, initial=initial, unit="step", disable=not enabled, dynamic_ncols=True, leave=True)


def _postfix(record: dict) -> str:
    text = (f"{record['images_per_second']:.0f} img/s D {record['loss_d']:.3f} "
            f"G {record['loss_g']:.3f}")
    if "loss_scale_d" in record:
        text += (f" scale {record['loss_scale_d']:g}/{record['loss_scale_g']:g}"
                 f" skipped {record['skipped_d_total']}/{record['skipped_g_total']}")
    return text
