"""The model trust rule's consent: which model names the person running this process named.

A model that is not built in is imported (its code run) only when the person running ampgan named it: on the
command line (`--model`, `--set model.name=`), in a Python call (`ampgan.compare(my_gan)`,
`config_from_options(model=...)`), or with `--trust-model`, consent to the model a folder or file names.
A name read from a file ampgan was given is data. gan/registry.py refuses the rest (_find_builder);
this module only keeps the consent, low enough that the config layer can record it too.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from ampgan.errors import AmpganError

# The model trust rule. The names the person running this process named (consent_to_import): only these,
# the built-in models and functions handed over from Python are ever imported. ANY_MODEL is --trust-model's
# consent to whichever model the command's files name. Processes that ampgan starts itself inherit the
# consent through MODEL_CONSENT_ENV (consent_environment()).
MODEL_CONSENT_ENV = "AMPGAN_TRUSTED_MODELS"
ANY_MODEL = "*"
_CONSENTED: set[str] = set()


class UntrustedModel(AmpganError):
    """A model that is not built in, named by a file rather than by the person running ampgan."""


def consent_to_import(name: str) -> None:
    """The person running ampgan named this model (or ANY_MODEL): it may be imported in this process."""
    if isinstance(name, str) and name.strip():
        _CONSENTED.add(name if name == ANY_MODEL else absolute_model_name(name))


def consent_environment() -> dict[str, str]:
    """The environment entry that carries this process's consent to a process it starts."""
    return {MODEL_CONSENT_ENV: "\n".join(sorted(_consented()))}


def import_consented(name: str) -> bool:
    consented = _consented()
    return ANY_MODEL in consented or absolute_model_name(name) in consented


def _consented() -> set[str]:
    # This process's consent and the consent it inherited from the process that started it.
    return _CONSENTED | {n for n in os.environ.get(MODEL_CONSENT_ENV, "").split("\n") if n}


def absolute_model_name(name: str) -> str:
    """One name per model however its file's path was written (relative, ./, ~, absolute): the consent's key, and
    what a config records, so a command run from another folder (a resume) finds the same file."""
    where, function_name = model_file(name), name.rpartition(":")[2]
    return f"{Path(where).expanduser().resolve()}:{function_name}" if where else name


def model_file(name: str) -> str | None:
    """The file of a model named path/to/file.py:FUNCTION, as written; None for a built-in or a module's."""
    where, colon, _ = name.rpartition(":")
    return where if colon and (where.endswith(".py") or "/" in where) else None


def command_line(*words) -> str:
    """`ampgan WORDS` as a shell reads it back: a printed command to copy must keep a folder named 'cm 1' one
    argument (it was two) and a name with ';' or '$(...)' a name, never a command of its own."""
    return " ".join(["ampgan", *(shlex.quote(str(word)) for word in words)])


def resume_command(run_dir, model: str) -> str:
    """The command that continues `run_dir`: with `--model` for a model that is not built in (a file's or a
    module's function), which a resume imports only when the person running it names it again."""
    return command_line("train", "--resume", run_dir, *(("--model", model) if ":" in model else ()))
