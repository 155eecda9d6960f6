"""One training step of any GAN: (1) update D (`d_steps` times), (2) update G, (3) the extra updates due,
(4) the EMA of G when the model declares one.

The GAN (gan/contract.py) says what its losses are; this function does the rest the same way for
every GAN and precision: each loss function runs under the policy's autocast, each loss is
backpropagated through its network's loss scaler, and each optimizer steps through that scaler
(unscale, skip on inf/NaN, update the scale). D is frozen while G updates: G's backward needs D's
input gradients only, and skipping D's weight gradients (discarded anyway) saves about a third of
D's backward work. A frozen network runs without DDP, so no gradient of its is reduced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

import torch

from ampgan.errors import AmpganError, first_words
from ampgan.gan.context import LossContext
from ampgan.gan.contract import as_terms
from ampgan.system.memory import is_out_of_memory
from ampgan.training.distributed import lost_contact_with_ranks, unused_parameters_line
from ampgan.training.ema import update_average
from ampgan.training.precision import LossScaler, PrecisionPolicy
from ampgan.training.state import TrainState

Batch = tuple[torch.Tensor, torch.Tensor]
FAILED = "failed_"  # metrics named failed_<update>: per application, 1.0 when it was skipped or non-finite


@contextmanager
def _frozen(modules: Sequence[torch.nn.Module]) -> Iterator[None]:
    """The modules' parameters need no gradient inside the block; afterwards each parameter gets its own
    `requires_grad` back, so a parameter the user froze (a fixed blur, a pretrained feature stem) stays
    frozen instead of being switched on with the rest."""
    switched = [p for module in modules for p in module.parameters() if p.requires_grad]
    for parameter in switched:
        parameter.requires_grad_(False)
    try:
        yield
    finally:
        for parameter in switched:
            parameter.requires_grad_(True)


@contextmanager
def _users_code(origin: str) -> Iterator[None]:
    """The user's networks and losses run inside: whatever they raise becomes one line naming the model,
    the network, the update and the reason (exit 2), never a traceback through ampgan's step."""
    try:
        yield
    except AmpganError as error:
        if type(error) is not AmpganError or str(error).startswith(origin.split(":")[0]):
            raise
        raise AmpganError(f"{origin}: {error}") from None
    except (Exception, SystemExit) as error:  # noqa: BLE001 - the user's code failing (or exiting) is the message
        if is_out_of_memory(error) or lost_contact_with_ranks(error) is not None:
            raise  # the caller's to handle: out of memory (the bench marks the batch size), a lost rank
        if isinstance(error, RuntimeError) and "double backward" in str(error):
            raise AmpganError(
                f"{origin} takes gradients of gradients (a gradient penalty), which torch.compile "
                "cannot compile yet (aot_autograd has no double backward): train this model without "
                "--compile (--no-compile)"
            ) from None
        translated = unused_parameters_line(error, origin)
        if translated:
            raise AmpganError(translated) from None
        raise AmpganError(f"{origin} failed: {type(error).__name__}: {first_words(str(error))}") from None


def as_loss(result, origin: str) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """A loss function's result as (loss, metrics), checked: a scalar floating tensor (checks of type and
    shape only, which cost no device synchronisation; one with no gradient is _no_gradient's). Each
    mistake gets its own fix: a Python number was cut from autograd (.item(), float()) and must be the
    tensor itself; only a tensor of many values needs reducing."""
    loss, metrics = result if isinstance(result, tuple) and len(result) == 2 else (result, {})
    if isinstance(loss, (int, float)) or (hasattr(loss, "dtype") and not isinstance(loss, torch.Tensor)):
        raise AmpganError(
            f"{origin} returned a {type(loss).__name__} ({loss!r:.20}), not a tensor: a number taken out of the "
            "loss (.item(), float(), numpy) has no gradient; return the loss tensor itself (call .item() "
            "only on metrics you log)"
        )
    if not isinstance(loss, torch.Tensor):
        raise AmpganError(
            f"{origin} returned {type(loss).__name__}, not a loss: return a scalar tensor (or (loss, metrics))"
        )
    if loss.numel() != 1:
        raise AmpganError(
            f"{origin} returned a {tuple(loss.shape)} tensor, not a scalar loss: reduce it to one number (e.g. .mean())"
        )
    if not loss.is_floating_point():
        raise AmpganError(f"{origin} returned a {loss.dtype} tensor: a loss is a floating-point tensor")
    if not isinstance(metrics, dict):
        raise AmpganError(
            f"{origin} returned metrics of type {type(metrics).__name__}: return (loss, {{name: tensor}})"
        )
    for name, value in metrics.items():  # each is averaged over the steps it logs and written as one number
        if not (isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex()):
            raise AmpganError(
                f"{origin} returned metric {name!r} as "
                f"{tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__}, not a one-number "
                "tensor: log one number per metric (reduce it, e.g. .mean(); keep it a tensor)"
            )
    return loss.reshape(()), metrics


