"""Data parallelism with torchrun: CPU, gloo, 2 processes, a small model."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from conftest import run_cli
from fixtures import ORIGINALS_TINY

from ampgan.data.batches import BatchStream
from ampgan.data.synthetic import make_synthetic

# Every test here starts real processes under the launcher.
pytestmark = pytest.mark.slow

# Subprocesses do not get conftest's injected memory-format tie: they name the format (no timing).
TINY = [*ORIGINALS_TINY, "--set", "logging.log_every=2", "--set", "logging.sample_every=1000"]


def torchrun(*args, timeout=240, script=None):
    target = [str(script)] if script else ["-m", "ampgan"]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", *target, *args]
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    ) as launch:
        try:
            stdout, stderr = launch.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # The ranks run in sessions of their own: killing the launcher alone left both waiting in a collective
            # (and holding its pipes) for the rest of the suite. SIGTERM is torchrun's to pass on to them.
            launch.terminate()
            try:
                stdout, stderr = launch.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                for pid in _descendants(launch.pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                launch.kill()
                stdout, stderr = launch.communicate()
            pytest.fail(f"torchrun {' '.join(args[:1])} ran past {timeout} s; its last output:\n{stderr[-3000:]}")
    return subprocess.CompletedProcess(command, launch.returncode, stdout, stderr)


def _descendants(pid: int) -> list[int]:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = [], [pid]
    while queue:
        children = parents.get(queue.pop(), [])
        found += children
        queue += children
    return found


def test_shards_are_disjoint_and_cover_each_epoch():
    data = make_synthetic(count=23, num_classes=3, image_size=28, channels=1)
    shards = [BatchStream(data, 4, torch.device("cpu"), seed=5, rank=r, world_size=3) for r in range(3)]
    epoch = [s._order.tolist() for s in shards]
    assert sorted(sum(epoch, [])) == list(range(23))  # complete
    assert all(set(a).isdisjoint(b) for i, a in enumerate(epoch) for b in epoch[i + 1 :])  # disjoint
    assert [len(e) for e in epoch] == [8, 8, 7]
    again = BatchStream(data, 4, torch.device("cpu"), seed=5, rank=1, world_size=3)
    assert again._order.tolist() == epoch[1]  # seeded


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory):
    """Six steps under torchrun with a checkpoint every 3; each rank's parameter digest and last loss in
    rankN.json beside the run folder (shared: a torchrun start is seconds of imports per process)."""
    folder = tmp_path_factory.mktemp("two-processes")
    script = folder / "train_and_dump.py"
    script.write_text(
        textwrap.dedent(f"""
        import hashlib, json
        from ampgan.config import config_from_options
        from ampgan.training.distributed import join_process_group, shutdown, world
        from ampgan.training.loop import prepare_run, run_training
        config = config_from_options(dataset="synthetic", width=8, z_dim=16, batch_size=8, device="cpu", steps=6,
                                     log_every=2, sample_every=1000, checkpoint_every=3)
        device = join_process_group("cpu")
        result = run_training(prepare_run(config, device=device), "{folder / "run"}", show_progress=False)
        state = result.state.train
        digest = hashlib.sha256()
        for p in list(state.generator.parameters()) + list(state.discriminator.parameters()):
            digest.update(p.detach().numpy().tobytes())
        loss = result.last_record["loss_d"]
        record = {{"digest": digest.hexdigest(), "loss": loss}}
        open("{folder}/rank%d.json" % world().rank, "w").write(json.dumps(record))
        shutdown()
    """)
    )
    result = torchrun(script=script)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


def test_two_processes_keep_identical_parameters_and_only_rank_0_writes(two_process_run):
    ranks = [json.loads((two_process_run / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["digest"] == ranks[1]["digest"]
    assert all(abs(r["loss"]) < 1e3 for r in ranks)
    run = two_process_run / "run"
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [2, 3, 4, 6]  # every 2nd step and the checkpoint at 3; one writer: none twice
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "step-000000.pt",
        "step-000003.pt",
        "step-000006.pt",
    ]
    config = json.loads((run / "config.json").read_text())
    assert config["processes"] == 2 and config["global_batch_size"] == 16


def test_a_two_process_checkpoint_resumes_in_one_process_and_back(two_process_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(two_process_run / "run", run)  # the shared run stays as the test above reads it
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "10", "--quiet")
    assert code == 0, err
    result = torchrun("train", "--resume", str(run), "--steps", "14", "--quiet")
    assert result.returncode == 0, result.stderr[-3000:]
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[-1] == 14, (steps, err, result.stdout[-2000:], result.stderr[-3000:])
    assert set(range(2, 15, 2)) <= set(steps)  # none missing
    assert [r["at_step"] for r in json.loads((run / "config.json").read_text())["resumed"]] == [6, 10]


# Rank 1's clock, as the bench's budget reads it, runs ten times fast: each rank's own clock differs (load,
# counting, a slower core), and a rank whose allowance ran out alone stopped warming up or measuring while the
# other stepped on into DDP's collective, both waiting there until killed (CI: 240 s). Every budget decision
# must be taken on rank 0's clock.
SKEWED_CLOCK = """
import os, sys, time, types
import ampgan.bench.deadline, ampgan.bench.measure
from ampgan.cli import main
if os.environ["RANK"] == "1":
    start = time.perf_counter()
    fast = types.SimpleNamespace(perf_counter=lambda: start + 10 * (time.perf_counter() - start))
    ampgan.bench.deadline.time = ampgan.bench.measure.time = fast
