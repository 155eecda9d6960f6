"""Memory a request would take, refused before anything is allocated when the machine cannot hold it.

A size beyond the machine (`generate --n 1000000000`, `evaluate --samples 1000000000`, a sample grid of 10^7
columns, 65536-pixel images) would otherwise be found out by the allocator after a long wait (a traceback
naming 512000000000 bytes), or by the kernel's out-of-memory killer with no message at all. Every such
request states a lower bound of the bytes it needs and calls `refuse_unless_it_fits`: one rule, one line
naming the request, the bound, the memory available now and the largest value that fits."""

from __future__ import annotations

import os

import torch

from ampgan.errors import AmpganError


def is_out_of_memory(error: BaseException) -> bool:
    """Whether `error` is the device's memory running out (CUDA's OutOfMemoryError, a CPU or MPS allocator's
    RuntimeError, Python's MemoryError), wherever it was raised: inside a user's network too."""
    text = str(error).lower()  # read only on a RuntimeError: the allocators' type; a user's ValueError that mentions
    # memory is the user's error, said as such (taken for the machine's limit, it reached the CLI as a traceback)
    return isinstance(error, (torch.OutOfMemoryError, MemoryError)) or (
        isinstance(error, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)
    )


def available_memory_bytes(device: torch.device | str = "cpu") -> int | None:
    """Memory a new allocation can use now: free GPU memory, or the kernel's MemAvailable (which
    counts reclaimable page cache). None when the platform does not say."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])  # (free, total)
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def size_text(count: int) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count / 2**10:.1f} KiB"


def refuse_unless_it_fits(
    request: str, needed_bytes: int, held: str, fix: str, device: torch.device | str = "cpu"
) -> None:
    """One error line when `needed_bytes` (a lower bound) exceed the memory `device` has available now.
    `request`: what the user asked, as they wrote it (`--n 1000000000`); `held`: what the bytes hold ('the
    samples, generated at once'); `fix`: the change that fits ('use --n 70000 or fewer')."""
    available = available_memory_bytes(device)
    if available is None or needed_bytes <= available:
        return
    raise AmpganError(
        f"{request} needs at least {size_text(needed_bytes)} for {held}, and {torch.device(device).type.upper()} "
        "memory available now is "
        f"{size_text(available)}: {fix}"
    )


def largest_count(bytes_each: int, device: torch.device | str = "cpu", fixed_bytes: int = 0) -> int:
    """How many items of `bytes_each` fit beside `fixed_bytes` in the memory available now (0 if none)."""
    return max(0, ((available_memory_bytes(device) or 0) - fixed_bytes) // max(1, bytes_each))
