"""Everything a lent NVIDIA GPU should measure, in at most six minutes of commands, checked and packed.

    PYTHONPATH=src python benchmarks/gpu_sweep.py WORK_DIR [--deliver DIR]   # on the GPU machine
    PYTHONPATH=src python benchmarks/gpu_sweep.py WORK_DIR --rehearse        # the same steps on this CPU, tiny
    python benchmarks/gpu_sweep.py WORK_DIR --dry-run                       # lists the commands (tests run it)

Run from the repository root. Written for the lent machine (Python 3.12, torch 2.11 with CUDA 13, 16 cores,
no network, 15 minutes in all with its start, 8 files of 16 MiB back): nothing here or in the commands it
runs is newer than both (checked by rehearsing on torch 2.13 and reading 2.11's API for each call: the
`fp32_precision` switches are used only where torch has them).

Steps, in order of what a GPU alone can answer:
  cuda-tests          tests/test_on_gpu.py and tests/test_cuda_paths.py on the GPU (resume, strict fp32, OOM, ...)
  bench-acgan-2019    the study's network (28 px grey), fp32/tf32/bf16/fp16, batch 64 to 4096
  calibrate           every GEMM and convolution of the real step alone (CUDA events), acgan-2019 and acgan,
                      in each precision: the projection's calibration table (benchmarks/kernel_calibration.py)
  project-acgan-2019  this GPU's own op tables projected onto it, beside what it measured
  bench-acgan         the default model, the same precisions, batch 64 to 2048
  train-sigterm       fp16 training stopped by SIGTERM once its first checkpoint exists
  train-resume        the same run resumed (--resume) for a few seconds more
  bench-compiled      the compiled step (fp32 and bf16) at batch 1024, compile-time processes left out
Decisions the sweep skips, and why: the memory format (--no-channels-last: NCHW everywhere, so every
precision is timed alike), the precision choice (--precisions given), torch.compile in train (--no-compile),
the compile-time processes (a minute each); `compare` is not run (its quality evaluation does not fit).

Each step has a time limit; at the limit minus its grace it gets SIGTERM (benches and training then write
what they finished), at the limit SIGKILL. The work folder keeps every step's log and output; the deliver
folder ($OUT when set) receives one tarball (no checkpoints), the calibration table with its sidecar, and
summary.json + summary.txt, whose self-check (printed last) gives each step's status, the measured speedups
per precision and batch, projected against measured, and the CUDA tests' result. Exit 0 when every step
did what it should, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AMPGAN = [sys.executable, "-m", "ampgan"]
TOTAL_LIMIT_S = 360  # the commands' limits together: 6 of the lent machine's 15 minutes
MAX_DELIVERED_BYTES = 15 * 2**20  # one file back may be 16 MiB


@dataclass(frozen=True)
class Sizes:
    """What the steps run at: on the GPU, or rehearsed on a CPU in about a minute."""

    device: str
    study_model: tuple[str, ...]  # the study's network, or what stands in for it in a rehearsal
    calibration_models: str
    precisions: str
    batches_2019: str
    batches_acgan: str
    acgan_width: str
    calibration_batches: str
    compiled_batch: str
    bench_max_seconds: str
    train_precision: str
    train_size: tuple[str, ...]  # train-sigterm's model and batch options (none: the defaults)
    after_checkpoint_s: float  # train-sigterm: SIGTERM this long after the first checkpoint appears
    resume_more_s: float  # train-resume: train this much longer than the run had


GPU = Sizes(
    device="cuda",
    study_model=("--model", "acgan-2019", "--image-size", "28", "--set", "data.channels=1"),
    calibration_models="acgan-2019,acgan",
    precisions="fp32,tf32,bf16,fp16",
    batches_2019="64,256,1024,2048,4096",
    batches_acgan="64,256,1024,2048",
    acgan_width="64",
    calibration_batches="256,2048",
    compiled_batch="1024",
    bench_max_seconds="3",
    train_precision="fp16",
    train_size=(),
    after_checkpoint_s=6.0,
    resume_more_s=6.0,
)
# The rehearsal's stand-in for acgan-2019 is acgan at width 8: the study's network (a 6272-wide dense layer)
# takes seconds a step on a 2-core CPU, and its op tables minutes.
REHEARSAL = Sizes(
    device="cpu",
    study_model=("--model", "acgan", "--width", "8"),
    calibration_models="acgan",
    precisions="fp32,bf16",
    batches_2019="4",
    batches_acgan="4",
    acgan_width="8",
    calibration_batches="4",
    compiled_batch="4",
    bench_max_seconds="3",
    train_precision="fp32",
    train_size=("--width", "8", "--batch-size", "8"),
    after_checkpoint_s=1.0,
    resume_more_s=1.0,
)


@dataclass
class Step:
    name: str
    argv: list[str]
    limit: int  # seconds, SIGKILL then
    writes: str = ""  # what it leaves in the work folder when it finishes (or is stopped)
    ok_exits: tuple[int, ...] = (0,)
    sigterm_once: str = ""  # SIGTERM once this file exists (and after_s more)
    after_s: float = 0.0
    env: dict = field(default_factory=dict)
    argv_after: object = None  # a function of the work folder giving the argv, when it depends on earlier steps

    @property
    def grace(self) -> int:
        """SIGTERM this long before the limit: the time to write what was finished (a bench draws its figures)."""
        return max(3, min(15, self.limit // 3))


def _bench(name: str, out: Path, model: list[str], batches: str, sizes: Sizes, limit: int, extra=()) -> Step:
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
            "--set",
            "bench.warmup=2",
            "--steps",
            "3",
            "--set",
            "bench.min_seconds=0",
            "--max-seconds",
            sizes.bench_max_seconds,
            *extra,
            "--out",
            str(out / name),
            "--overwrite",
        ],
        limit,
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
    """Every step, in order; their limits sum to at most TOTAL_LIMIT_S (times `time_scale`, which also
    scales the benches' --max-seconds: a rehearsal on a loaded machine)."""
    sizes = REHEARSAL if rehearse else GPU
    if time_scale != 1.0:
        sizes = replace(sizes, bench_max_seconds=f"{float(sizes.bench_max_seconds) * time_scale:g}")
    # On the GPU the injected CUDA paths run too (on torch 2.11 there); a rehearsal shows the GPU tests skip.
    tests = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_on_gpu.py",
        *([] if rehearse else ["tests/test_cuda_paths.py", "-k", "not sweep"]),
        "--junitxml",
        str(work / "cuda-tests.xml"),
    ]
    steps = [Step("cuda-tests", tests, 60, writes="cuda-tests.xml")]
    steps.append(_bench("bench-acgan-2019", work, list(sizes.study_model), sizes.batches_2019, sizes, 75))
    calibration_precisions = sizes.precisions if not rehearse else "fp32,bf16"
    steps.append(
        Step(
            "calibrate",
            [
                sys.executable,
                str(ROOT / "benchmarks" / "kernel_calibration.py"),
                str(work / "calibration" / "kernels.csv"),
                "--device",
                sizes.device,
                "--batch-sizes",
                sizes.calibration_batches,
                "--precisions",
                calibration_precisions,
                "--models",
                sizes.calibration_models,
                *(["--tiny", "--repeats", "1"] if rehearse else []),
            ],
            50,
            writes="calibration/kernels.csv",
        )
    )
    steps.append(
        Step(
            "project-acgan-2019",
            [
                *AMPGAN,
                "project",
                str(work / "bench-acgan-2019" / "results.json"),
                "--batch-sizes",
                sizes.batches_2019,
                "--out",
                str(work / "projection-acgan-2019"),
                "--overwrite",
            ],
            15,
            writes="projection-acgan-2019/projection.json",
        )
    )
    steps.append(
        _bench("bench-acgan", work, ["--model", "acgan", "--width", sizes.acgan_width], sizes.batches_acgan, sizes, 50)
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
                sizes.train_precision,
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
            30,
            writes="resume-run/checkpoints",
            ok_exits=(143,),
            sigterm_once=str(run / "checkpoints" / "step-000000.pt"),
            after_s=sizes.after_checkpoint_s,
        )
    )
    steps.append(
        Step(
            "train-resume", [], 25, writes="resume-run/metrics.jsonl", argv_after=_resume_argv(run, sizes.resume_more_s)
        )
    )
    # The compiled step through the bench's own harness, without its compile-time processes (cold and warm
    # cache in fresh processes, a minute each): compiled_bench() below.
    compiled = [
        sys.executable,
        str(Path(__file__).resolve()),
        str(work / "bench-compiled"),
        "--compiled-bench",
        "--device",
        sizes.device,
        "--width",
        sizes.acgan_width,
        "--batch-size",
        sizes.compiled_batch,
        "--max-seconds",
        sizes.bench_max_seconds,
    ]
    steps.append(
        Step(
            "bench-compiled",
            compiled,
            55,
            writes="bench-compiled/results.json",
            env={"AMPGAN_COMPILE_BACKEND": "eager"} if rehearse else {},
        )
    )
    for step in steps:
        step.limit = round(step.limit * time_scale)
    return steps


