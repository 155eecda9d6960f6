"""Before anything trains: will this GAN work under ampgan, and under mixed precision?

One training step of the real GAN on a small real batch, on the CPU, watched: what G returns (shape,
range), what D ends in, which parameters no backward pass reaches, which operations the losses run on
bf16/fp16 tensors, whether its state saves as plain tensors, whether it casts its own weights, and
whether each loss comes out the same under fp16 loss scaling as in fp32 (a gradient penalty that keeps
the loss scale is off by the scale squared). Each finding is one line; an "error" is what cannot work
(the command stops with exit 2), a "warning" what will train, worse or slower than it could.
"""

from __future__ import annotations

import io
import math
import sys
from dataclasses import dataclass

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from ampgan.config import TrainConfig
from ampgan.data.batches import BatchStream
from ampgan.errors import AmpganError, first_words, say
from ampgan.gan.context import LossContext
from ampgan.gan.contract import as_terms
from ampgan.gan.layers import in_fp32_modules
from ampgan.precisions import BF16, FP16, FP32, PRECISIONS
from ampgan.runs.samples import NOISE_INPUT
from ampgan.training.precision import build_policy
from ampgan.training.prepared import prepare_run
from ampgan.training.state import build_train_state
from ampgan.training.step import _extra_update, as_loss, train_step

PREFLIGHT_BATCH = 8
CPU = torch.device("cpu")
# Operations that lose what they compute when their input is bf16/fp16 (an epsilon under the format's
# resolution vanishes, a square of a small score flushes to zero, a log of a saturated sigmoid is -inf).
_FRAGILE = {
    "sqrt",
    "rsqrt",
    "log",
    "log1p",
    "log2",
    "log10",
    "exp",
    "exp2",
    "pow",
    "square",
    "norm",
    "linalg_vector_norm",
    "normalize",
    "var",
    "std",
    "mse_loss",
    "logsumexp",
}
_REFUSED = {"binary_cross_entropy"}  # autocast refuses it on CUDA: BCE on probabilities


@dataclass(frozen=True)
class Finding:
    severity: str  # "error" (cannot work) or "warning"
    check: str
    text: str

    def line(self) -> str:
        return f"{self.severity}: {self.text}"


def preflight(config: TrainConfig, dataset=None) -> list[Finding]:
    """The findings for `config`'s GAN on its data: one fp32 step watched, the losses under fp16 loss scaling,
    then the real step (backward and optimizer step included) in every mode with a CPU path: bf16 and fp16
    autocast run on the CPU too, so what fails only under one of them is found before a comparison starts."""
    config = config.with_fields(
        {
            "precision.name": FP32,
            "precision.loss_scale": None,
            "compute.device": "cpu",
            "compute.compile": False,
            "compute.channels_last": False,
            "budget.batch_size": PREFLIGHT_BATCH,
        }
    )
    prepared = prepare_run(config, dataset)
    state = build_train_state(prepared.config, prepared.model, prepared.data, prepared.policy)
    gan, data = state.gan, prepared.data
    stream = BatchStream(prepared.dataset, PREFLIGHT_BATCH, CPU, config.seed, image_range=gan.image_range)
    findings = _own_precision(gan) + _generator_output(gan, data, prepared.dataset.images[:PREFLIGHT_BATCH])
    findings += _discriminator_ends(gan, stream)
    if any(f.severity == "error" for f in findings):
        return findings
    witness = _GradientWitness(state)
    try:
        with _OpsInLosses(gan) as ops:
            metrics = train_step(state, stream.next_batch)
            if gan.cycle_steps > 1 and not _not_finite(metrics):
                # watched again as the cycle's last step, where every periodic update runs (a lazy R1 every 16 steps
                # runs in no first step): one more step for a GAN that has them, none for one that has not
                state.step = gan.cycle_steps - 1
                metrics = train_step(state, stream.next_batch)
    except AmpganError as error:
        return findings + [Finding("error", "step", str(error))]
    finally:
        witness.remove()
    if bad := _not_finite(metrics):
        findings.append(
            Finding(
                "error",
                "finite",
                f"fp32 step {state.step}'s {', '.join(bad)} is not finite: the losses "
                "or the initialisation are broken before any precision enters",
            )
        )
    findings += (
        witness.findings()
        + ops.findings(gan.name)
        + _saves_as_tensors(state)
        + _g_state_changed_by_d_loss(prepared, stream)
        + _losses_under_loss_scaling(prepared, stream)
    )
    for name in (name for name, mode in PRECISIONS.items() if mode.cpu):
        if not any(f.severity == "error" for f in findings):
            findings += _real_step_under(name, prepared, stream)
    return findings


