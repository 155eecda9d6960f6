"""The training state, which saves and restores itself (torchtitan's `Stateful` pattern).

`TrainState` is what the training step changes: the GAN's two networks, their optimizers and loss
scalers (and those of any update with an optimizer of its own), and the noise generator. Its
`state_dict()` / `load_state_dict()` own exactly what a checkpoint holds of it; `runs.checkpoint`
only stores the payload. The process-wide RNGs (torch, CUDA, numpy, Python) are captured beside it by
`capture_global_rngs()`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from ampgan.config import TrainConfig
from ampgan.env import env_value
from ampgan.errors import AmpganError
from ampgan.gan.contract import GAN, Adam, DataSpec
from ampgan.gan.registry import ModelRecipe
from ampgan.runs.checkpoint import load_weights
from ampgan.seeds import CURRENT_SCHEME, step_noise_seed, weights_seed
from ampgan.training.compile_cache import use_persistent_compile_cache
from ampgan.training.distributed import name_reduced_parameters, world
from ampgan.training.ema import attach_average, load_average
from ampgan.training.precision import LossScaler, PrecisionPolicy


@dataclass
class TrainState:
    gan: GAN
    optimizer_g: torch.optim.Optimizer
    optimizer_d: torch.optim.Optimizer
    scaler_g: LossScaler
    scaler_d: LossScaler
    policy: PrecisionPolicy
    rng: torch.Generator  # noise and fake labels, on the training device
    step: int = 0
    # Updates with an optimizer of their own (gan.Update with `optimizer`), by name.
    extra_optimizers: dict[str, torch.optim.Optimizer] = field(default_factory=dict)
    extra_scalers: dict[str, LossScaler] = field(default_factory=dict)
    # What the step calls: the plain modules (as built), or their torch.compile'd and/or DDP wrappers
    # (wrap_modules; kept apart so checkpoints always hold the plain modules' state dicts). A network that is
    # frozen in an update runs without DDP (`*_unwrapped`: compiled or plain): no gradient of its is reduced there.
    run_generator: Callable = field(init=False)
    run_discriminator: Callable = field(init=False)
    run_generator_unwrapped: Callable = field(init=False)
    run_discriminator_for_g: Callable = field(init=False)

    def __post_init__(self) -> None:
        self.run_generator = self.run_generator_unwrapped = self.generator
        self.run_discriminator = self.run_discriminator_for_g = self.discriminator

    @property
    def generator(self) -> torch.nn.Module:
        return self.gan.generator

    @property
    def discriminator(self) -> torch.nn.Module:
        return self.gan.discriminator

    @contextmanager
    def eager(self):
        """Run the step on the plain modules (no DDP, no torch.compile) inside the block."""
        wrapped = (
            self.run_generator,
            self.run_discriminator,
            self.run_generator_unwrapped,
            self.run_discriminator_for_g,
        )
        self.__post_init__()  # the plain modules, as built
        try:
            yield self
        finally:
            (self.run_generator, self.run_discriminator, self.run_generator_unwrapped, self.run_discriminator_for_g) = (
                wrapped
            )

    def loss_scalers(self) -> dict[str, LossScaler]:
        """Every loss scaler by the name metrics.jsonl logs it under (loss_scale_NAME): D's, G's, and that of
        each update with an optimizer of its own (it trains both networks, so neither's scaler is its)."""
        return {"d": self.scaler_d, "g": self.scaler_g, **self.extra_scalers}

    def state_dict(self) -> dict:
        saved = {
            "step": self.step,
            "generator": self.generator.state_dict(),
            "discriminator": self.discriminator.state_dict(),
            "optimizer_g": self.optimizer_g.state_dict(),
            "optimizer_d": self.optimizer_d.state_dict(),
            "scaler_g": self.scaler_g.state_dict(),
            "scaler_d": self.scaler_d.state_dict(),
            "step_generator": self.rng.get_state(),
            "step_generator_device": self.rng.device.type,
        }
        if self.gan.averaged_generator is not None:
            saved["ema_generator"] = self.gan.averaged_generator.state_dict()
        if self.extra_optimizers:
            saved["extra_optimizers"] = {name: opt.state_dict() for name, opt in self.extra_optimizers.items()}
            saved["extra_scalers"] = {name: scaler.state_dict() for name, scaler in self.extra_scalers.items()}
        return saved

    def load_state_dict(self, saved: dict, origin: str = "the checkpoint") -> None:
        """Networks (and the EMA of G), optimizers, scalers and step; the noise generator when `saved` has one."""
        load_weights(self.generator, saved["generator"], f"{origin} (generator)")
        load_weights(self.discriminator, saved["discriminator"], f"{origin} (discriminator)")
        load_average(self.gan, saved, origin)
        try:
            load_optimizer_state(self.optimizer_g, saved["optimizer_g"])
            load_optimizer_state(self.optimizer_d, saved["optimizer_d"])
            extra = saved.get("extra_optimizers", {})
            if set(extra) != set(self.extra_optimizers):
                raise KeyError(f"optimizers {sorted(extra)} saved, {sorted(self.extra_optimizers)} in this model")
            for name, optimizer in self.extra_optimizers.items():
                load_optimizer_state(optimizer, extra[name])
        except (RuntimeError, KeyError, ValueError) as error:
            raise AmpganError(
                f"{origin} holds a model of another shape than this run's config ({_first_reason(error)})"
            ) from None
        if saved["scaler_g"]:  # empty when the saving run did not scale its losses
            self.scaler_g.load_state_dict(saved["scaler_g"])
            self.scaler_d.load_state_dict(saved["scaler_d"])
        for name, scaler in self.extra_scalers.items():
            if saved.get("extra_scalers", {}).get(name):
                scaler.load_state_dict(saved["extra_scalers"][name])
        self.step = saved["step"]
        if "step_generator" in saved:
            set_generator_state(self.rng, saved["step_generator"])


# How an optimizer executes, not what it computes: which kernels (foreach, fused), where its step count
# lives (capturable), whether autograd records its update (differentiable). torch's load_state_dict takes
# them from the saved param groups with the hyperparameters; a checkpoint written on another device kind
# would then bring, say, foreach Adam to a GPU run whose loss scaler steps fused Adam (an AssertionError at
# the first fp16 step), or fused Adam to a CPU run. This run's device decides them (adam_implementation).
EXECUTION_SETTINGS = ("foreach", "fused", "capturable", "differentiable")


def load_optimizer_state(optimizer: torch.optim.Optimizer, saved: dict) -> None:
    """`saved` (an optimizer's state_dict) into `optimizer`, its execution settings left as this run made
    them. Applied before torch loads the state, which places each step count by them (on the parameters'
    device for fused or capturable, else as saved)."""
    groups = []
    for index, group in enumerate(saved["param_groups"]):
        if index < len(optimizer.param_groups):  # a count that differs is refused by torch, as before
            current = optimizer.param_groups[index]
            group = {key: value for key, value in group.items() if key not in EXECUTION_SETTINGS}
            group |= {key: current[key] for key in EXECUTION_SETTINGS if key in current}
        groups.append(group)
    optimizer.load_state_dict({**saved, "param_groups": groups})


def _first_reason(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return next(
        (line for line in lines if line.startswith("size mismatch")), lines[0] if lines else type(error).__name__
    )[:200]


def optimizer_settings(model: Adam, config: TrainConfig, network: str) -> Adam:
    """The model's Adam with the run's `optim` overrides applied (network: "g" or "d")."""
    optim = config.optim
    lr = optim.lr_g if network == "g" else optim.lr_d
    return replace(
        model,
        lr=lr if lr is not None else model.lr,
        betas=(
            optim.beta1 if optim.beta1 is not None else model.betas[0],
            optim.beta2 if optim.beta2 is not None else model.betas[1],
        ),
    )


def adam_implementation(device_type: str) -> dict:
    """On CUDA the fused Adam: GradScaler hands it the scale and the inf flag as device tensors, where with
    foreach Adam it reads the flag back to the host (`.item()`) at every fp16 step, a sync per update. On
    the CPU foreach (one multi-tensor kernel per update), whose results the tests' golden losses hold."""
    return {"fused": True} if device_type == "cuda" else {"foreach": True}


def trainable(network: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter]]:
    """(name, parameter) for the parameters an optimizer may change: those the model did not freeze
    (`requires_grad=False`: a fixed blur, a pretrained feature stem). A frozen parameter never reaches an
    optimizer, so neither weight decay nor a stale moment can move it."""
    return [(name, parameter) for name, parameter in network.named_parameters() if parameter.requires_grad]


def make_adam(named_parameters, settings: Adam) -> torch.optim.Optimizer:
    """Adam over (name, parameter) pairs: one parameter group per learning-rate multiplier of `settings`
    (the first name prefix that matches; StyleGAN2's mapping network learns at 0.01x), in the order the
    parameters come."""
    named = list(named_parameters)
    groups: dict[float, list] = {}
    for name, parameter in named:
        scale = next((factor for prefix, factor in settings.lr_multipliers.items() if name.startswith(prefix)), 1.0)
        groups.setdefault(scale, []).append(parameter)
    device_type = named[0][1].device.type if named else "cpu"
    optimizer = torch.optim.Adam(
        [
            {"params": params, "lr": settings.lr * scale, "initial_lr": settings.lr * scale}
            for scale, params in groups.items()
        ],
        lr=settings.lr,
        betas=settings.betas,
        eps=settings.eps,
        weight_decay=settings.weight_decay,
        **adam_implementation(device_type),
    )
    optimizer.lr_schedule = settings.lr_schedule  # applied by the step (training/step.py _scheduled)
    return optimizer


def build_train_state(
    config: TrainConfig,
    model: ModelRecipe,
    data: DataSpec,
    policy: PrecisionPolicy,
    rank: int = 0,
    seed_scheme: int = CURRENT_SCHEME,
) -> TrainState:
    """A fresh GAN and its optimizers; the initial weights depend on the seed alone (the same on
    every rank and in every precision), the noise generator on the seed and the rank (each rank draws
    its own fakes). The modules run plain; `wrap_modules` compiles and/or DDP-wraps them."""
    device = policy.device
    # Every process generator a checkpoint saves starts from the seed: a model built (or a loss drawing) with
    # numpy's or Python's generator starts, and runs, the same in each precision and each run of one seed.
    torch.manual_seed(weights_seed(config.seed))
    np.random.seed(weights_seed(config.seed) % 2**32)
    random.seed(weights_seed(config.seed))
    gan = model.build(data)
    for network in (gan.generator, gan.discriminator):
        if any(t.device != device for t in (*network.parameters(), *network.buffers())):
            network.to(device)  # (a meta trace's weights cannot be moved, and are where they need to be)
        # train() called, not assumed from construction: a network that overrides it (Projected GAN's D keeps its
        # frozen, pretrained backbone in eval mode) is asked as a training loop asks it (stylegan2-ada: .train())
        network.train()
        if config.compute.channels_last:  # NHWC: oneDNN/cuDNN pick their fastest convolutions without reorders
            # 4-D tensors only: Module.to(memory_format=channels_last) refuses a 5-D one (a Conv3d weight,
            # StyleGAN2's (1, out, in, k, k) modulated weight), which has no NHWC form.
            network._apply(lambda t: t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t)
    attach_average(gan)  # after G is placed: the average lives where G does, never in an optimizer
    extra_optimizers, extra_scalers = {}, {}
    for update in gan.extra_updates:
        if update.optimizer is not None:
            parameters = [named for name in update.networks for named in trainable(getattr(gan, name))]
            extra_optimizers[update.name] = make_adam(parameters, update.optimizer)
            extra_scalers[update.name] = LossScaler(policy)
    return TrainState(
        gan=gan,
        optimizer_g=make_adam(trainable(gan.generator), optimizer_settings(gan.optimizer_g, config, "g")),
        optimizer_d=make_adam(trainable(gan.discriminator), optimizer_settings(gan.optimizer_d, config, "d")),
        scaler_g=LossScaler(policy),
        scaler_d=LossScaler(policy),
        policy=policy,
        rng=torch.Generator(device=device).manual_seed(step_noise_seed(config.seed, rank, scheme=seed_scheme)),
        extra_optimizers=extra_optimizers,
        extra_scalers=extra_scalers,
    )


def set_generator_state(generator: torch.Generator, saved: torch.Tensor) -> bool:
    """Restore `generator` from `saved` when it is a state of the same kind; False (nothing changed) when
    not: a CPU generator's state (mt19937, 5056 bytes) cannot continue a CUDA one (Philox seed and
    offset, 16 bytes) or the reverse, as happens when a run saved on one device kind resumes on another."""
    if (
        not isinstance(saved, torch.Tensor)
        or saved.dtype != torch.uint8
        or saved.numel() != generator.get_state().numel()
    ):
        return False
    generator.set_state(saved)
    return True


def capture_global_rngs(device: torch.device | None = None) -> dict:
    """This process's RNG states (torch CPU, numpy, Python, and the global generator of the CUDA device it
    trains on) as tensors and plain values. Only the training device's CUDA state is saved: another GPU's
    generator is never drawn from, and the GPUs visible on resume may be fewer or numbered otherwise."""
    numpy_state = np.random.get_state()
    python_version, python_internal, python_gauss = random.getstate()
    device = device or torch.device("cpu")
    return {
        "torch_cpu": torch.get_rng_state(),
        "device": device.type,
        "torch_cuda": [torch.cuda.get_rng_state(device)] if device.type == "cuda" else [],
        "numpy": {
            "kind": numpy_state[0],
            "keys": torch.from_numpy(numpy_state[1].astype(np.int64)),
            "pos": int(numpy_state[2]),
            "has_gauss": int(numpy_state[3]),
            "cached_gaussian": float(numpy_state[4]),
        },
        "python": {"version": python_version, "internal": list(python_internal), "gauss_next": python_gauss},
    }


def _saved_cuda_state(saved: dict, device: torch.device) -> torch.Tensor | None:
    """The CUDA generator state `saved` holds for a process training on `device`, or None. Since this
    version a checkpoint holds its process's own device's state alone (`device` says where it ran); older
    ones held every visible GPU's, in order, so the one at this device's index is taken when present."""
    states = saved.get("torch_cuda") or []
    if device.type != "cuda" or not states:
        return None
    if "device" in saved:
        return states[0] if saved["device"] == "cuda" else None
    index = device.index or 0
    return states[index] if index < len(states) else None


def restore_global_rngs(saved: dict, device: torch.device | None = None) -> list[str]:
    """Restore what `saved` (capture_global_rngs' output) holds for this process; returns what could not be
    restored, in words (empty when everything was). The CPU, numpy and Python generators are the same
    kind everywhere and always restored; the CUDA device's generator only when the saving process trained
    on a CUDA device too (a CPU run has no CUDA state to give): otherwise it keeps the state the run's
    seed gave it at start."""
    device = device or torch.device("cpu")
    torch.set_rng_state(saved["torch_cpu"])
    numpy_state = saved["numpy"]
    np.random.set_state(
        (
            numpy_state["kind"],
            numpy_state["keys"].numpy().astype(np.uint32),
            numpy_state["pos"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )
    python_state = saved["python"]
    random.setstate((python_state["version"], tuple(python_state["internal"]), python_state["gauss_next"]))
    if device.type != "cuda":
        return []
    state = _saved_cuda_state(saved, device)
    if state is None or state.numel() != torch.cuda.get_rng_state(device).numel():
        return [f"the {device} global generator (the checkpoint was saved on {saved.get('device', 'another device')})"]
    torch.cuda.set_rng_state(state, device)
    return []


def compile_backend() -> str:
    """torch.compile's backend: inductor (generated kernels), or AMPGAN_COMPILE_BACKEND (e.g. `eager`:
    graph capture without code generation, to check what compiles in seconds)."""
    return env_value("AMPGAN_COMPILE_BACKEND")


# Graphs one process may compile per network function. D alone runs three ways per step (real images
# in fp32, fakes in the compute dtype, frozen weights in G's update), per precision; a comparison's
# decisions, bench batch sizes and seeds add more. torch's default (8) was hit by measuring two
# precisions at two batch sizes in one process, after which dynamo silently ran D eager.
RECOMPILE_LIMIT = 64


# Inductor generates Triton kernels on CUDA, and Triton runs on compute capability 7.0 (Volta) and newer.
TRITON_MIN_CAPABILITY = (7, 0)


def check_compile_runs_on(device: torch.device) -> None:
    """Refuse --compile where its code generator cannot run, in one line, before inductor's traceback at
    the first step: a GPU below TRITON_MIN_CAPABILITY (the P100 is sm_60). Graph capture alone
    (AMPGAN_COMPILE_BACKEND=eager) runs everywhere."""
    if device.type != "cuda" or compile_backend() != "inductor":
        return
    capability = torch.cuda.get_device_capability(device)
    if tuple(capability) < TRITON_MIN_CAPABILITY:
        raise AmpganError(
            f"--compile needs a GPU of compute capability 7.0 or newer (its kernels are Triton's), and "
            f"{torch.cuda.get_device_name(device)} is sm_{capability[0]}{capability[1]}: drop --compile (the eager "
            "step runs there)"
        )


def wrap_modules(
    state: TrainState, *, compile: bool, sync_batch_norm: bool = False, data_parallel: bool = True
) -> None:
    """What the step runs: torch.compile'd modules (with `compile`), wrapped in DDP under torchrun.

    Compile first, then wrap (nanoGPT's order): DDP then reduces the gradients of the compiled
    module's parameters, which are the plain module's own. A frozen network (D in G's update) runs
    the compiled module without DDP: no gradient of its is reduced there. `data_parallel=False`: never
    DDP (the bench's single-process reference, timed beside the DDP step).
    """
    distributed = data_parallel and world().distributed
    if sync_batch_norm and distributed:
        if state.policy.device.type != "cuda":
            raise AmpganError("compute.sync_bn needs CUDA (PyTorch's SyncBatchNorm has no CPU kernel): drop it on CPUs")
        # Converted in place of the plain modules, so checkpoints and samples use the same weights.
        state.gan.generator = torch.nn.SyncBatchNorm.convert_sync_batchnorm(state.generator)
        state.gan.discriminator = torch.nn.SyncBatchNorm.convert_sync_batchnorm(state.discriminator)
    generator, discriminator = state.generator, state.discriminator
    if compile:
        check_compile_runs_on(state.policy.device)
        use_persistent_compile_cache()
        dynamo = torch._dynamo.config  # every variant of the step may compile (RECOMPILE_LIMIT)
        limit = "recompile_limit" if hasattr(dynamo, "recompile_limit") else "cache_size_limit"
        setattr(dynamo, limit, max(getattr(dynamo, limit), RECOMPILE_LIMIT))
        generator = torch.compile(generator, backend=compile_backend())
        discriminator = torch.compile(discriminator, backend=compile_backend())
    state.run_generator_unwrapped, state.run_discriminator_for_g = generator, discriminator
    if distributed:
        device_ids = [state.policy.device.index] if state.policy.device.type == "cuda" else None
        generator = DDP(generator, device_ids=device_ids)
        discriminator = DDP(discriminator, device_ids=device_ids)
        name_reduced_parameters(generator, "the generator")
        name_reduced_parameters(discriminator, "the discriminator")
    state.run_generator, state.run_discriminator = generator, discriminator
