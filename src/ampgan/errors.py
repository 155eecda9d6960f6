"""What ampgan tells a user who gave it something it cannot use.

Every problem the user can fix raises `AmpganError` with one sentence naming the problem and the
fix; the CLI prints it as one line and exits with code 2, never with a traceback. Advice that
does not stop the run is an `AmpganWarning`, printed as one `warning:` line.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import warnings


class AmpganError(Exception):
    """A problem the user can fix; the message says what it is and how."""


class AmpganWarning(UserWarning):
    """Advice about a choice that works but is likely not what the user wants."""


def one_line(text: object) -> str:
    """`text` as one printable line: control characters (a newline in a file's name, an escape sequence, C1
    controls, bidirectional overrides) are shown escaped, so no name inside a message can start a line of
    its own, forge one or move the terminal's cursor. A byte that was not UTF-8 in a file name (Python's
    surrogateescape, U+DC80-U+DCFF) is shown as the byte it was, `\\xff`, instead of failing to print."""
    return "".join(c if c.isprintable() else _escaped(c) for c in str(text))


def _escaped(character: str) -> str:
    surrogate = "\udc80" <= character <= "\udcff"
    return f"\\x{ord(character) - 0xDC00:02x}" if surrogate else repr(character)[1:-1]


def say(*lines: object, err: bool = False) -> None:
    """Print each of `lines` as one line, escaped by `one_line`: the one way ampgan prints to a terminal
    (tests/test_printed_lines.py holds src/ to it). A caller with a block of text passes its lines
    (`say(*text.splitlines())`); a name inside a line can then never start a line of its own."""
    import click

    for line in lines:
        try:
            click.echo(one_line(line), err=err)
        except BlockingIOError:  # EAGAIN: a passing state of a non-blocking pipe, not a reader gone
            raise
        except OSError as error:
            name = "stderr" if err else "stdout"
            _no_reader(sys.stderr if err else sys.stdout)
            if not isinstance(error, BrokenPipeError):  # `| head -1` read what it wanted: nothing was lost
                LOST_OUTPUT.setdefault(name, error.strerror or type(error).__name__)
            return


# The standard streams that refused a line (a full disk, an I/O error), with why: the command finishes its work,
# and its exit then says the output is gone (a `--json > study.json` on a full disk is not a success).
LOST_OUTPUT: dict[str, str] = {}


def _no_reader(stream) -> None:
    """The reader of `stream` went away (`ampgan bench ... | head -1`), or the stream refuses writes (`2>/dev/full`,
    a log on a full disk: a warning's line ended a run before its folder was written): the command's work still
    finishes and its files are written whole; what it would print, and the interpreter's last flush, go to
    /dev/null instead of ending the command with exit 1 and no word (a refusal other than a closed pipe is kept
    in LOST_OUTPUT, for the command's exit to report)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stream.fileno())
    os.close(devnull)


def say_json(document: object, indent: int | None = None) -> None:
    """`document` as JSON on stdout, through `say`. json.dumps escapes every control character but DEL,
    which `say` would show as `\\x7f` (not JSON): it is escaped the JSON way first, so the output parses."""
    import json

    say(*json.dumps(document, indent=indent).replace("\x7f", "\\u007f").splitlines())


def name_as_text(name: str, what: str) -> str:
    """A name read from the file system that becomes data (a class name, a model's name: written to config.json,
    shown in tables and reports) must be text. One that is not valid UTF-8 reaches Python as surrogates, which no
    JSON, HTML or terminal line can carry: refused in one line naming its bytes, rather than a
    UnicodeEncodeError wherever it is first written."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raw = os.fsencode(name)
        raise AmpganError(
            f"{what} {raw!r} has a name that is not valid UTF-8 text: rename it (e.g. to "
            f"{raw.decode('utf-8', errors='replace').replace(chr(0xFFFD), '_')!r})"
        ) from None
    return name


def first_words(text: str, limit: int = 300) -> str:
    """A library's message as its first line, at most `limit` characters cut between words (never mid-word),
    with '...' where it was cut."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0] if " " in line[:limit] else line[:limit]
    return cut.rstrip(" ,;:") + " ..."


def warn(message: str) -> None:
    warnings.warn(message, AmpganWarning, stacklevel=2)


def registered_once(table: dict, key: str, item, what: str):
    """`table[key] = item` for a registry (precisions, metrics, GPUs): a key already there is a ValueError, since
    a second registration under one name would silently replace the first."""
    if key in table:
        raise ValueError(f"{what} {key!r} is registered twice")
    table[key] = item
    return item


class ConfigError(AmpganError):
    """A config field with a value it cannot take. `field` is its path in the config tree
    (`budget.batch_size`), so the command line can name the flag that set it."""

    def __init__(self, field: str, problem: str):
        self.field, self.problem = field, problem
        super().__init__(f"{field} {problem}")


# The signals that stop a command after it saved what it finished (exit 128 + the number): Ctrl-C, SIGTERM (a
# scheduler's, `kill`'s), SIGHUP (the terminal closed), SIGQUIT (Ctrl-\\), SIGUSR1/SIGUSR2 (what a batch scheduler
# sends before its time limit: SLURM's --signal) and SIGXCPU (a CPU-time limit reached). Python's default for the
# last four ended the process at once, nothing saved since the last checkpoint, and SIGQUIT dumped core.
STOP_SIGNALS = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGXCPU,
)


def signal_number(stop: KeyboardInterrupt) -> int:
    """The signal that stopped a command: ampgan/__main__.py raises SIGTERM as KeyboardInterrupt(15); any other
    KeyboardInterrupt (Ctrl-C, or one a library raised with a message) is SIGINT."""
    return stop.args[0] if stop.args and isinstance(stop.args[0], int) else signal.SIGINT


# A folder where a file is written, or a file where its folder is: the path is taken, not the disk refused.
IN_THE_WAY = {errno.EISDIR, errno.ENOTDIR, errno.EEXIST}


def write_fix(error: OSError) -> str:
    """What to do about a write the filesystem refused: the path is taken, its folder is gone (moved or deleted
    while ampgan wrote in it), the file-size limit reached, or the disk or folder refused it."""
    fixes = {
        errno.ENOENT: "put the folder back where it was (what ampgan wrote went with it), or choose another place",
        errno.EFBIG: "raise the file-size limit (ulimit -f) or choose a place whose filesystem takes larger files",
        # No space frees a read-only disk or another user's folder.
        **dict.fromkeys(
            (errno.EROFS, errno.EACCES, errno.EPERM), "make the folder writable or choose a writable place"
        ),
    }
    return fixes.get(error.errno) or (
        "move what stands in its way" if error.errno in IN_THE_WAY else "free some space or choose a writable place"
    )


class UnwritableFile(AmpganError, OSError):
    """A write the filesystem refused (full, read-only, no permission). Still an OSError, so code that
    copes with a failed write (a cache, a run that stops cleanly) keeps coping; printed as one line.
    Nothing written before is lost: every file ampgan keeps is written whole or not at all."""

    def __init__(self, path, error: OSError):
        OSError.__init__(self, error.errno, error.strerror, str(path))
        self.message = (
            f"cannot write {one_line(path)} ({one_line(error.strerror or error)}): {write_fix(error)}, then run the "
            "command again; every file written before is intact"
        )

    def __str__(self) -> str:
        return self.message