def _real_step_under(name: str, prepared, stream) -> list[Finding]:
    """The real step in `name` (forward, backward, unscale, optimizer step), as the cycle's last step so that
    every lazy update runs in it: what fails only there (an update whose loss reaches no parameter, which
    GradScaler refuses under fp16; an operation autocast has no bf16 kernel for) is found here, not in the
    middle of a comparison. A loss that is not finite in a mode without loss scaling (fp32, bf16: nothing
    skips the update) is an error too: its NaN would reach the weights at the first step."""
    policy = build_policy(name, CPU)
    state = build_train_state(prepared.config, prepared.model, prepared.data, policy)
    state.step = state.gan.cycle_steps - 1
    kept, unsaved = _kept_by_losses(state.gan), _not_saved(state.gan) if name == FP32 else {}
    casts = _FloatBeforeLayers(state.gan) if name == BF16 else None  # one 16-bit mode says it
    try:
        metrics = train_step(state, stream.next_batch)
    except AmpganError as error:
        return [Finding("error", "step", f"under {policy.describe()}: {error}")]
    finally:
        cast = casts.remove() if casts else []
    outside = _state_outside(kept, state.gan) + _unsaved_changed(unsaved, state.gan) if name == FP32 else cast
    if policy.mode.loss_scaling:  # a non-finite fp16 loss is skipped; _losses_under_loss_scaling judges it
        return outside
    bad = _not_finite(metrics)
    if not bad:
        return outside
    return outside + [
        Finding(
            "error",
            "finite",
            f"under {policy.describe()}: the step's {', '.join(bad)} is not finite "
            f"({', '.join(f'{n} = {metrics[n].item():.4g}' for n in bad)}), and with no loss scaling nothing "
            "skips it: the weights would be NaN after one step; compute the losses from D's output in fp32 "
            "(ampgan.real_fake_loss, hinge_loss) and keep eps terms out of low-precision tensors",
        )
    ]


def _update_running() -> str | None:
    """'update NAME' while the step's extra update NAME runs (among the callers), else None."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code is not _extra_update.__code__:
        frame = frame.f_back
    return None if frame is None else f"update {frame.f_locals['update'].name!r}"


def _not_finite(metrics: dict[str, torch.Tensor]) -> list[str]:
    """The step's losses (loss_d, loss_g, loss_<update>) that are NaN or inf, by name."""
    return [name for name, value in metrics.items() if name.startswith("loss") and not torch.isfinite(value).all()]


