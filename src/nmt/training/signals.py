"""SIGINT / SIGTERM as a request to stop cleanly, not an interruption in the middle of a write."""

from __future__ import annotations

import logging
import signal
import threading
from contextlib import contextmanager

log = logging.getLogger(__name__)


@contextmanager
def stop_on_signals():
    """SIGINT / SIGTERM set a flag (checked between steps) instead of killing the process mid-write."""
    requested = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield requested
        return

    def handler(signum, frame):
        log.warning("received %s: saving a checkpoint and stopping", signal.Signals(signum).name)
        requested.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield requested
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
