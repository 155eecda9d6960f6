"""`python -m ampgan` and the `ampgan` console script (pyproject.toml): the entry point imports nothing before
it can catch Ctrl-C.

The commands (ampgan/cli) load click and torch, a second or more: a Ctrl-C then would end in a
KeyboardInterrupt traceback from the import, before any handler of theirs exists. `main` imports them inside
its own handler, so an interruption at any moment is the same one line and exit code 130.
"""

import os
import signal
import sys

# The line ampgan/cli prints for a Ctrl-C no stage was listening for (NOTHING_HALF_WRITTEN: not importable from there
# before the handler below exists), after the signal's name.
INTERRUPTED_EARLY = (
    "received: no file was left half-written (each is written whole or not at all); run the command again to finish"
)


def _terminate(signum, frame) -> None:
    # SIGTERM (a scheduler's, `kill`'s), SIGHUP (the terminal closed) or another of STOP_SIGNALS where no stage
    # listens for it unwinds as a Ctrl-C does, so a folder claimed for output is given back; its number rides along
    # for the line and the exit code (143, 129, ...).
    raise KeyboardInterrupt(signum)


def _check_environment() -> None:
    # Before torch loads: libgomp and torch read the thread counts then, and libgomp's own complaint about a value
    # it cannot read would come before ampgan's line (ampgan/cli checks again, for callers of its main).
    from ampgan.env import check_environment
    from ampgan.errors import AmpganError

    try:
        check_environment()
    except AmpganError as error:
        sys.stderr.write(f"error: {error}\n")
        sys.exit(2)


def _refuse_a_memory_limit_too_small_to_load(error: BaseException) -> None:
    # Under a small `ulimit -v` the dynamic loader cannot map torch's libraries ("failed to map segment from
    # shared object"): an ImportError traceback from inside torch, before any of ampgan's handlers exist.
    # The loader's message is the same for a folder mounted noexec: the limit is named only when one is set.
    import resource

    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    text = str(error).lower()
    mapping = isinstance(error, MemoryError) or "failed to map segment" in text or "cannot allocate memory" in text
    if mapping and limit != resource.RLIM_INFINITY:
        sys.stderr.write(
            f"error: torch could not be loaded under this process's memory limit of {limit / 2**20:,.0f} MiB "
            f"({str(error)[:200]}): raise it (ulimit -v) or run where more memory is available\n"
        )
        sys.exit(2)


def _closed_streams_to_devnull() -> None:
    """A standard stream the shell closed (`2>&-`, `>&-`, a daemon's start) becomes /dev/null. Closed, Python
    makes sys.stderr None (a run died on its first use, exit 1, its folder left with an empty metrics.jsonl),
    and the first file ampgan opened took the number 2: whatever writes to fd 2 (torch's C++ warnings) would
    have written into it."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:  # closed: open /dev/null at that very number
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, mode, buffering=1 if mode == "w" else -1, closefd=False))


def main(argv: list[str] | None = None) -> None:
    _closed_streams_to_devnull()
    try:
        from ampgan.errors import STOP_SIGNALS  # a Ctrl-C while it loads is caught below

        # SIGINT is Python's KeyboardInterrupt already; one ignored at start (nohup's SIGHUP) stays ignored.
        for signum in STOP_SIGNALS[1:]:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                signal.signal(signum, _terminate)
        _check_environment()
        try:
            from ampgan.cli import main as run
        except (ImportError, OSError, MemoryError) as error:
            _refuse_a_memory_limit_too_small_to_load(error)
            raise
        run(argv)
    except FileNotFoundError:
        _check_environment()  # the current folder deleted while torch loaded or a path was resolved: one line
        raise
    except KeyboardInterrupt as stop:
        # a signal while Python loaded the commands, or between a command's own handlers: nothing was saved.
        from ampgan.errors import signal_number

        signum = signal_number(stop)
        sys.stderr.write(f"stopped: {signal.Signals(signum).name} {INTERRUPTED_EARLY}\n")
        sys.exit(128 + signum)


if __name__ == "__main__":
    # `python -m ampgan` puts the current folder first on the import path: a torch.py or click.py in a user's
    # project would stand in for the real one. Off it goes, as the `ampgan` command and every process ampgan
    # starts (system/processes.py: -P) have it; Python found ampgan itself there before this line could run.
    try:
        if sys.path[0] == os.getcwd() and not sys.flags.safe_path:
            del sys.path[0]
    except FileNotFoundError:
        pass  # the current folder was deleted: Python left it off the path, and main says so in one line
    main()