class _FloatBeforeLayers:
    """G's and D's linear and convolution layers called under autocast on an input their network's code made fp32
    (`self.head(x.float())`, a user's way to keep a layer in fp32): autocast casts it back, so the layer computes
    in 16 bit all the same. A network's own input cast by the loss (`D(ctx.fake.float())`) keeps nothing in fp32
    and is not named."""

    VIEWS = {"ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "PermuteBackward0", "TransposeBackward0"}

    def __init__(self, gan):
        self.cast: list[str] = []
        self.inputs: list[torch.Tensor] = []  # G's and D's own inputs: a cast of one is the loss's
        networks = (("G", gan.generator), ("D", gan.discriminator))
        self.hooks = [network.register_forward_pre_hook(self._entry) for _, network in networks]
        islands = in_fp32_modules(gan.generator, gan.discriminator)  # autocast is off in them after a pre-hook runs
        for prefix, network in networks:
            for name, layer in network.named_modules():
                if isinstance(layer, (nn.Linear, nn.modules.conv._ConvNd)) and id(layer) not in islands:
                    self.hooks.append(layer.register_forward_pre_hook(self._layer(f"{prefix}.{name}")))

    def _entry(self, module, args) -> None:
        self.inputs += [a for a in args if isinstance(a, torch.Tensor)]

    def _layer(self, name: str):
        def hook(module, args) -> None:
            x = args[0] if args else None
            if not isinstance(x, torch.Tensor) or x.dtype != torch.float32 or not torch.is_autocast_enabled("cpu"):
                return
            step = x.grad_fn
            while step is not None and type(step).__name__ in self.VIEWS:
                step = step.next_functions[0][0]
            own = any(x is given for given in self.inputs)
            if step is not None and type(step).__name__ == "ToCopyBackward0" and not own and name not in self.cast:
                self.cast.append(name)

        return hook

    def remove(self) -> list[Finding]:
        for hook in self.hooks:
            hook.remove()
        if not self.cast:
            return []
        return [
            Finding(
                "warning",
                "float",
                f"{_first_few(self.cast, 3)} take(s) an input cast to fp32 (.float()), which does not keep a layer "
                "in fp32: autocast casts it back and the layer computes in bf16 or fp16 all the same; to keep it in "
                "fp32, list it in GAN(fp32_modules=[...])",
            )
        ]


def _own_precision(gan) -> list[Finding]:
    """A model that casts its own weights: ampgan keeps fp32 master weights and lets autocast cast compute.
    Buffers keep the dtype the model gave them (an fp64 running sum, a complex FFT filter): no optimizer
    steps them, and a model cast with .half() shows in its parameters."""
    cast = [
        f"{prefix}.{name} ({tensor.dtype})"
        for prefix, network in (("G", gan.generator), ("D", gan.discriminator))
        for name, tensor in network.named_parameters()
        if tensor.is_floating_point() and tensor.dtype != torch.float32
    ]
    if not cast:
        return []
    return [
        Finding(
            "error",
            "dtype",
            f"{len(cast)} weights are not fp32 ({', '.join(cast[:3])}): the model casts "
            "itself (.half(), .to(torch.float16)); remove that: ampgan keeps fp32 master "
            "weights and autocasts the compute in each precision",
        )
    ]


def _generator_output(gan, data, real) -> list[Finding]:
    rng = torch.Generator().manual_seed(0)
    z = gan.inputs_for(PREFLIGHT_BATCH, rng, real)  # drawn before the labels, from the same generator
    labels = torch.randint(gan.num_classes, (PREFLIGHT_BATCH,), generator=rng) if gan.conditional else None
    with torch.no_grad():
        try:
            images = gan.generate(gan.generator, z, labels)
        except AmpganError as error:  # G's output is not one tensor: the line says what to return
            return [Finding("error", "generator", str(error))]
        except Exception as error:  # noqa: BLE001 - the user's generator failing is one finding
            return [
                Finding(
                    "error",
                    "generator",
                    f"G({'z, labels' if gan.conditional else 'z'}) raised "
                    f"{type(error).__name__}: {first_words(str(error), 200)}"
                    + (f"; {NOISE_INPUT}" if gan.draw_inputs is not None else ""),
                )
            ]
    wanted = (PREFLIGHT_BATCH, data.channels, data.image_size, data.image_size)
    if tuple(images.shape) != wanted:
        return [
            Finding(
                "error",
                "generator",
                f"G returns {tuple(images.shape)}, the data is {wanted} (B, C, H, W): make G draw "
                f"{data.channels}-channel {data.image_size} px images, or change "
                "--image-size/--set data.channels=",
            )
        ]
    if images.dtype != torch.float32:
        # Preflight's G runs in fp32 without autocast: anything else is G's own doing, and D (fp32 weights)
        # would fail on it, or train in float64 at a fraction of the speed, blamed on D's update.
        return [
            Finding(
                "error",
                "generator",
                f"G returns {str(images.dtype).removeprefix('torch.')} images, not float32: G's output dtype "
                "comes from G itself (a .double(), a float64 tensor made in forward from numpy or "
                "torch.tensor(..., dtype=torch.float64)); keep G's tensors float32 and let ampgan's autocast "
                "choose the compute precision",
            )
        ]
    low, high = gan.image_range
    slack = 1e-3 * (high - low)
    outside = ((images < low - slack) | (images > high + slack)).float().mean().item()
    # Nothing outside, yet never below the middle: a sigmoid G (0 to 1) on data in [-1, 1].
    if outside > 0 or images.min() > (low + high) / 2:  # '>': a zero-initialised last layer sits at the middle
        return [
            Finding(
                "warning",
                "range",
                f"G's output spans {images.min().item():.2f} to {images.max().item():.2f}, "
                + (f"{outside:.0%} of it outside" if outside else "none of it in the lower half of")
                + f" the data range [{low:g}, {high:g}]: D can tell fakes by their range; end G in tanh for "
                "[-1, 1] or sigmoid for [0, 1] and set GAN.image_range to match",
            )
        ]
    return []


def _discriminator_ends(gan, stream) -> list[Finding]:
    """A D whose last operation is a sigmoid returns probabilities: BCE on them is refused by autocast on
    CUDA and saturates in fp16 (log(0) = -inf)."""
    order: list[nn.Module] = []
    hooks = [
        m.register_forward_hook(lambda module, args, out: order.append(module))
        for m in gan.discriminator.modules()
        if not list(m.children())
    ]
    real, labels = stream.next_batch()
    try:
        with torch.no_grad():
            gan.discriminator(real)
    except Exception:  # noqa: BLE001 - D may take more than images (its losses say what); the step
        pass  # below calls it as they do and reports a failure with its origin
    finally:
        for hook in hooks:
            hook.remove()
    shaping = (nn.Flatten, nn.Unflatten, nn.Identity, nn.Dropout)  # change no value: look past them
    last = next((module for module in reversed(order) if not isinstance(module, shaping)), None)
    if isinstance(last, nn.Sigmoid):
        return [
            Finding(
                "warning",
                "logits",
                "D ends in a Sigmoid (it returns probabilities): BCE on probabilities is "
                "refused by autocast on CUDA and saturates in fp16; drop the Sigmoid and "
                "take the loss on logits (ampgan.real_fake_loss)",
            )
        ]
    return []


class _GradientWitness:
    """Which trainable parameters each backward pass of the step reaches: under DDP every parameter of the
    wrapped network must get a gradient in every backward pass (or DDP stops with 'Expected to have
    finished reduction')."""

    def __init__(self, state):
        self.missing: dict[str, set[str]] = {}
        self._restore = []
        networks = {"discriminator": state.discriminator, "generator": state.generator}
        # Only a network that ran forward in a loss needs all its gradients from that backward (DDP
        # waits only for the networks it ran).
        self.called: set[str] = set()
        self._hooks = [
            network.register_forward_pre_hook(lambda module, args, name=name: self.called.add(name))
            for name, network in networks.items()
        ]
        scalers = [
            ("D's update", state.scaler_d, ("discriminator",)),
            ("G's update", state.scaler_g, ("generator",)),
            *(
                (f"update {update.name!r}", state.extra_scalers[update.name], update.networks)
                for update in state.gan.extra_updates
                if update.optimizer is not None and state.extra_scalers.get(update.name) is not None
            ),
        ]
        wrapped: set[int] = set()
        for label, scaler, names in scalers:
            if id(scaler) not in wrapped:  # a scaler several updates share is wrapped once, for the first
                wrapped.add(id(scaler))
                self._wrap(
                    scaler,
                    label,
                    [
                        (n, f"{'G' if n == 'generator' else 'D'}.{p_name}", p)
                        for n in names
                        for p_name, p in networks[n].named_parameters()
                    ],
                )

    def _wrap(self, scaler, label, params) -> None:
        original = scaler.backward

        def backward(loss):
            trainable = [(name, p) for network, name, p in params if p.requires_grad and network in self.called]
            self.called.clear()
            if trainable and loss.requires_grad:
                grads = torch.autograd.grad(loss, [p for _, p in trainable], allow_unused=True, retain_graph=True)
                unused = {name for (name, _), g in zip(trainable, grads) if g is None}
                if unused:  # an update on D's or G's own optimizer and scaler (a lazy R1) is named as itself
                    self.missing.setdefault(_update_running() or label, set()).update(unused)
            original(loss)

        scaler.backward = backward
        self._restore.append((scaler, original))

    def remove(self) -> None:
        for hook in self._hooks:
            hook.remove()
        for scaler, original in self._restore:
            scaler.backward = original

    def findings(self) -> list[Finding]:
        return [
            Finding(
                "warning",
                "unused",
                f"{len(names)} parameter(s) get no gradient in a backward pass of "
                f"{label} ({_first_few(sorted(names), 4)}): under torchrun DDP stops there; use them in "
                "every loss term (a zero-weighted term: ampgan.unused_but_reduced(output)) "
                "or leave them out of the network",
            )
            for label, names in self.missing.items()
        ]


class _OpsInLosses(TorchFunctionMode):
    """Records, during the step, the functions the loss code (not G's or D's: any method of their modules, a
    forward or what a loss calls itself, as path length calls G.mapping and G.synthesis) runs on bf16/fp16
    tensors that lose precision there, and the ones autocast refuses anywhere."""

    def __init__(self, gan):
        super().__init__()
        self.networks = {id(module) for network in (gan.generator, gan.discriminator) for module in network.modules()}
        # The loss terms' own code: a term that is a method of D (d_loss=D.loss) has D as its `self`, and only
        # what runs below its frame is network code.
        self.terms = {getattr(term, "__code__", None) for term in _loss_functions(gan)}
        self.fragile: set[str] = set()
        self.refused: set[str] = set()
        self.term = ""  # the loss term running now (set by _loss_terms)
        self.plain_grad: set[str] = set()  # terms that called torch.autograd.grad themselves

    def _in_networks(self) -> bool:
        """Whether a caller below the running loss term is a method of one of G's or D's modules (its `self`):
        their code, not the loss's."""
        frame = sys._getframe(2)
        while frame is not None and frame.f_code not in self.terms:
            if id(frame.f_locals.get("self")) in self.networks:
                return True
            frame = frame.f_back
        return False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if func is torch.autograd.grad and self.term and not _called_from(LossContext.input_gradients):
            self.plain_grad.add(self.term)
        if name in _REFUSED:
            self.refused.add(name)
        elif name in _FRAGILE and any(
            isinstance(a, torch.Tensor) and a.dtype in (torch.float16, torch.bfloat16)
            for a in (*args, *(kwargs or {}).values())
        ):
            if name == "normalize" or not self._in_networks():
                self.fragile.add(name)
        return func(*args, **(kwargs or {}))

    def findings(self, model: str) -> list[Finding]:
        if not self.refused:
            return []
        return [
            Finding(
                "warning",
                "autocast",
                f"model {model} computes {', '.join(sorted(self.refused))} (BCE "
                "on probabilities), which autocast refuses on CUDA: return "
                "logits and use BCE-with-logits (ampgan.real_fake_loss)",
            )
        ]


def _state_outside(kept: dict, gan) -> list[Finding]:
    """A loss that keeps state between steps outside G and D (what `kept` held before the step changed). One
    step cannot tell a memo of constants filled on the first call from state: a container that was empty is
    named as what it may be. A copy of G the losses hold (a user's own average of G, which g_loss moves toward G
    before G's first update changes it) is state whether or not the step changed it."""
    now = _kept_by_losses(gan)
    names = (dict(gan.generator.named_parameters()) | dict(gan.generator.named_buffers())).keys()
    changed = [key for key, value in kept.items() if not _same(value, now.get(key)) or _copy_of(names, value)]
    if not changed:
        return []
    filled = all(isinstance(kept[key], (dict, list)) and not kept[key] for key in changed)
    return [
        Finding(
            "warning",
            "outside",
            f"the losses {'may keep' if filled else 'keep'} state between steps outside G and D "
            f"({_first_few(changed, 3)}{', empty until the first step filled it' if filled else ''}): a checkpoint "
            "holds the networks, optimizers, scalers and RNGs, not it, so a resumed run differs from an "
            "uninterrupted one; keep it in a buffer of G or D (G.register_buffer('pl_mean', torch.zeros(()))), "
            "an average of G's weights as GAN(ema=ampgan.EMA(decay))"
            + ("; a memo of values that never change is harmless" if filled else ""),
        )
    ]


def _copy_of(names, value) -> bool:
    """Whether a kept value is (or holds) a module's copy with these parameter and buffer names and values of its
    own (G itself, whose tensors the checkpoint holds, is kept as None values)."""
    if isinstance(value, list):
        return any(_copy_of(names, item) for item in value)
    return isinstance(value, dict) and value.keys() == names and None not in value.values()


def _not_saved(gan) -> dict[str, torch.Tensor]:
    """G's and D's non-persistent buffers (register_buffer(..., persistent=False)), by name, as they are now: the
    networks' state that no state_dict, so no checkpoint, holds."""
    networks = {"G": gan.generator, "D": gan.discriminator}
    saved = {prefix: network.state_dict().keys() for prefix, network in networks.items()}
    return {
        f"{prefix}.{name}": buffer.detach().clone()
        for prefix, network in networks.items()
        for name, buffer in network.named_buffers()
        if name not in saved[prefix]
    }


def _unsaved_changed(before: dict[str, torch.Tensor], gan) -> list[Finding]:
    """A non-persistent buffer the step changed (ADA's augmentation probability): a resumed run restarts it."""
    changed = [name for name, value in _not_saved(gan).items() if not _same(before.get(name), value)]
    if not changed:
        return []
    return [
        Finding(
            "warning",
            "not-saved",
            f"the step changes non-persistent buffers ({_first_few(changed, 3)}): no checkpoint holds them, so a "
            "resumed run starts them again from their first value and differs from an uninterrupted one; register "
            "them persistent (register_buffer(name, tensor), the default), unless each step recomputes them whole",
        )
    ]


def _loss_functions(gan) -> list:
    return [*gan.d_loss_terms, gan.g_loss, *(f for u in gan.extra_updates for f in as_terms(u.loss))]


def _kept_by_losses(gan) -> dict:
    """What each loss function holds between calls, outside G and D: its closure's values, its object's
    attributes (a loss object, or the one a bound method belongs to, as StyleGAN2's loss.g_loss keeps pl_mean),
    tensors cloned and containers copied, by name. G's and D's own parameters and buffers are in the checkpoint."""
    networks = (gan.generator, gan.discriminator)
    own = {_storage(t) for network in networks for t in (*network.parameters(), *network.buffers())}
    inside = {id(module) for network in networks for module in network.modules()}
    kept = {}
    for function in _loss_functions(gan):
        code, cells = getattr(function, "__code__", None), getattr(function, "__closure__", None) or ()
        owner = getattr(function, "__self__", None) if code is not None else function
        held = _attributes(owner, id(owner) in inside)
        for name, cell in zip(code.co_freevars if code is not None else (), cells):
            try:
                held[name] = cell.cell_contents
            except ValueError:  # a cell not yet filled
                continue
        for name, value in held.items():
            if (copy := _copied(value, own)) is not None:
                kept[f"`{name}`"] = copy
    return kept


def _attributes(owner, in_g_or_d: bool) -> dict:
    """What a loss's object holds by name: a plain object's attributes; a module's plain (unregistered) ones, and,
    unless it is G, D or one of their layers (whose registered state the checkpoint holds), its parameters and
    buffers too (a loss written as an nn.Module keeping pl_mean in a buffer: not in any checkpoint)."""
    if not isinstance(owner, nn.Module):
        return dict(getattr(owner, "__dict__", {}))
    held = {name: value for name, value in vars(owner).items() if not name.startswith("_") and name != "training"}
    if not in_g_or_d:
        held |= dict(owner.named_parameters()) | dict(owner.named_buffers())
    return held


def _storage(tensor: torch.Tensor) -> int:
    """The memory a tensor lives in: a view of a weight at an offset (`D[2].weight[0, 1:]`) is the weight's."""
    return tensor.untyped_storage().data_ptr()


def _copied(value, own: set):
    """A tensor, number, module (its parameters and buffers: a user's own average of G, updated in g_loss) or
    container of them as it is now; None for anything else (functions, a tensor whose memory is one of `own`: a
    parameter of G or D a loss holds, as a weight penalty's `w = D[1].weight`, or a layer of G or D)."""
    if isinstance(value, nn.Module):
        value = dict(value.named_parameters()) | dict(value.named_buffers())
    if isinstance(value, torch.Tensor):
        return None if _storage(value) in own else value.detach().clone()
    if isinstance(value, (int, float, bool)):
        return value
    if isinstance(value, dict):
        return {key: _copied(item, own) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copied(item, own) for item in value]
    return None


def _same(before, after) -> bool:
    if isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor):
        return before.shape == after.shape and torch.equal(before, after)
    if isinstance(before, dict) and isinstance(after, dict):
        return before.keys() == after.keys() and all(_same(before[k], after[k]) for k in before)
    if isinstance(before, list) and isinstance(after, list):
        return len(before) == len(after) and all(_same(a, b) for a, b in zip(before, after))
    return type(before) is type(after) and before == after


