"""Decoding worker processes: a translate call's batches shared between the calling thread and
child processes, each with its own copy of the model and one intra-op thread.

Why processes and not only threads: two decoding threads in one process take turns at Python's
GIL around every torch operation, and each hand-over is a sleep and a wake-up. Given the same
batches, two threads ran int8 greedy search 15-25% slower than two processes, with 6,500-9,000
voluntary context switches per call against none (docs/benchmarks.md, issue 11 session 19).

How: the caller's thread decodes as one worker; N - 1 children (`python -m nmt.decode_processes`,
a fresh interpreter, so a user's script is never re-run as with multiprocessing's spawn) take
batches from the same queue. A child needs seconds to start (import torch, load the weights), so
it starts in the background, and until it is ready a thread of the caller's process stands in
for it (as all workers were before), so no call waits for a start.
Children read the model's fp32 weights from a temporary file and prepare them as the parent did
(int8 quantisation is deterministic, so a batch gives the same result wherever it runs). They
exit when their pipe closes: when the engine is garbage-collected, at interpreter exit, or when
the parent dies.
"""

from __future__ import annotations

import collections
import logging
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

import torch

from .config import DecodeConfig
from .model import ModelConfig, Transformer

log = logging.getLogger(__name__)


class WorkerProcessError(RuntimeError):
    """A decoding worker process failed; the message holds its traceback."""


class _Child:
    """One worker process and the two pipes to it (messages are pickled objects)."""

    def __init__(self, init: dict[str, Any]):
        to_child_read, to_child_write = os.pipe()
        from_child_read, from_child_write = os.pipe()
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nmt.decode_processes", str(to_child_read), str(from_child_write)],
            pass_fds=(to_child_read, from_child_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=env,
        )
        os.close(to_child_read)
        os.close(from_child_write)
        self.send_conn = Connection(to_child_write, readable=False)
        self.recv_conn = Connection(from_child_read, writable=False)
        self.ready = threading.Event()
        self.broken = False
        self.send_conn.send_bytes(pickle.dumps(init))
        threading.Thread(target=self._await_ready, daemon=True, name="nmt-worker-start").start()

    def _await_ready(self) -> None:
        try:
            status, detail = pickle.loads(self.recv_conn.recv_bytes())
        except Exception:  # noqa: BLE001 - the process exited (EOF), or the engine closed the pipe first
            status, detail = "error", "the process exited while starting"
        if status != "ready":
            self.broken = True
            log.warning("a decoding worker process could not start; decoding goes on without it:\n%s", detail)
        self.ready.set()

    def call(self, request: Any) -> Any:
        """Send one request and wait for its answer. EOFError if the process died."""
        self.send_conn.send_bytes(pickle.dumps(request))
        status, detail = pickle.loads(self.recv_conn.recv_bytes())
        if status != "ok":
            raise WorkerProcessError(f"a decoding worker process failed:\n{detail}")
        return detail

    def stop(self) -> None:
        """Close the pipe the process reads (it exits at EOF); kill it if it has not within 5 s, or at
        once if it is still starting (a short `nmt translate` must not wait seconds for it to exit)."""
        self.send_conn.close()
        if not self.ready.is_set():
            self.process.kill()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.ready.wait(5)  # the starter thread has seen the exit: its pipe can close
        self.recv_conn.close()


def _stop_all(children: list[_Child], weights_dir: str) -> None:
    for child in children:
        child.stop()
    shutil.rmtree(weights_dir, ignore_errors=True)


