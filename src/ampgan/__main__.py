"""`python -m ampgan` and the `ampgan` console script (pyproject.toml): the entry point imports nothing before
it can catch Ctrl-C.

The commands (ampgan/cli) load click and torch, a second or more: a Ctrl-C then would end in a
KeyboardInterrupt traceback from the import, before any handler of theirs exists. `main` imports them inside
its own handler, so an interruption at any moment is the same one line and exit code 130.
"""

import sys

# The line ampgan/cli prints for a Ctrl-C no stage was listening for (NOTHING_SAVED: not importable from there
# before the handler below exists).
INTERRUPTED_EARLY = "stopped: SIGINT received before any work was saved"


def main(argv: list[str] | None = None) -> None:
    try:
        from ampgan.cli import main as run

        run(argv)
    except KeyboardInterrupt:
        # Ctrl-C while Python loaded the commands, or between a command's own handlers: nothing was saved.
        sys.stderr.write(INTERRUPTED_EARLY + "\n")
        sys.exit(130)


if __name__ == "__main__":
    main()
