"""torch.compile's cache outlives the process (training/compile_cache.py), and bench measures the
compile time cold and warm in fresh processes (speed/compile_time.py)."""

import math

import pytest
from conftest import tiny_config

from ampgan.errors import AmpganError
from ampgan.training.compile_cache import ENV, use_persistent_compile_cache


def test_the_compile_cache_goes_to_ampgans_cache_folder_unless_the_user_chose_one(tmp_path, monkeypatch):
    monkeypatch.setenv("AMPGAN_CACHE_DIR", str(tmp_path / "ampgan"))
    monkeypatch.delenv(ENV, raising=False)
    assert use_persistent_compile_cache() == tmp_path / "ampgan" / "torch-compile"
    monkeypatch.setenv(ENV, str(tmp_path / "mine"))
    assert use_persistent_compile_cache() == tmp_path / "mine"


@pytest.mark.slow
def test_compile_time_is_measured_cold_and_warm_in_fresh_processes(tmp_path, monkeypatch):
    from ampgan.speed.compile_time import measure_compile_times

    # Graph capture without code generation keeps this to seconds; the probes inherit the setting.
    monkeypatch.setenv("AMPGAN_COMPILE_BACKEND", "eager")
    times = measure_compile_times(tiny_config(compile=True))
    assert set(times) == {"cold_s", "warm_s", "compiled_step_s"}
    assert all(math.isfinite(value) for value in times.values()) and times["compiled_step_s"] > 0


def test_a_probe_that_fails_is_one_line_naming_the_fix(monkeypatch):
    from ampgan.speed.compile_time import measure_compile_times

    monkeypatch.setenv("AMPGAN_COMPILE_BACKEND", "no-such-backend")
    with pytest.raises(AmpganError, match=r"^measuring the compile time failed \(.*\): drop --compile$"):
        measure_compile_times(tiny_config(compile=True))