# --- running a step ---------------------------------------------------------------------------------------


def _stop(process: subprocess.Popen, how: int) -> None:
    try:
        os.killpg(process.pid, how)
    except ProcessLookupError:
        pass


def run_step(step: Step, work: Path, deadline: float) -> dict:
    """Run one step to its end, its SIGTERM (limit - grace) or its SIGKILL (limit), whichever comes first;
    `deadline`: the sweep's own end, which no step runs past."""
    argv = step.argv_after(work) if step.argv_after else step.argv
    log = work / f"{step.name}.log"
    env = {
        **os.environ,
        **step.env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])),
    }
    started = time.monotonic()
    kill_at = min(started + step.limit, deadline)
    term_at = kill_at - step.grace
    signals = []
    with open(log, "w") as handle:
        process = subprocess.Popen(
            argv, stdout=handle, stderr=subprocess.STDOUT, cwd=ROOT, env=env, start_new_session=True
        )
        trigger_seen_at = None
        while process.poll() is None:
            now = time.monotonic()
            if step.sigterm_once and trigger_seen_at is None and Path(step.sigterm_once).exists():
                trigger_seen_at = now
            asked = trigger_seen_at is not None and now >= trigger_seen_at + step.after_s
            if now >= kill_at:
                _stop(process, signal.SIGKILL)
                signals.append("SIGKILL")
                process.wait()
                break
            if (now >= term_at or asked) and "SIGTERM" not in signals:
                _stop(process, signal.SIGTERM)
                signals.append("SIGTERM")
            time.sleep(0.1)
        code = process.returncode
    exit_code = 128 - code if code is not None and code < 0 else code  # a signal's death as the shell says it
    seconds = round(time.monotonic() - started, 1)
    written = (work / step.writes).exists() if step.writes else True
    if "SIGKILL" in signals:
        status = "killed at its limit"
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
        "seconds": seconds,
        "limit": step.limit,
        "log": log.name,
        "log_tail": log.read_text(errors="replace").splitlines()[-3:],
    }