main(sys.argv[1:])
"""


def test_bench_under_two_processes_reports_per_rank_times_max_and_efficiency(tmp_path):
    out = tmp_path / "bench"
    script = tmp_path / "skewed_clock.py"
    script.write_text(SKEWED_CLOCK)
    result = torchrun(
        "bench",
        "--batch-sizes",
        "8",
        "--precisions",
        "fp32,bf16",
        "--width",
        "8",
        "--set",
        "model.z_dim=16",
        "--device",
        "cpu",
        "--set",
        "bench.warmup=1",
        "--steps",
        "3",
        "--set",
        "bench.min_seconds=0",
        "--max-seconds",
        "4",
        "--no-channels-last",
        "--out",
        str(out),
        script=script,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("results:") == 1  # rank 0 alone reports
    results = json.loads((out / "results.json").read_text())
    row, other = results["configs"]
    # Every rank timed the same rounds in the same shuffled order and stopped at the same round
    # (the stopping rule reads the slowest rank's times, which all ranks share).
    rounds = results["measurements"][0]["rounds"]
    assert rounds >= 3 and len(row["samples_s"]) == len(other["samples_s"]) == rounds
    assert row["processes"] == 2 and len(row["per_rank_samples_s"]) == rounds
    assert all(len(times) == 2 for times in row["per_rank_samples_s"])
    assert row["samples_s"] == [max(times) for times in row["per_rank_samples_s"]]
    assert 0 < row["scaling_efficiency"] <= 1.5 and len(row["local_samples_s"]) == rounds


def test_a_killed_rank_ends_the_job_with_a_clear_error(tmp_path):
    script = tmp_path / "die.py"
    script.write_text(
        textwrap.dedent("""
        import os, signal, sys
        import ampgan.training.loop as train_module
        from ampgan.cli import main
        original = train_module.train_step
        def step(state, next_batch):
            if os.environ["RANK"] == "1" and state.step == 4:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(state, next_batch)
        train_module.train_step = step
        main(sys.argv[1:])
    """)
    )
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import sys
        from ampgan.training.launcher import launch_on_this_machine
        sys.exit(launch_on_this_machine(2, {["train", *TINY, "--steps", "200", "--out", str(tmp_path / "run")]!r},
                                      target=[{str(script)!r}]))
    """),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode != 0
    assert "error: rank 1 was killed by signal 9" in result.stderr, result.stderr[-3000:]
    # The survivor says one line (no backend traceback) and the launcher's line comes last.
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: rank 1 was killed by signal 9")
    assert all(line.startswith(("error", "warning", "stopped")) for line in lines), lines


def test_wrong_launcher_settings_are_one_line_errors(tmp_path, monkeypatch, capsys):
    """Checked before the process group starts: in this process, with the launcher's variables set."""
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "1", "--out", str(tmp_path / "r"))
    assert code == 2 and "MASTER_ADDR is not set: start ampgan with torchrun" in err, err
    for name, value in {"RANK": "3", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}.items():
        monkeypatch.setenv(name, value)
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "1", "--out", str(tmp_path / "r"))
    assert code == 2 and "inconsistent launcher settings" in err, err
    assert not (tmp_path / "r").exists()