def _step(scaler: LossScaler, optimizer: torch.optim.Optimizer, origin: str, networks: str) -> torch.Tensor:
    """The optimizer step through the scaler, once a gradient reached the parameters it steps (without one
    GradScaler fails with "No inf checks were recorded", and fp32 would silently train nothing)."""
    if not any(p.grad is not None for group in optimizer.param_groups for p in group["params"]):
        raise _no_gradient(origin, networks)
    with _users_code(origin):
        return scaler.step(optimizer)


def _no_gradient(origin: str, networks: str) -> AmpganError:
    return AmpganError(
        f"{origin}: its loss reaches no trainable parameter of {networks} (no gradient after the "
        f"backward pass): make the loss depend on {networks}, or move the term to the update of the "
        "network it trains"
    )


def _backward_terms(
    terms: Sequence[Callable],
    context: LossContext,
    scaler: LossScaler,
    policy: PrecisionPolicy,
    metrics: dict,
    origin: str,
    networks: str,
    multiplier: float = 1.0,
) -> torch.Tensor:
    """Each loss term under autocast, then its own (scaled) backward pass; their detached sum."""
    total = None
    for term in terms:
        where = f"{origin} ({getattr(term, '__name__', 'loss')})" if len(terms) > 1 else origin
        with _users_code(where):
            with policy.autocast():
                loss, extra = as_loss(term(context), where)
            if multiplier != 1.0:
                loss = loss * multiplier
            if not loss.requires_grad:  # only the frozen network's outputs, or constants
                raise _no_gradient(where, networks)
            scaler.backward(loss)
        metrics.update({name: value.detach() for name, value in extra.items()})
        total = loss.detach() if total is None else total + loss.detach()
    return total


def _scheduled(state: TrainState) -> None:
    """Each optimizer's learning rates at this step: its Adam's lr_schedule(step) times each group's own. The
    groups keep their unscheduled rate as torch's schedulers do (`initial_lr`; a checkpoint without it: the rate
    it holds)."""
    for optimizer in (state.optimizer_g, state.optimizer_d, *state.extra_optimizers.values()):
        if getattr(optimizer, "lr_schedule", None) is not None:
            factor = float(optimizer.lr_schedule(state.step))
            for group in optimizer.param_groups:
                group["lr"] = group.setdefault("initial_lr", group["lr"]) * factor


def train_step(state: TrainState, next_batch: Callable[[], Batch]) -> dict[str, torch.Tensor]:
    """One G update after the GAN's D updates, each D update on a batch from `next_batch()` ((B, C, H, W)
    images in the GAN's image_range, (B,) labels, on the device).

    Returns 0-dim tensors (never Python numbers): reading them would make the host wait for the
    device, so the loop reads them only when it logs.
    """
    gan, policy = state.gan, state.policy
    metrics: dict[str, torch.Tensor] = {}
    model = f"model {gan.name or 'GAN'}:"
    _scheduled(state)

    # (1) Update D: its loss terms on real and generated images, one backward pass each.
    context, fake, loss_d, skipped_d = _update_d(state, next_batch, metrics, model)

    # (2) Update G: its loss on the last fakes, through a frozen D.
    with _frozen([state.discriminator]):
        context.D, context.fake, context.scaler = state.run_discriminator_for_g, fake, state.scaler_g
        origin = f"{model} G's update, g_loss"
        state.optimizer_g.zero_grad(set_to_none=True)
        loss_g = _backward_terms((gan.g_loss,), context, state.scaler_g, policy, metrics, origin, "the generator")
        skipped_g = _step(state.scaler_g, state.optimizer_g, origin, "the generator")
    state.step += 1

    # (3) Extra updates due after this step (lazy regularisers, extra optimizers).
    for update in gan.extra_updates:
        if state.step % update.every:
            continue
        metrics[f"loss_{update.name}"], skipped = _extra_update(state, update, context, metrics, model)
        # 1 when this application changed nothing (skipped for overflow) or its loss is NaN/inf: the loop
        # stops a run whose lazy update fails at every application (training/loop.py, MetricWindow.failing_reason).
        non_finite = (~torch.isfinite(metrics[f"loss_{update.name}"])).float()
        metrics[f"{FAILED}{update.name}"] = torch.maximum(skipped, non_finite)
        if update.optimizer is not None:
            metrics[f"skipped_{update.name}"] = skipped
        elif update.networks == ("discriminator",):
            skipped_d = skipped_d + skipped
        else:
            skipped_g = skipped_g + skipped

    # (4) The EMA of G, when the model declares one: after the step's last change to G.
    update_average(gan, state.step)

    with torch.no_grad():
        return {"loss_d": loss_d, "loss_g": loss_g, **metrics, "skipped_d": skipped_d, "skipped_g": skipped_g}


