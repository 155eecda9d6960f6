"""The Python API (ampgan/api.py): train, bench and project as the commands run them, each returning its
answer as data, each refusing a setting it does not have in one line."""

import json
import math
import os
import random
import re

import numpy as np
import pytest

import ampgan
from ampgan.errors import AmpganError

TINY = {"model.width": 8, "model.z_dim": 16, "compute.device": "cpu"}


def test_train_writes_the_run_the_command_would_and_returns_its_numbers(tmp_path):
    settings = {**TINY, "data.dataset": "synthetic", "budget.batch_size": 8, "budget.steps": 2}
    run = ampgan.train("acgan", tmp_path / "run", settings=settings)
    assert run.run_dir == tmp_path / "run" and run.precision == "fp32" and run.steps == 2
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())["config"]
    assert run.config.to_dict() == recorded and run.config.budget.steps == 2 and run.config.model.options["width"] == 8
    assert math.isfinite(run.loss_d) and math.isfinite(run.loss_g) and run.train_seconds > 0
    assert list((tmp_path / "run" / "checkpoints").glob("*.pt"))


@pytest.mark.real_op_trace  # the bench traces its step, so that project has op tables to project
def test_bench_then_project_return_what_their_commands_write(tmp_path):
    bench = ampgan.bench(
        "acgan",
        tmp_path / "bench",
        settings=TINY,
        batch_sizes=[8],
        precisions=["fp32"],
        warmup=1,
        steps=2,
        min_seconds=0,
        max_seconds=60,
    )
    assert bench.results == tmp_path / "bench" / "results.json" and bench.results.is_file()
    assert [(c["batch_size"], c["precision"], c["status"]) for c in bench.configs] == [(8, "fp32", "ok")]
    assert bench.configs[0]["median_ms"] > 0 and not bench.incomplete
    assert (tmp_path / "bench" / "fig1_time_per_batch.png").is_file()  # drawn as the command draws it

    projected = ampgan.project(bench.out_dir, tmp_path / "projection", devices="T4,A100", batch_sizes=[8, 4096])
    assert projected.projection == tmp_path / "projection" / "projection.json" and projected.projection.is_file()
    assert len(projected.rows) == 2 * 4 * 2 and all(r["projected"] for r in projected.rows)
    row = projected.row("A100", "fp32", 4096)
    assert row["status"] == "ok" and row["ms_low"] <= row["ms_per_step"] <= row["ms_high"]


@pytest.mark.parametrize(
    ("call", "closest"),
    [
        (lambda out: ampgan.bench("acgan", out, settings=TINY, batch_size=[8]), "batch_sizes"),
        (lambda out: ampgan.project(out, device="T4"), "devices"),
        (lambda out: ampgan.compare("acgan", out, seed=3), "seeds"),
        (lambda out: ampgan.compare("acgan", out, bench={"warmups": 1}), "bench.warmup"),
        (lambda out: ampgan.bench("acgan", out, settings=TINY, max_second=3), "max_seconds"),
    ],
    ids=["bench", "project", "compare", "compare-bench", "bench-seconds"],
)
def test_a_setting_the_command_does_not_have_is_one_line_naming_its_settings(tmp_path, call, closest):
    with pytest.raises(AmpganError) as refused:
        call(tmp_path / "out")
    message = str(refused.value)
    assert "has no setting" in message and "its settings are" in message and "\n" not in message
    assert f"did you mean {closest}?" in message
    assert not (tmp_path / "out").exists()  # refused before anything is written


@pytest.mark.parametrize(
    ("call", "path", "value"),
    [
        (lambda out: ampgan.bench("acgan", out, settings=TINY, batch_size=8), "budget.batch_size", "8"),
        (lambda out: ampgan.compare("acgan", out, z_dim=16), "model.z_dim", "16"),
        (lambda out: ampgan.compare("acgan", out, lr_g=1e-3), "optim.lr_g", "0.001"),
    ],
    ids=["bench-batch", "compare-model", "compare-optim"],
)
def test_a_config_field_given_by_its_bare_name_is_pointed_to_settings(tmp_path, call, path, value):
    """A config tree field passed as a keyword (`batch_size=8`) is one line saying where it goes, not the closest
    of the command's own settings (which would be `batch_sizes`, another thing)."""
    with pytest.raises(AmpganError) as refused:
        call(tmp_path / "out")
    message = str(refused.value)
    assert (
        message.endswith(f"if you meant the config setting, give settings={{'{path}': {value}}}")
        and "\n" not in message
    )
    assert not (tmp_path / "out").exists()


