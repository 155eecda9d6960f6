"""`ampgan ... --nproc N`: the same command in N processes on this machine, under PyTorch's launcher.

torch.distributed.elastic (the engine behind torchrun) starts the workers; their output reaches the
terminal live (progress bars, warnings). When a worker fails, the agent stops the others and
reports every failure in its own records (`ChildFailedError.failures`); ampgan ends with one line
naming the rank that failed first, read from those records rather than from torchrun's text.

Each rank is `python -P -m ampgan` (system/processes.py: never the current folder's `ampgan.py`), and each
leaves a receipt when its command finished (`finished_command`): a rank that exited 0 without one ran
something else, trained nothing, and the launch fails with one line instead of reporting success.
"""

from __future__ import annotations

import logging
import os
import signal
import tempfile
import uuid
from pathlib import Path

from ampgan.errors import STOP_SIGNALS, AmpganError, say
from ampgan.system.processes import python_command
from ampgan.training.distributed import launched_by_torchrun

# The folder where each rank leaves its receipt (set by the launcher for its ranks only).
RECEIPTS_ENV = "AMPGAN_LAUNCH_RECEIPTS"


def launch_on_this_machine(nproc: int, argv: list[str], target: list[str] | None = None) -> int:
    """Run `python -P -m ampgan ARGV` (or `python -P TARGET ARGV`) in `nproc` processes; the exit code."""
    # Imported here, not at the top: torch's launcher takes 0.66 s to import, which no other command needs.
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if launched_by_torchrun():
        raise AmpganError("--nproc is for launching on this machine; under torchrun use its --nproc-per-node instead")
    # The agent passes on to the ranks only the signals it handles (torch's default: TERM, INT, HUP, QUIT); any other
    # of ours (a scheduler's SIGUSR1 warning) it would turn into SIGTERM, and the ranks would exit 143, not 128+N.
    signals = ",".join(signal.Signals(number).name for number in STOP_SIGNALS)
    # (a torch whose LaunchConfig has no such field passes on its default four)
    handled = {"signals_to_handle": signals} if "signals_to_handle" in LaunchConfig.__dataclass_fields__ else {}
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nproc,
        run_id=str(uuid.uuid4()),
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=0,
        **handled,
    )
    # The agent's own log lines (worker start, its failure table) would bury the workers' messages;
    # the one line below says what failed.
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="ampgan-launch-") as receipts:
        # The agent starts the ranks with this process's environment: the receipts folder travels in it.
        before = os.environ.get(RECEIPTS_ENV)
        os.environ[RECEIPTS_ENV] = receipts
        try:
            python, *arguments = python_command(*(target or ["-m", "ampgan"]), *argv)
            elastic_launch(config, entrypoint=python)(*arguments)
        except ChildFailedError as failed:
            rank, failure = failed.get_first_failure()
            code = failure.exitcode  # negative: killed by that signal
            how = f"was killed by signal {-code} ({failure.signal_name()})" if code < 0 else f"exited with code {code}"
            say(f"error: rank {rank} {how}; the launcher stopped the other ranks", err=True)
            return code if 0 < code < 256 else 1
        except SignalException as stop:
            # Ctrl-C or SIGTERM to the launcher: the agent passed it on to every rank, which finished
            # its step and saved a checkpoint (their own lines above say so).
            say(f"stopped: the launcher received {stop.sigval.name} and stopped every rank", err=True)
            return 128 + int(stop.sigval)
        finally:
            if before is None:
                os.environ.pop(RECEIPTS_ENV, None)
            else:
                os.environ[RECEIPTS_ENV] = before
        silent = [rank for rank in range(nproc) if not (Path(receipts) / f"rank-{rank}").exists()]
    if silent:
        # Ranks that exited 0 without finishing ampgan's command: what they ran was not ampgan's.
        who = f"rank {silent[0]}" if len(silent) == 1 else f"ranks {', '.join(map(str, silent))}"
        ran = " ".join(target) if target else "python -P -m ampgan"
        say(
            f"error: {who} exited without finishing the command, so nothing was trained or written by them: "
            f"'{ran}' did not run this ampgan; check which one it imports with: python -P -c 'import ampgan; "
            "print(ampgan.__file__)'",
            err=True,
        )
        return 1
    return 0


def finished_command() -> None:
    """Called by a rank whose command finished: its receipt for the launcher (nothing outside a launch)."""
    folder, rank = os.environ.get(RECEIPTS_ENV), os.environ.get("RANK")
    if folder and rank is not None and rank.isdecimal():
        try:
            (Path(folder) / f"rank-{int(rank)}").touch()
        except OSError:
            pass  # the launcher is gone or its folder with it: nobody to tell
