"""The seam every GAN comes through: what a GAN is, as far as ampgan needs to know.

A GAN is the object a model function returns: its two networks, how its inputs are drawn, its losses,
and the few facts that change how a step runs. ampgan does everything else the same way for every GAN,
which is what makes fp32 and mixed precision comparable: the precision policy (autocast around every
forward pass, losses reduced in fp32), one loss scaler per network, backward / unscale / skip / step,
freezing D during G's update, memory format, compile and DDP wrapping, timing, checkpoints, resume,
fault detection and evaluation.

    def my_gan(data: DataSpec, *, width: int = 64) -> GAN:   # keyword options: `--set model.width=32`
        G, D = MyGenerator(data, width), MyDiscriminator(data, width)
        return GAN(generator=G, discriminator=D, z_dim=128, d_loss=..., g_loss=...)

One training step of ampgan is one G update (for WGAN-style critics, after `d_steps` D updates):

    for each of d_steps:  real, labels = next batch;  z, fake_labels = draw_inputs;  fake = G(z[, fake_labels])
                          D loss term(s) under autocast -> backward (scaled) -> D optimizer step
    G update:             D frozen;  g_loss under autocast -> backward (scaled) -> G optimizer step
    extra updates:        each one due at this step (lazy regularisers, a third optimizer) the same way

docs/your-gan.md walks through the contract with complete examples (examples/).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from ampgan.data.batches import scale_images
from ampgan.errors import AmpganError
from ampgan.gan.context import LossContext
from ampgan.gan.ema import EMA, G_OWN_WEIGHTS, check_ema
from ampgan.gan.options import is_whole

# What a loss function returns: the loss (a scalar tensor), or (the loss, {name: scalar tensor}) with
# metrics to log beside it. Metrics stay tensors: the step never waits for the device.
LossResult = torch.Tensor | tuple[torch.Tensor, dict[str, torch.Tensor]]
LossFunction = Callable[["LossContext"], LossResult]  # noqa: F821 - gan/context.py


@dataclass(frozen=True)
class DataSpec:
    """What the data is: what a model function receives to size its networks."""

    image_size: int
    channels: int
    num_classes: int  # classes of the dataset (1 for a dataset without labels); unconditional GANs ignore it
    class_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Adam:
    """An optimizer's settings: ampgan's step uses Adam (foreach) for every network. The `optim`
    config section can override lr and betas per run."""

    lr: float = 2e-4
    betas: tuple[float, float] = (0.5, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    # Parameter groups: {name prefix: factor}, the learning rate of the parameters whose name (in their
    # network) starts with the prefix; the first matching prefix wins. StyleGAN2: {"mapping.": 0.01}.
    lr_multipliers: dict[str, float] = field(default_factory=dict)
    # The learning rate's factor at each step (TTUR's decay, a warm-up): step -> factor, of the G updates finished
    # before it. A function of ampgan's step count, not of the updates applied: an fp16 update skipped for
    # overflow leaves the schedule where fp32's is (a scheduler stepped per applied update would fall behind).
    lr_schedule: Callable[[int], float] | None = None

    @classmethod
    def lazy(cls, every: int, **settings) -> Adam:
        """StyleGAN2's adjustment for a network regularised lazily every `every` steps: the optimizer
        steps (every + 1) times per `every` steps, so lr and betas are scaled by c = every / (every + 1)
        (lr * c, betas ** c) to keep the same per-step dynamics."""
        base = cls(**settings)
        c = every / (every + 1)
        return replace(base, lr=base.lr * c, betas=(base.betas[0] ** c, base.betas[1] ** c))


@dataclass(frozen=True)
class Update:
    """An update beside D's and G's, run after G's at every `every`-th step (the step count after the
    update, as StyleGAN2 schedules its lazy regularisation):

    - `networks`: which parameters it changes: ("discriminator",), ("generator",) or both;
    - `optimizer`: None steps the network's own optimizer (and its loss scaler); an `Adam` gets an
      optimizer and scaler of its own (the study's third optimizer over D, its classifier and G);
    - `loss`: one loss function or a sequence (one backward pass each, in order);
    - `scale_by_interval`: multiply the loss by `every` (lazy regularisation keeps the penalty's
      strength per image when it runs every N steps).
    """

    name: str
    loss: LossFunction | Sequence[LossFunction]
    networks: tuple[str, ...] = ("discriminator",)
    every: int = 1
    optimizer: Adam | None = None
    scale_by_interval: bool = False


BUILT_IN: dict[str, Callable] = {}  # name -> model function, filled by @built_in in gan/models/


def built_in(name: str):
    """Register a model function of gan/models/ under `name` (`--model name`)."""

    def register(builder: Callable) -> Callable:
        BUILT_IN[name] = builder
        return builder

    return register


Z_DISTRIBUTIONS = ("normal", "uniform")  # N(0, 1), or U(-1, 1) as the study's TF code drew it
NETWORKS = ("generator", "discriminator")


@dataclass
class GAN:
    """`generator(z)` (or `generator(z, labels)` when `conditional`) returns images in `image_range`,
    (B, C, H, W) as the data is; `discriminator` is called by the loss functions, so its signature is
    theirs to choose. Both are plain nn.Modules built on the CPU: ampgan moves, wraps and compiles them.

    - `d_loss`: D's loss; a sequence of loss functions runs one backward pass each, in order (the real
      half's graph is freed before the fake half is built, as pytorch/examples' DCGAN does);
    - `g_loss`: G's loss; D is frozen while it runs (only D's input gradients are needed);
    - `d_steps`: D updates per G update (WGAN-GP's critic: 5), each on its own real batch;
    - `extra_updates`: lazy regularisers and extra optimizers (`Update`);
    - `fp32_modules`: submodules that must compute in fp32 whatever the precision (autocast is switched
      off inside them and their floating inputs are cast to fp32);
    - `draw_inputs(context) -> (z, labels or None)`: how a training batch's inputs are drawn, when not
      z from `z_distribution` and labels uniform over the classes (the AC-GAN draws its labels in pairs);
    - `ema`: an exponential moving average of G (`EMA`), which samples and evaluations then use.
    """

    generator: nn.Module
    discriminator: nn.Module
    z_dim: int
    d_loss: LossFunction | Sequence[LossFunction]
    g_loss: LossFunction
    conditional: bool = False
    num_classes: int = 1
    z_distribution: str = "normal"
    image_range: tuple[float, float] = (-1.0, 1.0)
    d_steps: int = 1
    extra_updates: Sequence[Update] = ()
    optimizer_g: Adam = field(default_factory=Adam)
    optimizer_d: Adam = field(default_factory=Adam)
    fp32_modules: Sequence[nn.Module] = ()
    draw_inputs: Callable | None = None
    ema: EMA | None = None
    description: str = ""
    name: str = ""  # the model name it was built from (ampgan sets it)
    # The fp32 average of G when `ema` is declared (training/ema.py makes it beside the trained G).
    averaged_generator: nn.Module | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def sampling_generator(self) -> nn.Module:
        """The generator samples, `generate`, `export` and evaluations use: the average when the model
        declares one (and ampgan has made it), otherwise G itself."""
        return self.averaged_generator if self.averaged_generator is not None else self.generator

    @property
    def sampling_weights(self) -> str:
        """Which weights `sampling_generator` holds, in words (printed and recorded beside what they made)."""
        return self.ema.describe() if self.ema is not None else G_OWN_WEIGHTS

    @property
    def d_loss_terms(self) -> tuple[LossFunction, ...]:
        return as_terms(self.d_loss)

    @property
    def cycle_steps(self) -> int:
        """Steps after which the schedule repeats (every lazy update has run): the unit a speed
        measurement must time, so a mode is not judged on the steps where a penalty does not run."""
        return math.lcm(*(update.every for update in self.extra_updates))

    def cycle_kinds(self) -> list[tuple[int, int]]:
        """The cycle's steps grouped by which extra updates run in them: [(a step count before such a
        step, how many steps of the cycle are of its kind)]. A cycle of 16 with a lazy penalty is 15 plain
        steps and 1 with the penalty: timing one of each (weighted 15 : 1) times the whole cycle."""
        kinds: dict[tuple[str, ...], list[int]] = {}
        for position in range(1, self.cycle_steps + 1):  # the step count after the step
            due = tuple(u.name for u in self.extra_updates if position % u.every == 0)
            kinds.setdefault(due, [position - 1, 0])[1] += 1
        return [(before, count) for before, count in kinds.values()]

    def draw_z(self, count: int, rng: torch.Generator, device: torch.device | str = "cpu") -> torch.Tensor:
        """(count, z_dim) noise from `z_distribution`, drawn with `rng` (on `rng`'s device)."""
        if self.z_distribution == "uniform":
            return torch.rand(count, self.z_dim, device=device, generator=rng).mul_(2).sub_(1)
        return torch.randn(count, self.z_dim, device=device, generator=rng)

    def inputs_for(self, count: int, rng: torch.Generator, real: torch.Tensor | None = None) -> torch.Tensor:
        """G's z outside the training step (samples, evaluations, preflight), on the CPU: (count, z_dim) noise; for
        an image-to-image G (its draw_inputs draws a map, not (N, z_dim) noise) the maps draw_inputs makes of the
        real images `real` (the data's uint8, cycled to `count`), so every precision translates the same ones. An
        unconditional G whose draw_inputs draws (N, z_dim) codes (InfoGAN's one-hot and uniform codes) gets them:
        noise in their place is an input it never trained on. A conditional G's labels are the caller's, so its
        z is noise from z_distribution."""
        z = self.draw_z(count, rng)
        if self.draw_inputs is None or real is None or not len(real):
            return z
        real = scale_images(real[torch.arange(count) % len(real)], self.image_range)  # as training feeds it
        try:
            drawn = LossContext.for_batch(self, None, None, real, None, step=0, rng=rng, scaler=None).z
        except Exception:  # noqa: BLE001 - a draw that needs the training step's context: G is tried on noise
            return z
        return drawn if drawn.dim() != 2 or not self.conditional else z

    @torch.no_grad()
    def translates(self, image_shape: tuple[int, ...]) -> bool:
        """An image-to-image G: its draw_inputs makes maps of real images (a blank image tells its draw apart from
        noise's, and is what a draw of codes that reads only the batch's size is given)."""
        blank = torch.zeros(1, *image_shape, dtype=torch.uint8)
        return self.draw_inputs is not None and self.inputs_for(1, torch.Generator(), blank).dim() != 2

    def generate(self, generator: Callable, z: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor:
        """G's images for (z, labels): the one place that knows G's signature."""
        images = generator(z, labels) if self.conditional else generator(z)
        if not isinstance(images, torch.Tensor):  # a tuple or dict: nothing could train, sample or export it
            raise AmpganError(
                f"model {self.name}: G returned a {type(images).__name__}, not a (B, C, H, W) tensor: {ONE_TENSOR}"
            )
        return images

    def to_unit_range(self, images: torch.Tensor) -> torch.Tensor:
        """Images in `image_range` -> [-1, 1], the range evaluators, grids and PNGs read."""
        low, high = self.image_range
        if (low, high) == (-1.0, 1.0):
            return images
        return (images - low) * (2.0 / (high - low)) - 1.0


ONE_TENSOR = (
    "return the images alone from G's forward; compute G's other outputs in the losses "
    "(a method of G called on ctx.z) or keep them in a buffer of G"
)


def as_terms(loss) -> tuple[LossFunction, ...]:
    return tuple(loss) if isinstance(loss, (list, tuple)) else (loss,)


def check_gan(gan, origin: str) -> GAN:
    """The object a model function returned, checked field by field: one error line naming `origin`
    (the model function) and what to fix."""
    if not isinstance(gan, GAN):
        raise AmpganError(
            f"{origin} returned {type(gan).__name__}, not an ampgan GAN: return "
            "ampgan.GAN(generator=..., discriminator=..., z_dim=..., d_loss=..., g_loss=...)"
        )
    _check_updates(gan.extra_updates, origin)
    optimizers = [("GAN.optimizer_g", gan.optimizer_g), ("GAN.optimizer_d", gan.optimizer_d)]
    optimizers += [(f"Update {u.name!r} optimizer", u.optimizer) for u in gan.extra_updates if u.optimizer is not None]
    for where, optimizer in optimizers:
        if not isinstance(optimizer, Adam):  # torch.optim.Adam (its class or one made over G's parameters)
            kind = optimizer if isinstance(optimizer, type) else type(optimizer)
            # torch's Adam maps onto ampgan.Adam; any other (RAdam, SGD, the user's own) would be swapped for Adam
            other = "" if kind.__name__ == "Adam" else f"ampgan's step runs Adam only, not {kind.__qualname__}: "
            raise AmpganError(
                f"{origin}: {where} is {kind.__module__}.{kind.__qualname__}, not ampgan.Adam: {other}"
                "give its settings, ampgan.Adam(lr=..., betas=...), and ampgan makes the optimizer over the network's "
                "trainable parameters (lr_multipliers for parameter groups, lr_schedule for a scheduler)"
            )
    _check_networks(gan, origin)
    for name in ("z_dim", "d_steps"):
        if not is_whole(getattr(gan, name), 1):
            raise AmpganError(f"{origin}: GAN.{name} must be a whole number of at least 1, got {getattr(gan, name)!r}")
    if gan.z_distribution not in Z_DISTRIBUTIONS:
        raise AmpganError(
            f"{origin}: GAN.z_distribution must be one of {', '.join(Z_DISTRIBUTIONS)}, got {gan.z_distribution!r}"
        )
    _check_callable(gan.d_loss, f"{origin}: GAN.d_loss", " (or a list of them)")
    if not callable(gan.g_loss):  # one function: G's update is one backward pass through D (the step calls it)
        raise AmpganError(
            f"{origin}: GAN.g_loss must be one function of the loss context (G's update is one backward pass), "
            f"got {type(gan.g_loss).__name__}"
        )
    low_high = gan.image_range
    if not (
        isinstance(low_high, tuple)
        and len(low_high) == 2
        and all(isinstance(v, (int, float)) for v in low_high)
        and low_high[0] < low_high[1]
    ):
        raise AmpganError(
            f"{origin}: GAN.image_range must be (low, high) with low < high, e.g. (-1, 1) for tanh "
            f"or (0, 1) for sigmoid, got {low_high!r}"
        )
    gan.image_range = (float(low_high[0]), float(low_high[1]))
    if gan.conditional and (not isinstance(gan.num_classes, int) or gan.num_classes < 1):
        raise AmpganError(
            f"{origin}: a conditional GAN needs num_classes (the data's number of classes), got {gan.num_classes!r}"
        )
    for where, optimizer in optimizers:
        _check_schedule(optimizer.lr_schedule, f"{origin}: {where}.lr_schedule")
    check_ema(gan.ema, origin)
    if gan.draw_inputs is not None:
        _check_callable(gan.draw_inputs, f"{origin}: GAN.draw_inputs")
    return gan


def _check_schedule(schedule, where: str) -> None:
    """A learning-rate schedule is step -> a factor of at least 0 (tried at step 0: a scheduler class or a
    float failed inside the first training step with a bare TypeError)."""
    if schedule is None:
        return
    fix = "give a function of the step returning the learning rate's factor, e.g. lambda step: 0.5 ** (step // 1000)"
    if not callable(schedule):
        raise AmpganError(f"{where} is {type(schedule).__name__}, not a function: {fix}")
    try:
        factor = schedule(0)
    except Exception as error:  # noqa: BLE001 - the user's function: said in one line
        raise AmpganError(f"{where} raised {type(error).__name__} at step 0 ({error}): {fix}") from None
    try:  # what the step reads it as (float()): a NumPy or 0-dim torch number too, not text or a switch
        value = float(factor) if not isinstance(factor, (bool, str, bytes)) else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise AmpganError(f"{where} returned {factor!r} at step 0, not a factor of at least 0: {fix}")


def _check_callable(loss, where: str, or_list: str = "") -> None:
    for term in as_terms(loss):
        if not callable(term):
            raise AmpganError(f"{where} must be a function of the loss context{or_list}, got {type(term).__name__}")


def _check_networks(gan: GAN, origin: str) -> None:
    """Two distinct networks with trainable parameters of their own, their fp32 islands and learning-rate
    multipliers inside them."""
    for name, which in zip(NETWORKS, ("optimizer_g", "optimizer_d")):
        network = getattr(gan, name)
        if not isinstance(network, nn.Module):
            raise AmpganError(f"{origin}: GAN.{name} is {type(network).__name__}, not a torch.nn.Module")
        if not any(parameter.requires_grad for parameter in network.parameters()):
            raise AmpganError(
                f"{origin}: every parameter of GAN.{name} is frozen (requires_grad=False): nothing "
                "would train; leave the layers that should learn trainable"
            )
        lazy = [n for n, t in network.state_dict(keep_vars=True).items() if is_lazy(t)]
        if lazy:  # no shape yet: nothing ampgan could count, cast, give an optimizer or save
            raise AmpganError(
                f"{origin}: GAN.{name}'s {lazy[0]} ({len(lazy)} tensor(s)) is uninitialized (nn.LazyConv2d, "
                "nn.LazyLinear...): call the network once in the model function on a batch of its input's shape "
                "(e.g. D(torch.zeros(2, C, H, W))) so every layer has its shape before ampgan takes it"
            )
        names = [n for n, _ in network.named_parameters()]
        for prefix, factor in getattr(gan, which).lr_multipliers.items():
            if not isinstance(factor, (int, float)) or factor <= 0:
                raise AmpganError(
                    f"{origin}: GAN.{which} lr_multipliers[{prefix!r}] must be a positive number, got {factor!r}"
                )
            if not any(n.startswith(prefix) for n in names):
                raise AmpganError(
                    f"{origin}: GAN.{which} lr_multipliers names {prefix!r}, which no parameter name "
                    f"of the {name} starts with (they start: {', '.join(sorted({n.split('.')[0] for n in names})[:6])})"
                )
    if gan.generator is gan.discriminator:
        raise AmpganError(f"{origin}: the generator and the discriminator are the same module: give two networks")
    in_d = {id(p): name for name, p in gan.discriminator.named_parameters()}
    shared = [(name, in_d[id(p)]) for name, p in gan.generator.named_parameters() if id(p) in in_d]
    if shared:  # weight tying (a class embedding both use): named, so the user finds the module they share
        raise AmpganError(
            f"{origin}: the generator and the discriminator share {len(shared)} parameter(s) (G.{shared[0][0]} is "
            f"D.{shared[0][1]}): each network needs its own (each has its own optimizer and loss scaler); give one "
            "network a copy of the shared module"
        )
    modules = [m for network in (gan.generator, gan.discriminator) for m in network.modules()]
    for module in gan.fp32_modules:
        if not isinstance(module, nn.Module) or not any(module is m for m in modules):
            raise AmpganError(
                f"{origin}: every GAN.fp32_modules entry must be a submodule of the generator or the discriminator"
            )


def _check_updates(updates: Sequence[Update], origin: str) -> None:
    names = set()
    for update in updates:
        if not isinstance(update, Update):
            raise AmpganError(f"{origin}: GAN.extra_updates holds {type(update).__name__}: use ampgan.Update(...)")
        where = f"{origin}: Update {update.name!r}"
        if update.name in names or update.name in ("d", "g"):
            raise AmpganError(f"{origin}: two updates are called {update.name!r} (or it is 'd'/'g'): name each once")
        names.add(update.name)
        if not update.networks or any(n not in NETWORKS for n in update.networks):
            raise AmpganError(f"{where} networks must be among {NETWORKS}, got {update.networks!r}")
        if update.optimizer is None and len(update.networks) != 1:
            raise AmpganError(
                f"{where} changes both networks, so it needs an optimizer of its own (optimizer=ampgan.Adam(...))"
            )
        if not is_whole(update.every, 1):
            raise AmpganError(f"{where} every must be a whole number of at least 1")
        _check_callable(update.loss, f"{where} loss")