def test_a_config_setting_that_does_not_exist_is_one_line(tmp_path):
    with pytest.raises(AmpganError) as refused:
        ampgan.train("acgan", tmp_path / "run", settings={"budget.stepz": 2})
    assert "budget.stepz" in str(refused.value) and "did you mean steps" in str(refused.value)
    assert not (tmp_path / "run").exists()


def test_a_signal_while_compare_decides_stops_it_at_once(tmp_path, monkeypatch):
    """Deciding measures for minutes on a busy machine: a Ctrl-C then stops the call at once (it waited for the
    decisions' end: 46 to 524 s measured on a loaded 2-core machine), and nothing of the study is left."""
    import signal

    import ampgan.study.compare as compare

    went_on = []

    def deciding(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)
        went_on.append(True)
        raise AssertionError("the decisions went on measuring after the signal")

    monkeypatch.setattr(compare, "plan_run", deciding)
    with pytest.raises(KeyboardInterrupt):
        ampgan.compare("acgan", tmp_path / "c", settings=TINY | {"data.dataset": "synthetic"}, seeds=1)
    assert went_on == [] and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").glob("study.json"))


def test_a_call_leaves_the_callers_torch_and_plots_as_it_found_it(tmp_path, monkeypatch):
    """The commands fit the thread count to the machine's load, set strict FP32 matrix products, seed the
    weights with torch.manual_seed and draw figures: from Python (a notebook) none of it may outlive the call
    (pyplot's backend was switched to Agg, process-wide: a notebook's inline plots stopped showing)."""
    import matplotlib
    import matplotlib.pyplot as plt
    import torch

    import ampgan.speed.planned_run as planned_run
    import ampgan.speed.threads as threads
    from ampgan.training.compile_cache import use_persistent_compile_cache

    monkeypatch.setattr(threads, "thread_choice", lambda current, *rest: {"threads": 1, "reason": "fitted (test)"})
    before, matmul = torch.get_num_threads(), torch.get_float32_matmul_precision()
    expected = torch.rand(6, generator=torch.Generator().manual_seed(7))  # the caller's stream, uninterrupted
    np.random.seed(7)
    random.seed(7)
    expected_numpy, expected_python = np.random.rand(2), [random.random() for _ in range(2)]
    np.random.seed(7)
    random.seed(7)
    torch.set_num_threads(3)
    torch.set_float32_matmul_precision("medium")
    torch.manual_seed(7)
    backend = matplotlib.get_backend()
    plt.switch_backend("svg")  # the caller's own, as a notebook's inline backend is
    try:
        settings = TINY | {"data.dataset": "synthetic", "budget.steps": 1, "budget.batch_size": 8}
        settings |= {"compute.channels_last": False, "compute.compile": False}
        ampgan.train("acgan", tmp_path / "run", settings=settings)
        assert (torch.get_num_threads(), torch.get_float32_matmul_precision()) == (3, "medium")
        assert torch.equal(torch.rand(2), expected[:2])
        assert np.random.rand() == expected_numpy[0] and random.random() == expected_python[0]  # a run seeds them
        ampgan.bench(
            "acgan", tmp_path / "bench", settings=settings, batch_sizes=[8], precisions=["fp32"], max_seconds=1
        )
        assert (torch.get_num_threads(), torch.get_float32_matmul_precision()) == (3, "medium")
        assert torch.equal(torch.rand(2), expected[2:4])
        assert (tmp_path / "bench" / "fig1_time_per_batch.png").is_file()
        assert matplotlib.get_backend() == "svg" and plt.get_fignums() == []

        def interrupted_mid_run(*args, **kwargs):  # a Ctrl-C after the run set its switches, seeded and compiled
            torch.set_float32_matmul_precision("highest")
            torch.manual_seed(0)
            use_persistent_compile_cache()
            raise KeyboardInterrupt

        monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
        monkeypatch.setattr(planned_run, "run_training", interrupted_mid_run)
        with pytest.raises(KeyboardInterrupt):
            ampgan.train("acgan", tmp_path / "stopped", settings=settings)
        assert torch.get_float32_matmul_precision() == "medium" and torch.equal(torch.rand(2), expected[4:6])
        assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ  # the caller's own torch.compile caches where it did
    finally:
        plt.switch_backend(backend)
        torch.set_num_threads(before)
        torch.set_float32_matmul_precision(matmul)


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda out: ampgan.bench("acgan", out, batch_sizes="64"), "ampgan.bench: batch_sizes takes a list"),
        (lambda out: ampgan.bench("acgan", out, precisions="fp32"), "ampgan.bench: precisions takes a list"),
        (lambda out: ampgan.compare("acgan", out, precisions="fp32,bf16"), "ampgan.compare: precisions takes a list"),
        (lambda out: ampgan.compare("acgan", out, seeds="2"), "ampgan.compare: seeds takes a number, not the string"),
        (lambda out: ampgan.compare("acgan", out, bench={"batch_sizes": "8"}), "batch_sizes takes a list ([16, 64"),
        # decided by the declared type, not the default's: a float, a switch, a list whose default is None
        (lambda out: ampgan.bench("acgan", out, max_seconds="5"), "ampgan.bench: max_seconds takes a number"),
        (lambda out: ampgan.bench("acgan", out, trace_ops="no"), "ampgan.bench: trace_ops takes True or False"),
        (lambda out: ampgan.bench("acgan", out, channels_last="bf16"), "ampgan.bench: channels_last takes a list"),
        (lambda out: ampgan.compare("acgan", out, price_per_hour="1.5"), "price_per_hour takes a number, not the"),
    ],
)
def test_a_string_for_a_list_or_a_number_is_one_line(tmp_path, call, named):
    """Its letters were read as the items: 'fp32' as the precision 'f', '64' as the batch sizes 6 and 4."""
    with pytest.raises(AmpganError, match=re.escape(named)):
        call(tmp_path / "out")
    assert not (tmp_path / "out").exists()


