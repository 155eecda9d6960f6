"""Process settings that make PyTorch's CPU training step fast, applied once per process.

glibc's malloc serves large blocks (the activations of a training step) with mmap and hands them
back to the OS with munmap when freed, so every step page-faults its activations in again. At
batch 1024 on a 2-core Zen 4 that was a third of the fp32 step (3.55 s -> 2.37 s with the settings
below; benchmarks/results/cpu-amd-epyc-zen4-2core-2026-11-30/reference_loop.txt). Keeping freed
memory in the heap for reuse is what jemalloc or tcmalloc (which Intel's PyTorch CPU tuning guide
recommends) achieve; `mallopt` does it without a preloaded library. The cost: the process keeps its peak heap
until it exits.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import statistics
from pathlib import Path

from ampgan.env import env_value

_M_TRIM_THRESHOLD = -1  # glibc malloc.h
_M_MMAP_THRESHOLD = -3
_applied: bool | None = None


def keep_freed_memory_for_reuse() -> bool:
    """Raise glibc's mmap and trim thresholds; True when applied (glibc only, once per process)."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        _applied = bool(libc.mallopt(_M_MMAP_THRESHOLD, 2**30)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
    except (OSError, AttributeError):
        _applied = False
    return _applied


def tuning_state() -> dict:
    return {
        "glibc_malloc_keeps_freed_memory": bool(_applied),
        # libgomp reads its wait policy once, when torch loads it: what the environment said then.
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY") or "libgomp's default (spin, then sleep)",
        "threads_fixed_by": threads_given(),
    }


# Threads that fit the machine. PyTorch's CPU step runs its operations on one OpenMP thread per core (torch's
# own libgomp), and at the end of every parallel region each thread waits for the others: libgomp spins 300000
# turns, about 3 ms (unless OMP_WAIT_POLICY or GOMP_SPINCOUNT, read once when torch loads it, say otherwise), then
# sleeps.
# When another process keeps a core busy, the thread that shares it is descheduled for whole time slices while
# its partner waits: a width-8 AC-GAN's 28 ms step took 1.34 s beside one busy loop on a 2-core Zen 4 (47x),
# 122 ms with one thread (benchmarks/results/neighbour-load-amd-zen4-2core-2026-12-03). So the threads are
# fitted to the cores the other processes leave (before measuring, and while training, speed/threads.py and
# ThreadWatch below), unless the user fixed them.


