"""ampgan: does mixed precision make my GAN train faster and cheaper, without making it worse?

From Python: `ampgan.compare(model, out, ...)` runs the study (ampgan/api.py); a model function returns
`ampgan.GAN` (gan/contract.py; docs/your-gan.md). The names below are imported when first used, so the
command line starts without loading torch for `--help`."""

import time

__version__ = "0.1.0"
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
    "Study": "ampgan.study.answer",
    "real_fake_loss": "ampgan.gan.layers",
    "class_loss": "ampgan.gan.layers",
    "hinge_loss": "ampgan.gan.layers",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'ampgan' has no attribute {name!r}")
