"""The stop signals (errors.STOP_SIGNALS: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2, SIGXCPU) held for a block: a
handler only records the request; the block's owner decides when to stop (training and the bench between steps, a
folder claim once the old folder is back or the new one kept)."""

from __future__ import annotations

import ctypes
import signal
import threading
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass

from ampgan.errors import STOP_SIGNALS


@dataclass
class StopRequest:
    """Set by the signal handler, read by the loop between steps."""

    signum: int | None = None

    def __bool__(self) -> bool:
        return self.signum is not None


try:
    _sigaction = ctypes.CDLL(None).sigaction
except (OSError, AttributeError, TypeError):  # no C library to ask (Windows): Python's record is all there is
    _sigaction = None
_ACTION_BYTES = 1024  # more than any libc's struct sigaction (glibc's: 152 bytes): read and written back, never parsed


@contextmanager
def handlers_kept(signals: Iterable[int]):
    """Each of `signals`' handlers put back after the block exactly as it was, as Python records it and as the OS
    holds it: a handler set from C after Python started (faulthandler.register, another library's) is the OS's
    only, signal.getsignal still says SIG_DFL, and putting that back ended the caller's process at the signal."""
    python = {sig: signal.getsignal(sig) for sig in signals}
    actions = {sig: ctypes.create_string_buffer(_ACTION_BYTES) for sig in python if _sigaction}
    actions = {sig: action for sig, action in actions.items() if _sigaction(sig, None, action) == 0}
    try:
        yield
    finally:
        for sig, handler in python.items():
            signal.signal(sig, handler)
            if sig in actions:
                _sigaction(sig, actions[sig], None)


@contextmanager
def stop_on_signals():
    """Within the block, the STOP_SIGNALS only set the request; the loop decides when to stop."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request  # signal handlers can only be installed from the main thread
        return

    def handle(signum, frame):
        request.signum = signum

    # SIGHUP: the terminal was closed, so save what is finished as for SIGTERM. A signal the process was started
    # ignoring stays ignored (nohup's SIGHUP, a shell script's background job's SIGINT): the work goes on. One whose
    # handler was not set from Python (None) is left as it is: it could not be put back.
    held = [sig for sig in STOP_SIGNALS if signal.getsignal(sig) not in (signal.SIG_IGN, None)]
    with handlers_kept(held):
        for sig in held:
            signal.signal(sig, handle)
        yield request
