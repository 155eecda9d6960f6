"""The precision policy: one object that says how a training step computes.

Built once from the run's precision (precisions.py holds each mode's facts), so fp32, tf32, bf16 and
fp16 all run the very same lines of the training step. What stays FP32 in every mode, and why:

- master weights and optimizer state: parameters are created in FP32 and never cast; autocast
  only casts the inputs of selected ops (convolutions, matmuls) to the compute dtype;
- batch-norm statistics: autocast keeps `running_mean`/`running_var` FP32 buffers on CPU and
  CUDA, and the kernels accumulate the batch statistics in FP32 (tests check both);
- the losses: the built-in GANs cast logits to FP32 before BCE/cross-entropy (gan/layers.py), so the
  softmax and log-sum-exp run in FP32 on every device, whatever autocast's op lists say.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass

import torch

from ampgan.env import env_value
from ampgan.errors import AmpganError
from ampgan.files.schema import OneOf
from ampgan.precisions import NAMES, Precision, precision

# A precision's name in a document read back (results.json, compare.json, projection.json): a registered one.
PRECISION_NAME = OneOf("a precision", NAMES)
# A run's config.json records its precision as described (PrecisionPolicy.describe): fp16 with its loss scale.
PRECISION_DESCRIBED = OneOf(
    "a precision",
    NAMES,
    (" (fp16 as 'fp16 (loss scale dynamic)')", lambda v: v.endswith(")") and v.split(" (loss scale ")[0] in NAMES),
)


@dataclass(frozen=True)
class PrecisionPolicy:
    name: str
    device: torch.device
    loss_scale: float | None = None  # fp16 only: None = dynamic, a number = static

    # The mode's record (precisions.py): its compute dtype, autocast, loss scaling (fp16's; bf16 has FP32's
    # exponent range, so its gradients do not underflow), ...
    @property
    def mode(self) -> Precision:
        return precision(self.name)

    def autocast(self) -> AbstractContextManager:
        if not self.mode.autocast:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.mode.compute_dtype)

    def apply_backend_settings(self) -> None:
        """Set PyTorch's process-wide backend switches for this mode (and leave them set: a training run
        or a step timer owns its process). `backend_settings()` is the same, restored on leaving.

        TF32: off in fp32, so fp32 really means FP32 (cuDNN's convolutions default to TF32 on Ampere and
        later, whatever the matmul switch says); on in tf32. cuDNN's autotuner is switched on: a GAN's shapes
        are the same every step, so the first step of each shape tries cuDNN's algorithms and keeps the
        fastest (without it every precision is timed on cuDNN's heuristic pick, which favours none of them
        reliably). Decisions and the bench discard those first steps. The autotuner's pick may differ
        between processes, so runs are not bit-identical on CUDA unless determinism is asked for."""
        allow_tf32 = self.device.type == "cuda" and self.mode.tf32_matmul
        # Matrix products on every backend: "highest" is strict FP32 (a caller's "medium" would let oneDNN
        # run them in bf16 on a CPU); "high" lets cuBLAS use TF32.
        torch.set_float32_matmul_precision("high" if allow_tf32 else "highest")
        if self.device.type != "cuda":
            return
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
        torch.backends.cudnn.allow_tf32 = allow_tf32  # convolutions: cuDNN's own switch, on by default
        # AMPGAN_DETERMINISTIC=1, or torch.use_deterministic_algorithms(True) set by the caller: the same
        # kernels every time on CUDA (no cuDNN autotuning, deterministic algorithms), at some speed.
        if env_value(DETERMINISTIC_ENV) or torch.are_deterministic_algorithms_enabled():
            # Same kernels in every process, so a resumed run repeats the uninterrupted one bit for bit.
            torch.backends.cudnn.benchmark = False
            torch.backends.cudnn.deterministic = True
            # cuBLAS reads this when its first handle is made: the run applies these settings before its
            # first matrix product.
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True, warn_only=True)
        else:
            torch.backends.cudnn.benchmark = True

    @contextmanager
    def backend_settings(self) -> Iterator[None]:
        """apply_backend_settings() inside the block; every switch it may touch is restored on leaving,
        whatever happened inside (the doctor's fp32 reference steps run inside one)."""
        saved = snapshot_backend_switches()
        try:
            self.apply_backend_settings()
            yield
        finally:
            restore_backend_switches(saved)

    def describe(self) -> str:
        if not self.mode.loss_scaling:
            return self.name
        scaling = "dynamic" if self.loss_scale is None else f"static {self.loss_scale:g}"
        return f"{self.name} (loss scale {scaling})"


DETERMINISTIC_ENV = "AMPGAN_DETERMINISTIC"


# Every process-wide switch that decides which kernels an fp32 operation may use, as (object, attribute),
# in the order they are restored: the legacy TF32 flags first, then, where this torch has them (2.9 and
# later), the per-backend `fp32_precision` settings, finest last, so that each ends as saved. Both kinds are
# saved: a legacy flag writes the new settings through, but cuDNN's also keeps a flag of its own that no
# fp32_precision setting writes, and torch (2.9 and later) refuses to read `cudnn.allow_tf32` when that flag
# and the conv and rnn settings disagree (restoring the settings alone once left it False under "tf32").
# The policy itself sets TF32 through the legacy flags, the one API that keeps both kinds in agreement.
_LEGACY_PATHS = (("backends.cuda.matmul", "allow_tf32"), ("backends.cudnn", "allow_tf32"))
_SWITCH_PATHS = (
    *_LEGACY_PATHS,
    ("backends", "fp32_precision"),
    ("backends.cuda.matmul", "fp32_precision"),
    ("backends.cudnn", "fp32_precision"),
    ("backends.cudnn.conv", "fp32_precision"),
    ("backends.cudnn.rnn", "fp32_precision"),
    ("backends.mkldnn", "fp32_precision"),
    ("backends.mkldnn.matmul", "fp32_precision"),
    ("backends.mkldnn.conv", "fp32_precision"),
    ("backends.mkldnn.rnn", "fp32_precision"),
    ("backends.cudnn", "benchmark"),
    ("backends.cudnn", "deterministic"),
)


def _resolve(path: str):
    target = torch
    for part in path.split("."):
        target = getattr(target, part, None)
        if target is None:
            return None
    return target


def snapshot_backend_switches() -> dict:
    """The current value of every backend switch this torch has (see _SWITCH_PATHS), plus the
    float32 matmul precision and whether deterministic algorithms are on."""
    saved = {}
    for path, attribute in _SWITCH_PATHS:
        target = _resolve(path)
        try:
            if hasattr(target, attribute):  # (None, for a path this torch lacks, has none of them)
                saved[(path, attribute)] = getattr(target, attribute)
        except RuntimeError:  # a legacy flag the caller left disagreeing with its settings: unreadable, kept as is
            continue
    saved["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    saved["deterministic_algorithms"] = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    return saved


def restore_backend_switches(saved: dict) -> None:
    saved = dict(saved)
    enabled, warn_only = saved.pop("deterministic_algorithms")
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
    matmul = saved.pop("float32_matmul_precision")
    legacy = {key: saved.pop(key) for key in _LEGACY_PATHS if key in saved}
    # The legacy flags write the settings through, then the matmul precision, then each setting as saved.
    for (path, attribute), value in legacy.items():
        setattr(_resolve(path), attribute, value)
    torch.set_float32_matmul_precision(matmul)
    for (path, attribute), value in saved.items():
        setattr(_resolve(path), attribute, value)


class LossScaler:
    """Backward + optimizer step for one network, with loss scaling when the policy needs it.

    The training step keeps one scaler per network rather than PyTorch's one-for-all recipe:
    D's and G's losses have different gradient ranges, and D is updated before G's forward
    pass, so an overflow in D should neither skip G's step nor lower G's scale.
    """

    def __init__(self, policy: PrecisionPolicy):
        self.static_scale = policy.loss_scale
        self._scaler = torch.amp.GradScaler(
            policy.device.type,
            init_scale=policy.loss_scale or 2.0**16,
            enabled=policy.mode.loss_scaling,
        )
        self._one = torch.ones((), device=policy.device)
        self._no_skip = torch.zeros((), device=policy.device)

    @property
    def enabled(self) -> bool:
        return self._scaler.is_enabled()

    def backward(self, loss: torch.Tensor) -> None:
        """Accumulate the (scaled) gradients of one loss; several may precede one step()."""
        self._scaler.scale(loss).backward()

    def scale_tensor(self) -> torch.Tensor:
        """The current scale as a 0-dim fp32 tensor on the device (1 without scaling), with no host
        synchronisation: what a gradient penalty multiplies its backward pass by (gan/context.py)."""
        return self._scaler.scale(self._one)  # the tensor itself when scaling is off

    def step(self, optimizer: torch.optim.Optimizer) -> torch.Tensor:
        """Unscale, skip on inf/NaN, update the scale. Returns a 0-dim tensor: 1.0 if the step was
        skipped, else 0.0. It stays a tensor so the step never waits on the device."""
        self._scaler.step(optimizer)
        if not self.enabled:
            return self._no_skip
        # GradScaler has no public accessor for "did this step find inf/NaN"; this private one
        # returns the on-device flags step() just used, so reading it costs no synchronisation.
        skipped = (sum(self._scaler._found_inf_per_device(optimizer).values()) > 0).float()
        # None: the dynamic update. A static scale (the study used 128) is set again as it is: overflowing
        # steps are skipped, the scale never changes.
        self._scaler.update(self.static_scale)
        return skipped

    def scale(self) -> float:
        """The current loss scale (1.0 when not scaling). Synchronises: call when logging only."""
        return self._scaler.get_scale()  # 1.0 when scaling is off

    def state_dict(self) -> dict:
        return self._scaler.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self._scaler.load_state_dict(state)


def resolve_device(requested: str) -> torch.device:
    if requested == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    elif requested == "cuda" and not torch.cuda.is_available():
        raise AmpganError("--device cuda was asked for but no CUDA GPU is visible: use --device cpu")
    else:
        device = torch.device(requested)
    if device.type == "cuda":
        check_kernels_for(device)
    return device


def check_kernels_for(device: torch.device) -> None:
    """Refuse a GPU this PyTorch build has no kernels for, before the first kernel fails with "no kernel
    image is available": recent CUDA wheels dropped Pascal (sm_60, the P100) and Volta (sm_70, the V100).
    A build runs a GPU with kernels compiled for its exact architecture (sm_XY), or for an older one of
    the same major version, or from PTX (compute_XY) at or below it, which the driver compiles."""
    arch_list = torch.cuda.get_arch_list()
    if not arch_list:  # a build that does not say: nothing to check against
        return
    major, minor = torch.cuda.get_device_capability(device)
    if not any(_runs_on(arch, major, minor) for arch in arch_list):
        raise AmpganError(
            f"this PyTorch build ({torch.__version__}) has no kernels for {torch.cuda.get_device_name(device)} "
            f"(sm_{major}{minor}); it has {', '.join(arch_list)}: install a PyTorch wheel built for "
            f"sm_{major}{minor} (an older CUDA build, e.g. --index-url https://download.pytorch.org/whl/cu118), or "
            "use --device cpu"
        )


def _runs_on(arch: str, major: int, minor: int) -> bool:
    """Whether kernels built for `arch` (sm_XY, compute_XY) run on a GPU of capability (major, minor)."""
    kind, _, number = arch.partition("_")
    if not number.isdecimal() or len(number) < 2:
        return False
    built = (int(number[:-1]), int(number[-1]))
    return (kind == "sm" and built[0] == major and built[1] <= minor) or (kind == "compute" and built <= (major, minor))


def build_policy(name: str, device: torch.device, loss_scale: float | None = None) -> PrecisionPolicy:
    """The policy for this device, refusing modes it cannot run (by the device's own capability:
    torch.cuda.is_bf16_supported() answers yes for emulated bf16 on a T4 and asks the current device)."""
    capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    reason = precision(name).unavailable_reason(device.type, capability)
    if reason is not None:
        if device.type == "cuda":
            raise AmpganError(
                f"{name} {reason}, and {torch.cuda.get_device_name(device)} is sm_"
                f"{capability[0]}{capability[1]}: use fp32 or fp16"
            )
        raise AmpganError(f"{name} is {reason} and this run is on the CPU: use fp32 or bf16")
    # Whether the mode is fast here is measured on the real step by speed.decision, not assumed.
    return PrecisionPolicy(name=name, device=device, loss_scale=loss_scale)
