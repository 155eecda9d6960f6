"""Many processes: torchrun's environment, the process group, DDP wrapping, collective decisions.

ampgan uses PyTorch's own engine: `torchrun` starts the processes and sets RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE and the rendezvous; ampgan joins with gloo on CPUs and NCCL on
GPUs (one GPU per process, cuda:LOCAL_RANK) when the command calls `join_process_group`, and
every clock- or signal-driven decision is agreed by all ranks here. Outside torchrun everything
here is a no-op. (DDP wrapping: state.wrap_modules; launching: launcher.py.)
"""

from __future__ import annotations

import datetime as dt
import os
import re
import traceback
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ampgan.env import env_value
from ampgan.errors import AmpganError
from ampgan.sections import differences
from ampgan.system.cpu_tuning import cores

# A rank that dies leaves the others blocked in a collective; this bounds the wait (torchrun
# also stops the survivors as soon as it sees one worker exit): AMPGAN_COLLECTIVE_TIMEOUT_S (ampgan/env.py).
# Control traffic (stop/log/save flags, decisions measured on rank 0) travels on a gloo group of CPU
# tensors: under NCCL a flag on the GPU would be read back to the host every step, serialising the ranks,
# and ranks waiting minutes for rank 0's speed decisions would meet NCCL's watchdog (a C++ abort) at
# the collective timeout. Waiting here is bounded by AMPGAN_CONTROL_TIMEOUT_S instead.
_control_group = None


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1

    @property
    def distributed(self) -> bool:
        return self.size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


_world = World()


def world() -> World:
    return _world


def launched_by_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def _env_int(name: str) -> int:
    value = os.environ.get(name)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise AmpganError(f"{name}={value!r} is not a number: start ampgan with torchrun, which sets it") from None


