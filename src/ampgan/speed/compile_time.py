"""How long does torch.compile take before the first step, cold and warm? Measured as a new run sees it.

Within one process a second compile reuses in-memory caches that the next run would not have, so
each measurement is a fresh Python process running the bench's step with compilation on: *cold*
with an empty compile cache folder, *warm* with the folder the cold one filled (what a second run
on this machine meets, training/compile_cache.py). Each process times its first step (compiling
plus one step) and three more (the compiled step alone); compile time = first - their median.
`ampgan bench --compile` reports both; the compile decision (compilation.py) uses the warm one.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

from ampgan.config import TrainConfig
from ampgan.data import load_dataset
from ampgan.errors import AmpganError, say
from ampgan.gan.registry import consent_environment
from ampgan.speed.step_timer import StepTimer
from ampgan.system.processes import python_command
from ampgan.training.compile_cache import ENV, use_persistent_compile_cache
from ampgan.training.precision import resolve_device

PROBE_TIMEOUT_S = 900


def measure_compile_times(config: TrainConfig) -> dict:
    """{"cold_s", "warm_s", "compiled_step_s"} for the config's step (its precision and batch size)."""
    with tempfile.TemporaryDirectory(prefix="ampgan-compile-") as folder:
        cold, warm = _probe(config, folder), _probe(config, folder)
    return {
        "cold_s": cold["first_step_s"] - cold["step_s"],
        "warm_s": warm["first_step_s"] - warm["step_s"],
        "compiled_step_s": warm["step_s"],
    }


def measure_warm_compile_s(config: TrainConfig, fix: str = "drop --compile") -> float:
    """What a new run on this machine pays before its first compiled step, with the compile cache
    as this process left it (call it after compiling the same step here: the cache is then warm)."""
    probe = _probe(config, str(use_persistent_compile_cache()), fix)
    return max(probe["first_step_s"] - probe["step_s"], 0.0)


def _probe(config: TrainConfig, cache_folder: str, fix: str = "drop --compile") -> dict:
    try:
        # The probe builds the model this process was allowed to import, and no other (gan/registry.py).
        done = subprocess.run(
            python_command("-m", "ampgan.speed.compile_time", json.dumps(config.to_dict())),
            env=os.environ | {ENV: cache_folder} | consent_environment(),
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise AmpganError(f"measuring the compile time took over {PROBE_TIMEOUT_S} s: {fix}") from None
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise AmpganError(f"measuring the compile time failed ({reason}): {fix}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _probe_main(config_json: str) -> None:
    config = TrainConfig.from_dict(json.loads(config_json))
    timer = StepTimer(
        config,
        load_dataset(config.data, seed=config.seed),
        resolve_device(config.compute.device),
        data_parallel=False,
        across_ranks=False,
    )
    first = timer()
    step = statistics.median(timer() for _ in range(3))
    say(json.dumps({"first_step_s": first, "step_s": step}))


if __name__ == "__main__":
    _probe_main(sys.argv[1])