# --- reading what the steps wrote --------------------------------------------------------------------------


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def measured_speedups(work: Path) -> list[dict]:
    rows = []
    for bench in ("bench-acgan-2019", "bench-acgan", "bench-compiled"):
        results = _json(work / bench / "results.json")
        if not isinstance(results, dict):
            continue
        for pair in results.get("speedups", []):
            rows.append(
                {
                    "bench": bench,
                    "batch_size": pair.get("batch_size"),
                    "precision": pair.get("precision"),
                    "speedup": pair.get("estimate"),
                    "low": pair.get("low"),
                    "high": pair.get("high"),
                    "step_ms": (pair.get("step_s") or 0) * 1e3 or None,
                }
            )
        for config in results.get("configs", []):
            if config.get("status") != "ok":
                rows.append(
                    {
                        "bench": bench,
                        "batch_size": config.get("batch_size"),
                        "precision": config.get("precision"),
                        "status": config.get("status"),
                        "reason": str(config.get("reason", ""))[:120],
                    }
                )
    return rows


def projected_against_measured(work: Path) -> list[dict] | None:
    """Each measured configuration of the study's network beside this GPU's projection; None: no projection."""
    document = _json(work / "projection-acgan-2019" / "projection.json")
    if not isinstance(document, dict):
        return None
    return [
        {
            "batch_size": row.get("batch_size"),
            "precision": row.get("precision"),
            "measured_ms": row.get("ms_per_step"),
            "projected_ms": row.get("projected_for_it_ms"),
            "measured_over_projected": row.get("measured_over_projected"),
        }
        for row in document.get("measured_here", [])
    ]


