"""Every Python process ampgan starts (the ranks of --nproc, compile-time probes, benchmark steps) starts
through `python_command`, so none of them imports from the folder it was started in.

`python -m ampgan` puts the current folder first on the import path: run from a project that holds a file
named `ampgan.py`, `torch.py` or `numpy.py` (or such a package), a child would import that instead, run its
code, and perhaps exit 0 having done nothing. `-P` (Python 3.11's safe path) leaves the current folder, and
a script's own folder, off the path; unlike `-I` it keeps PYTHONPATH and the user's site-packages.
tests/test_launch_paths.py holds every launch in src/ and benchmarks/ to it.
"""

from __future__ import annotations

import sys


def python_command(*arguments: str) -> list[str]:
    """`python -P ARGUMENTS...` with this interpreter: `python_command("-m", "ampgan", "train", ...)`."""
    return [sys.executable, "-P", *arguments]
