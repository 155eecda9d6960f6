"""`ampgan ... --nproc N`: the same command in N processes on this machine, under PyTorch's launcher.

torch.distributed.elastic (the engine behind torchrun) starts the workers; their output reaches the
terminal live (progress bars, warnings). When a worker fails, the agent stops the others and
reports every failure in its own records (`ChildFailedError.failures`); ampgan ends with one line
naming the rank that failed first, read from those records rather than from torchrun's text.
"""

from __future__ import annotations

import logging
import sys
import uuid

from ampgan.errors import AmpganError
from ampgan.training.distributed import launched_by_torchrun


def launch_on_this_machine(nproc: int, argv: list[str], target: list[str] | None = None) -> int:
    """Run `python -m ampgan ARGV` (or `python TARGET ARGV`) in `nproc` processes; the exit code."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if nproc < 1:
        raise AmpganError(f"--nproc must be at least 1, got {nproc}")
    if launched_by_torchrun():
        raise AmpganError("--nproc is for launching on this machine; under torchrun use its --nproc-per-node instead")
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nproc,
        run_id=str(uuid.uuid4()),
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=0,
    )
    # The agent's own log lines (worker start, its failure table) would bury the workers' messages;
    # the one line below says what failed.
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    try:
        elastic_launch(config, entrypoint=sys.executable)(*(target or ["-m", "ampgan"]), *argv)
    except ChildFailedError as failed:
        rank, failure = failed.get_first_failure()
        print(
            f"error: {describe_failure(rank, failure.exitcode, failure.signal_name())}; "
            "the launcher stopped the other ranks",
            file=sys.stderr,
        )
        code = failure.exitcode
        return code if 0 < code < 256 else 1
    except SignalException as stop:
        # Ctrl-C or SIGTERM to the launcher: the agent passed it on to every rank, which finished
        # its step and saved a checkpoint (their own lines above say so).
        print(f"stopped: the launcher received {stop.sigval.name} and stopped every rank", file=sys.stderr)
        return 128 + int(stop.sigval)
    return 0


def describe_failure(rank: int, exitcode: int, signal_name: str) -> str:
    """'rank 1 was killed by signal 9 (SIGKILL)' or 'rank 0 exited with code 2'."""
    if exitcode < 0:
        return f"rank {rank} was killed by signal {-exitcode} ({signal_name})"
    return f"rank {rank} exited with code {exitcode}"