def cuda_test_result(work: Path, step: dict | None) -> str:
    text = (work / "cuda-tests.log").read_text(errors="replace") if (work / "cuda-tests.log").exists() else ""
    found = re.findall(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s", text, flags=re.MULTILINE)
    summary = found[-1] if found else "no pytest summary"
    return f"{summary} ({step['status'] if step else 'not run'})"


def calibration_summary(work: Path) -> dict:
    table = work / "calibration" / "kernels.csv"
    if not table.is_file():
        return {"rows": 0}
    lines = table.read_text().splitlines()
    by_op: dict[str, int] = {}
    for line in lines[1:]:
        op = line.split(",")[1]
        by_op[op] = by_op.get(op, 0) + 1
    return {"rows": len(lines) - 1, "by_op": by_op, "sidecar": _json(table.with_suffix(".json")) is not None}


def _fmt(value, digits=2) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "-"


def self_check(document: dict, work: Path) -> list[str]:
    lines = [
        f"SELF-CHECK ({document['stamp'].get('gpu') or document['stamp'].get('device')}, "
        f"torch {document['stamp']['torch']}, {'rehearsal on the CPU' if document['rehearse'] else 'GPU run'})"
    ]
    for step in document["steps"]:
        lines.append(f"  {step['name']:<20} {step['status']:<48} {step['seconds']:>6.1f} s of {step['limit']}")
    for name in document.get("not_run", []):
        lines.append(f"  {name:<20} not run: the sweep's time was spent")
    lines.append("  measured speedup over fp32 [95% interval] (step ms):")
    for row in document["speedups"]:
        if "speedup" in row:
            lines.append(
                f"    {row['bench']:<18} batch {row['batch_size']:>5} {row['precision']:>5}: "
                f"{_fmt(row['speedup'])}x [{_fmt(row['low'])}-{_fmt(row['high'])}] ({_fmt(row['step_ms'], 1)})"
            )
        else:
            lines.append(
                f"    {row['bench']:<18} batch {row['batch_size']:>5} {row['precision']:>5}: {row['status']} "
                f"({row['reason']})"
            )
    if not document["speedups"]:
        lines.append("    none measured")
    projected = document["projected_vs_measured"]
    compared = [r for r in projected or [] if r["projected_ms"] is not None]
    lines.append("  projected vs measured (acgan-2019 on this device, ms per step; measured / projected):")
    for row in compared:
        lines.append(
            f"    batch {row['batch_size']:>5} {row['precision']:>5}: measured {_fmt(row['measured_ms'], 2)}, "
            f"projected {_fmt(row['projected_ms'], 2)}, ratio {_fmt(row['measured_over_projected'])}"
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
        f"  calibration: {calibration['rows']} kernels {calibration.get('by_op', {})}, "
        f"sidecar {'written' if calibration.get('sidecar') else 'missing'}"
    )
    lines.append(f"  CUDA tests: {document['cuda_tests']}")
    lines.append(
        "  RESULT: "
        + (
            "every step did what it should"
            if document["ok"]
            else "NOT every step did what it should, or the study's network has no measured speedup"
        )
    )
    return lines


# --- the machine, the package --------------------------------------------------------------------------------


def stamp(device: str) -> dict:
    import platform

    import torch

    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "device": device,
        "cores": os.cpu_count(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if device == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info |= {
            "gpu": props.name,
            "capability": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / 2**30, 1),
            "arch_list": torch.cuda.get_arch_list(),
            "cudnn": torch.backends.cudnn.version(),
        }
        try:
            info["nvidia_smi"] = subprocess.run(
                [
                    "nvidia-smi",
                    "--query-gpu=name,driver_version,clocks.max.sm,power.limit,mig.mode.current",
                    "--format=csv,noheader",
                ],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            info["nvidia_smi"] = None
    else:
        info["cpu"] = platform.processor() or platform.machine()
    return info


def pack(work: Path, tarball: Path, leave_out=(".pt",)) -> list[str]:
    """The work folder as one .tar.gz without checkpoints; figures left out too when it would not come back."""
    left_out = []
    for suffixes in (leave_out, (*leave_out, ".png")):
        with tarfile.open(tarball, "w:gz") as archive:
            for path in sorted(work.rglob("*")):
                if path.is_file() and not path.name.endswith(suffixes):
                    archive.add(path, arcname=str(Path(work.name) / path.relative_to(work)))
        if tarball.stat().st_size <= MAX_DELIVERED_BYTES:
            break
        left_out = ["figures (*.png): the tarball was over 15 MiB with them"]
    return ["checkpoints (*.pt)", *left_out]


def deliver(document: dict, work: Path, deliver_dir: Path) -> list[str]:
    """At most 5 files into `deliver_dir` (8 come back): the tarball, the calibration and its sidecar, the summary."""
    deliver_dir.mkdir(parents=True, exist_ok=True)
    document["left_out_of_tarball"] = pack(work, deliver_dir / "sweep.tar.gz")
    for name in ("kernels.csv", "kernels.json"):
        source = work / "calibration" / name
        if source.is_file():
            (deliver_dir / f"calibration-{name}").write_bytes(source.read_bytes())
    (deliver_dir / "summary.json").write_text(json.dumps(document, indent=2))
    (deliver_dir / "summary.txt").write_text("\n".join(document["self_check"]) + "\n")
    return sorted(p.name for p in deliver_dir.iterdir())


def compiled_bench(out: Path, device_name: str, width: int, batch_size: int, max_seconds: float) -> int:
    """`ampgan bench --compile` of fp32 and bf16 at one batch size, without the compile-time processes."""
    from ampgan.bench.harness import run_bench
    from ampgan.bench.output import write_results
    from ampgan.bench.spec import BenchSpec
    from ampgan.config import config_from_options
    from ampgan.precisions import BF16, FP32
    from ampgan.training.precision import resolve_device

    base = config_from_options(dataset="synthetic", model="acgan", width=width, device=device_name)
    spec = BenchSpec(
        base=base,
        batch_sizes=(batch_size,),
        precisions=(FP32, BF16),
        compile=(FP32, BF16),
        measure_compile_times=False,
        channels_last=(),
        warmup=2,
        steps=3,
        min_seconds=0.0,
        max_seconds=max_seconds,
    )
    results = run_bench(spec, resolve_device(device_name), log=lambda line: print(line, flush=True))
    write_results(results, out)
    print(f"results: {out / 'results.json'}" + (" (incomplete: stopped by a signal)" if results["incomplete"] else ""))
    return 143 if results["incomplete"] else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path, help="where the steps write (a fresh folder)")
    parser.add_argument(
        "--deliver",
        type=Path,
        default=None,
        help="where the tarball and summary go (default: $OUT when set, else WORK/deliver)",
    )
    parser.add_argument("--dry-run", action="store_true", help="list the commands and their limits, run nothing")
    parser.add_argument("--rehearse", action="store_true", help="the same steps on the CPU at tiny sizes")
    parser.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="multiply every limit (a rehearsal on a loaded machine; the test suite gives 4)",
    )
    parser.add_argument(
        "--compiled-bench", action="store_true", help="(a step of the sweep) the compiled bench into WORK"
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--max-seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    if args.compiled_bench:
        return compiled_bench(args.work, args.device, args.width, args.batch_size, args.max_seconds)
    work = args.work.resolve()
    steps = plan(work, rehearse=args.rehearse, time_scale=args.time_scale)
    if args.dry_run:
        for step in steps:
            command = step.argv_after(work) if step.argv_after else step.argv
            print(f"[{step.limit:>4} s] {shlex.join(command)}")
        print(f"{len(steps)} commands, at most {sum(s.limit for s in steps)} s")
        return 0
    if not args.rehearse:
        import torch

        if not torch.cuda.is_available():
            print("no CUDA GPU here: run it on the GPU machine, or with --rehearse or --dry-run", file=sys.stderr)
            return 2
    work.mkdir(parents=True, exist_ok=True)
    deliver_dir = (args.deliver or (Path(os.environ["OUT"]) if os.environ.get("OUT") else work / "deliver")).resolve()
    document = {
        "rehearse": args.rehearse,
        "stamp": stamp(REHEARSAL.device if args.rehearse else GPU.device),
        "steps": [],
        "not_run": [],
    }
    deadline = time.monotonic() + TOTAL_LIMIT_S * args.time_scale
    for step in steps:
        if time.monotonic() + step.grace >= deadline:
            document["not_run"].append(step.name)
            continue
        result = run_step(step, work, deadline)
        document["steps"].append(result)
        (work / "sweep.json").write_text(json.dumps(document, indent=2))  # what finished, after every step
        print(f"{step.name}: {result['status']} in {result['seconds']} s", flush=True)
    by_name = {s["name"]: s for s in document["steps"]}
    document["speedups"] = measured_speedups(work)
    document["projected_vs_measured"] = projected_against_measured(work)
    document["calibration"] = calibration_summary(work)
    document["cuda_tests"] = cuda_test_result(work, by_name.get("cuda-tests"))
    # Every step did what it should, and the study's network has a measured speedup: the sweep's point.
    document["ok"] = (
        not document["not_run"]
        and all(s["status"] == "ok" for s in document["steps"])
        and any(r["bench"] == "bench-acgan-2019" and "speedup" in r for r in document["speedups"])
    )
    document["self_check"] = self_check(document, work)
    (work / "sweep.json").write_text(json.dumps(document, indent=2))
    delivered = deliver(document, work, deliver_dir)
    print(f"delivered to {deliver_dir}: {', '.join(delivered)}")
    print("\n".join(document["self_check"]), flush=True)
    return 0 if document["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