def cores() -> int:
    """The cores this process may run on (its affinity mask where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def threads_given() -> str | None:
    """The environment variable that fixed the thread count (the user's choice, never changed), or None. torch
    reads MKL_NUM_THREADS where OMP_NUM_THREADS is not set (MKL_NUM_THREADS=1: one thread)."""
    return next((name for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if env_value(name)), None)


def _running_threads(stat_text: str, own_states: list[str]) -> int:
    """Runnable threads on the machine that are not this process's: /proc/stat's procs_running (every
    runnable thread, this process's included) minus this process's threads in state R (pure)."""
    running = next((int(line.split()[1]) for line in stat_text.splitlines() if line.startswith("procs_running ")), None)
    if running is None:
        raise ValueError("no procs_running line")
    return max(0, running - sum(state == "R" for state in own_states))


def _own_states() -> list[str]:
    states = []
    for task in Path("/proc/self/task").iterdir():
        try:
            # The state follows the command name, which is in parentheses and may itself hold spaces.
            states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue  # a thread that ended between listing and reading
    return states


def others_running(samples: int = 5) -> int | None:
    """How many threads of other processes are runnable right now (Linux: the median of a few reads of
    /proc, a fraction of a millisecond); None where /proc cannot tell."""
    counts = []
    for _ in range(samples):
        try:
            counts.append(_running_threads(Path("/proc/stat").read_text(), _own_states()))
        except (OSError, ValueError):
            return None
    return int(statistics.median(counts))


def fitting_threads(cores: int, others: int | None, most: int) -> int:
    """The threads that leave the other processes their cores: cores - others, at least 1, at most `most`."""
    return most if others is None else max(1, min(most, cores - others))


def oversubscribed(threads: int, cores: int, others: int | None) -> bool:
    """More runnable threads than cores: ours would wait for one another at every parallel region's end."""
    return others is not None and threads > 1 and threads + others > cores


def load_text(others: int | None, threads: int, cores: int) -> str:
    """'3 other threads running beside 2 of ours on 2 cores'."""
    seen = "an unknown number of" if others is None else str(others)
    return f"{seen} other thread{'s' if others != 1 else ''} running beside {threads} of ours on {cores} cores"


# While training the watch looks at the machine every CHECK_EVERY_S of steps, and at once when SLOW_STEPS_TO_ACT
# steps in a row took over SLOWED_FACTOR x the run's reference (its bench step, else its fastest step): one slow
# step is a hiccup, not a neighbour. A neighbour that doubles the step is the most a race may meet unsaid.
SLOWED_FACTOR = 2.0
SLOW_STEPS_TO_ACT = 2
CHECK_EVERY_S = 5.0
TRIAL_STEPS = 3  # steps at each of two thread counts, taking turns, before the faster is kept
MORE_THREADS_GAIN = 1.02  # what more threads must gain to be kept (speed/intervals.py's MIN_EFFECT)


class ThreadWatch:
    """Fits a training run's threads to the machine as its load changes, by measurement on the run's own steps.
    When the count that leaves the other processes their cores (fitting_threads, looked up in /proc) differs
    from the one running, the two take turns for TRIAL_STEPS steps each and the faster is kept (within
    MORE_THREADS_GAIN of each other: the fewer, which never waits on a descheduled partner). A slowdown with no
    count to try is said once in a run (its pace is in its record). Every choice is said (`say`) and each change
    kept (`changes`), never silent. Inactive when the user fixed the threads or under torchrun (each rank has
    its share of the cores). `probe`, `get_threads`, `set_threads` are injectable (tests)."""

    def __init__(
        self,
        reference_s: float | None = None,
        active: bool = True,
        say=lambda line: None,
        probe=None,
        get_threads=None,
        set_threads=None,
        machine_cores: int | None = None,
        most: int | None = None,
    ):
        import torch

        self.reference_s, self.active, self.say = reference_s, active, say
        self.probe = probe or (lambda: others_running())  # looked up when called: a test may stand in for it
        self.get_threads = get_threads or torch.get_num_threads
        self.set_threads = set_threads or torch.set_num_threads
        self.cores = machine_cores or cores()
        # The most it goes back to: what the run was planned on (`most`: a resume's restored count may be one the
        # watch had dropped to), else what it started with.
        self.full = min(most or self.get_threads(), self.cores)
        self.fastest_s: float | None = None
        self.slow_in_a_row, self.since_check_s, self.slowdown_said = 0, 0.0, False
        self.trial: dict[int, list[float]] | None = None  # thread count -> its steps' seconds, while on trial
        self.tried: int | None = None  # the count last tried against the running one
        self.changes: list[str] = []

    def step(self, seconds: float, at_step: int) -> None:
        if not self.active:
            return
        if self.trial is not None:
            return self._trial_step(seconds, at_step)
        reference = self.reference_s or self.fastest_s
        self.fastest_s = min(seconds, self.fastest_s or seconds)
        slow = reference is not None and seconds > SLOWED_FACTOR * reference
        self.slow_in_a_row = self.slow_in_a_row + 1 if slow else 0
        self.since_check_s += seconds
        if self.slow_in_a_row < SLOW_STEPS_TO_ACT and self.since_check_s < CHECK_EVERY_S:
            return
        self.since_check_s, self.slow_in_a_row = 0.0, 0
        others, threads = self.probe(), self.get_threads()
        fitted = fitting_threads(self.cores, others, self.full)
        self.load = load_text(others, threads, self.cores)
        if fitted != threads and (slow or fitted != self.tried):
            self.tried, self.trial, self.trial_from = fitted, {threads: [], fitted: []}, threads
            self.set_threads(fitted)
        elif slow and not self.slowdown_said:
            self.slowdown_said = True
            self.say(
                f"step {at_step}: {seconds * 1e3:.0f} ms per step against {reference * 1e3:.0f} ms "
                f"({seconds / reference:.1f}x), with {self.load}: {threads} thread(s) already fit the cores left; "
                "this run's wall clock carries the slowdown"
            )

    def _trial_step(self, seconds: float, at_step: int) -> None:
        self.trial[self.get_threads()].append(seconds)
        fewer, more = sorted(self.trial)
        if min(map(len, self.trial.values())) < TRIAL_STEPS:
            self.set_threads(fewer if self.get_threads() == more else more)  # the two take turns
            return
        median = {count: statistics.median(times) for count, times in self.trial.items()}
        chosen = more if median[more] * MORE_THREADS_GAIN < median[fewer] else fewer
        self.trial, self.fastest_s = None, None  # the step's pace at the chosen count is learned anew
        self.set_threads(chosen)
        line = (
            f"step {at_step}: {self.load}; measured {fewer} thread(s) {median[fewer] * 1e3:.0f} ms vs {more} "
            f"{median[more] * 1e3:.0f} ms per step ({TRIAL_STEPS} steps each, taking turns): threads "
            f"{self.trial_from} -> {chosen}"
        )
        if chosen != self.trial_from:
            self.changes.append(line)
        self.say(line)
