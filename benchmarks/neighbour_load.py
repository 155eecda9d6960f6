"""What one busy neighbour does to the training step, per thread count and OpenMP wait policy.

    python benchmarks/neighbour_load.py --width 8 --batch-size 64 --rounds 6 --cycles 5

Each setting (torch threads x OMP_WAIT_POLICY) lives in a process of its own (libgomp reads its wait policy
once, when it is loaded), with fp32's and bf16's real training step built and warmed up
(speed/step_timer.py). The settings then take turns, the bench's principle across processes: in each cycle,
first with nothing of ours running beside them ("alone"), then beside one busy-loop process
(`python -c "while True: pass"`), every setting times `--rounds` interleaved fp32/bf16 rounds, in an order
rotated per cycle. A shared machine's other tenants come and go; taking turns lets their load land on every
setting and both states alike, and the ratios (beside / alone, bf16 / fp32) are taken per cycle, then their
median over cycles is printed. Say how loaded the machine was (`uptime`, printed before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from ampgan.precisions import BF16, FP32  # noqa: E402
from ampgan.system.processes import python_command  # noqa: E402


def child(args) -> None:
    """One setting: its threads set here, its wait policy given in the environment; then, per line read
    from stdin, `--rounds` interleaved rounds and each precision's median step, as one JSON line."""
    import torch

    from ampgan.config import config_from_options
    from ampgan.data import load_dataset
    from ampgan.speed.step_timer import StepTimer

    torch.set_num_threads(args.threads)
    config = config_from_options(
        dataset=args.dataset, device="cpu", width=args.width, batch_size=args.batch_size, model=args.model
    )
    dataset = load_dataset(config.data)
    timers = {
        name: StepTimer(
            config.with_fields({"precision.name": name, "precision.loss_scale": None}),
            dataset,
            torch.device("cpu"),
            data_parallel=False,
            across_ranks=False,
        )
        for name in (FP32, BF16)
    }
    for _ in range(3):
        for timer in timers.values():
            timer()
    print("ready", flush=True)
    for _ in sys.stdin:
        samples = {name: [] for name in timers}
        for index in range(args.rounds):
            for name in list(timers) if index % 2 == 0 else list(timers)[::-1]:
                samples[name].append(timers[name]())
        print(json.dumps({name: statistics.median(values) for name, values in samples.items()}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="acgan")
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds per turn")
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument(
        "--settings", default="2:default,2:PASSIVE,1:default", help="threads:wait policy, comma-separated"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    print(f"load average before: {os.getloadavg()}", flush=True)
    settings = args.settings.split(",")
    children = {}
    for setting in settings:
        threads, policy = setting.split(":")
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
        if policy != "default":
            env["OMP_WAIT_POLICY"] = policy
        argv = python_command(__file__, "--child", "--threads", threads)
        for name in ("model", "dataset", "width", "batch_size", "rounds"):
            argv += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
        children[setting] = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert children[setting].stdout.readline().strip() == "ready"
    found = {setting: {"alone": [], "beside": []} for setting in settings}
    try:
        for cycle in range(args.cycles):
            order = settings[cycle % len(settings) :] + settings[: cycle % len(settings)]
            for phase in ("alone", "beside"):
                neighbour = subprocess.Popen(python_command("-c", "while True: pass")) if phase == "beside" else None
                time.sleep(0.3 if neighbour else 0)
                for setting in order:
                    children[setting].stdin.write("go\n")
                    children[setting].stdin.flush()
                    found[setting][phase].append(json.loads(children[setting].stdout.readline()))
                if neighbour:
                    neighbour.kill()
                    neighbour.wait()
    finally:
        for process in children.values():
            process.stdin.close()
            process.wait()
    for setting in settings:
        alone, beside = found[setting]["alone"], found[setting]["beside"]

        def median_of(values):
            return statistics.median(values)

        parts = [f"threads {setting.replace(':', ', OMP_WAIT_POLICY ')}:"]
        for name in (FP32, BF16):
            parts.append(
                f"{name} {median_of([a[name] for a in alone]) * 1e3:.1f} ms alone, "
                f"{median_of([b[name] for b in beside]) * 1e3:.1f} ms beside the busy loop "
                f"({median_of([b[name] / a[name] for a, b in zip(alone, beside)]):.2f}x);"
            )
        parts.append(
            f"bf16 speedup {median_of([a[FP32] / a[BF16] for a in alone]):.2f}x alone, "
            f"{median_of([b[FP32] / b[BF16] for b in beside]):.2f}x beside"
        )
        print(" ".join(parts), flush=True)
    base = settings[0]
    for setting in settings[1:]:
        ratio = median_of([a[FP32] / b[FP32] for a, b in zip(found[setting]["alone"], found[base]["alone"])])
        print(f"alone, fp32 step of {setting} / {base}: {ratio:.2f}x (same cycle, taken in turn)")
    print(f"load average after: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