def _first_few(names: list[str], count: int) -> str:
    """'a, b, c and 2 more': the first `count` names, and how many are left out."""
    return ", ".join(names[:count]) + (f" and {len(names) - count} more" if len(names) > count else "")


def _called_from(function, depth: int = 8) -> bool:
    """Whether `function` is among the callers a few frames up (autograd.grad's own frames in between)."""
    frame = sys._getframe(1)
    for _ in range(depth):
        if frame is None:
            return False
        if frame.f_code is function.__code__:
            return True
        frame = frame.f_back
    return False


def _saves_as_tensors(state) -> list[Finding]:
    """Checkpoints are read back with weights_only=True: anything in the state that is not plain tensors and
    containers cannot be resumed."""
    buffer = io.BytesIO()
    try:
        torch.save(state.state_dict(), buffer)
        buffer.seek(0)
        torch.load(buffer, weights_only=True)
    except Exception as error:  # noqa: BLE001 - what the unpickler refuses is the finding
        return [
            Finding(
                "error",
                "checkpoint",
                f"the model's state cannot be read back with weights_only=True "
                f"({type(error).__name__}: {first_words(str(error), 160)}): keep "
                "only tensors in its state_dict (buffers, not Python objects)",
            )
        ]
    return []


HIGHER_SCALE = 2.0**20  # a second fp16 loss scale: a loss that is right under scaling does not change with it