class DecodeProcesses:
    """Worker processes holding a copy of one model, started in the background."""

    def __init__(self, config: ModelConfig, state: dict[str, torch.Tensor], decode: DecodeConfig, precision: str):
        self._dir = tempfile.mkdtemp(prefix="nmt-workers-")
        weights = os.path.join(self._dir, "weights.pt")
        torch.save(state, weights)
        self._init = {"config": config, "weights": weights, "decode": decode, "precision": precision}
        self._children: list[_Child] = []
        self._one_call = threading.Lock()  # a child answers one request at a time
        self._finalizer = weakref.finalize(self, _stop_all, self._children, self._dir)

    def ensure(self, count: int) -> None:
        """Start children until there are `count` (they get ready in the background)."""
        while len(self._children) < count:
            self._children.append(_Child(self._init))

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until every child started so far is ready (or has failed); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for child in self._children:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not child.ready.wait(left):
                return False
        return True

    def close(self) -> None:
        self._finalizer()

    def run(
        self, jobs: Sequence[int], count: int, run_here: Callable[[int], Any], request: Callable[[int], Any]
    ) -> dict[int, Any]:
        """Results of `jobs`, each computed once: by `run_here(job)` in this thread, or by one of the
        first `count` children answering `request(job)`, with a thread running `run_here` in the
        place of each child that is not ready (yet). Jobs are taken in order; calls take turns."""
        with self._one_call:
            return self._run(jobs, count, run_here, request)

    def _run(
        self, jobs: Sequence[int], count: int, run_here: Callable[[int], Any], request: Callable[[int], Any]
    ) -> dict[int, Any]:
        pending = collections.deque(jobs)
        lock = threading.Lock()
        results: dict[int, Any] = {}
        errors: list[BaseException] = []

        def take() -> int | None:
            with lock:
                return pending.popleft() if pending and not errors else None

        def feed(child: _Child) -> None:
            while (job := take()) is not None:
                try:
                    if child.ready.is_set() and not child.broken:
                        results[job] = child.call(request(job))
                    else:  # a thread stands in for the child while it starts (or after it failed)
                        results[job] = run_here(job)
                except (EOFError, OSError):  # the process died: its job goes back to the queue
                    child.broken = True
                    with lock:
                        pending.appendleft(job)
                except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
                    errors.append(error)

        feeders = [
            threading.Thread(target=feed, args=(child,), daemon=True, name="nmt-worker-feed")
            for child in self._children[:count]
            if not child.broken
        ]
        for feeder in feeders:
            feeder.start()
        try:
            while (job := take()) is not None:
                results[job] = run_here(job)
        except BaseException as error:  # Ctrl-C included: the feeders stop taking jobs too
            errors.append(error)
            raise
        finally:
            for feeder in feeders:
                feeder.join()
        while (job := take()) is not None:  # a job handed back by a child that died late
            results[job] = run_here(job)
        if errors:
            raise errors[0]
        return results


def _child_main(read_fd: int, write_fd: int) -> int:
    """A worker process: build the engine from the first message, then answer batch requests."""
    from .engine import TorchEngine  # noqa: PLC0415 - the engine imports this module

    # Ctrl-C reaches the whole process group: the parent decides, and closes the pipe when it stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    recv_conn, send_conn = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    torch.set_num_threads(1)
    try:
        init = pickle.loads(recv_conn.recv_bytes())
        model = Transformer(init["config"])
        model.load_state_dict(torch.load(init["weights"], weights_only=True))
        model.requires_grad_(False)
        engine = TorchEngine(model, init["decode"], precision=init["precision"], workers=1, threads=1, processes=False)
    except BaseException:  # noqa: BLE001 - reported to the parent, which goes on without this worker
        send_conn.send_bytes(pickle.dumps(("error", traceback.format_exc())))
        return 1
    send_conn.send_bytes(pickle.dumps(("ready", None)))
    while True:
        try:
            batch_index, batch_ids, search = pickle.loads(recv_conn.recv_bytes())
        except (EOFError, OSError):  # the parent closed the pipe, or died
            return 0
        try:
            with torch.inference_mode():
                answer = ("ok", engine.search_batch(batch_ids, search, batch_index))
        except Exception:  # noqa: BLE001 - sent to the parent, which raises it
            answer = ("error", traceback.format_exc())
        send_conn.send_bytes(pickle.dumps(answer))


if __name__ == "__main__":
    sys.exit(_child_main(int(sys.argv[1]), int(sys.argv[2])))
