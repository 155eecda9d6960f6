"""A call abandoned once it runs past its time: the bench's first warm-up call of a configuration that
could never fit its --max-seconds (bf16 on a CPU without bf16 units can be 20x slower than fp32; one call
of a lazily regularised GAN runs every kind of step in its cycle) stops there instead of running on.

The alarm (SIGALRM) raises between Python operations, so a call is stopped within one ATen operation of
its deadline. Each `with` block the step is inside (autocast, no_grad, frozen parameters) restores its
state on the way out; the configuration is dropped afterwards, so nothing it half-changed is used again.
Only in the main thread of a single process: a rank abandoning a step inside a collective would leave the
others waiting, so under torchrun (and off the main thread) the call runs to its end.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ampgan.training.distributed import world


class CallTooLong(BaseException):
    """Raised inside the abandoned call. A BaseException, as KeyboardInterrupt is, so that no `except
    Exception` on the way (the step's one-line error for the user's code) takes it for the model's failure."""


def can_abandon() -> bool:
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and not world().distributed
    )


@contextmanager
def abandoned_after(seconds: float | None) -> Iterator[None]:
    """CallTooLong inside the block once `seconds` have passed (None, or where can_abandon() is false:
    the block runs to its end)."""
    if seconds is None or seconds <= 0 or not can_abandon():
        yield
        return

    def expire(signum, frame):
        raise CallTooLong()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
