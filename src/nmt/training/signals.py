"""SIGINT / SIGTERM as a request to stop cleanly, not an interruption in the middle of a write."""

from __future__ import annotations

import logging
import signal
import threading
from contextlib import contextmanager

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # a request to save and stop (Ctrl-C, a scheduler's notice)


class StopRequest(threading.Event):
    """Set by SIGINT / SIGTERM; `signum` says which (None while unset)."""

    signum: int | None = None


def interrupted_status(signum: int) -> int:
    """The shell's exit status for a run a signal stopped (130 for SIGINT, 143 for SIGTERM): the work
    is saved but not finished, so `nmt train && nmt average` must not go on to its next step."""
    return 128 + signum


def was_interrupted(status: int) -> bool:
    """Whether an exit status is `interrupted_status` of a stop signal."""
    return status in {interrupted_status(s) for s in STOP_SIGNALS}


@contextmanager
def stop_on_signals():
    """SIGINT / SIGTERM set a flag (checked between steps) instead of killing the process mid-write."""
    requested = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield requested
        return

    def handler(signum, frame):
        log.warning("received %s: saving a checkpoint and stopping", signal.Signals(signum).name)
        requested.signum = signum
        requested.set()

    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield requested
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