def _losses_under_loss_scaling(prepared, stream) -> list[Finding]:
    """Each loss term on one batch in fp32 and under fp16 at the loss scale training starts from (65536)
    and at a higher one: a loss that carries the scale (a penalty taken from the scaled score and not
    unscaled) is off by orders of magnitude and grows with the scale; one that is non-finite under fp16
    makes its update skip at every step. What the term did (read ctx.scale, passed input_gradients a
    summed scalar, called torch.autograd.grad itself) names the fix. The operations the losses run on
    fp16 tensors that lose precision are named too, and a term whose parameter gradients, unscaled, are not
    fp32's (a custom backward or a gradient hook that clamps what arrives scaled)."""
    values, notes, fragile, plain_grad, gradients = {}, {}, set(), set(), {}
    batch = stream.next_batch()
    for name, scale in ((FP32, None), (FP16, None), ("fp16 high", HIGHER_SCALE)):
        policy = build_policy(name.split()[0], CPU, loss_scale=scale)
        state = build_train_state(prepared.config, prepared.model, prepared.data, policy)
        with _OpsInLosses(state.gan) as ops:
            try:
                values[name], term_notes, gradients[name] = _loss_terms(state, policy, batch, ops, name != "fp16 high")
            except AmpganError as error:
                return [Finding("error", "step", f"under {policy.describe()}: {error}")]
        if name == FP16:
            fragile, plain_grad, notes = ops.fragile, ops.plain_grad, term_notes
    findings = [
        finding
        for term, fp32 in values[FP32].items()
        if values[FP16].get(term) is not None and math.isfinite(fp32)
        for finding in _scaling_findings(
            term, fp32, values[FP16][term], values["fp16 high"].get(term), notes.get(term, set()), term in plain_grad
        )
    ]
    for term, fp32 in gradients[FP32].items():
        # Per parameter, against fp32's, where both are finite (an overflow is the scaler's to skip) and fp32's
        # is not next to nothing (a bias before batch norm): right gradients differ by fp16's rounding only.
        norms = {n: (gradients[FP16].get(term, fp32).get(n, norm), norm) for n, norm in fp32.items()}
        largest = max((norm for _, norm in norms.values()), default=0.0)
        changed = [n for n, (low, exact) in norms.items() if 0 <= low < math.inf and exact > 1e-3 * largest]
        changed = [n for n in changed if not 0.5 < norms[n][0] / norms[n][1] < 2]
        if changed:
            findings.append(
                Finding(
                    "error",
                    "scaling",
                    f"{term}: the gradients of {_first_few(changed, 3)} under fp16 loss scaling, unscaled, are not "
                    f"fp32's ({norms[changed[0]][0]:.3g} against {norms[changed[0]][1]:.3g}): code in the backward "
                    "pass (a torch.autograd.Function's backward, a tensor hook) clamps or compares gradients, which "
                    "arrive multiplied by the loss scale; make it scale-free or keep it out of the backward pass",
                )
            )
        broken = [n for n, (low, exact) in norms.items() if math.isnan(low) and math.isfinite(exact)]
        if broken and not any(f.text.startswith(term) for f in findings):  # a loss wrong under scaling is said
            fine = [n for n, (low, _) in norms.items() if math.isfinite(low)]
            findings.append(
                Finding(
                    "error",
                    "fp16-nan",
                    f"{term}: the gradients of {_first_few(broken, 3)} are inf or NaN under fp16 even without loss "
                    f"scaling (finite in fp32{f'; those of {_first_few(fine, 2)} are finite' if fine else ''}): an "
                    "operation on their path computes in fp16 what it cannot hold (an epsilon under fp16's 6e-8 "
                    "vanishes: sqrt(var + 1e-8) of a zero variance, a minibatch-stddev; a value past 65504), so every "
                    "fp16 update would be skipped until the loss scale collapses; compute it in fp32 (.float() "
                    "before it, or its module in GAN.fp32_modules)",
                )
            )
    if fragile:
        findings.append(
            Finding(
                "warning",
                "fragile",
                f"the losses compute {', '.join(sorted(fragile))} on fp16/bf16 "
                "tensors (an epsilon under the format's resolution vanishes, "
                "small squares flush to zero): call .float() on D's output "
                "before the loss",
            )
        )
    return findings