# A program that uses ampgan: faulthandler's handlers for SIGUSR1 and SIGALRM are set from C, so Python's record
# (signal.getsignal) still says SIG_DFL; after the calls each signal must reach faulthandler, which writes the
# threads' stacks and lets the program go on.
_PROGRAM_WITH_C_HANDLERS = """
import faulthandler, os, signal, sys
import ampgan
from ampgan.speed.step_timer import abandoned_after
log = open(sys.argv[1] + "/stacks.txt", "w")
for sig in (signal.SIGUSR1, signal.SIGALRM):
    faulthandler.register(sig, file=log, chain=False)
before = [signal.getsignal(sig) for sig in (signal.SIGUSR1, signal.SIGALRM)]
settings = {"model.width": 8, "model.z_dim": 16, "compute.device": "cpu", "data.dataset": "synthetic",
            "budget.batch_size": 8, "budget.steps": 1}
ampgan.train("acgan", sys.argv[1] + "/run", settings=settings)
with abandoned_after(60):  # the alarm that stops a bench's or a decision's step past its cap
    pass
os.kill(os.getpid(), signal.SIGUSR1)
os.kill(os.getpid(), signal.SIGALRM)
print(before == [signal.getsignal(sig) for sig in (signal.SIGUSR1, signal.SIGALRM)])
"""


def test_a_call_gives_back_the_signal_handlers_a_library_set_from_c(tmp_path):
    """A call held the stop signals (and the step's alarm) and put back what signal.getsignal had said, SIG_DFL
    for a handler set from C (faulthandler.register, another library's): the caller's next SIGUSR1 ended its
    process (exit -10) instead of reaching its handler. Now the OS's own handler is put back too."""
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    program = [sys.executable, "-c", _PROGRAM_WITH_C_HANDLERS, str(tmp_path)]
    done = subprocess.run(program, capture_output=True, text=True, timeout=300, env=env)
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr
    assert (tmp_path / "stacks.txt").read_text().count("Current thread") == 2  # one dump per signal
