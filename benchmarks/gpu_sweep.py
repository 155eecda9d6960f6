"""Everything a lent NVIDIA GPU should measure, in one run of under 8 minutes, into one folder.

    python benchmarks/gpu_sweep.py OUT_DIR            # on the GPU machine
    python benchmarks/gpu_sweep.py OUT_DIR --dry-run  # lists the commands (the test suite runs this)

1. the CUDA-only tests (tests/test_on_gpu.py: resume on CUDA, no host read-back in an fp16 step, ...);
2. `bench` fp32, tf32, bf16, fp16 at batch 64 to 4096 for acgan at width 64 and 128, and for the study's
   own network (acgan-2019, 28 px);
3. the compiled step against eager at batch 1024;
4. `project` of the study's network from this GPU's op tables onto every GPU of the table, beside what
   was measured here;
5. a one-minute `compare` (25 s of training per precision) (fp32 against the best mixed mode of this GPU);
6. `train` stopped by SIGTERM and resumed with --resume.
Each command has its own time limit; one that fails or runs out is recorded and the sweep goes on.
OUT_DIR/sweep.json lists every command, its exit status and seconds, and the GPU, driver and versions.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

AMPGAN = [sys.executable, "-m", "ampgan"]
BATCHES = "64,256,1024,2048,4096"


def commands(out: Path) -> list[dict]:
    """(name, argv, seconds allowed) of every step, in order; the limits sum to under 8 minutes."""
    steps = [{"name": "cuda-tests", "argv": [sys.executable, "-m", "pytest", "-q", "tests/test_on_gpu.py"], "limit": 45}]
    for label, model in (("acgan-w64", ["--model", "acgan", "--width", "64"]),
                         ("acgan-w128", ["--model", "acgan", "--width", "128"]),
                         ("acgan-2019", ["--model", "acgan-2019", "--image-size", "28", "--channels", "1"])):
        steps.append({"name": f"bench-{label}", "limit": 60, "argv": [
            *AMPGAN, "bench", *model, "--device", "cuda", "--batch-sizes", BATCHES,
            "--precisions", "fp32,tf32,bf16,fp16", "--steps", "5", "--max-seconds", "3",
            "--out", str(out / f"bench-{label}"), "--overwrite"]})
    steps.append({"name": "bench-compiled", "limit": 70, "argv": [
        *AMPGAN, "bench", "--device", "cuda", "--batch-sizes", "1024", "--precisions", "fp32,bf16", "--compile",
        "--steps", "5", "--max-seconds", "4", "--out", str(out / "bench-compiled"), "--overwrite"]})
    # The study's network projected onto every GPU of the table from this GPU's own op tables, its measured
    # rows beside: projection against measurement on the same machine.
    steps.append({"name": "project-acgan-2019", "limit": 10, "argv": [
        *AMPGAN, "project", str(out / "bench-acgan-2019" / "results.json"), "--batch-sizes", BATCHES,
        "--out", str(out / "projection-acgan-2019"), "--overwrite"]})
    steps.append({"name": "compare-60s", "limit": 110, "argv": [  # 2 x 25 s of training, 60 s in all
        *AMPGAN, "compare", "--device", "cuda", "--time-budget", "25s", "--seeds", "1", "--eval-points", "3",
        "--bench-seconds", "3", "--quiet", "--out", str(out / "compare-60s"), "--overwrite"]})
    run = out / "resume-run"
    steps.append({"name": "train-sigterm", "limit": 35, "sigterm_after": 20, "argv": [
        *AMPGAN, "train", "--device", "cuda", "--precision", "fp16", "--time-budget", "120s", "--quiet",
        "--checkpoint-every", "50", "--out", str(run), "--overwrite"]})
    steps.append({"name": "train-resume", "limit": 30, "argv": [
        *AMPGAN, "train", "--resume", str(run), "--time-budget", "10s", "--quiet"]})
    return steps


def stamp() -> dict:
    import torch

    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0],
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info |= {"gpu": props.name, "capability": f"{props.major}.{props.minor}", "arch_list": torch.cuda.get_arch_list()}
    try:
        info["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit",
                                             "--format=csv,noheader"], capture_output=True, text=True,
                                            timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        info["nvidia_smi"] = None
    return info


def run_step(step: dict, out: Path) -> dict:
    log = out / f"{step['name']}.log"
    started = time.perf_counter()
    with open(log, "w") as handle:
        process = subprocess.Popen(step["argv"], stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            if "sigterm_after" in step:
                try:
                    process.wait(timeout=step["sigterm_after"])
                except subprocess.TimeoutExpired:
                    process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=step["limit"] - (time.perf_counter() - started))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            code = "timed out"
    return {"name": step["name"], "command": shlex.join(step["argv"]), "exit": code,
            "seconds": round(time.perf_counter() - started, 1), "log": log.name}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--dry-run", action="store_true", help="list the commands and their limits, run nothing")
    args = parser.parse_args(argv)
    steps = commands(args.out)
    if args.dry_run:
        for step in steps:
            print(f"[{step['limit']:>4} s] {shlex.join(step['argv'])}")
        print(f"{len(steps)} commands, at most {sum(s['limit'] for s in steps)} s")
        return 0
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU here: run it on the GPU machine, or with --dry-run", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    document = {"stamp": stamp(), "steps": []}
    for step in steps:
        document["steps"].append(run_step(step, args.out))
        (args.out / "sweep.json").write_text(json.dumps(document, indent=2))
        print(f"{step['name']}: exit {document['steps'][-1]['exit']} in {document['steps'][-1]['seconds']} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
