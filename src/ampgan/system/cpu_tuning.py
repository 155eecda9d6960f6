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


# Threads that fit the machine. PyTorch's CPU step runs its operations on one OpenMP thread per core, and
# at the end of every parallel region each thread waits for the others (libgomp spins first, then sleeps).
# When another process keeps a core busy, the thread that shares it is descheduled for whole time slices while
# its partner waits: a width-8 AC-GAN's 28 ms step took 1.34 s beside one busy loop on a 2-core Zen 4 (47x),
# 122 ms with one thread (benchmarks/results/neighbour-load-amd-zen4-2core-2026-12-03). So the threads are
# fitted to the cores the other processes leave (before measuring, and while training, speed/threads.py and
# ThreadWatch below), unless the user fixed them.
THREADS_GIVEN_BY = ("OMP_NUM_THREADS",)


def cores() -> int:
    """The cores this process may run on (its affinity mask where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def threads_given() -> str | None:
    """The environment variable that fixed the thread count (the user's choice, never changed), or None."""
    return next((name for name in THREADS_GIVEN_BY if os.environ.get(name)), None)


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
    if others is None:
        return most
    return max(1, min(most, cores - others))


def oversubscribed(threads: int, cores: int, others: int | None) -> bool:
    """More runnable threads than cores: ours would wait for one another at every parallel region's end."""
    return others is not None and threads > 1 and threads + others > cores


def load_text(others: int | None, threads: int, cores: int) -> str:
    """'3 other threads running beside 2 of ours on 2 cores'."""
    seen = "an unknown number of" if others is None else str(others)
    return f"{seen} other thread{'s' if others != 1 else ''} running beside {threads} of ours on {cores} cores"


# While training: a step this many times the run's reference (its bench step, else its fastest recent step),
# twice in a row, makes the watch look at the machine (one slow step is a hiccup, not a neighbour).
SLOWED_FACTOR = 3.0
SLOW_STEPS_TO_ACT = 2
# The cores must look free this many checks in a row before the threads go back up (a neighbour that comes
# and goes would otherwise have them change at every check).
FREE_CHECKS_TO_RESTORE = 3
CHECK_EVERY_STEPS = 50  # with the threads lowered: how often to look whether the cores are free again


class ThreadWatch:
    """Watches a training run's step times and fits its threads to the machine as the load changes: lowered
    to the cores other processes leave when a step slowed SLOWED_FACTOR x twice in a row and another process is
    running, restored when the cores have been free for a while. Each change is said (`say`) and kept
    (`changes`), never silent. Inactive when the user fixed the threads or under torchrun (each rank has its
    share of the cores). `probe`, `get_threads`, `set_threads` are injectable (tests)."""

    def __init__(
        self,
        reference_s: float | None = None,
        active: bool = True,
        say=lambda line: None,
        probe=None,
        get_threads=None,
        set_threads=None,
        machine_cores: int | None = None,
    ):
        import torch

        self.reference_s, self.active, self.say = reference_s, active, say
        self.probe = probe or (lambda: others_running())  # looked up when called: a test may stand in for it
        self.get_threads = get_threads or torch.get_num_threads
        self.set_threads = set_threads or torch.set_num_threads
        self.cores = machine_cores or cores()
        self.full = self.get_threads()  # what the run started with: the most it goes back to
        self.fastest_s: float | None = None
        self.slow_in_a_row = 0
        self.free_in_a_row = 0
        self.steps_since_check = 0
        self.changes: list[str] = []

    def step(self, seconds: float, at_step: int) -> None:
        if not self.active:
            return
        reference = self.reference_s or self.fastest_s
        if self.fastest_s is None or seconds < self.fastest_s:
            self.fastest_s = seconds
        if reference is not None and seconds > SLOWED_FACTOR * reference:
            self.slow_in_a_row += 1
        else:
            self.slow_in_a_row = 0
        if self.slow_in_a_row >= SLOW_STEPS_TO_ACT and self.get_threads() > 1:
            self.slow_in_a_row = 0
            others = self.probe()
            threads = self.get_threads()
            fitted = fitting_threads(self.cores, others, threads)
            if fitted < threads:
                self._change(
                    fitted,
                    f"step {at_step}: {seconds * 1e3:.0f} ms per step against {reference * 1e3:.0f} ms before, with "
                    f"{load_text(others, threads, self.cores)}: threads {threads} -> {fitted} (each waited for "
                    "the other at every operation's end)",
                )
            return
        if self.get_threads() < self.full:
            self.steps_since_check += 1
            if self.steps_since_check >= CHECK_EVERY_STEPS:
                self.steps_since_check = 0
                others = self.probe()
                fitted = fitting_threads(self.cores, others, self.full)
                self.free_in_a_row = self.free_in_a_row + 1 if fitted > self.get_threads() else 0
                if self.free_in_a_row >= FREE_CHECKS_TO_RESTORE:
                    self.free_in_a_row = 0
                    self._change(
                        fitted,
                        f"step {at_step}: cores free again ({load_text(others, self.get_threads(), self.cores)}): "
                        f"threads {self.get_threads()} -> {fitted}",
                    )

    def _change(self, threads: int, line: str) -> None:
        self.set_threads(threads)
        self.fastest_s = None  # the step's pace at the new thread count is learned anew
        self.changes.append(line)
        self.say(line)