def _scaling_findings(
    term: str, fp32: float, fp16: float, high: float | None, did: set[str], plain_grad: bool
) -> list[Finding]:
    """What one loss term's values in fp32, under fp16 loss scaling and at a higher scale say is wrong with it
    (`did`: what the term did, LossContext.notes; `plain_grad`: it called torch.autograd.grad itself)."""
    if plain_grad and "read the scale" not in did:
        return [
            Finding(
                "error",
                "penalty",
                f"{term} takes input gradients with torch.autograd.grad: under "
                "fp16 they are not loss-scaled, so small ones flush to zero "
                "(a penalty that silently weakens); take them with "
                "ctx.input_gradients(outputs, inputs), right in every precision",
            )
        ]
    if not math.isfinite(fp16) and "summed outputs" in did:
        text = (
            f"{term} is {fp16} under fp16 loss scaling ({fp32:.4g} in fp32): "
            "it passes ctx.input_gradients an already-summed scalar, so "
            "every element's backward pass starts from the whole loss "
            "scale and overflows fp16; pass the unreduced tensor "
            "(ctx.input_gradients(img * y, w), not (img * y).sum())"
        )
    elif not math.isfinite(fp16):
        text = (
            f"{term} is {fp16} under fp16 loss scaling and {fp32:.4g} in fp32: "
            "its update would be skipped at every step; " + _scaling_fix(did)
        )
    elif abs(fp16 - fp32) > max(1.0, 10 * abs(fp32)) or (
        high is not None and math.isfinite(high) and abs(high) > 4 * abs(fp16) + 1e-6
    ):
        text = (
            f"{term} is {fp16:.4g} under fp16 loss scaling and {fp32:.4g} "
            "in fp32, and grows with the scale: it carries the loss scale "
            "(a gradient penalty taken from the scaled score and not "
            "unscaled); " + _scaling_fix(did)
        )
    elif "summed outputs" in did:
        text = (
            f"{term} passes ctx.input_gradients an already-summed scalar: "
            "every element's backward pass then starts from the whole "
            "loss scale, which overflows fp16 as the model grows; pass the "
            "unreduced tensor (ctx.input_gradients(D(x), x), not "
            "D(x).sum())"
        )
    else:
        return []
    return [Finding("error", "scaling", text)]