def test_compile_under_ddp_runs_the_compiled_modules(tmp_path):
    """Compile, then wrap: under two processes the DDP-wrapped module is the compiled one, and a
    step runs through compiled frames. (Backend `eager`: graph capture without code generation,
    so the check takes seconds.)"""
    script = tmp_path / "compiled.py"
    script.write_text(
        textwrap.dedent(f"""
        import json
        import torch
        from torch._dynamo.eval_frame import OptimizedModule
        from torch._dynamo.utils import counters
        from ampgan.config import config_from_options
        from ampgan.training.distributed import join_process_group, shutdown, world
        from ampgan.training.loop import prepare_run, run_training
        config = config_from_options(dataset="synthetic", width=8, z_dim=16, batch_size=8, device="cpu", steps=2,
                                     log_every=1, sample_every=1000, compile=True)
        device = join_process_group("cpu")
        result = run_training(prepare_run(config, device=device), "{tmp_path / "run"}", show_progress=False)
        train = result.state.train
        report = {{"g_wrapped": type(train.run_generator).__name__,
                   "g_inner_compiled": isinstance(train.run_generator.module, OptimizedModule),
                   "d_inner_compiled": isinstance(train.run_discriminator.module, OptimizedModule),
                   "d_for_g_compiled": isinstance(train.run_discriminator_for_g, OptimizedModule),
                   "compiled_frames": counters["stats"]["unique_graphs"]}}
        open("{tmp_path}/rank%d.json" % world().rank, "w").write(json.dumps(report))
        shutdown()
    """)
    )
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"AMPGAN_COMPILE_BACKEND": "eager"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        report = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert report["g_wrapped"] == "DistributedDataParallel"
        assert report["g_inner_compiled"] and report["d_inner_compiled"] and report["d_for_g_compiled"]
        assert report["compiled_frames"] > 0


def test_nproc_streams_the_ranks_output_live_and_stops_on_sigterm(tmp_path):
    """The ranks' warnings reach the terminal while the job runs (not when it ends), and SIGTERM to
    the launcher stops every rank after a checkpoint, with no traceback."""
    run = tmp_path / "run"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ampgan",
            "train",
            "--nproc",
            "2",
            *TINY,
            "--width",
            "12",
            "--steps",
            "100000",
            "--out",
            str(run),
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    try:
        lines = []
        for line in process.stderr:
            lines.append(line)
            if "warning: dimensions that are not multiples of 8" in line:
                break
        assert process.poll() is None, "".join(lines)  # still running: the line came live
        while not (run / "checkpoints").is_dir() or not any((run / "checkpoints").iterdir()):
            assert process.poll() is None, "".join(lines)
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        rest = process.stderr.read()
        code = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert code == 143, "".join(lines) + rest
    assert "stopped: the launcher received SIGTERM" in rest and "Traceback" not in rest, rest


@pytest.mark.parametrize(
    ("allowed", "local_size", "threads"), [({0, 1}, 2, 1), ({0, 1, 2, 3, 4, 5}, 2, 3), ({0}, 4, 1)]
)
def test_each_cpu_rank_gets_its_share_of_the_cores_it_may_run_on(monkeypatch, allowed, local_size, threads):
    """N CPU processes share the cores the affinity mask allows (a container, `taskset`), not every core of the
    machine: 2 ranks on 2 allowed cores of a 64-core machine get one thread each, never 32 that oversubscribe
    the two (the process group itself is injected: only the thread count is under test)."""
    import ampgan.training.distributed as distributed

    for name, value in {
        "TORCHELASTIC_RUN_ID": "r",
        "RANK": "0",
        "WORLD_SIZE": str(local_size),
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": str(local_size),
        "MASTER_ADDR": "localhost",
        "MASTER_PORT": "1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: allowed)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(distributed.dist, "init_process_group", lambda **kwargs: None)
    monkeypatch.setattr(distributed.dist, "new_group", lambda **kwargs: None)
    monkeypatch.setattr(distributed, "_world", distributed.World())
    before = torch.get_num_threads()
    try:
        assert distributed.join_process_group("cpu") == torch.device("cpu")
        assert torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(before)


def test_a_lazy_r1_step_trains_under_two_processes(tmp_path):
    """R1's input gradient moves no gradient into D's last bias; DDP (without find_unused_parameters) stopped the
    built-in r1 at its first R1 step ('D.head.bias ... got no gradient'). Its exact zero on the scores gives one."""
    run = tmp_path / "run"
    result = torchrun(
        "train", "--model", "r1", *TINY, "--set", "model.r1_every=2", "--steps", "4", "--out", str(run)
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps[-1] == 4 and any("loss_r1" in json.loads(line) or "r1_penalty" in line for line in
                                  (run / "metrics.jsonl").read_text().splitlines())  # fmt: skip