def _update_d(state: TrainState, next_batch: Callable[[], Batch], metrics: dict, model: str):
    """D's `d_steps` updates, each on a batch of its own: (the last one's context, its fakes with G's graph,
    its loss, D's skipped updates)."""
    gan, policy = state.gan, state.policy
    skipped_d = None
    for index in range(gan.d_steps):
        real, labels = next_batch()
        context = LossContext.for_batch(
            gan,
            state.run_generator,
            state.run_discriminator,
            real,
            labels,
            step=state.step,
            rng=state.rng,
            scaler=state.scaler_d,
        )
        state.optimizer_d.zero_grad(set_to_none=True)
        with _users_code(f"{model} G's forward pass (for D's update)"):
            if index == gan.d_steps - 1:  # these fakes also feed G's update: G's graph is kept (through DDP's G)
                with policy.autocast():
                    fake = gan.generate(state.run_generator, context.z, context.fake_labels)  # (B, C, H, W)
            else:  # only D learns from these: no graph, and no DDP forward without its backward
                with torch.no_grad(), policy.autocast():
                    fake = gan.generate(state.run_generator_unwrapped, context.z, context.fake_labels)
        context.fake = fake.detach()
        origin = f"{model} D's update, d_loss"
        loss_d = _backward_terms(
            gan.d_loss_terms, context, state.scaler_d, policy, metrics, origin, "the discriminator"
        )
        skipped = _step(state.scaler_d, state.optimizer_d, origin, "the discriminator")
        skipped_d = skipped if skipped_d is None else skipped_d + skipped
    return context, fake, loss_d, skipped_d


def _extra_update(
    state: TrainState, update, step_context: LossContext, metrics: dict, model: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """One extra update on the step's last real batch and noise; the networks it does not change are
    frozen (and run without DDP) meanwhile."""
    trains_g, trains_d = "generator" in update.networks, "discriminator" in update.networks
    if update.optimizer is not None:
        optimizer, scaler = state.extra_optimizers[update.name], state.extra_scalers[update.name]
    elif trains_d:
        optimizer, scaler = state.optimizer_d, state.scaler_d
    else:
        optimizer, scaler = state.optimizer_g, state.scaler_g
    frozen = [
        network for network, trains in ((state.generator, trains_g), (state.discriminator, trains_d)) if not trains
    ]
    context = replace(
        step_context,
        G=state.run_generator if trains_g else state.run_generator_unwrapped,
        D=state.run_discriminator if trains_d else state.run_discriminator_for_g,
        fake=None,
        step=state.step,
        scaler=scaler,
    )
    with _frozen(frozen):
        optimizer.zero_grad(set_to_none=True)
        changes = " and ".join(f"the {name}" for name in update.networks)
        origin = f"{model} update {update.name!r} (of {changes})"
        multiplier = float(update.every) if update.scale_by_interval else 1.0
        loss = _backward_terms(
            as_terms(update.loss), context, scaler, state.policy, metrics, origin, changes, multiplier
        )
        return loss, _step(scaler, optimizer, origin, changes)
