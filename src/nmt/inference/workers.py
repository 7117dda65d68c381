"""Where a call's batches run: in the caller's thread, in worker threads, or in worker processes.

    workers = Workers(model, "int8", process_weights)
    found = workers.map(jobs, count=2, threads=1, processes=True)   # one result per job, in order

Every worker runs `BatchJob.run` (nmt.inference.batch_search) on its own batches; which kind of
worker is the engine's choice (nmt.inference.plan.WorkerPolicy says when).

Why processes and not only threads: two decoding threads in one process take turns at Python's
GIL around every torch operation, and each hand-over is a sleep and a wake-up (measured in
docs/benchmarks-log.md: thousands of voluntary context switches per call, none with processes).

How: the caller's thread decodes as one worker; N - 1 children (`python -m nmt.inference.workers`,
a fresh interpreter, so a user's script is never re-run as with multiprocessing's spawn) take
batches from the same queue. A child needs seconds to start (import torch, load the weights), so
it starts in the background, and until it is ready a thread of the caller's process stands in
for it, so no call waits for a start. Children get the model's fp32 weights through their pipe
and prepare them as the parent did (int8 quantisation is deterministic, so a batch gives the same
result wherever it runs); each job carries the caller's limits, and each request its thread count.
They run in their own session (Ctrl-C is the parent's to handle) and exit when their pipe closes:
when the engine is closed or garbage-collected, at interpreter exit, or when the parent dies.
A child imports the model, the precision and the batch search: no engine.
"""

from __future__ import annotations

import collections
import contextlib
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
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

import torch

from ..decoding import Hypothesis
from ..model import ModelConfig, Transformer
from .batch_search import BatchJob
from .plan import DEFAULT_POLICY, WorkerPolicy
from .precision import prepare_for_inference

log = logging.getLogger(__name__)

# torch's thread count is process-wide: translate calls from several threads take turns, or one
# would restore its count under another.
_THREADS_LOCK = threading.RLock()


@contextlib.contextmanager
def intra_op_threads(threads: int | None) -> Iterator[None]:
    """torch's intra-op thread count set for the duration (None: left as it is), then restored;
    one holder at a time.

    Set even when torch already reports `threads`: torch reads OpenMP's count, and another OpenMP
    user in the process can change that without MKL's (a `ctranslate2.Translator` sets its creating
    thread's OpenMP count to its intra_threads), while torch.set_num_threads sets both. Skipping
    the call then left MKL's matrix products on more threads than the plan gave this worker: with
    worker processes on the other cores, the main process ran 1.7x slower (docs/benchmarks-log.md).
    """
    with _THREADS_LOCK:
        before = torch.get_num_threads()
        if threads is not None:
            torch.set_num_threads(threads)
        try:
            yield
        finally:
            if threads is not None:
                torch.set_num_threads(before)


class WorkerProcessError(RuntimeError):
    """A decoding worker process failed; the message holds its traceback."""


class _Child:
    """One worker process and the two pipes to it (messages are pickled objects)."""

    def __init__(self, init: bytes):
        to_child_read, to_child_write = os.pipe()
        from_child_read, from_child_write = os.pipe()
        # Found without help where nmt is installed; appended (never in front of the standard library)
        # for a checkout put on sys.path by hand.
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), package_root])))
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "nmt.inference.workers", str(to_child_read), str(from_child_write)],
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


class ProcessPool:
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


