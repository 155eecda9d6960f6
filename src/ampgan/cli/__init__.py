"""The `ampgan` command: one module per subcommand, one place that turns problems into one line (the console
script's entry point, which catches a Ctrl-C while this loads, is ampgan/__main__.py).

Every user-fixable problem becomes one `error:` line and exit code 2 (3 for a numeric fault,
130/143 for an interruption); warnings are one `warning:` line each. Tracebacks are for bugs only.
"""

from __future__ import annotations

import errno
import signal
import sys
import warnings
from contextlib import contextmanager

import click

from ampgan.cli import bench, compare, config, cost, data, doctor, preflight, project, runs, train
from ampgan.cli.options import moved_to_set, setting_flag
from ampgan.env import check_environment
from ampgan.errors import (
    LOST_OUTPUT,
    AmpganError,
    AmpganWarning,
    ConfigError,
    first_words,
    one_line,
    say,
    signal_number,
)
from ampgan.runs.claim import release_unused_defaults
from ampgan.system.memory import is_out_of_memory
from ampgan.training.distributed import lost_contact_with_ranks, shutdown, world
from ampgan.training.interruption import Interrupted
from ampgan.training.launcher import finished_command

EXIT_USAGE = 2
# ampgan/__main__.py says it too, before this loads. True of every command: ampgan writes each file atomically.
NOTHING_HALF_WRITTEN = (
    "received: no file was left half-written (each is written whole or not at all); run the command again to finish"
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ampgan")
def cli() -> None:
    """Does mixed precision make my GAN train faster and cheaper, without making it worse?"""


# One module per command (runs: evaluate, generate, report).
for _command in [
    *(module.command for module in (train, data, bench, cost, project, compare, doctor, preflight, config)),
    *runs.commands,
]:
    cli.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    with warnings.catch_warnings():
        warnings.simplefilter("default", AmpganWarning)
        warnings.showwarning = _show_warning
        try:
            _dispatch(argv)
        finally:
            release_unused_defaults()
            shutdown()
    finished_command()  # under --nproc: this rank's receipt that ampgan's command ran to its end
    if LOST_OUTPUT:
        lost = ", ".join(f"{name} ({why})" for name, why in LOST_OUTPUT.items())
        say(f"error: the command's work is done and its files are whole, but {lost} refused its output", err=True)
        sys.exit(EXIT_USAGE)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    if issubclass(category, AmpganWarning):
        say(f"warning: {message}", err=True)
    else:
        say(*warnings.formatwarning(message, category, filename, lineno, line).rstrip().splitlines(), err=True)


def _rank_prefix() -> str:
    return f" (rank {world().rank})" if world().distributed else ""


def _usage_message(error: click.UsageError) -> str:
    if isinstance(error, click.NoSuchOption):
        path = moved_to_set(error.ctx and error.ctx.command, error.option_name)
        if path is not None:
            return (
                f"{error.option_name} is no option: write --set {path}=VALUE "
                "('ampgan config --list' shows every setting)"
            )
    if (
        isinstance(error, click.BadParameter)
        and not isinstance(error, click.MissingParameter)
        and error.param is not None
    ):
        hint = error.param.opts[0] if error.param.opts else error.param.name
        if isinstance(error.param, click.Argument):
            hint = error.param.human_readable_name
        return f"{hint} {error.message}"
    return error.format_message()


def _stopped(stop: KeyboardInterrupt, what: str = NOTHING_HALF_WRITTEN) -> tuple[str, int]:
    """The line and exit code of a Ctrl-C, or a SIGTERM (ampgan/__main__.py raises it as KeyboardInterrupt(15)),
    that no stage was listening for: the signal's name, then `what` (by default: nothing was being saved)."""
    signum = signal_number(stop)
    return f"stopped{_rank_prefix()}: {signal.Signals(signum).name} {what}", 128 + signum


@contextmanager
def _interrupts_python_ignores():
    """The Ctrl-Cs (and SIGTERMs, raised as KeyboardInterrupt by ampgan/__main__.py) that Python cannot raise where
    they land: inside a garbage collector's callback or a __del__, it prints "Exception ignored ...
    KeyboardInterrupt" and the command goes on to exit 0. Each is kept, unprinted, for the command's end."""
    ignored: list[KeyboardInterrupt] = []
    previous = sys.unraisablehook

    def keep(unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            ignored.append(unraisable.exc_value)
        else:
            previous(unraisable)

    sys.unraisablehook = keep
    try:
        yield ignored
    finally:
        sys.unraisablehook = previous


def _dispatch(argv: list[str]) -> None:
    try:
        check_environment()  # every AMPGAN_* variable set, before any command reads one
        # obj: the command line as given, for `--nproc N` to relaunch the same command.
        with _interrupts_python_ignores() as ignored:
            cli.main(args=argv, prog_name="ampgan", standalone_mode=False, obj={"argv": argv})
        if not ignored:
            return
        # A stop Python ignored: the command ran on to its end (every file ampgan writes is written whole), and
        # ends as a stop does, with the signal's exit code.
        line, code = _stopped(ignored[0], "received where it could not stop the command; it finished first")
    except click.exceptions.Abort as error:
        # click turns a Ctrl-C inside a command (a lazy import, loading data) into Abort: the same line as
        # one anywhere else; an Abort of its own (a prompt's end of input) is only that.
        interrupted = isinstance(error.__context__, KeyboardInterrupt)
        line, code = _stopped(error.__context__) if interrupted else ("aborted", 130)
    except click.UsageError as error:
        # the command's whole path: a subcommand's own name alone ('ampgan info') is no command
        hint = f" (see '{error.ctx.command_path if error.ctx else 'ampgan'} --help')"
        line, code = f"error: {_usage_message(error)}{hint}", EXIT_USAGE
    except click.ClickException as error:
        line, code = f"error: {error.format_message()}", error.exit_code
    except Interrupted as stop:
        line, code = f"stopped{_rank_prefix()}: {stop}", stop.exit_code
    except KeyboardInterrupt as stop:
        # Ctrl-C where no stage was listening for it (loading data, say): nothing was being saved.
        line, code = _stopped(stop)
    except ConfigError as error:
        flag = setting_flag(error.field)
        named = f"{error.field} ({flag})" if flag else error.field
        line, code = f"error{_rank_prefix()}: {named} {error.problem}", EXIT_USAGE
    except AmpganError as error:
        line, code = f"error{_rank_prefix()}: {error}", getattr(error, "exit_code", EXIT_USAGE)
    except (RuntimeError, MemoryError, OSError) as error:
        line, code = _failure_line(error)
    # One line on stderr and the exit code each problem has (above), never a traceback.
    say(line, err=True)
    sys.exit(code)


def _failure_line(error: BaseException) -> tuple[str, int]:
    """Lost ranks, memory running out outside a step that says so (planning's timed steps, building a model), and
    a path that is a loop of links (pathlib's resolve: RuntimeError 'Symlink loop from', ELOOP from 3.13 on) are
    one line too; anything else is a bug, whose traceback is what a developer needs."""
    reason, text = lost_contact_with_ranks(error), str(error)
    looped = getattr(error, "errno", None) == errno.ELOOP or text.startswith("Symlink loop from ")
    if looped:
        where = getattr(error, "filename", None) or text.removeprefix("Symlink loop from ").strip("'")
        return (
            f"error{_rank_prefix()}: {one_line(where)} leads through a loop of symbolic links (a link that leads "
            "back to itself): remove the loop or give another path",
            EXIT_USAGE,
        )
    if reason is not None:
        return (
            f"error{_rank_prefix()}: lost contact with another rank ({reason}); the launcher's line below names the "
            "rank that failed",
            1,
        )
    if not is_out_of_memory(error):
        raise error
    return (
        f"error{_rank_prefix()}: ran out of memory ({first_words(text) or type(error).__name__}): try a smaller "
        "--batch-size or model, or free memory (a limit set by ulimit -v counts too)",
        EXIT_USAGE,
    )
