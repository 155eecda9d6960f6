"""Everything a lent NVIDIA GPU should measure, in at most seven minutes of commands, delivered after every step.

    PYTHONPATH=src python benchmarks/gpu_sweep.py WORK [--deliver DIR]   # on the GPU machine (DIR: $OUT when set)
    PYTHONPATH=src python benchmarks/gpu_sweep.py WORK --rehearse        # the same steps on this CPU, tiny
    python benchmarks/gpu_sweep.py WORK --dry-run                       # the plan: commands, limits, their basis

Run from the repository root. Written for the lent machine: one H200, 15 minutes with its start, Python 3.12,
torch 2.11 with CUDA 13, 16 cores, no network, at most 8 files of 16 MiB back.

Steps, in order of value per second (the first two alone answer the study's question on a modern GPU):
  bench-acgan-2019    the study's network at CIFAR-10's shape (32x32x3), fp32/tf32/bf16/fp16, batch 64/1024/4096
  bench-acgan         the default model, the same precisions, batch 256/2048
  project-acgan-2019  the study's network projected onto this GPU beside what it measured (its op tables traced
                      here, on the GPU, when the bench has none)
  calibrate           every GEMM and convolution of the real step alone (CUDA events): a Hopper calibration table
  e2e-rows            five validation models' whole training steps, strict fp32 / TF32 / AMP fp16, as rows.csv rows
                      (benchmarks/validation/measure_rows.py): the projection checked end to end on this GPU
  cuda-tests          tests/test_on_gpu.py alone (the CPU tests have nothing to say on a GPU)
  train-sigterm       fp16 training stopped by SIGTERM once its first checkpoint exists
  train-resume        the same run resumed (--resume) for a few seconds more
  bench-compiled      one network compiled in one precision (bf16) against the same step eager
Decisions the sweep skips, and why: the memory format (--no-channels-last: NCHW everywhere, so every precision
is timed alike), the precision choice (--precisions given), torch.compile in train (--no-compile); `compare` is
not run (its quality evaluation does not fit).

What comes back ($OUT, at most 6 files at any moment, 8 allowed): summary.json and summary.txt (the self-check),
sweep.tar.gz (the work folder without checkpoints), calibration-kernels.csv/.json. All are written atomically
(a temporary file in OUT, renamed), first before any step runs, then after every step, so a sweep killed at any
moment (SIGKILL included) leaves a readable summary. The supervisor below imports nothing of ampgan nor torch
(a broken install still leaves a summary); each step is a child process in its own process group that the
kernel kills when the supervisor dies (PR_SET_PDEATHSIG). A step gets SIGTERM `grace` seconds before its limit
(benches, training and the tests then write what they finished) and SIGKILL at it; the sweep itself on
SIGTERM/SIGINT stops the running step the same way, delivers, and exits 143/130. Exit 0 when every step did
what it should and every check of the self-check holds, 1 otherwise, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import json
import os
import resource
import shlex
import signal
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).resolve()
# Every child starts as ampgan's system/processes.py starts them (-P: never the current folder's modules); the
# supervisor spells it here because it imports nothing of ampgan (a broken install still leaves its summary).
PYTHON = [sys.executable, "-P"]
AMPGAN = [*PYTHON, "-m", "ampgan"]
TOTAL_LIMIT_S = 415  # the steps' limits together: 7 of the lent machine's 15 minutes (its start takes 1-2)
MAX_DELIVERED_BYTES = 15 * 2**20  # one file back may be 16 MiB
MAX_OUT_FILES = 8  # files back from $OUT
DELIVERED = ("summary.json", "summary.txt", "sweep.tar.gz", "calibration-kernels.csv", "calibration-kernels.json")
PARTIAL = ".partial"  # a file being written in OUT, renamed when complete (one at a time: 6 files at most)
STUDY = "bench-acgan-2019"
# A rehearsal's limits are the GPU's times this: on a shared 2-core CPU the project step's trace of acgan-2019
# took 23 s of its 30 and a resumed run's start 15 of its 20 (load 13), at time scale 1.
REHEARSAL_TIME_SCALE = 2.0
# A speedup interval whose low end clears this shows a mode really differs from strict fp32.
DIFFERS_BY = 1.05
LARGE_BATCH = 1024  # from here the study's network is compute-bound on an H200 (projected), and TF32 must show


@dataclass(frozen=True)
class Sizes:
    """What the steps run at: on the GPU, or rehearsed on a CPU (two minutes on a busy 2-core machine)."""

    device: str
    precisions: str  # the benches'
    batches_2019: str
    batches_acgan: str
    bench_max_seconds: float  # --max-seconds per batch size: warm-ups and measured rounds of every precision
    acgan_max_seconds: float  # the same for the default model
    bench_warmup: int
    bench_steps: int
    trace_batches: str  # the project step's op-table trace (two batch sizes: the table is affine in the batch)
    trace_precisions: str  # traced there (tf32 runs fp32's operations; bf16 and fp16 stand in for each other)
    calibration: tuple[str, ...]  # kernel_calibration.py's options
    train_size: tuple[str, ...]  # train-sigterm's model and batch options (none: the defaults)
    after_checkpoint_s: float  # train-sigterm: SIGTERM this long after the first checkpoint appears
    resume_more_s: float  # train-resume: train this much longer than the run had
    compiled_batch: int
    compiled_precision: str
    compiled_seconds: float  # eager-against-compiled rounds after the compile
    e2e_models: str  # validation models whose whole steps e2e-rows times (measure_rows.py's --models)
    e2e_seconds: float  # its --seconds: per precision mode and round
    model_acgan: tuple[str, ...] = ()  # the default model's options (none: its defaults)


GPU = Sizes(
    device="cuda",
    precisions="fp32,tf32,bf16,fp16",
    batches_2019="64,1024,4096",
    batches_acgan="256,2048",
    bench_max_seconds=12.0,
    acgan_max_seconds=12.0,
    bench_warmup=2,
    bench_steps=3,
    trace_batches="8,16",
    trace_precisions="fp32,bf16,fp16",
    calibration=("--batch-sizes", "256,2048", "--precisions", "fp32,tf32,bf16,fp16", "--models", "acgan-2019,acgan"),
    train_size=(),
    after_checkpoint_s=6.0,
    resume_more_s=6.0,
    compiled_batch=1024,
    compiled_precision="bf16",
    compiled_seconds=8.0,
    e2e_models="resnet50:256,ssd300:128,vgg16:128,ncf:1048576,hifigan:128",
    e2e_seconds=0.6,
)
# The rehearsal runs the real networks (acgan-2019 at 32x32x3, the default acgan) at batch 2, one warm-up, two
# rounds or so, in fp32 and bf16 (tf32 is CUDA's; fp16's acgan-2019 step takes 4 s on a 2-core CPU), fp16 with
# its loss scaler in training, checkpointing and resuming; the op tables traced at batch 2 and 4; the calibration
# at width 8 (--tiny); the compiled step with AMPGAN_COMPILE_BACKEND=eager.
REHEARSAL = Sizes(
    device="cpu",
    precisions="fp32,bf16",
    batches_2019="2",
    batches_acgan="2",
    bench_max_seconds=6.0,
    acgan_max_seconds=3.0,
    bench_warmup=1,
    bench_steps=2,
    trace_batches="2,4",
    trace_precisions="fp32",
    calibration=("--batch-sizes", "4", "--precisions", "fp32,bf16", "--models", "acgan", "--tiny", "--repeats", "1"),
    train_size=("--width", "8", "--batch-size", "8"),
    after_checkpoint_s=1.0,
    resume_more_s=1.0,
    compiled_batch=2,
    compiled_precision="bf16",
    compiled_seconds=1.0,
    e2e_models="ncf:64",
    e2e_seconds=0.05,
)


@dataclass
class Step:
    name: str
    argv: list[str]
    limit: int  # seconds, SIGKILL then
    basis: str  # why the limit fits the work on an H200, in one line, from measured or published numbers
    writes: str = ""  # what it leaves in the work folder when it finishes (or is stopped)
    ok_exits: tuple[int, ...] = (0,)
    sigterm_once: str = ""  # SIGTERM once this file exists (and after_s more)
    after_s: float = 0.0
    env: dict = field(default_factory=dict)
    argv_after: object = None  # a function of the work folder giving the argv, when it depends on earlier steps
    grace: int = 8  # SIGTERM this long before the limit: the time to write what was finished

    def command(self, work: Path) -> list[str]:
        return self.argv_after(work) if self.argv_after else self.argv


def _bench(
    name: str, work: Path, model: list[str], batches: str, max_seconds: float, sizes: Sizes, limit: int, basis: str
) -> Step:
    return Step(
        name,
        [
            *AMPGAN,
            "bench",
            *model,
            "--device",
            sizes.device,
            "--batch-sizes",
            batches,
            "--precisions",
            sizes.precisions,
            "--no-channels-last",
            "--no-trace",  # the first minute measures only; the project step traces (on the GPU) what it needs
            "--set",
            f"bench.warmup={sizes.bench_warmup}",
            "--steps",
            str(sizes.bench_steps),
            "--set",
            "bench.min_seconds=0",  # a quiet GPU settles in a few rounds; --max-seconds caps the unsettled
            "--max-seconds",
            f"{max_seconds:g}",
            "--out",
            str(work / name),
            "--overwrite",
        ],
        limit,
        basis,
        writes=f"{name}/results.json",
    )


def _resume_argv(run: Path, more_s: float):
    """`train --resume` for `more_s` seconds beyond what the run trained: its time budget counts the whole run."""

    def argv(_work: Path) -> list[str]:
        trained = 0.0
        metrics = run / "metrics.jsonl"
        if metrics.is_file():
            for line in metrics.read_text().splitlines():
                try:
                    trained = max(trained, float(json.loads(line).get("train_seconds", 0.0)))
                except (ValueError, AttributeError):
                    continue
        return [*AMPGAN, "train", "--resume", str(run), "--time-budget", f"{trained + more_s:.1f}s", "--quiet"]

    return argv


def plan(work: Path, rehearse: bool = False, time_scale: float = 1.0) -> list[Step]:
    """Every step, in order of value per second; their limits sum to at most TOTAL_LIMIT_S (times `time_scale`,
    which also scales the benches' --max-seconds: a rehearsal on a loaded machine).

    Each limit's basis (the `basis` line) rests on these numbers: the study's network projected onto an H200 by
    `ampgan project` from its op tables and NVIDIA's datasheet (benchmarks/results/projection-step-band-acgan2019-
    amd-zen3-2026-12-02: fp32 46 ms [25-79] at batch 2048, 28 px; x2 for 4096 and x1.31 for 32 px: 120 ms
    [66-206]; tf32 47, bf16 30, fp16 30 ms; host-bound at 4-6 ms below batch 256); a bf16 8192^3 product at 788
    TFLOP/s and 4.3 TB/s copies, measured on a lent H200 machine of this kind on 2026-10-28; torch's import, CUDA's
    context and cuDNN's engines from a cold disk (~3 GB of cu130 libraries) taken as 15 s for the first process
    and 8 s for later ones (`import torch, ampgan.cli` took 7.2 s on a 2-core Zen 4 at load 10, page cache warm);
    inductor's cold compile of the default model's step, 58-70 s on a 2-core CPU (benchmarks/results/cpu-speed-
    intel-amx-2core-2026-11-30: C++ codegen on 2 cores; Triton's on 16 cores is the part that parallelises)."""
    sizes = REHEARSAL if rehearse else GPU
    if time_scale != 1.0:
        sizes = replace(
            sizes,
            bench_max_seconds=sizes.bench_max_seconds * time_scale,
            acgan_max_seconds=sizes.acgan_max_seconds * time_scale,
        )
    study = ["--model", "acgan-2019", "--image-size", "32", "--set", "data.channels=3"]
    steps = [
        _bench(
            STUDY,
            work,
            study,
            sizes.batches_2019,
            sizes.bench_max_seconds,
            sizes,
            65,
            "15 s cold start + 3 x (--max-seconds 12 + 1 s building) + 4 s figures = 58 s (a 4096 round: 0.23-0.48 s)",
        ),
        _bench(
            "bench-acgan",
            work,
            ["--model", "acgan", *sizes.model_acgan],
            sizes.batches_acgan,
            sizes.acgan_max_seconds,
            sizes,
            40,
            "8 s start + 2 x (--max-seconds 12 + 1 s building) + 4 s figures = 38 s (steps lighter than the study's)",
        ),
    ]
    project = work / "project-acgan-2019"
    steps.append(
        Step(
            "project-acgan-2019",
            [
                *PYTHON,
                str(SCRIPT),
                str(project),
                "--project-step",
                str(work / STUDY / "results.json"),
                "--device",
                sizes.device,
                "--trace-batches",
                sizes.trace_batches,
                "--trace-precisions",
                sizes.trace_precisions,
                "--max-seconds",
                f"{10 * time_scale:g}",
            ],
            30,
            "8 s start + 3 op tables, 4-16 host-bound traced steps each (cap 10 s) + 6 s projecting 7 GPUs = 24 s",
            writes="project-acgan-2019/projection/projection.json",
        )
    )
    steps.append(
        Step(
            "calibrate",
            [
                *PYTHON,
                str(ROOT / "benchmarks" / "kernel_calibration.py"),
                str(work / "calibration" / "kernels.csv"),
                "--device",
                sizes.device,
                *sizes.calibration,
            ],
            45,
            "8 s start + 16 configurations x (0.4 s building + ~40 kernels x >=3 calls of <= 2 ms) = 24 s; x1.8",
            writes="calibration/kernels.csv",
        )
    )
    steps.append(
        Step(
            "e2e-rows",
            [
                *PYTHON,
                str(ROOT / "benchmarks" / "validation" / "measure_rows.py"),
                str(work / "e2e-rows" / "rows.csv"),
                "--device",
                sizes.device,
                "--models",
                sizes.e2e_models,
                "--seconds",
                f"{sizes.e2e_seconds:g}",
                "--rounds",
                "3",
            ],
            55,
            "10 s start + 5 models x (3 rounds x 3 modes x (0.6 s + a warm-up step) + building) = 50 s; a CSV a model",
            writes="e2e-rows/rows.csv",
        )
    )
    steps.append(
        Step(
            "cuda-tests",
            [
                *PYTHON,
                str(SCRIPT),
                str(work),
                "--pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "tests/test_on_gpu.py",
                "--junitxml",
                str(work / "cuda-tests.xml"),
            ],
            60,
            "10 s start + 8 tests (6 trainings of <= 8 ms-steps, a 4-GFLOP float64 conv on 16 cores) = 25 s; x2",
            writes="cuda-tests.xml",
            grace=10,
        )
    )
    run = work / "resume-run"
    steps.append(
        Step(
            "train-sigterm",
            [
                *AMPGAN,
                "train",
                "--device",
                sizes.device,
                "--precision",
                "fp16",
                "--dataset",
                "synthetic",
                *sizes.train_size,
                "--no-compile",
                "--no-channels-last",
                "--time-budget",
                "120s",
                "--checkpoint-every",
                "50",
                "--quiet",
                "--out",
                str(run),
                "--overwrite",
            ],
            25,
            "8 s start + checkpoint at step 0 + 6 s more of ~5 ms steps + the checkpoint SIGTERM writes = 16 s",
            writes="resume-run/checkpoints",
            ok_exits=(143,),
            sigterm_once=str(run / "checkpoints" / "step-000000.pt"),
            after_s=sizes.after_checkpoint_s,
            grace=5,
        )
    )
    steps.append(
        Step(
            "train-resume",
            [],
            20,
            "8 s start + loading the checkpoint + 6 s of training = 15 s",
            writes="resume-run/metrics.jsonl",
            argv_after=_resume_argv(run, sizes.resume_more_s),
            grace=5,
        )
    )
    steps.append(
        Step(
            "bench-compiled",
            [
                *PYTHON,
                str(SCRIPT),
                str(work / "bench-compiled"),
                "--compiled-step",
                "--device",
                sizes.device,
                "--batch-size",
                str(sizes.compiled_batch),
                "--precision",
                sizes.compiled_precision,
                "--max-seconds",
                f"{sizes.compiled_seconds * time_scale:g}",
            ],
            75,
            "8 s start + cold compile (58-70 s on 2 cores; 16 here) + 8 s rounds; last, killed it says how long",
            writes="bench-compiled/results.json",
            env={"AMPGAN_COMPILE_BACKEND": "eager"} if rehearse else {},
        )
    )
    # A rehearsal's steps run one thread each unless told otherwise: on a shared 2-core CPU two threads spin at
    # every parallel region's barrier (a traced acgan-2019 step took 7.9 s so at load 10, against 1 s alone).
    threads = {name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if rehearse and name not in os.environ}
    for step in steps:
        step.limit = round(step.limit * time_scale)
        step.grace = round(step.grace * time_scale)
        step.env = {**threads, **step.env}
    return steps


# --- running a step ---------------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
try:
    _LIBC = ctypes.CDLL(None, use_errno=True)  # loaded before any fork: the child only calls into it
except OSError:  # not Linux: no parent-death signal; the supervisor still ends its steps on every path it lives
    _LIBC = None


def _child_setup(parent: int):
    """Run in the child between fork and exec: its own process group (the step's tree is signalled together,
    never the supervisor), and SIGKILL when the supervisor dies, however it dies."""

    def setup() -> None:
        os.setpgid(0, 0)
        if _LIBC is not None and hasattr(_LIBC, "prctl"):
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the supervisor died before the signal was asked for
            os._exit(137)

    return setup


def start_child(argv: list[str], log, env: dict, cwd: Path = ROOT) -> subprocess.Popen:
    return subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env, preexec_fn=_child_setup(os.getpid())
    )


