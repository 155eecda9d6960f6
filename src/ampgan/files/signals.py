"""The stop signals (errors.STOP_SIGNALS: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2, SIGXCPU) held for a block: a
handler only records the request; the block's owner decides when to stop (training and the bench between steps, a
folder claim once the old folder is back or the new one kept)."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass

from ampgan.errors import STOP_SIGNALS


@dataclass
class StopRequest:
    """Set by the signal handler, read by the loop between steps."""

    signum: int | None = None

    def __bool__(self) -> bool:
        return self.signum is not None


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
    previous = {
        sig: signal.signal(sig, handle) for sig in STOP_SIGNALS if signal.getsignal(sig) not in (signal.SIG_IGN, None)
    }
    try:
        yield request
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
