"""The `ampgan` command's entry point (`main`), which imports nothing before it can catch Ctrl-C.

The commands, their group and the one place that turns problems into one line are in cli/group.py. Loading
them loads torch (a second or more): a Ctrl-C then would end in a KeyboardInterrupt traceback from the
import, before any handler exists. `main` imports them inside its own handler, so an interruption at any
moment is the same one line and exit code 130.
"""

from __future__ import annotations

import sys

INTERRUPTED_EARLY = "stopped: SIGINT received before any work was saved"


def main(argv: list[str] | None = None) -> None:
    try:
        from ampgan.cli.group import run

        run(argv)
    except KeyboardInterrupt:
        # Ctrl-C while Python loaded the commands, or between a command's own handlers: nothing was saved.
        sys.stderr.write(INTERRUPTED_EARLY + "\n")
        sys.exit(130)


def __getattr__(name: str):
    """`ampgan.cli.cli` (the click group) and the rest of cli/group.py, loaded when first asked for."""
    import importlib

    if name.startswith("__"):
        raise AttributeError(name)
    group = importlib.import_module("ampgan.cli.group")
    try:
        return getattr(group, name)
    except AttributeError:
        raise AttributeError(f"module 'ampgan.cli' has no attribute {name!r}") from None
