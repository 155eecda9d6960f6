"""What one busy neighbour does to the training step and to the race, on this machine.

    python benchmarks/neighbour_load.py [--models acgan-2019@32,acgan] [--cycles 6] [--rounds 4]
    python benchmarks/neighbour_load.py --scenario race-start    [--budget 20s] [-- EXTRA COMPARE OPTIONS]
    python benchmarks/neighbour_load.py --scenario race-halfway  [--budget 20s] [-- EXTRA COMPARE OPTIONS]

**steps** (the default): each setting (torch threads x OMP_WAIT_POLICY) of each model lives in a process of its
own (libgomp reads its wait policy once, when torch loads it), with fp32's and bf16's real training step built
and warmed up (speed/step_timer.py). The processes then take turns, the bench's principle across processes: in
each cycle, first with nothing of ours running beside them ("alone"), then beside one busy-loop process
(`python -c "while True: pass"`), every process times `--rounds` interleaved fp32/bf16 rounds, in an order
rotated per cycle. A shared machine's other tenants come and go; taking turns lets their load land on every
setting and both states alike. Every ratio is paired by cycle (beside / alone, bf16 / fp32, one setting / the
first) and given as the geometric mean over cycles with its 95% t-interval (speed/intervals.py).

**race-start** (issue 45's first race target): `ampgan compare --precisions fp32,bf16 --seeds 2 --time-budget
20s` with a busy loop started when the race's first run starts: each seed's per-step speedup, on the race's
clock and on the wall clock, against the bench's interval widened by 10%.
**race-halfway**: the same race with 3 seeds, alone, then again with the busy loop started when the 4th of its
6 runs starts (fp32 of seed 1 alone, bf16 of seed 1 beside it), reading the first race's bench and quality
target (`compare.bench_results`, `compare.target_accuracy`) so that the loop is the only difference: how far the
time-to-target ratio moved, against half its interval's width in the race alone.

The load average is printed before and after: on a shared machine, say it beside every number.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from ampgan.precisions import BF16, FP32  # noqa: E402
from ampgan.speed.intervals import speedup_interval  # noqa: E402
from ampgan.system.processes import python_command  # noqa: E402

BUSY_LOOP = ("-c", "while True: pass")
NEIGHBOURS: list[subprocess.Popen] = []


def busy_loop(on: bool = True) -> None:
    """Start the busy neighbour (on) or stop every one started."""
    if on:
        NEIGHBOURS.append(subprocess.Popen(python_command(*BUSY_LOOP)))
        time.sleep(0.3)  # running, and seen by the scheduler, before anything is timed
    while NEIGHBOURS and not on:
        neighbour = NEIGHBOURS.pop()
        neighbour.kill()
        neighbour.wait()


def child(args) -> None:
    """One model at one setting: its threads set here, its wait policy given in the environment; then, per line
    read from stdin, `--rounds` interleaved rounds and each precision's median step, as one JSON line."""
    import torch

    from ampgan.config import config_from_options
    from ampgan.data import load_dataset
    from ampgan.speed.step_timer import StepTimer

    torch.set_num_threads(args.threads)
    model, _, size = args.model.partition("@")
    options = {"image_size": int(size)} if size else {}
    config = config_from_options(dataset=args.dataset, device="cpu", batch_size=args.batch_size, model=model, **options)
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


def ratio(numerators: list[float], denominators: list[float]) -> str:
    """'1.93x (1.71-2.18)': the geometric mean of the paired ratios with its 95% interval."""
    found = speedup_interval(numerators, denominators, between_run_sd=0.0)
    return f"{found.estimate:.2f}x ({found.low:.2f}-{found.high:.2f})"


