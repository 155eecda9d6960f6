"""Model names -> model functions: the built-in GANs, a user's `path/to/file.py:FUNCTION`, or an
importable `package.module:FUNCTION`.

A user's file is imported into this process like any Python import (it runs that code), so it is
imported only when the person running ampgan named it: on the command line (`--model`, `--set
model.name=`), in a Python call, or by consenting with `--trust-model` to the model a file names. A
name read from a file ampgan was given (a run folder's config.json, a study.json, a config file, a
results file) is data: building it without that consent is refused with the flag to pass (the model
trust rule, docs/training.md). While it is imported its folder comes first on sys.path, as `python file.py`
has it, so it imports the modules beside it, each file its own (_beside).

A built-in GAN is added by writing its module in gan/models/ (a model function returning gan.GAN,
decorated with @built_in("name")): the registry imports every module there.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import shlex
import sys
import traceback
from collections import OrderedDict
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ampgan.data.registry import registry_of
from ampgan.errors import AmpganError, ConfigError, first_words, name_as_text
from ampgan.files.jsonfile import refuse_unless_regular_file
from ampgan.files.schema import OneOf
from ampgan.gan.contract import BUILT_IN, GAN, DataSpec, check_gan
from ampgan.gan.layers import keep_in_fp32
from ampgan.gan.options import option_parameters, resolve_options
from ampgan.sections import close_match_hint
from ampgan.system.memory import is_out_of_memory
from ampgan.trust import (  # noqa: F401 - the registry's readers import the rule from here too
    ANY_MODEL,
    MODEL_CONSENT_ENV,
    UntrustedModel,
    consent_environment,
    consent_to_import,
    import_consented,
)

_built_in = registry_of("ampgan.gan.models", BUILT_IN)  # every model function of gan/models/ by name


def model_names() -> list[str]:
    return list(_built_in())


# A model's name in a document read back (results.json, compare.json, projection.json): a built-in one, or a user's
# own as its run named it (FILE.py:FUNCTION, package.module:FUNCTION, python:NAME), which needs no registering.
MODEL_NAME = OneOf("a model", model_names, (", or FILE.py:FUNCTION", lambda name: ":" in name))


_IN_PROCESS: dict[str, tuple[Callable, str]] = {}  # "python:NAME" -> (model function, its source's digest)


def model_name_for(function: Callable) -> str:
    """The model name of a model function handed over from Python (ampgan.compare(my_gan)): its file's
    `path.py:NAME` when it is a module-level function of a .py file, so the run folder names a model
    that `ampgan` can build again from the command line; else (a notebook cell, a closure) `python:NAME`,
    known to this process only."""
    if not callable(function):
        raise AmpganError(f"a model is a name or a model function, got {type(function).__name__}")
    source = inspect.getsourcefile(function) if inspect.isfunction(function) else None
    module = sys.modules.get(getattr(function, "__module__", "") or "")
    name = getattr(function, "__name__", "")
    if (
        source
        and source.endswith(".py")
        and Path(source).is_file()
        and module is not None
        and getattr(module, name, None) is function
        and "<" not in function.__qualname__
    ):
        return f"{Path(source).resolve()}:{name}"
    try:
        text = inspect.getsource(function)
    except (OSError, TypeError):
        text = repr(function)
    key = f"python:{name or 'model'}"
    _IN_PROCESS[key] = (function, hashlib.sha256(text.encode()).hexdigest())
    return key


@dataclass(frozen=True)
class ModelRecipe:
    """A model function with its options resolved: everything needed to build the same GAN again."""

    name: str  # as the user wrote it: "acgan", "examples/dcgan.py:build", "mypkg.gans:build"
    builder: Callable = field(repr=False, compare=False)
    options: dict[str, Any] = field(default_factory=dict)
    source_sha256: str = ""  # of the file that defines the function: a changed file is another model

    def build(self, data: DataSpec) -> GAN:
        """A new GAN (fresh weights from torch's current RNG state), checked against the contract."""
        origin = f"model {self.name}"
        try:
            with torch_settings_kept(origin):
                gan = self.builder(data, **self.options)
        except (AmpganError, KeyboardInterrupt):
            raise
        except (Exception, SystemExit) as error:  # noqa: BLE001 - the user's code failing is one line naming it
            if is_out_of_memory(error):
                raise  # the machine's limit, not the model's fault: the command line says so
            # A built-in model is not the user's to fix: its options are (a width of 10**23 overflowed a shape).
            options = ", ".join(f"{name}={value!r}" for name, value in self.options.items())
            fix = f"check its options ({options})" if self.name in _built_in() else "fix the model function"
            raise AmpganError(
                f"{origin} raised {type(error).__name__}: {_first_line(error)}{_where(error)}: {fix}"
            ) from None
        gan = check_gan(gan, origin)
        networks = {"G": gan.generator, "D": gan.discriminator}
        on_meta = [f"{k}.{n}" for k, net in networks.items() for n, t in net.state_dict().items() if t.is_meta]
        if on_meta:  # shapes without values: nothing to train or move to a device
            raise AmpganError(
                f"{origin}: {on_meta[0]} and {len(on_meta) - 1} more tensor(s) are on the meta device (no values): "
                "build the networks on the CPU (ampgan moves them to the training device)"
            )
        gan.name = self.name
        for module in gan.fp32_modules:
            keep_in_fp32(module)
        return gan

    def fingerprint(self, gan: GAN | None = None) -> str:
        """What makes two GANs the same for a cached measurement: the name, the options, the source
        and, when given, the parameter shapes."""
        digest = hashlib.sha256(f"{self.name}|{sorted(self.options.items())!r}|{self.source_sha256}".encode())
        if gan is not None:
            for network in (gan.generator, gan.discriminator):
                for name, parameter in network.named_parameters():
                    digest.update(f"{name}:{tuple(parameter.shape)};".encode())
        return digest.hexdigest()[:20]


def resolve_model(name: str, given_options: dict[str, Any]) -> ModelRecipe:
    """The model called `name` with `given_options` checked and every default filled in."""
    builder, source = _find_builder(name)
    try:
        option_parameters(builder)
    except (TypeError, ValueError) as error:
        raise AmpganError(f"model {name}: {error}: define it as def FUNCTION(data, *, option=default, ...)") from None
    return ModelRecipe(
        name=name,
        builder=builder,
        options=resolve_options(name, builder, dict(given_options)),
        source_sha256=_IN_PROCESS[name][1] if name in _IN_PROCESS else _sha256_of(source),
    )


def _find_builder(name: str) -> tuple[Callable, Path | None]:
    """`name`: a config's model.name, which ModelConfig has checked is a name (not empty)."""
    built_in = _built_in()
    if name.startswith("python:"):
        if name not in _IN_PROCESS:
            raise AmpganError(
                f"model {name} was handed over from Python in another process: run it from the same "
                "script or notebook again, or save the function in a .py file and give path.py:FUNCTION"
            )
        return _IN_PROCESS[name][0], None
    if name in built_in:
        return built_in[name], Path(inspect.getsourcefile(built_in[name]))
    if ":" not in name:
        raise ConfigError(
            "model.name",
            f"{name!r} is not a built-in model{close_match_hint(name, built_in)}: choose one of {', '.join(built_in)}, "
            "or give your own as path/to/file.py:FUNCTION or package.module:FUNCTION",
        )
    where, _, function_name = name.rpartition(":")
    if not function_name.isidentifier():
        raise ConfigError("model.name", f"{name!r}: {function_name!r} after the colon is not a function name")
    if not where.strip():  # '--model $FILE:build' with FILE unset
        raise ConfigError("model.name", f"{name!r} names no file or module before the colon: give path/to/file.py:F")
    if not import_consented(name):  # one line, before any import, for a model (not built in) nobody named
        raise UntrustedModel(
            f"model {name} is not built in and was named by a file, not by you: building it imports "
            f"and runs that code, which ampgan never does on a file's word; read the code, then name it "
            f"yourself with --model {shlex.quote(name)} (or pass --trust-model)"
        )
    module = _import_file(where) if where.endswith(".py") or "/" in where else _import_module(where)
    builder = getattr(module, function_name, None)
    if builder is None:
        available = sorted(
            n
            for n, v in vars(module).items()
            if inspect.isfunction(v) and not n.startswith("_") and getattr(v, "__module__", None) == module.__name__
        )
        raise AmpganError(
            f"{where} has no function {function_name!r}{close_match_hint(function_name, available)}; "
            f"its functions: {', '.join(available) or 'none'}"
        )
    if not callable(builder):
        raise AmpganError(f"{where}:{function_name} is a {type(builder).__name__}, not a function")
    source = getattr(module, "__file__", None)
    return builder, Path(source) if source else None


# Settings torch keeps for the whole process, each with its setter: a user's file or model function that
# changes one (grad mode off, float64 or the meta device by default) would change every step ampgan runs after.
_TORCH_SETTINGS = {
    "torch.set_grad_enabled": (torch.is_grad_enabled, torch.set_grad_enabled),
    "torch.set_default_dtype": (torch.get_default_dtype, torch.set_default_dtype),
    # the CPU is torch's own default: put back as None, not as a device context entered for every later call
    "torch.set_default_device": (
        torch.get_default_device,
        lambda device: torch.set_default_device(None if device == torch.device("cpu") else device),
    ),
}


@contextmanager
def torch_settings_kept(origin: str):
    """Runs the user's code; a process-wide torch setting it changed is put back and named in one line."""
    before = {name: get() for name, (get, _) in _TORCH_SETTINGS.items()}
    try:
        yield
    finally:  # put back even when the user's code raised (a failed meta build is swallowed by its caller)
        changed = {name: get() for name, (get, _) in _TORCH_SETTINGS.items() if get() != before[name]}
        for name in changed:
            _TORCH_SETTINGS[name][1](before[name])
    if changed:
        raise AmpganError(
            f"{origin} changed torch's settings for the whole process ("
            + ", ".join(f"{name}({value})" for name, value in changed.items())
            + "): ampgan sets them for every precision; remove the call, or set it inside your forward or loss "
            "(e.g. with torch.no_grad():)"
        )


def _import_file(path_text: str):
    name_as_text(path_text, "the model file")  # the model's name is written to config.json
    path = Path(path_text).expanduser()
    refuse_unless_regular_file(path, "the model file")
    if not path.is_file():
        raise AmpganError(f"no model file {path}: give path/to/file.py:FUNCTION (the path relative to here)")
    resolved = path.resolve()
    script = sys.modules.get("__main__")
    if getattr(script, "__file__", None) and Path(script.__file__).resolve() == resolved:
        return script  # the running script (ampgan.train(build) in it): importing it again would rerun its top level
    # named by its path and its text: the same file edited since (in a notebook's process) is imported again; one
    # that cannot be read fails in exec_module below, in one line
    module_name = "ampgan_user_model_" + hashlib.sha256(f"{resolved}:{_sha256_of(resolved)}".encode()).hexdigest()[:12]
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    if spec is None or spec.loader is None:
        raise AmpganError(f"{path} cannot be imported as a Python module: give a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        with torch_settings_kept(f"importing {path}"), _beside(resolved.parent):
            spec.loader.exec_module(module)
    except BaseException as error:  # noqa: BLE001 - the user's file failing to import is one line
        del sys.modules[module_name]
        if isinstance(error, (KeyboardInterrupt, AmpganError)):
            raise
        raise AmpganError(
            f"importing {path} failed: {type(error).__name__}: {_first_line(error)}{_where(error, resolved)}"
        ) from None
    return module


_BESIDE_MODEL_FILES: set[str] = set()  # the modules user files imported from their own folders (helpers.py)
_MODEL_FOLDERS: set[str] = set()  # the folders _beside put at the end of sys.path: not installed ones


@contextmanager
def _beside(folder: Path):
    """While a user's file is imported its folder comes first on sys.path, as `python file.py` has it, so it
    imports the helpers beside it; then it goes last, so a file there named like a module ampgan imports later
    (matplotlib.py, jinja2.py) cannot stand in for it. The modules an earlier user file imported from beside it
    leave the module cache first: another folder's `helpers.py`, or this one's edited, is imported afresh."""
    for name in _BESIDE_MODEL_FILES & set(sys.modules):
        del sys.modules[name]  # the earlier model keeps its own: its functions hold the module
    # A folder already on the path (site-packages, PYTHONPATH) holds installed modules, not a file's helpers.
    installed = str(folder) in sys.path and str(folder) not in _MODEL_FOLDERS
    sys.path.insert(0, str(folder))
    before = set(sys.modules)
    try:
        yield
    finally:
        sys.path.remove(str(folder))
        if not installed:
            if str(folder) not in sys.path:
                sys.path.append(str(folder))
            _MODEL_FOLDERS.add(str(folder))
            for name in set(sys.modules) - before:
                found = Path(getattr(sys.modules[name], "__file__", None) or "/")
                # a module of its folder, not one of a virtual environment or a package that lies below it
                if found.is_relative_to(folder) and (
                    found.relative_to(folder).parts[0].split(".")[0] == name.split(".")[0]
                ):
                    _BESIDE_MODEL_FILES.add(name)


def _import_module(name: str):
    with torch_settings_kept(f"importing {name}"):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as error:
            raise AmpganError(
                f"cannot import {name} ({error}): give path/to/file.py:FUNCTION, or install the package"
            ) from None
        except Exception as error:  # noqa: BLE001
            raise AmpganError(
                f"importing {name} failed: {type(error).__name__}: {_first_line(error)}{_where(error)}"
            ) from None


def _sha256_of(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _first_line(error: BaseException) -> str:
    # a SyntaxError's str() carries its place, which _where gives once; an empty message is its type's name
    return first_words(error.msg if isinstance(error, SyntaxError) else str(error)) or type(error).__name__


def _where(error: BaseException, path: Path | None = None) -> str:
    """' (file.py, line 12)': the deepest frame of the user's code (outside torch and ampgan)."""
    if isinstance(error, SyntaxError) and error.filename:
        return f" ({Path(error.filename).name}, line {error.lineno})"
    own = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if "site-packages" not in f.filename
        and "/ampgan/" not in f.filename.replace("\\", "/")
        and not f.filename.startswith("<")
    ]
    if path is not None:
        own = [f for f in own if Path(f.filename).resolve() == path] or own
    return f" ({Path(own[-1].filename).name}, line {own[-1].lineno})" if own else ""


# The GANs built on the meta device, newest last: a study prepares the same model for every precision, seed
# and timer (a dozen times), and each build and its traces cost a fraction of a second. A meta GAN holds no
# values, so one build serves every preparation of the same function, options and data in this process.
_META_BUILDS: OrderedDict[tuple, GAN] = OrderedDict()
_META_BUILDS_KEPT = 8


def build_on_meta(recipe: ModelRecipe, data: DataSpec) -> GAN | None:
    """The GAN built on PyTorch's meta device (shapes only, no memory), or None when its function
    cannot build there (it loads weights from a file, say, or is broken: the real build says how).
    The same function, options and data give the same GAN object (kept for the next preparation)."""
    key = (recipe.builder, recipe.name, repr(sorted(recipe.options.items())), recipe.source_sha256, data)
    if key in _META_BUILDS:
        _META_BUILDS.move_to_end(key)
        return _META_BUILDS[key]
    try:
        with torch_settings_kept(f"model {recipe.name}"), torch.device("meta"):
            gan = check_gan(recipe.builder(data, **recipe.options), f"model {recipe.name}")
    except (Exception, SystemExit):  # noqa: BLE001 - not every model builds on meta; the caller does without
        return None
    gan.name = recipe.name
    _META_BUILDS[key] = gan
    while len(_META_BUILDS) > _META_BUILDS_KEPT:
        _META_BUILDS.popitem(last=False)
    return gan