def _scaling_fix(did: set[str]) -> str:
    if "read the scale" in did:
        return (
            "it multiplies by ctx.scale itself and never divides it out: take input gradients with "
            "ctx.input_gradients(outputs, inputs), which starts from the scale and unscales the result"
        )
    return (
        "if it takes input gradients, take them with ctx.input_gradients from the unreduced outputs (not their "
        ".sum()); otherwise compute the loss in fp32 (.float() on D's output before it)"
    )


def _g_state_changed_by_d_loss(prepared, stream) -> list[Finding]:
    """A D loss that runs G again (ctx.G(ctx.z) where ctx.fake was meant, even under torch.no_grad()) in
    training mode updates G's running statistics (batch norm's running mean and variance,
    num_batches_tracked) a second time per step: G's weights are safe (only D's optimizer steps), so no
    other check sees it, but eval-mode samples and every quality score use those statistics. Found by G's
    buffers changing while D's loss terms run, each on the context the step gives it."""
    state = build_train_state(prepared.config, prepared.model, prepared.data, build_policy(FP32, CPU))
    if not any(True for _ in state.generator.buffers()):
        return []
    context, _ = _context(state, stream.next_batch())
    findings = []
    runs = []  # G or any of its layers run by the term (a loss may call G's parts: G.synthesis)
    for module in state.generator.modules():
        module.register_forward_pre_hook(lambda *_: runs.append(1))  # on this throwaway state only
    for index, term in enumerate(state.gan.d_loss_terms, start=1):
        before = {name: buffer.clone() for name, buffer in state.generator.named_buffers()}
        runs.clear()
        try:
            term(context)
        except Exception:  # noqa: BLE001 - a failing loss is the step's finding, not this one's
            continue
        moved = [n for n, b in state.generator.named_buffers() if n in before and not torch.equal(before[n], b)]
        if not moved:
            continue
        if runs:
            text = (
                "it runs G in training mode during D's update, so G's batch-norm statistics move twice per step and "
                "eval-mode samples use them; use ctx.fake (G's output for this step, already detached) instead of "
                "calling ctx.G"
            )
        else:  # set by the loss itself (a ProGAN's fade-in): G drew this step's fakes before it ran
            text = (
                "the loss sets them itself, after G drew this step's fakes with their old value; set what G reads "
                "for a step at the end of g_loss, for the next step (ctx.step + 1)"
            )
        findings.append(
            Finding("warning", "g-state", f"d_loss term {index} changes G's buffers ({_first_few(moved, 3)}): {text}")
        )
    return findings