def steps(args) -> None:
    settings, models = args.settings.split(","), args.models.split(",")
    children = {}
    for model in models:
        for setting in settings:
            threads, policy = setting.split(":")
            env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
            if policy != "default":
                env["OMP_WAIT_POLICY"] = policy
            argv = python_command(__file__, "--child", "--threads", threads, "--model", model)
            argv += ["--dataset", args.dataset, "--batch-size", str(args.batch_size), "--rounds", str(args.rounds)]
            children[model, setting] = subprocess.Popen(
                argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            # Built and warmed up one at a time: a process spinning at its barriers would crowd the others'.
            assert children[model, setting].stdout.readline().strip() == "ready"
    keys = list(children)
    found = {key: {"alone": [], "beside": []} for key in keys}
    try:
        for cycle in range(args.cycles):
            order = keys[cycle % len(keys) :] + keys[: cycle % len(keys)]
            for phase in ("alone", "beside"):
                busy_loop(phase == "beside")
                for key in order:
                    children[key].stdin.write("go\n")
                    children[key].stdin.flush()
                    found[key][phase].append(json.loads(children[key].stdout.readline()))
                busy_loop(False)
            print(f"cycle {cycle + 1} of {args.cycles} done, load average {os.getloadavg()}", flush=True)
            if cycle:  # what the cycles so far say: a run stopped early keeps it
                summary(args, models, settings, found, cycle + 1)
    finally:  # stopped early too: the busy loop first, then the settings' processes, none left running
        busy_loop(False)
        for process in children.values():
            process.kill()
            process.wait()


def summary(args, models, settings, found, cycles: int) -> None:
    for model in models:
        first = found[model, settings[0]]["alone"]
        print(f"{model}, batch {args.batch_size}: per setting, medians over {cycles} cycles; ratios paired", flush=True)
        for setting in settings:
            alone, beside = found[model, setting]["alone"], found[model, setting]["beside"]
            parts = [f"  threads {setting.replace(':', ', OMP_WAIT_POLICY ')}:"]
            for name in (FP32, BF16):
                mine, base = [a[name] for a in alone], [a[name] for a in first]
                theirs = [b[name] for b in beside]
                parts.append(
                    f"{name} {statistics.median(mine) * 1e3:.1f} ms alone, {statistics.median(theirs) * 1e3:.1f} ms "
                    f"beside; beside/alone {ratio(theirs, mine)}, beside/alone at {settings[0]} "
                    f"{ratio(theirs, base)}, alone/alone at {settings[0]} {ratio(mine, base)};"
                )
            parts.append(
                f"bf16 speedup {ratio([a[FP32] for a in alone], [a[BF16] for a in alone])} alone, "
                f"{ratio([b[FP32] for b in beside], [b[BF16] for b in beside])} beside"
            )
            print(" ".join(parts), flush=True)


def compare(args, out: Path, seeds: int, start_at_run: int, more: list[str] = ()) -> dict:
    """`ampgan compare` fp32 vs bf16 for `--budget` per run, its output passed through; a busy loop started when
    its `start_at_run`-th run starts (0: none), stopped when it ends. Its compare.json."""
    argv = python_command("-m", "ampgan", "compare", "--precisions", f"{FP32},{BF16}", "--seeds", str(seeds))
    argv += ["--time-budget", args.budget, "--out", str(out), *args.extra, *more]
    print("$", " ".join(argv[2:]), flush=True)
    env = os.environ | {"PYTHONUNBUFFERED": "1"}  # each line as it is said: the busy loop starts on time
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    runs = 0
    try:
        for line in process.stdout:
            print(line, end="", flush=True)
            runs += bool(re.match(r"train: \w+, seed \d+", line))
            if start_at_run and runs == start_at_run and not NEIGHBOURS:
                busy_loop()
                print(f"[busy loop started with run {runs}, load average {os.getloadavg()}]", flush=True)
    except BaseException:
        process.terminate()
        raise
    finally:
        process.wait()
        busy_loop(False)
    if process.returncode:
        sys.exit(f"compare exited {process.returncode}")
    return json.loads((out / "compare.json").read_text())


def race_start(args, out: Path) -> None:
    document = compare(args, out / "race-start", seeds=2, start_at_run=1)
    step_s = document["race"].get("step_s")
    if step_s:  # on the bench's clock every seed's per-step speedup is the bench's median ratio, by construction
        print(
            f"race's clock ({document['race']['clock']}): bf16 per-step speedup {step_s[FP32] / step_s[BF16]:.2f}x "
            "at every seed (each step charged the bench's median step)"
        )
    also = "" if step_s else " (the race's clock too: the bench had no settled step)"
    for seed, pace in document["race"]["pace"][BF16].items():
        low, high = pace["bench_low"] / 1.1, pace["bench_high"] * 1.1
        print(
            f"seed {seed}: bf16 per-step speedup {pace['wall_speedup']:.2f}x on the wall clock{also} (fp32 "
            f"{pace['baseline_wall_over_bench']:.2f}x its bench step, bf16 {pace['wall_over_bench']:.2f}x); the "
            f"bench's {pace['bench_estimate']:.2f}x widened by 10%: {low:.2f}-{high:.2f}: "
            f"{'within' if low <= pace['wall_speedup'] <= high else 'OUTSIDE'}"
        )
    print(f"threads: {(document['race'].get('threads') or {}).get('reason')}")


def race_halfway(args, out: Path) -> None:
    """The race alone, then again with the busy loop from its 4th run. The second race reads the first's bench and
    quality target, so that the busy loop is the only thing that differs: a bench measured minutes apart on a
    shared machine gives different absolute step times (so a different number of steps in the same budget), and a
    target taken from each race's own curves moves with them; neither is what the loop did."""
    alone_out = out / "race-alone"
    alone = compare(args, alone_out, seeds=3, start_at_run=0)
    target = (alone.get("cost") or {}).get("target")
    if target is None:
        sys.exit("the race alone chose no quality target: give a longer --budget")
    same = ["--set", f"compare.bench_results={alone_out / 'bench' / 'results.json'}"]
    same += ["--set", f"compare.target_accuracy={target}"]
    halfway = compare(args, out / "race-halfway", seeds=3, start_at_run=4, more=same)
    ratios = {}
    for name, document in (("alone", alone), ("halfway", halfway)):
        ratios[name] = (document.get("seed_comparison") or {}).get(BF16, {}).get("time_to_target_ratio") or {}
        threads = (document["race"].get("threads") or {}).get("reason")
        steps = {precision: run.get("steps") for precision, run in document["runs"].items()}
        chosen = (document.get("cost") or {}).get("target")
        print(
            f"{name}: target {chosen}, steps per run {steps}, bf16's time-to-target ratio {ratios[name]}; "
            f"threads: {threads}"
        )
    alone_ratio, halfway_ratio = ratios["alone"], ratios["halfway"]
    if alone_ratio.get("low") is None or halfway_ratio.get("mean") is None:
        sys.exit("a race without a time-to-target interval: give a longer --budget or more seeds")
    moved, half = abs(halfway_ratio["mean"] - alone_ratio["mean"]), (alone_ratio["high"] - alone_ratio["low"]) / 2
    print(
        f"time-to-target ratio {alone_ratio['mean']:.2f}x alone, {halfway_ratio['mean']:.2f}x with the busy loop from "
        f"the 4th run (same bench, same target {target}): moved {moved:.2f}, "
        f"{'less' if moved < half else 'NOT less'} than the half width {half:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=("steps", "race-start", "race-halfway"), default="steps")
    parser.add_argument("--models", default="acgan-2019@32,acgan", help="MODEL[@IMAGE_SIZE], comma-separated")
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds per turn")
    parser.add_argument("--cycles", type=int, default=6)
    parser.add_argument(
        "--settings",
        default="2:default,2:PASSIVE,1:default",
        # ACTIVE is not among them: its idle threads spin even while their process waits for its turn, and
        # would crowd every other setting's turn.
        help="threads:wait policy, comma-separated",
    )
    parser.add_argument("--budget", default="20s", help="races: each run's --time-budget")
    parser.add_argument("--out", type=Path, help="races: the study folders' parent (default: a temporary one)")
    parser.add_argument("extra", nargs="*", help="races: more `ampgan compare` options, after --")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=2, help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cycles < 2:
        parser.error("--cycles must be at least 2: every ratio is paired by cycle, with an interval over cycles")
    if args.child:
        child(args)
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the busy loop and the children are stopped too
    print(f"load average before: {os.getloadavg()}", flush=True)
    try:
        if args.scenario == "steps":
            steps(args)
        else:
            out = args.out or Path(tempfile.mkdtemp(prefix="neighbour-load-"))
            (race_start if args.scenario == "race-start" else race_halfway)(args, out)
    finally:
        busy_loop(False)
    print(f"load average after: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
