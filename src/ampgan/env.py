"""Every AMPGAN_* environment variable, declared once: its name, what it takes and its default; and the
others ampgan reads (the thread counts torch takes when it loads, torch.compile's cache folder).

They are read through `env_value`, and the command line checks every one that is set before any command
runs (`check_environment`), so a value a variable cannot take is one error line naming the variable, the
value and what it takes: never a traceback from int() at import, and never a value quietly read as
something else (AMPGAN_DETERMINISTIC=maybe as on)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ampgan.errors import AmpganError, one_line


@dataclass(frozen=True)
class Variable:
    name: str
    takes: str  # what a valid value is, in words
    parse: Callable[[str], Any]  # the value, or ValueError
    default: Any


def _seconds(text: str) -> int:
    value = int(text.strip())
    if value < 1:
        raise ValueError
    return value


_SWITCH = {**dict.fromkeys(("", "0", "false", "no", "off"), False), **dict.fromkeys(("1", "true", "yes", "on"), True)}


def _switch(text: str) -> bool:
    word = text.strip().lower()
    if word not in _SWITCH:
        raise ValueError(f"not a switch: {text!r}")
    return _SWITCH[word]


def _compile_backend(text: str) -> str:
    name = text.strip()
    if name != "inductor" and name not in _backends():  # the default needs no check (and no import of dynamo)
        raise ValueError
    return name


def _folder(text: str) -> str:
    if not text.strip() or (os.path.exists(text) and not os.path.isdir(text)):
        raise ValueError
    return text


def _threads(text: str) -> str:
    # OpenMP takes a count or a comma list (nested levels). A value it cannot read is not an error to libgomp or
    # torch: OMP_NUM_THREADS=abc runs on every core, MKL_NUM_THREADS=abc on one, both silently.
    if not all(part.strip().isascii() and part.strip().isdecimal() and int(part) > 0 for part in text.split(",")):
        raise ValueError
    return text


def _backends() -> list[str]:
    # Only for a backend other than the default: torch._dynamo took 7.5 s to import here (-X importtime,
    # loaded 2-core Zen 4).
    from torch._dynamo import list_backends

    return sorted(list_backends(exclude_tags=()))


VARIABLES = {
    variable.name: variable
    for variable in (
        Variable("AMPGAN_CACHE_DIR", "a folder (ampgan creates it)", _folder, None),
        Variable("AMPGAN_COMPILE_BACKEND", "a torch.compile backend", _compile_backend, "inductor"),
        Variable("AMPGAN_DETERMINISTIC", "1 or 0 (true/false, yes/no, on/off)", _switch, False),
        Variable("AMPGAN_COLLECTIVE_TIMEOUT_S", "whole seconds, 1 or more", _seconds, 120),
        Variable("AMPGAN_CONTROL_TIMEOUT_S", "whole seconds, 1 or more", _seconds, 3600),
        Variable("AMPGAN_LAUNCH_RECEIPTS", "a folder (ampgan's --nproc launcher sets it for its ranks)", str, None),
        Variable("AMPGAN_TRUSTED_MODELS", "model names, one a line (ampgan sets it for its own processes)", str, ""),
        Variable("OMP_NUM_THREADS", "a whole number of threads, 1 or more", _threads, None),
        Variable("MKL_NUM_THREADS", "a whole number of threads, 1 or more", _threads, None),
        Variable("TORCHINDUCTOR_CACHE_DIR", "a folder (torch.compile creates it)", _folder, None),
    )
}


def env_value(name: str) -> Any:
    """The variable's value (its default when unset or empty); one error line when it cannot take it."""
    variable = VARIABLES[name]
    text = os.environ.get(name, "")
    if not text:
        return variable.default
    try:
        return variable.parse(text)
    except ValueError:  # each parser's way of refusing a value
        takes = variable.takes + (f" ({', '.join(_backends())})" if name == "AMPGAN_COMPILE_BACKEND" else "")
        raise AmpganError(
            f"the environment variable {name}={one_line(text)!r} cannot be used: it takes {takes}; "
            f"set it so, or unset it for the default"
            + (f" ({variable.default})" if variable.default not in (None, "") else "")
        ) from None


def _umask() -> int:
    """The process's umask: Linux shows it in /proc/self/status; elsewhere Python reads it only by setting one and
    putting it back (a file another thread makes in between would take the interim mask)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_environment() -> None:
    """Every variable declared here that is set, checked before a command starts; and the current folder, which
    torch needs to load (MKL's loader ends the process with 'Cannot load libtorch_cpu.so' in a deleted one)."""
    try:
        os.getcwd()
    except FileNotFoundError:
        raise AmpganError(
            "the current folder was deleted while this shell (or ampgan, starting) was in it: cd to a folder that "
            "exists, then run the command again"
        ) from None
    mask = _umask()
    if mask & 0o700:  # a folder ampgan made, ampgan could not then write in (it was left behind, empty)
        raise AmpganError(
            f"the umask {mask:04o} takes your own permission to read, write or enter the files and folders ampgan "
            "makes: set one that leaves them to you (umask 022, or 077 to keep others out), then run it again"
        )
    for name in sorted(VARIABLES.keys() & os.environ.keys()):
        env_value(name)