def join_process_group(device_request: str) -> torch.device | None:
    """Under torchrun: join the process group it set up and return this rank's device.
    Outside torchrun: nothing to join, None (the caller resolves the device itself)."""
    global _world, _control_group
    if not launched_by_torchrun():
        return None
    rank, size = _env_int("RANK"), _env_int("WORLD_SIZE")
    local_rank = _env_int("LOCAL_RANK") if "LOCAL_RANK" in os.environ else rank
    local_size = _env_int("LOCAL_WORLD_SIZE") if "LOCAL_WORLD_SIZE" in os.environ else size
    if not (0 <= rank < size and 0 <= local_rank < local_size):
        raise AmpganError(
            f"inconsistent launcher settings RANK={rank} WORLD_SIZE={size} LOCAL_RANK={local_rank}: "
            "start ampgan with torchrun"
        )
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if name not in os.environ:
            raise AmpganError(f"{name} is not set: start ampgan with torchrun (it sets the rendezvous), not by hand")
    if device_request == "cuda" or (device_request == "auto" and torch.cuda.is_available()):
        index = device_index_for(local_rank, local_size, torch.cuda.device_count(), _shown_only_its_own_gpu(local_rank))
        device = torch.device("cuda", index)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
        # N processes on one machine share the cores it lets them run on (the affinity mask: a container or
        # taskset narrows it): give each its share, never more threads than those cores.
        torch.set_num_threads(max(1, cores() // local_size))
    if not dist.is_initialized():
        timeout = dt.timedelta(seconds=env_value("AMPGAN_COLLECTIVE_TIMEOUT_S"))
        dist.init_process_group(backend=backend, rank=rank, world_size=size, timeout=timeout)
    _control_group = dist.new_group(backend="gloo", timeout=dt.timedelta(seconds=env_value("AMPGAN_CONTROL_TIMEOUT_S")))
    _world = World(rank=rank, size=size, local_rank=local_rank, local_size=local_size)
    return device


def device_index_for(local_rank: int, local_size: int, visible: int, shown_only_its_own: bool = False) -> int:
    """This process's GPU: cuda:LOCAL_RANK when the node's processes see the same GPUs (one each), or cuda:0
    when each process is shown only its own (`shown_only_its_own`: _shown_only_its_own_gpu). Refused, before
    any process group exists, when processes would share a GPU: NCCL fails then ("Duplicate GPU") at the
    first collective, which every other rank reports as lost contact."""
    if visible < 1:
        raise AmpganError("no CUDA GPU is visible to this process: check CUDA_VISIBLE_DEVICES, or use --device cpu")
    if visible >= local_size:
        return local_rank
    if visible == 1 and shown_only_its_own:
        return 0
    raise AmpganError(
        f"{local_size} processes on this machine but {visible} GPU{'s' if visible > 1 else ''} visible to them: "
        f"two would share a GPU, which NCCL refuses; start at most {visible} (torchrun --nproc-per-node {visible}, "
        f"or ampgan --nproc {visible}), or run on the CPU with --device cpu"
    )


def _shown_only_its_own_gpu(local_rank: int) -> bool:
    """Whether this process sees only the GPU that is its own, rather than one its neighbours see too. torch
    elastic (torchrun, ampgan --nproc) starts a node's workers with one environment, so they see the same
    GPUs, unless its --virtual-local-rank showed each its own (CUDA_VISIBLE_DEVICES one device, LOCAL_RANK 0
    on every worker). A process started otherwise with one GPU visible was given it by a scheduler."""
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return True
    shown = [part for part in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if part.strip()]
    return local_rank == 0 and len(shown) == 1


_left_alone = False


def leave_without_peers() -> None:
    """This rank failed on its own (out of memory, say) and may have left the others inside a collective:
    shutdown() then leaves the process group without waiting for them (they would never arrive);
    torchrun stops them when this process exits."""
    global _left_alone
    _left_alone = True


def shutdown() -> None:
    """Leave the process group together: a rank that tears gloo down while a peer is still in its
    last collective makes that peer abort (SIGABRT) at exit. A rank that failed alone does not wait."""
    global _world, _control_group, _left_alone
    if dist.is_initialized() and not _left_alone:
        # (A rank left alone skips even the destruction: NCCL's would wait on the collective it left.)
        # On the control group: the others wait here while rank 0 alone writes results and figures, which
        # on a crowded machine outlasts the collective timeout meant for a dead peer.
        try:
            dist.barrier(group=_control_group)
        except Exception:  # noqa: BLE001 - a peer already gone: nothing left to wait for
            pass
        dist.destroy_process_group()
    _control_group = None
    _world = World()
    _left_alone = False


def any_rank(flags: list[bool]) -> list[bool]:
    """Element-wise OR of per-rank flags, so every rank takes the same branch (stop, log, save). A CPU
    tensor on the control group: no device read-back."""
    if not world().distributed:
        return flags
    tensor = torch.tensor([float(f) for f in flags])
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=_control_group)
    return [bool(v) for v in tensor.tolist()]


def average_over_ranks(values: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Metric sums averaged over ranks, in one collective. Skipped-step counts are identical on
    every rank (DDP reduces the gradients before the inf check), so their average is the count."""
    if not world().distributed or not values:
        return values
    names = sorted(values)
    stacked = torch.stack([values[n].float().reshape(()) for n in names])
    dist.all_reduce(stacked, op=dist.ReduceOp.SUM)
    return {n: stacked[i] / world().size for i, n in enumerate(names)}


def gather_objects(value):
    """[value of rank 0, rank 1, ...] on every rank (a plain list outside torchrun)."""
    if not world().distributed:
        return [value]
    gathered = [None] * world().size
    dist.all_gather_object(gathered, value, group=_control_group)
    return gathered


def rank_zeros(value):
    """Rank 0's `value` on every rank: for what a rank reads from its own clock or machine (seconds spent, the
    load) where it decides a branch with collectives inside, which every rank must take alike; and for what
    rank 0 alone decided. One broadcast: the other ranks' values are never sent."""
    if not world().distributed:
        return value
    carried = [value]
    dist.broadcast_object_list(carried, src=0, group=_control_group)
    return carried[0]


def refuse_unless_ranks_agree(record: dict) -> None:
    """One line on every rank when a rank runs other settings or data than rank 0: ranks started by hand with
    other flags, a config file edited between launches or another data folder would otherwise train apart
    under one run folder (other seeds, precisions or batches) or fail in DDP's traceback (other shapes)."""
    per_rank = gather_objects(record)
    for rank, other in enumerate(per_rank):
        differing = [path for path, _, _ in differences(per_rank[0], other)]
        if differing:
            raise AmpganError(
                f"rank {rank} runs other settings or data than rank 0 ({', '.join(differing[:3])}): start every "
                "rank with the same command, config file and data"
            )


_LOST_PEER_SIGNS = (
    "Connection reset by peer",
    "Connection closed by peer",
    "Broken pipe",
    "Socket Timeout",
    "NCCL communicator was aborted",
    "ProcessGroupGloo",
    "gloo/transport",
)


def lost_contact_with_ranks(error: BaseException) -> str | None:
    """Why a collective failed when another rank died (its reason, in a few words), or None when
    `error` is not such a failure. The surviving ranks see the loss first; the launcher then names
    the rank that failed, so a survivor should say one line, not print the backend's traceback."""
    if not world().distributed:
        return None
    if isinstance(error, getattr(torch.distributed, "DistError", ())):
        return type(error).__name__
    if not isinstance(error, RuntimeError):
        return None
    return next((sign for sign in _LOST_PEER_SIGNS if sign in str(error)), None)


# What DDP's reducer says when a backward pass left trainable parameters without a gradient (it notices at the
# next forward pass): 900 characters advising `find_unused_parameters=True`, which ampgan does not expose
# (finding them costs a graph walk every step) and which would hide a loss that forgot part of a network.
_UNUSED_PARAMETERS = "Expected to have finished reduction in the prior iteration"
_UNUSED_INDICES = re.compile(r"Parameter indices which did not receive grad for rank \d+:((?:\s*\d+)+)")


def name_reduced_parameters(ddp: torch.nn.Module, network: str) -> None:
    """Record on a DDP module the names of the parameters its reducer indexes, in its order (as DDP's
    _build_params_for_reducer makes the list: trainable when wrapped, each once; without torch.compile's
    `_orig_mod.`), so that its error about unused parameters can be told with their names."""
    seen, names = set(), []
    for module_name, module in ddp.module.named_modules():
        for name, parameter in module.named_parameters(recurse=False):
            if parameter.requires_grad and id(parameter) not in seen:
                seen.add(id(parameter))
                names.append((f"{module_name}.{name}" if module_name else name).replace("_orig_mod.", ""))
    ddp.ampgan_reduced = (network, names)


def unused_parameters_line(error: BaseException, origin: str) -> str | None:
    """DDP's error about parameters that got no gradient as one ampgan line naming them (when the DDP module
    was named by name_reduced_parameters) and the fix ampgan offers; None for any other error."""
    text = str(error)
    if _UNUSED_PARAMETERS not in text:
        return None
    network, names = "a network", []
    for frame, _ in traceback.walk_tb(error.__traceback__):  # the DDP module whose forward noticed it
        reduced = getattr(frame.f_locals.get("self"), "ampgan_reduced", None)
        if reduced is not None:
            network, names = reduced
    found = _UNUSED_INDICES.search(text)
    indices = [int(i) for i in found.group(1).split()] if found else []
    named = [names[i] for i in indices if i < len(names)]
    shown = ", ".join(named[:6] or [str(i) for i in indices[:6]]) + (" ..." if len(indices) > 6 else "")
    what = f"parameters {shown} of {network}" if named else f"parameters of {network} (indices {shown or '?'})"
    return (
        f"{origin}: {what} got no gradient in the previous backward pass, and under torchrun (DDP) every "
        "trainable parameter must reach each loss: add a zero-weighted term for the outputs the loss leaves out "
        "(+ ampgan.unused_but_reduced(output)), or remove or freeze those parameters (docs/your-gan.md, "
        "'What preflight checks'; 'ampgan preflight' names them in one process)"
    )