def _context(state, batch) -> tuple[LossContext, torch.Tensor]:
    """The LossContext the step's first D update gives its loss terms (the same batch and noise, the fakes
    detached), and the fakes with G's graph, which G's update gets as the step gives them (a g_loss that takes
    gradients of G's weights itself, VQGAN's adaptive weight, needs it; so does the check of G's gradients)."""
    torch.manual_seed(0)
    context = LossContext.for_batch(
        state.gan,
        state.generator,
        state.discriminator,
        *batch,  # (real images, their labels)
        step=0,
        rng=torch.Generator().manual_seed(1),
        scaler=state.scaler_d,
    )
    with state.policy.autocast():
        fake = state.gan.generate(state.generator, context.z, context.fake_labels)
    context.fake = fake.detach()
    return context, fake


def _loss_terms(
    state, policy, batch, ops, with_gradients: bool = True
) -> tuple[dict[str, float], dict[str, set[str]], dict[str, dict[str, float]]]:
    """Every loss term's value on the same batch and noise, as the step's first D and G updates see them,
    what each did (LossContext.notes) and (`with_gradients`) the norm of each parameter's gradient it gives,
    unscaled, for the networks its update trains (D is frozen while G learns: its gradients there are no one's)."""
    gan = state.gan
    context, fake_with_graph = _context(state, batch)
    detached = context.fake
    values, notes, gradients = {}, {}, {}
    networks = {"generator": ("G", state.generator), "discriminator": ("D", state.discriminator)}

    def trained(*names: str) -> dict[str, torch.Tensor]:
        return {
            f"{prefix}.{n}": p
            for prefix, network in (networks[name] for name in names)
            for n, p in network.named_parameters()
            if p.requires_grad
        }

    terms = [
        (f"d_loss term {i + 1}", t, state.scaler_d, trained("discriminator"), detached)
        for i, t in enumerate(gan.d_loss_terms)
    ]
    terms += [("g_loss", gan.g_loss, state.scaler_g, trained("generator"), fake_with_graph)]
    for update in gan.extra_updates:
        loss = update.loss if isinstance(update.loss, (list, tuple)) else (update.loss,)
        scaler = state.extra_scalers.get(update.name) or (
            state.scaler_d if "discriminator" in update.networks else state.scaler_g
        )
        terms += [  # an extra update draws its own fakes (the step gives it none)
            (f"update {update.name!r} term {i + 1}", t, scaler, trained(*update.networks), None)
            for i, t in enumerate(loss)
        ]
    for name, term, scaler, parameters, fake in terms:
        context.scaler, context.notes, context.fake, ops.term = scaler, [], fake, name
        context.rng.manual_seed(2)
        try:
            with policy.autocast():
                result = term(context)
        except AmpganError as error:
            raise AmpganError(f"model {gan.name}: {name}: {error}") from None
        except Exception as error:  # noqa: BLE001 - the user's loss failing is one line
            raise AmpganError(
                f"model {gan.name}: {name} failed: {type(error).__name__}: {first_words(str(error), 200)}"
            ) from None
        loss, _ = as_loss(result, f"model {gan.name}: {name}")  # the step's own rule
        values[name] = float(loss.detach().float().reshape(-1)[0])
        notes[name] = set(context.notes)
        if with_gradients and loss.requires_grad and parameters:
            ops.term = ""  # ampgan's own autograd.grad, not the term's
            scale = float(scaler.scale_tensor())
            found = torch.autograd.grad(loss * scale, list(parameters.values()), allow_unused=True, retain_graph=True)
            gradients[name] = {n: float(g.float().norm()) / scale for n, g in zip(parameters, found) if g is not None}
            if scale != 1 and not all(map(math.isfinite, gradients[name].values())):
                # An overflow at the scale is the scaler's to skip (inf); one without scaling is the model's (NaN)
                at_one = torch.autograd.grad(loss, list(parameters.values()), allow_unused=True)
                for n, g in zip(parameters, at_one):
                    if not math.isfinite(gradients[name].get(n, 0.0)):
                        gradients[name][n] = math.inf if bool(g.isfinite().all()) else math.nan
    return values, notes, gradients


def check_before_training(config: TrainConfig, dataset=None, log=say, said=("error", "warning")) -> list[Finding]:
    """Preflight as a gate: each finding of a severity in `said` logged as one line (a caller that prints the
    warnings itself, as the doctor's summary does, says errors only); stops (AmpganError, exit 2) on an error."""
    findings = preflight(config, dataset)
    for finding in findings:
        if finding.severity in said:
            log(f"preflight: {finding.line()}")
    errors = [finding for finding in findings if finding.severity == "error"]
    if errors:
        raise AmpganError(
            f"preflight: model {config.model.name} cannot train as it is ({len(errors)} error(s) above): "
            "fix them and check again with 'ampgan preflight --model ...'"
        )
    return findings