class Workers:
    """The workers of one engine: the caller's thread, plus worker threads or processes.

    process_weights: the model's fp32 state for worker processes (None: threads only). They start
    on first use by `map(..., processes=True)` or `start_processes`, with the weights as they are
    then: weights changed later are not seen by them (load a new Translator instead).
    """

    def __init__(
        self,
        model: Transformer,
        precision: str,
        process_weights: dict[str, torch.Tensor] | None = None,
        policy: WorkerPolicy = DEFAULT_POLICY,
    ):
        self.model, self.precision, self.policy = model, precision, policy
        self._process_weights = process_weights
        self._pool: ProcessPool | None = None
        self._parallel_seconds = 0.0  # time spent in parallel calls: see WorkerPolicy.processes_after_s

    @property
    def pool(self) -> ProcessPool | None:
        """The worker processes, where they have started."""
        return self._pool

    @property
    def processes_due(self) -> bool:
        """Whether the next parallel call should run on worker processes (started, or due to start)."""
        return self._pool is not None or (
            self._process_weights is not None and self._parallel_seconds >= self.policy.processes_after_s
        )

    def run_here(self, job: BatchJob) -> list[list[Hypothesis]]:
        """One job in this thread."""
        return job.run(self.model, self.precision)

    def map(
        self, jobs: Sequence[BatchJob], count: int, threads: int | None, processes: bool
    ) -> list[list[list[Hypothesis]]]:
        """Each job's result, in order, from `count` workers with `threads` intra-op threads each
        (None: torch's setting as it is). The workers beyond this thread are processes if
        `processes` and they can start, threads otherwise. Each worker takes the next job (the
        longest remaining batch) when free."""
        begun = time.perf_counter()
        with intra_op_threads(threads), contextlib.ExitStack() as stack:
            if count == 1:
                found = [self.run_here(job) for job in jobs]
            elif processes and (pool := self.start_processes(count - 1)):
                by_index = pool.run(
                    range(len(jobs)),
                    count - 1,
                    run_here=lambda i: self.run_here(jobs[i]),
                    request=lambda i: (jobs[i], threads),
                )
                found = [by_index[i] for i in range(len(jobs))]
            else:
                pool = stack.enter_context(ThreadPoolExecutor(count, thread_name_prefix="nmt-decode"))
                found = list(pool.map(self.run_here, jobs))
        if count > 1:
            self._parallel_seconds += time.perf_counter() - begun
        return found

    def start_processes(self, count: int) -> ProcessPool | None:
        """The worker processes, `count` of them at least (started now, ready later), or None where
        this engine's workers are threads only."""
        if self._pool is None:
            if self._process_weights is None:
                return None
            weights, self._process_weights = self._process_weights, None  # serialised now: int8's fp32 copy can go
            self._pool = ProcessPool(self.model.config, weights, self.precision)
        try:
            self._pool.ensure(count)
        except OSError as error:  # no process can start here (resources, an embedded interpreter)
            log.warning("decoding worker processes cannot start (%s); the workers are threads", error)
            self._pool = None
        return self._pool

    def close(self) -> None:
        """Stop the worker processes; later calls run in threads."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def _child_main(read_fd: int, write_fd: int) -> int:
    """A worker process: build the model from the first message, then answer batch requests."""
    recv_conn, send_conn = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    torch.set_num_threads(1)  # while it starts, beside the parent's workers
    try:
        init = pickle.loads(recv_conn.recv_bytes())
        model = Transformer(init["config"])
        model.load_state_dict(torch.load(io.BytesIO(init["weights"]), weights_only=True))
        model.requires_grad_(False)
        precision = init["precision"]
        model = prepare_for_inference(model, precision)
        send_conn.send_bytes(pickle.dumps(("ready", None)))
    except (EOFError, OSError):  # the parent closed the pipes, or died, before the start was over
        return 0
    except BaseException:  # noqa: BLE001 - reported to the parent, which goes on without this worker
        send_conn.send_bytes(pickle.dumps(("error", traceback.format_exc())))
        return 1
    while True:
        try:
            job, threads = pickle.loads(recv_conn.recv_bytes())
        except (EOFError, OSError):  # the parent closed the pipe, or died
            return 0
        try:
            torch.set_num_threads(threads)  # the caller's worker runs with as many
            answer = ("ok", job.run(model, precision))
        except Exception:  # noqa: BLE001 - sent to the parent, which raises it
            answer = ("error", traceback.format_exc())
        try:
            send_conn.send_bytes(pickle.dumps(answer))
        except OSError:  # the parent died while this search ran
            return 0


if __name__ == "__main__":
    sys.exit(_child_main(int(sys.argv[1]), int(sys.argv[2])))
