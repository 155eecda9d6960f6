"""Which allocator and thread placement make the CPU step fastest? Fresh processes, interleaved.

    python benchmarks/allocator_trials.py --precisions fp32,bf16 --batch-size 256 --rounds 5

Intel's PyTorch CPU tuning guide recommends a preloaded jemalloc or tcmalloc and pinned OpenMP
threads. ampgan instead raises glibc malloc's mmap and trim thresholds in-process
(system/cpu_tuning.py), which needs nothing installed. Each variant is a fresh Python process (an
allocator is chosen before the process starts), timing the real train_step after a warm-up; one
round runs every variant once, in a shuffled order, so a neighbour's load hits them alike, and each
variant's speedup over plain glibc gets a 95% interval over the rounds (speed/intervals.py).
Variants whose library is not installed (`apt-get install libjemalloc2 libtcmalloc-minimal4`) are
skipped and said so.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ampgan.system.processes import python_command

LIBRARIES = {
    "jemalloc": ["/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2"],
    "tcmalloc": [
        "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
        "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4",
    ],
}
# name -> (preloaded library, apply ampgan's mallopt setting, extra environment)
VARIANTS = {
    "glibc": (None, False, {}),
    "glibc+mallopt (ampgan)": (None, True, {}),
    "glibc+mallopt, threads bound": (None, True, {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}),
    "jemalloc": ("jemalloc", False, {}),
    "tcmalloc": ("tcmalloc", False, {}),
}
BASELINE = "glibc"


def probe(precision: str, batch_size: int, steps: int, mallopt: bool) -> dict:
    """In the fresh process: the real step's median over `steps`, after two warm-up steps."""
    import torch

    from ampgan.config import config_from_options
    from ampgan.data import load_dataset
    from ampgan.data.batches import BatchStream
    from ampgan.precisions import BF16
    from ampgan.system.cpu_tuning import keep_freed_memory_for_reuse
    from ampgan.training.prepared import prepare_run
    from ampgan.training.state import build_train_state
    from ampgan.training.step import train_step

    if mallopt:
        keep_freed_memory_for_reuse()
    config = config_from_options(
        precision=precision, batch_size=batch_size, device="cpu", channels_last=precision == BF16
    )
    dataset = load_dataset(config.data)
    # Not StepTimer: it applies the malloc setting itself, which is what this script varies.
    prepared = prepare_run(config, dataset)
    state = build_train_state(prepared.config, prepared.model, prepared.data, prepared.policy)
    batch = BatchStream(dataset, batch_size, torch.device("cpu"), 0).next_batch()
    for _ in range(2):
        train_step(state, lambda: batch)
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        train_step(state, lambda: batch)
        times.append(time.perf_counter() - started)
    return {"median_s": statistics.median(times), "threads": torch.get_num_threads()}


def library_path(name: str | None) -> str | None:
    if name is None:
        return None
    return next((path for path in LIBRARIES[name] if Path(path).exists()), None)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=4, help="timed steps per process")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=None, help="JSON file for the numbers")
    parser.add_argument("--probe", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:
        precision, mallopt = args.probe.split(":")
        print(json.dumps(probe(precision, args.batch_size, args.steps, mallopt == "1")))
        return

    import torch

    from ampgan.speed.intervals import speedup_interval
    from ampgan.system.environment import environment_stamp

    variants = {}
    for name, (library, mallopt, env) in VARIANTS.items():
        path = library_path(library)
        if library and path is None:
            print(f"{name}: not installed, skipped", flush=True)
            continue
        variants[name] = (path, mallopt, env)
    report = {"environment": environment_stamp(torch.device("cpu")), "batch_size": args.batch_size, "rows": []}
    rng = random.Random(0)
    for precision in args.precisions.split(","):
        samples = {name: [] for name in variants}
        for _ in range(args.rounds):
            order = list(variants)
            rng.shuffle(order)
            for name in order:
                path, mallopt, env = variants[name]
                extra = env | ({"LD_PRELOAD": path} if path else {})
                done = subprocess.run(
                    [
                        *python_command(__file__),
                        "--probe",
                        f"{precision}:{int(mallopt)}",
                        "--batch-size",
                        str(args.batch_size),
                        "--steps",
                        str(args.steps),
                    ],
                    env=os.environ | extra,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                samples[name].append(json.loads(done.stdout.strip().splitlines()[-1])["median_s"])
        for name, times in samples.items():
            interval = speedup_interval(samples[BASELINE], times) if name != BASELINE else None
            row = {
                "precision": precision,
                "variant": name,
                "median_ms": statistics.median(times) * 1e3,
                "samples_s": times,
                "speedup_over_glibc": interval.to_dict() if interval else None,
            }
            report["rows"].append(row)
            print(
                f"{precision} batch {args.batch_size} {name:<30} {row['median_ms']:8.1f} ms"
                + (f"  vs glibc {interval.describe()}" if interval else ""),
                flush=True,
            )
    print(report["environment"]["hardware_summary"], "| torch", torch.__version__)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
