"""ampgan: does mixed precision make my GAN train faster and cheaper, without making it worse?

From Python: `ampgan.compare(model, out, ...)` runs the study, and `ampgan.train`, `ampgan.bench` and
`ampgan.project` the other commands (ampgan/api.py); a model function returns
`ampgan.GAN` (gan/contract.py; docs/your-gan.md). The names below are imported when first used, so the
command line starts without loading torch for `--help`."""

import importlib
import importlib.metadata
import time
import types

__version__ = importlib.metadata.version("ampgan")  # pyproject.toml declares it once
# When ampgan was first imported: a command's start, before torch is (bench prints what it all took).
STARTED_AT = time.perf_counter()

_EXPORTS = {
    "GAN": "ampgan.gan.contract",
    "Adam": "ampgan.gan.contract",
    "DataSpec": "ampgan.gan.contract",
    "Update": "ampgan.gan.contract",
    "EMA": "ampgan.gan.ema",
    "LossContext": "ampgan.gan.context",
    "compare": "ampgan.api",
    "train": "ampgan.api",
    "project": "ampgan.api",
    "Trained": "ampgan.api",
    "Benched": "ampgan.api",
    "Projected": "ampgan.api",
    "Study": "ampgan.study.answer",
    "real_fake_loss": "ampgan.gan.layers",
    "class_loss": "ampgan.gan.layers",
    "hinge_loss": "ampgan.gan.layers",
    "unused_but_reduced": "ampgan.gan.layers",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'ampgan' has no attribute {name!r}")


class _BenchPackage(types.ModuleType):
    """`ampgan.bench(...)` is the Python API's bench (ampgan/api.py) and `ampgan.bench` the bench package:
    Python makes an imported subpackage its parent's attribute, so the package itself answers the call."""

    def __call__(self, *args, **kwargs):
        return importlib.import_module("ampgan.api").bench(*args, **kwargs)


# By importlib, as __getattr__ loads the exports: the root package re-exports, it is no layer's dependency.
# The bench package's __init__ imports nothing.
importlib.import_module("ampgan.bench").__class__ = _BenchPackage
__all__ = sorted([*_EXPORTS, "bench"])
