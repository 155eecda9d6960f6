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
import platform

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
    return {"glibc_malloc_keeps_freed_memory": bool(_applied)}
