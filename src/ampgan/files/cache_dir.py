"""Where ampgan keeps what it can always rebuild: speed decisions, trained evaluators, manifests.

$AMPGAN_CACHE_DIR if set, else $XDG_CACHE_HOME/ampgan, else ~/.cache/ampgan.
"""

from __future__ import annotations

import os
from pathlib import Path

from ampgan.env import env_value


def cache_dir() -> Path:
    if env_value("AMPGAN_CACHE_DIR"):
        return Path(env_value("AMPGAN_CACHE_DIR"))
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ampgan"
