"""Compiled kernels outlive the process: torch.compile's caches live in ampgan's cache folder.

torch.compile keeps what it compiled (Inductor's FX-graph cache, the AOT-autograd cache and the
generated C++/Triton kernels) under TORCHINDUCTOR_CACHE_DIR, by default /tmp/torchinductor_<user>,
which a reboot or a fresh container empties; every run after that pays the whole compile again
(about half a minute for ampgan's step on a 2-core CPU). Pointed at ampgan's cache folder
(files.cache_dir), the compile is paid once per machine, torch version and model. A folder the
user chose with TORCHINDUCTOR_CACHE_DIR is left alone.
"""

from __future__ import annotations

import os
from pathlib import Path

from ampgan.files.cache_dir import cache_dir

ENV = "TORCHINDUCTOR_CACHE_DIR"


def use_persistent_compile_cache() -> Path:
    """Set (unless already set) and return the folder torch.compile caches into. Inductor reads the
    variable whenever it looks for its cache, so setting it before the first compile is enough."""
    if not os.environ.get(ENV):
        os.environ[ENV] = str(cache_dir() / "torch-compile")
    return Path(os.environ[ENV])
