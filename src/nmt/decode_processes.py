"""Decoding worker processes: a translate call's batches shared between the calling thread and
child processes, each with its own copy of the model and the caller's intra-op thread count.
When they start is the engine's choice (nmt.engine.PROCESSES_AFTER_SECONDS).

Why processes and not only threads: two decoding threads in one process take turns at Python's
GIL around every torch operation, and each hand-over is a sleep and a wake-up. Given the same
batches, two threads ran int8 greedy search 15-25% slower than two processes, with 6,500-9,000
voluntary context switches per call against none (docs/benchmarks.md, issue 11 session 19).

How: the caller's thread decodes as one worker; N - 1 children (`python -m nmt.decode_processes`,
a fresh interpreter, so a user's script is never re-run as with multiprocessing's spawn) take
batches from the same queue. A child needs seconds to start (import torch, load the weights), so
it starts in the background, and until it is ready a thread of the caller's process stands in
for it (as all workers were before), so no call waits for a start.
Children get the model's fp32 weights through their pipe and prepare them as the parent did
(int8 quantisation is deterministic, so a batch gives the same result wherever it runs); each
request carries the caller's decode limits and thread count. They run in their own session (Ctrl-C
is the parent's to handle) and exit when their pipe closes: when the engine is garbage-collected,
at interpreter exit, or when the parent dies.
"""

from __future__ import annotations

import collections
import io
import logging
import os
import pickle
import subprocess
import sys
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

    def __init__(self, init: bytes):
        to_child_read, to_child_write = os.pipe()
        from_child_read, from_child_write = os.pipe()
        # Found without help where nmt is installed; appended (never in front of the standard library)
        # for a checkout put on sys.path by hand.
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), package_root])))
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "nmt.decode_processes", str(to_child_read), str(from_child_write)],
                pass_fds=(to_child_read, from_child_write),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # Ctrl-C is the parent's to handle: it closes the children
            )
        except BaseException:
            for fd in (to_child_read, to_child_write, from_child_read, from_child_write):
                os.close(fd)
            raise
        os.close(to_child_read)  # the child's ends
        os.close(from_child_write)
        self.send_conn = Connection(to_child_write, readable=False)
        self.recv_conn = Connection(from_child_read, writable=False)
        self.ready = threading.Event()
        self.broken = self.stopping = False
        self._one_request = threading.Lock()  # a request and its answer are never interleaved with another's
        threading.Thread(target=self._start, args=(init,), daemon=True, name="nmt-worker-start").start()

    def _start(self, init: bytes) -> None:
        """Send the model (in this thread: a call never waits for it), then wait for the child's word."""
        try:
            self.send_conn.send_bytes(init)
            status, detail = pickle.loads(self.recv_conn.recv_bytes())
        except Exception:  # noqa: BLE001 - the process exited (EOF), or the engine closed the pipe first
            status, detail = "error", "the process exited while starting"
        if status != "ready":
            self.broken = True
            if not self.stopping:
                log.warning("a decoding worker process could not start; a thread does its work:\n%s", detail)
        self.ready.set()

    def call(self, request: Any) -> Any:
        """Send one request and wait for its answer. EOFError or OSError if the process died."""
        with self._one_request:
            self.send_conn.send_bytes(pickle.dumps(request))
            status, detail = pickle.loads(self.recv_conn.recv_bytes())
        if status != "ok":
            raise WorkerProcessError(f"a decoding worker process failed:\n{detail}")
        return detail

    def stop(self) -> None:
        """Close the pipe the process reads (it exits at EOF); kill it if it has not within 5 s, or at
        once if it is still starting (a short `nmt translate` must not wait seconds for it to exit)."""
        self.stopping = True
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


def _stop_all(children: list[_Child]) -> None:
    for child in children:
        child.stop()


class DecodeProcesses:
    """Worker processes holding a copy of one model, started in the background.

    They get the model's weights as they are when the processes start: weights changed later
    (`load_state_dict` on the engine's model) are not seen by them; load a new Translator instead.
    The weights, serialised once, stay in memory for any child started later (`ensure`).
    """

    def __init__(self, config: ModelConfig, state: dict[str, torch.Tensor], precision: str):
        weights = io.BytesIO()
        torch.save(state, weights)
        self._init = pickle.dumps({"config": config, "weights": weights.getvalue(), "precision": precision})
        self._children: list[_Child] = []
        self._one_call = threading.Lock()  # the children serve one call at a time
        self._finalizer = weakref.finalize(self, _stop_all, self._children)

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
        place of each child that is not ready (yet), or has failed. Jobs are taken in order; calls
        take turns."""
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

        def in_child(child: _Child, job: int) -> bool:
            """Run `job` in `child`; False (the job back in the queue) if the process has died."""
            try:
                results[job] = child.call(request(job))
                return True
            except (EOFError, OSError):
                child.broken = True
                with lock:
                    pending.appendleft(job)
                return False

        def feed(child: _Child) -> None:
            try:
                while (job := take()) is not None:
                    if child.ready.is_set() and not child.broken:
                        in_child(child, job)
                    else:  # a thread stands in for the child while it starts, or for good if it failed
                        results[job] = run_here(job)
            except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(error)

        feeders = [
            threading.Thread(target=feed, args=(child,), daemon=True, name="nmt-worker-feed")
            for child in self._children[:count]
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
        if errors:
            raise errors[0]
        return results


def _child_main(read_fd: int, write_fd: int) -> int:
    """A worker process: build the engine from the first message, then answer batch requests."""
    from .engine import TorchEngine  # noqa: PLC0415 - the engine imports this module

    recv_conn, send_conn = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    torch.set_num_threads(1)  # while it starts, beside the parent's workers
    try:
        init = pickle.loads(recv_conn.recv_bytes())
        model = Transformer(init["config"])
        model.load_state_dict(torch.load(io.BytesIO(init["weights"]), weights_only=True))
        model.requires_grad_(False)
        engine = TorchEngine(model, DecodeConfig(), precision=init["precision"], workers=1, threads=1, processes=False)
        send_conn.send_bytes(pickle.dumps(("ready", None)))
    except (EOFError, OSError):  # the parent closed the pipes, or died, before the start was over
        return 0
    except BaseException:  # noqa: BLE001 - reported to the parent, which goes on without this worker
        send_conn.send_bytes(pickle.dumps(("error", traceback.format_exc())))
        return 1
    while True:
        try:
            batch_index, batch_ids, search, decode, threads = pickle.loads(recv_conn.recv_bytes())
        except (EOFError, OSError):  # the parent closed the pipe, or died
            return 0
        try:
            torch.set_num_threads(threads)  # the caller's worker runs with as many
            engine.decode = decode  # the caller's limits of now, not of when this process started
            with torch.inference_mode():
                answer = ("ok", engine.search_batch(batch_ids, search, batch_index))
        except Exception:  # noqa: BLE001 - sent to the parent, which raises it
            answer = ("error", traceback.format_exc())
        try:
            send_conn.send_bytes(pickle.dumps(answer))
        except OSError:  # the parent died while this search ran
            return 0


if __name__ == "__main__":
    sys.exit(_child_main(int(sys.argv[1]), int(sys.argv[2])))