def _signal_group(process: subprocess.Popen, how: int) -> None:
    try:
        os.killpg(process.pid, how)
    except (ProcessLookupError, PermissionError):
        pass


def _cpu_s(usage) -> float:
    return usage.ru_utime + usage.ru_stime


def _child_env(extra: dict) -> dict:
    return {
        **os.environ,
        **extra,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])),
        "PYTHONUNBUFFERED": "1",
    }


class StopFlag:
    """Set by the supervisor's SIGTERM/SIGINT handler; the running step is stopped as at its limit."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __bool__(self) -> bool:
        return self.signum is not None


def run_step(step: Step, work: Path, deadline: float, stop: StopFlag | None = None) -> dict:
    """Run one step to its end, its SIGTERM (limit - grace, or the sweep's own SIGTERM) or its SIGKILL (limit),
    whichever comes first; `deadline`: the sweep's own end, which no step runs past."""
    stop = stop if stop is not None else StopFlag()
    argv = step.command(work)
    log = work / f"{step.name}.log"
    started, cpu_before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    kill_at = min(started + step.limit, deadline)
    term_at = kill_at - step.grace
    signals: list[str] = []
    with open(log, "w") as handle:
        process = start_child(argv, handle, _child_env(step.env))
        trigger_seen_at = None
        while process.poll() is None:
            now = time.monotonic()
            if step.sigterm_once and trigger_seen_at is None and Path(step.sigterm_once).exists():
                trigger_seen_at = now
            asked = trigger_seen_at is not None and now >= trigger_seen_at + step.after_s
            if now >= kill_at:
                _signal_group(process, signal.SIGKILL)
                signals.append("SIGKILL")
                process.wait()
                break
            if (now >= term_at or asked or stop) and "SIGTERM" not in signals:
                _signal_group(process, signal.SIGTERM)
                signals.append("SIGTERM")
                if stop:  # the sweep was asked to stop: the step gets its grace, not the rest of its limit
                    kill_at = min(kill_at, now + step.grace)
            time.sleep(0.05)
        code = process.returncode
        _signal_group(process, signal.SIGKILL)  # whatever the step left running in its group ends with it
    exit_code = 128 - code if code is not None and code < 0 else code  # a signal's death as the shell says it
    written = (work / step.writes).exists() if step.writes else True
    if "SIGKILL" in signals:
        status = "killed at its limit" + ("" if written else f", no {step.writes}")
    elif stop and "SIGTERM" in signals:
        status = "stopped: the sweep got a signal" + (", wrote what it finished" if step.writes and written else "")
    elif exit_code in step.ok_exits and written:
        status = "ok"
    elif "SIGTERM" in signals and not step.sigterm_once:
        status = "stopped at its limit (SIGTERM), wrote what it finished" if written else "stopped at its limit"
    else:
        status = f"failed (exit {exit_code})" + ("" if written else f", no {step.writes}")
    return {
        "name": step.name,
        "command": shlex.join(argv),
        "exit": exit_code,
        "signals": signals,
        "status": status,
        "seconds": round(time.monotonic() - started, 1),
        # The processor time of the step's processes (what it costs a shared machine; wall time is the load's)
        "cpu_s": round(_cpu_s(resource.getrusage(resource.RUSAGE_CHILDREN)) - _cpu_s(cpu_before), 1),
        "limit": step.limit,
        "log": log.name,
        "log_tail": log.read_text(errors="replace").splitlines()[-3:],
    }


# --- reading what the steps wrote (no ampgan: plain JSON, CSV and JUnit) ----------------------------------------


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def bench_rows(work: Path) -> tuple[list[dict], list[dict]]:
    """(every speedup over fp32 the benches measured, every configuration with its status and % of peak)."""
    speedups, configs = [], []
    for bench in (STUDY, "bench-acgan"):
        results = _json(work / bench / "results.json")
        if not isinstance(results, dict):
            continue
        for pair in results.get("speedups") or []:
            speedups.append(
                {
                    "bench": bench,
                    "batch_size": pair.get("batch_size"),
                    "precision": pair.get("precision"),
                    "speedup": pair.get("estimate"),
                    "low": pair.get("low"),
                    "high": pair.get("high"),
                    "settled": pair.get("settled"),
                    "step_ms": (pair.get("step_s") or 0) * 1e3 or None,
                }
            )
        for config in results.get("configs") or []:
            configs.append(
                {
                    "bench": bench,
                    "batch_size": config.get("batch_size"),
                    "precision": config.get("precision"),
                    "status": config.get("status"),
                    "reason": str(config.get("reason") or "")[:160],
                    "ms": ((config.get("stats") or {}).get("median_s") or 0) * 1e3 or None,
                    "percent_of_peak": config.get("percent_of_peak"),
                }
            )
    return speedups, configs


def projected_against_measured(work: Path) -> list[dict] | None:
    """Each measured configuration of the study's network beside this GPU's projection; None: no projection."""
    document = _json(work / "project-acgan-2019" / "projection" / "projection.json")
    if not isinstance(document, dict):
        return None
    return [
        {
            "batch_size": row.get("batch_size"),
            "precision": row.get("precision"),
            "measured_ms": row.get("ms_per_step"),
            "projected_ms": row.get("projected_for_it_ms"),
            "projected_low_ms": row.get("projected_low_ms"),
            "projected_high_ms": row.get("projected_high_ms"),
            "measured_over_projected": row.get("measured_over_projected"),
        }
        for row in document.get("measured_here") or []
    ]


def calibration_summary(work: Path) -> dict:
    table = work / "calibration" / "kernels.csv"
    if not table.is_file():
        return {"rows": 0, "by_op": {}, "precisions": [], "sidecar": False}
    with open(table, newline="") as handle:
        rows = list(csv.DictReader(handle))
    by_op: dict[str, int] = {}
    for row in rows:
        by_op[row.get("op") or "?"] = by_op.get(row.get("op") or "?", 0) + 1
    precisions = sorted({row.get("precision") for row in rows if row.get("precision")})
    return {
        "rows": len(rows),
        "by_op": by_op,
        "precisions": precisions,
        "sidecar": _json(table.with_suffix(".json")) is not None,
    }


def cuda_tests(work: Path) -> dict | None:
    """The JUnit file's counts (written also when the tests were stopped by SIGTERM); None: no file."""
    try:
        root = ElementTree.parse(work / "cuda-tests.xml").getroot()
    except (OSError, ElementTree.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {key: sum(int(s.get(key, 0)) for s in suites) for key in ("tests", "failures", "errors", "skipped")}
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    counts["failed_names"] = [
        case.get("name")
        for suite in suites
        for case in suite.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]
    return counts


def compiled_result(work: Path) -> dict | None:
    document = _json(work / "bench-compiled" / "results.json")
    return document if isinstance(document, dict) else None


# --- the self-check: each condition named, each able to fail ---------------------------------------------------


def _fmt(value, digits=2) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "-"


def checks(document: dict) -> list[dict]:
    """[{"name", "status": ok | FAIL | n/a, "detail"}] of a finished (or partial) sweep's document. n/a only in a
    rehearsal, for what only a GPU shows; on a GPU, a check without the data it needs fails."""
    rehearse = document["rehearse"]
    out = []

    def check(name: str, failed: bool, detail: str, applicable: bool = True) -> None:
        status = "n/a" if not applicable else "FAIL" if failed else "ok"
        out.append({"name": name, "status": status, "detail": detail})

    steps = document["steps"]
    not_ok = [f"{s['name']}: {s['status']}" for s in steps if s["status"] != "ok"]
    missing = [*document.get("not_run", []), *([document["running"]] if document.get("running") else [])]
    missing += document.get("to_run", [])
    check(
        "steps",
        bool(not_ok or missing),
        "; ".join(not_ok + [f"{name}: not run" for name in missing]) or f"all {len(steps)} did what they should",
    )

    speedups, configs = document["speedups"], document["configs"]
    study = [r for r in speedups if r["bench"] == STUDY and isinstance(r.get("speedup"), (int, float))]
    check(
        "study-speedup",
        not study,
        f"{len(study)} speedups of acgan-2019 over fp32 measured" if study else "no speedup of acgan-2019 measured",
    )

    # A share of the peak over 100% is impossible: a FLOP count, a peak, or the clock around the step is wrong.
    percents = [c for c in configs if isinstance(c.get("percent_of_peak"), (int, float))]
    over = [c for c in percents if c["percent_of_peak"] > 100]
    if over:
        detail = "over 100% of the peak: " + "; ".join(
            f"{c['bench']} batch {c['batch_size']} {c['precision']} {c['percent_of_peak']:.0f}%" for c in over
        )
    elif percents:
        detail = f"{len(percents)} configurations, at most {max(c['percent_of_peak'] for c in percents):.1f}%"
    else:
        detail = "no % of peak measured"
    check("percent-of-peak", bool(over) or (not rehearse and not percents), detail)

    # TF32 on (tf32) against off (fp32) where the matrix units decide the step: alike means a switch did nothing.
    tf32 = [r for r in speedups if r["precision"] == "tf32" and (r["batch_size"] or 0) >= LARGE_BATCH]
    differs = [r for r in tf32 if isinstance(r.get("low"), (int, float)) and r["low"] > DIFFERS_BY]
    shown = ", ".join(
        f"{_fmt(r['speedup'])}x [{_fmt(r['low'])}-{_fmt(r['high'])}] at {r['batch_size']} ({r['bench']})"
        for r in (differs or tf32)
    )
    if differs:
        detail = f"tf32 over strict fp32: {shown}"
    elif tf32:
        detail = (
            f"tf32 timed like strict fp32 at every batch of {LARGE_BATCH} or more ({shown}): a TF32 switch did nothing"
        )
    else:
        detail = f"no tf32 speedup measured at a batch of {LARGE_BATCH} or more"
    check("tf32-switch", not differs, detail, applicable=not rehearse)

    projected = document["projected_vs_measured"]
    compared = [r for r in projected or [] if isinstance(r.get("projected_ms"), (int, float))]
    outside = [
        r
        for r in compared
        if not (r["projected_low_ms"] or 0) <= (r["measured_ms"] or 0) <= (r["projected_high_ms"] or float("inf"))
    ]
    check(
        "projection-band",
        bool(outside) or not compared,
        (
            "; ".join(
                f"batch {r['batch_size']} {r['precision']}: measured {_fmt(r['measured_ms'], 1)} ms outside "
                f"[{_fmt(r['projected_low_ms'], 1)}-{_fmt(r['projected_high_ms'], 1)}]"
                for r in outside
            )
            if outside
            else f"{len(compared)} measured configurations inside the projected band"
            if compared
            else "no projection for this device to hold the measurements against"
        ),
        applicable=not rehearse,
    )

    calibration = document["calibration"]
    asked = document["calibration_precisions"]
    absent = [p for p in asked if p not in calibration["precisions"]]
    check(
        "calibration-precisions",
        bool(absent) or not calibration["sidecar"],
        (f"no kernel rows for {', '.join(absent)}" if absent else f"rows for {', '.join(asked)}")
        + ("" if calibration["sidecar"] else "; no sidecar"),
    )

    tests = document["cuda_tests"]
    ran = tests is not None and tests["passed"] > 0
    bad = tests is not None and (tests["failures"] or tests["errors"])
    if tests is None:
        detail = "no JUnit file"
    else:
        detail = (
            f"{tests['passed']} passed, {tests['failures']} failed, {tests['errors']} errors, "
            f"{tests['skipped']} skipped" + (f" ({', '.join(tests['failed_names'])})" if tests["failed_names"] else "")
        )
        if not rehearse and not ran:
            detail += ": no GPU test passed on a GPU"
    check("cuda-tests", tests is None or bool(bad) or (not rehearse and not ran), detail)
    return out


def summarise(document: dict, work: Path) -> dict:
    """The document with what the work folder holds now, its checks and its text."""
    document["stamp"] = stamp(work)
    document["speedups"], document["configs"] = bench_rows(work)
    document["projected_vs_measured"] = projected_against_measured(work)
    document["calibration"] = calibration_summary(work)
    document["cuda_tests"] = cuda_tests(work)
    document["compiled"] = compiled_result(work)
    for step in document["steps"]:  # a bench whose every configuration failed did not do what it should
        mine = [c for c in document["configs"] if c["bench"] == step["name"]]
        if step["status"] == "ok" and mine and not any(c["status"] == "ok" for c in mine):
            step["status"] = f"failed: no configuration measured ({mine[0]['status']}: {mine[0]['reason']})"
    document["checks"] = checks(document)
    failed = [c["name"] for c in document["checks"] if c["status"] == "FAIL"]
    document["ok"] = document["state"] == "finished" and not failed
    document["failed_checks"] = failed
    document["self_check"] = self_check_text(document)
    return document


def self_check_text(document: dict) -> list[str]:
    machine = document.get("stamp") or {}
    lines = [
        f"SELF-CHECK ({machine.get('gpu') or machine.get('hardware') or 'device not yet known'}, "
        f"torch {machine.get('torch', '?')}, {'rehearsal on the CPU' if document['rehearse'] else 'GPU run'}; "
        f"{document['state']})"
    ]
    for step in document["steps"]:
        lines.append(f"  {step['name']:<20} {step['status']:<48} {step['seconds']:>6.1f} s of {step['limit']}")
    if document.get("running"):
        lines.append(f"  {document['running']:<20} running (if this is the last summary, the sweep was killed here)")
    for name in document.get("to_run", []):
        lines.append(f"  {name:<20} not run yet")
    for name in document.get("not_run", []):
        lines.append(f"  {name:<20} not run: {document.get('not_run_why', 'the sweep time was spent')}")
    lines.append("  measured speedup over fp32 [95% interval] (step ms):")
    for row in document["speedups"]:
        lines.append(
            f"    {row['bench']:<18} batch {row['batch_size']:>5} {row['precision']:>5}: "
            f"{_fmt(row['speedup'])}x [{_fmt(row['low'])}-{_fmt(row['high'])}] ({_fmt(row['step_ms'], 1)})"
            + ("" if row.get("settled") else " unsettled")
        )
    for row in document["configs"]:
        if row["status"] != "ok":
            lines.append(
                f"    {row['bench']:<18} batch {row['batch_size']:>5} {row['precision']:>5}: {row['status']} "
                f"({row['reason']})"
            )
    if not document["speedups"]:
        lines.append("    none measured")
    lines.append("  projected vs measured (acgan-2019 on this device, ms per step; measured / projected):")
    projected = document["projected_vs_measured"]
    compared = [r for r in projected or [] if r["projected_ms"] is not None]
    for row in compared:
        lines.append(
            f"    batch {row['batch_size']:>5} {row['precision']:>5}: measured {_fmt(row['measured_ms'], 2)}, "
            f"projected {_fmt(row['projected_ms'], 2)} [{_fmt(row['projected_low_ms'], 2)}-"
            f"{_fmt(row['projected_high_ms'], 2)}], ratio {_fmt(row['measured_over_projected'])}"
        )
    if not compared:
        lines.append(
            "    none: "
            + (
                "no projection was written"
                if projected is None
                else "no configuration was measured"
                if not projected
                else "this device is not a GPU of the table (system/gpus.csv)"
            )
        )
    calibration = document["calibration"]
    lines.append(
        f"  calibration: {calibration['rows']} kernels {calibration['by_op']}, precisions "
        f"{','.join(calibration['precisions']) or '-'}, sidecar {'written' if calibration['sidecar'] else 'missing'}"
    )
    compiled = document.get("compiled")
    if compiled:
        interval = compiled.get("speedup") or {}
        if compiled.get("compile_ran_s") is not None:
            found = f"the compile had run {_fmt(compiled['compile_ran_s'], 1)} s"
        else:
            found = (
                f"first compile {_fmt(compiled.get('first_compile_s'), 1)} s, compiled over eager "
                f"{_fmt(interval.get('estimate'))}x [{_fmt(interval.get('low'))}-{_fmt(interval.get('high'))}]"
            )
        lines.append(
            f"  compiled {compiled.get('precision')} at batch {compiled.get('batch_size')} "
            f"({compiled.get('compile_backend')} backend): {compiled.get('status')}; {found}"
        )
    lines.append("  checks:")
    for item in document["checks"]:
        lines.append(f"    {item['status']:<4} {item['name']:<22} {item['detail']}")
    if document["state"] != "finished":
        verdict = f"not finished ({document['state']})"
    elif document["failed_checks"]:
        verdict = "NOT ok: " + ", ".join(document["failed_checks"])
    else:
        verdict = "every step did what it should and every check holds"
    lines.append(f"  RESULT: {verdict}")
    return lines


# --- delivery: atomic, at most 6 files in OUT at any moment ----------------------------------------------------


def _write_atomically(path: Path, write) -> None:
    partial = path.with_name(path.name + PARTIAL)
    with open(partial, "wb") as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)


def pack(work: Path, tarball: Path, leave_out=(".pt",)) -> list[str]:
    """The work folder as one .tar.gz without checkpoints; figures left out too when it would not come back."""
    left_out = ["checkpoints (*.pt)"]
    for suffixes in (leave_out, (*leave_out, ".png")):

        def write(handle, suffixes=suffixes) -> None:
            with tarfile.open(fileobj=handle, mode="w:gz", compresslevel=6) as archive:
                for path in sorted(work.rglob("*")):
                    if path.is_file() and not path.name.endswith(suffixes):
                        try:
                            archive.add(path, arcname=str(Path(work.name) / path.relative_to(work)))
                        except OSError:  # a file a step removed meanwhile
                            continue

        _write_atomically(tarball, write)
        if tarball.stat().st_size <= MAX_DELIVERED_BYTES:
            break
        left_out = ["checkpoints (*.pt)", "figures (*.png): the tarball was over 15 MiB with them"]
    return left_out


def write_summary(document: dict, deliver_dir: Path) -> None:
    """The text, then the JSON: where summary.json exists, so does a summary.txt (killed between the two, the text
    is one state behind)."""
    lines = ("\n".join(document["self_check"]) + "\n").encode()
    _write_atomically(deliver_dir / "summary.txt", lambda handle: handle.write(lines))
    text = json.dumps(document, indent=2).encode()
    _write_atomically(deliver_dir / "summary.json", lambda handle: handle.write(text))


def deliver(document: dict, work: Path, deliver_dir: Path) -> list[str]:
    """The tarball, the calibration table and its sidecar, then the summary (last: it describes the others)."""
    document["left_out_of_tarball"] = pack(work, deliver_dir / "sweep.tar.gz")
    for name in ("kernels.csv", "kernels.json"):
        source = work / "calibration" / name
        if source.is_file():
            data = source.read_bytes()
            _write_atomically(deliver_dir / f"calibration-{name}", lambda handle, data=data: handle.write(data))
    files = sorted(p.name for p in deliver_dir.iterdir() if p.name != "summary.json" + PARTIAL)
    document.setdefault("deliveries", []).append({"state": document["state"], "files": len(files)})
    write_summary(document, deliver_dir)
    return sorted(p.name for p in deliver_dir.iterdir())


def _check_folders(work: Path, deliver_dir: Path) -> str | None:
    """Why these folders cannot be used (one line), or None."""
    if deliver_dir == work or deliver_dir.is_relative_to(work) or work.is_relative_to(deliver_dir):
        return (
            f"the work folder {work} and the deliver folder {deliver_dir} overlap: give a work folder outside "
            f"{deliver_dir} (at most {MAX_OUT_FILES} files come back from it)"
        )
    if deliver_dir.exists() and not deliver_dir.is_dir():
        return f"{deliver_dir} is not a folder: give --deliver a folder"
    foreign = [p.name for p in deliver_dir.iterdir() if p.name not in DELIVERED] if deliver_dir.is_dir() else []
    foreign = [name for name in foreign if not name.endswith(PARTIAL)]
    if foreign:
        return (
            f"{deliver_dir} already holds {len(foreign)} other file(s) ({', '.join(sorted(foreign)[:3])}): at most "
            f"{MAX_OUT_FILES} files come back, so give an empty folder"
        )
    return None


# --- the supervisor ----------------------------------------------------------------------------------------------


def new_document(steps: list[Step], rehearse: bool) -> dict:
    sizes = REHEARSAL if rehearse else GPU
    calibration_precisions = sizes.calibration[sizes.calibration.index("--precisions") + 1].split(",")
    return {
        "format": "ampgan-gpu-sweep/2",
        "rehearse": rehearse,
        "state": "starting",
        "stamp": {},
        "plan": [{"name": s.name, "limit": s.limit, "basis": s.basis} for s in steps],
        "steps": [],
        "running": None,
        "to_run": [s.name for s in steps],
        "not_run": [],
        "calibration_precisions": calibration_precisions,
    }


NVIDIA_SMI = [
    "nvidia-smi",
    "--query-gpu=name,driver_version,clocks.max.sm,clocks.sm,power.limit,mig.mode.current,temperature.gpu",
    "--format=csv",
]


def stamp(work: Path) -> dict:
    """The machine, without importing torch here: this process, the first bench's environment stamp (torch, CUDA,
    cuDNN, the device), and nvidia-smi's answer (clocks, power limit, MIG), as far as each exists yet."""
    import platform

    found = {"python": platform.python_version(), "cores": os.cpu_count(), "platform": platform.platform()}
    for bench in (STUDY, "bench-acgan"):
        environment = (_json(work / bench / "results.json") or {}).get("environment")
        if isinstance(environment, dict):
            hardware = environment.get("hardware") or {}
            found |= {k: v for k, v in (environment.get("versions") or {}).items() if k in ("torch", "cuda", "cudnn")}
            found |= {"device": hardware.get("device_type"), "hardware": environment.get("hardware_summary")}
            if hardware.get("device_type") == "cuda":
                found |= {"gpu": hardware.get("name"), "capability": hardware.get("cuda_capability")}
            break
    smi = work / "nvidia-smi.csv"
    if smi.is_file() and smi.stat().st_size:
        found["nvidia_smi"] = smi.read_text(errors="replace").strip().splitlines()
    return found


def supervise(
    steps: list[Step], work: Path, deliver_dir: Path, rehearse: bool, total_s: float, probe: list | None = None
) -> int:
    """Run the steps in order within `total_s`, delivering before the first and after every one. `probe`: a
    command run beside the first step whose output (WORK/nvidia-smi.csv) the summary keeps (default: nvidia-smi
    on a GPU, none in a rehearsal)."""
    stop = StopFlag()

    def on_signal(signum, frame):
        stop.signum = signum

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    document = new_document(steps, rehearse)
    deliver(summarise(document, work), work, deliver_dir)  # before anything runs: a kill now still leaves this
    probe = probe if probe is not None else ([] if rehearse else NVIDIA_SMI)
    prober = None
    if probe:
        with open(work / "nvidia-smi.csv", "w") as output:
            try:
                prober = start_child(probe, output, _child_env({}))
            except OSError as error:
                output.write(f"{probe[0]}: {error}\n")
    deadline = time.monotonic() + total_s
    for step in steps:
        document["to_run"].remove(step.name)
        if stop:
            document["not_run"].append(step.name)
            document["not_run_why"] = f"the sweep got {signal.Signals(stop.signum).name}"
            continue
        if time.monotonic() + step.grace >= deadline:
            document["not_run"].append(step.name)
            continue
        document["state"], document["running"] = f"running {step.name}", step.name
        write_summary(summarise(document, work), deliver_dir)  # says which step a kill interrupted
        result = run_step(step, work, deadline, stop)
        document["steps"].append(result)
        document["running"] = None
        document["state"] = f"after {step.name}"
        deliver(summarise(document, work), work, deliver_dir)
        print(f"{step.name}: {result['status']} in {result['seconds']} s", flush=True)
    if prober is not None:
        _signal_group(prober, signal.SIGKILL)
        prober.wait()
    document["state"] = "finished" if not stop else f"stopped by {signal.Signals(stop.signum).name}"
    delivered = deliver(summarise(document, work), work, deliver_dir)
    print(f"delivered to {deliver_dir}: {', '.join(delivered)}")
    print("\n".join(document["self_check"]), flush=True)
    if stop:
        return 128 + stop.signum
    return 0 if document["ok"] else 1


# --- the steps run by this script in a child process (these import ampgan) ------------------------------------


def pytest_child(args: list[str]) -> int:
    """pytest, with SIGTERM as Ctrl-C: pytest then ends the session as interrupted, and still writes its JUnit
    file and its summary line (plain SIGTERM would kill it with neither)."""
    import pytest

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    return int(pytest.main(args))


class _Stopped(BaseException):
    """SIGTERM in a child step: unwinds through anything (a compile included) to the code that writes results."""


def _raise_stopped(signum, frame):
    raise _Stopped


def project_child(
    out: Path, results_path: Path, device_name: str, trace_batches: str, trace_precisions: str, seconds: float
) -> int:
    """The study's network projected onto this device beside what it measured. Its op tables come from the
    bench's results when it traced them, else are traced here, on the device that measured (the bench ran
    with --no-trace, or was stopped before its trace): a missing op table is made, not a failure."""
    signal.signal(signal.SIGTERM, _raise_stopped)
    import torch  # noqa: F401 - imported before ampgan, as the CLI does

    from ampgan.bench.op_tables import step_memory
    from ampgan.bench.ops import trace_op_table
    from ampgan.bench.output import load_results
    from ampgan.bench.spec import BenchSpec
    from ampgan.config import TrainConfig
    from ampgan.data import load_dataset
    from ampgan.errors import AmpganError
    from ampgan.files.atomic import write_json_atomically
    from ampgan.projection.from_results import ProjectSpec, project_results
    from ampgan.speed.step_timer import StepTimer
    from ampgan.training.precision import resolve_device

    try:
        results = load_results(results_path)
    except AmpganError as error:
        print(f"nothing to project: {error}", flush=True)
        return 1
    tables = results.get("op_tables") or {}
    if not tables:
        # Traced whatever the bench measured: the projection onto other GPUs needs no measurement.
        asked = trace_precisions.split(",")
        config = TrainConfig.from_dict(results["spec"]["config"])
        dataset = load_dataset(config.data, seed=config.seed)
        device = resolve_device(device_name)
        spec = BenchSpec(base=config)
        small, large = (int(b) for b in trace_batches.split(","))
        deadline = time.perf_counter() + seconds
        failed = []
        try:
            for name in asked:

                def make_timer(batch_size, name=name):
                    return StepTimer(
                        spec.train_config(name, batch_size), dataset, device, data_parallel=False, across_ranks=False
                    )

                started = time.perf_counter()
                try:
                    tables[name] = trace_op_table(make_timer, name, (small, large), deadline=deadline).to_dict()
                    print(f"op table {name}: traced in {time.perf_counter() - started:.1f} s", flush=True)
                except Exception as error:  # noqa: BLE001 - a precision not traced is said; its stand-in may do
                    failed.append({"precision": name, "reason": str(error).splitlines()[0][:200] if str(error) else ""})
                    print(f"op table {name}: not traced ({failed[-1]['reason']})", flush=True)
        except _Stopped:
            failed.append({"precision": "-", "reason": "stopped by SIGTERM"})
        results["op_tables"], results["op_tables_failed"] = tables, failed
        results["step_memory"] = step_memory(spec, dataset)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomically(out / "results.json", results)
    try:
        _, target, text = project_results(out / "results.json", ProjectSpec(), out / "projection", True, print)
    except AmpganError as error:
        print(f"not projected: {error}", flush=True)
        return 1
    except _Stopped:
        print("not projected: stopped by SIGTERM", flush=True)
        return 143
    print(text)
    print(f"projection: {target / 'projection.json'}", flush=True)
    return 0


def compiled_child(out: Path, device_name: str, batch_size: int, precision: str, seconds: float) -> int:
    """The default model's step in one precision, compiled, against the same step eager: interleaved rounds after
    the compile. results.json is rewritten at each stage, so a step stopped (or killed) mid-compile still says
    how long the compile had run."""
    signal.signal(signal.SIGTERM, _raise_stopped)
    import torch  # noqa: F401

    from ampgan.config import config_from_options
    from ampgan.data import load_dataset
    from ampgan.files.atomic import write_json_atomically
    from ampgan.speed.rounds import UNTIL_SETTLED, StoppingRule, measure_rounds
    from ampgan.speed.step_timer import StepTimer
    from ampgan.training.precision import resolve_device

    device = resolve_device(device_name)
    document = {
        "format": "ampgan-gpu-sweep-compiled/1",
        "model": "acgan",
        "precision": precision,
        "batch_size": batch_size,
        "device": device.type,
        "compile_backend": os.environ.get("AMPGAN_COMPILE_BACKEND", "inductor"),
        "status": "building",
    }

    def write(status: str, **values) -> None:
        document.update(values, status=status)
        write_json_atomically(out / "results.json", document)

    out.mkdir(parents=True, exist_ok=True)
    write("building")
    compile_started = None
    try:
        config = config_from_options(
            dataset="synthetic", precision=precision, batch_size=batch_size, device=device.type, channels_last=False
        )
        dataset = load_dataset(config.data, seed=0)

        def timer(compiled: bool):
            return StepTimer(
                config.with_fields({"compute.compile": compiled}),
                dataset,
                device,
                data_parallel=False,
                across_ranks=False,
            )

        eager = timer(False)
        eager()
        eager_s = min(eager(), eager())
        write("compiling", eager_step_s=eager_s)
        compile_started = time.perf_counter()
        compiled = timer(True)
        first = compiled()  # the compile, then one step
        write("compiled", first_compile_s=round(max(first - eager_s, 0.0), 2))
        compile_started = None
        compiled()
        rule = StoppingRule(min_rounds=3, max_seconds=seconds, until=UNTIL_SETTLED)
        rounds = measure_rounds({"eager": eager, "compiled": compiled}, "eager", rule, seed=0)
        interval = rounds.intervals.get("compiled")
        write(
            "measured",
            rounds=rounds.rounds,
            settled=rounds.settled,
            compiled_step_s=rounds.to_dict()["median_s"]["compiled"],
            eager_step_s=rounds.to_dict()["median_s"]["eager"],
            speedup=interval.to_dict() if interval else None,
        )
    except _Stopped:
        if compile_started is not None:
            write("stopped while compiling", compile_ran_s=round(time.perf_counter() - compile_started, 1))
        else:
            write(f"stopped ({document['status']})")
        return 143
    except Exception as error:  # noqa: BLE001 - a compiler failure is this step's result
        write("error", reason=f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}")
        return 1
    print(json.dumps(document, indent=2), flush=True)
    return 0


# --- the command line --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--pytest" in argv:  # a child step: everything after --pytest is pytest's
        return pytest_child(argv[argv.index("--pytest") + 1 :])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path, help="where the steps write (a folder outside the deliver folder)")
    parser.add_argument(
        "--deliver",
        type=Path,
        default=None,
        help="where the tarball and summary go (default: $OUT when set, else WORK-out)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list the commands, limits and bases; run nothing")
    parser.add_argument("--rehearse", action="store_true", help="the same steps on the CPU at tiny sizes")
    parser.add_argument(
        "--time-scale",
        type=float,
        default=None,
        help="multiply every limit and the benches' --max-seconds (default 1; with --rehearse 2: the limits are "
        "the GPU's, and a shared 2-core CPU runs the tiny steps' imports and builds slower than they allow)",
    )
    # The child steps this script runs itself:
    parser.add_argument("--project-step", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--compiled-step", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    parser.add_argument("--trace-batches", default="8,16", help=argparse.SUPPRESS)
    parser.add_argument("--trace-precisions", default="fp32,bf16,fp16", help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, default=1024, help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="bf16", help=argparse.SUPPRESS)
    parser.add_argument("--max-seconds", type=float, default=10.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.project_step is not None:
        return project_child(
            args.work, args.project_step, args.device, args.trace_batches, args.trace_precisions, args.max_seconds
        )
    if args.compiled_step:
        return compiled_child(args.work, args.device, args.batch_size, args.precision, args.max_seconds)
    if args.time_scale is None:
        args.time_scale = REHEARSAL_TIME_SCALE if args.rehearse else 1.0
    if args.time_scale <= 0:
        print(f"--time-scale must be positive, got {args.time_scale:g}", file=sys.stderr)
        return 2
    work = args.work.resolve()
    steps = plan(work, rehearse=args.rehearse, time_scale=args.time_scale)
    if args.dry_run:
        for step in steps:
            print(f"[{step.limit:>4} s] {shlex.join(step.command(work))}")
            print(f"         {step.name}: {step.basis}")
        print(f"{len(steps)} commands, at most {sum(s.limit for s in steps)} s")
        return 0
    default_out = Path(os.environ["OUT"]) if os.environ.get("OUT") else Path(f"{work}-out")
    deliver_dir = (args.deliver or default_out).resolve()
    problem = _check_folders(work, deliver_dir)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    if not args.rehearse and not _has_nvidia_gpu():
        print("no NVIDIA GPU here: run it on the GPU machine, or with --rehearse or --dry-run", file=sys.stderr)
        return 2
    work.mkdir(parents=True, exist_ok=True)
    deliver_dir.mkdir(parents=True, exist_ok=True)
    for stale in deliver_dir.glob(f"*{PARTIAL}"):  # a temporary file a killed sweep left
        stale.unlink()
    return supervise(steps, work, deliver_dir, args.rehearse, TOTAL_LIMIT_S * args.time_scale)


def _has_nvidia_gpu() -> bool:
    """Without importing torch: the driver's device files or nvidia-smi."""
    if Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia").exists():
        return True
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


if __name__ == "__main__":
    sys.exit(main())
