"""Dynamic batching: requests that arrive close together are translated by one model call.

A server receives sentences one small request at a time, yet the model spends about as long on a
batch of eight short sentences as on one: most of a call is fixed cost (Python, kernel launches,
the search loop), not arithmetic. So one worker thread owns the translator and works like this:

    1. wait for a request;
    2. keep collecting requests for `window_ms` more (or until `max_sentences` are held);
    3. split what it holds into groups that can share a call: same beam size, same attention flag;
    4. call `translate_detailed` once per group and hand every request its own slice of the results.

While the worker translates, new requests wait in the queue, so under load the next batch is
already full when the worker comes back: batches grow with the load by themselves.

    queue = BatchingQueue(translator, BatchingConfig(window_ms=5, max_sentences=64))
    queue.start()
    future = queue.submit(["Ein Mann."], beam=5, attention=False)   # a concurrent.futures.Future
    future.result()   # -> [[Translation(...)]]
    queue.stop()

A request is never split across calls, so a batch may hold a few more than `max_sentences`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from .translator import Translation

log = logging.getLogger(__name__)


class Translates(Protocol):
    """What the queue needs from a Translator (tests pass stand-ins)."""

    def translate_detailed(self, texts: Sequence[str], *, beam: int | None = None,
                           return_attention: bool = False) -> list[list[Translation]]: ...


@dataclass(frozen=True)
class BatchingConfig:
    """How long to wait for company, and how much company to take.

    window_ms = 0 still takes every request already waiting; max_sentences = 1 turns batching off
    (one request per call), which is what the load benchmark compares against.
    """

    window_ms: float = 5.0  # after the first request arrives, how long to wait for more
    max_sentences: int = 64  # stop collecting once the batch holds this many sentences

    def __post_init__(self):
        if self.window_ms < 0 or self.max_sentences < 1:
            raise ValueError(f"need window_ms >= 0 and max_sentences >= 1, got {self}")


@dataclass
class Job:
    """One request waiting for its translations: the 1-best-first n-best list per sentence."""

    texts: list[str]
    beam: int
    attention: bool
    future: Future[list[list[Translation]]] = field(default_factory=Future)

    @property
    def key(self) -> tuple[int, bool]:
        """Requests with the same key can share one call to the translator."""
        return self.beam, self.attention


@dataclass
class BatchStats:
    """Counters for /health and the tests; written by the worker thread only."""

    requests: int = 0  # requests answered (or failed) by a model call
    sentences: int = 0
    calls: int = 0  # calls to translate_detailed (retries of a failed batch included)
    dropped: int = 0  # requests whose client gave up while they were still queued


_STOP = None  # put on the queue to end the worker after the batch in hand


class BatchingQueue:
    """A queue of translation requests and the one worker thread that serves it."""

    def __init__(self, translator: Translates, config: BatchingConfig | None = None):
        self.translator = translator
        self.config = config or BatchingConfig()
        self.stats = BatchStats()
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._accepting = False  # guarded by _lock: no request may slip in while stop() drains the queue
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.running:
            return
        # A daemon thread: a server killed mid-batch must not hang on it at exit.
        self._thread = threading.Thread(target=self._run, name="nmt-batching", daemon=True)
        self._thread.start()
        with self._lock:
            self._accepting = True

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the batch in hand, fail whatever is still queued, and end the worker."""
        if self._thread is None:
            return
        with self._lock:
            self._accepting = False
        self._queue.put(_STOP)
        self._thread.join(timeout)
        if self._thread.is_alive():  # keep it: start() must not run a second worker beside it
            log.warning("the batching worker did not stop within %.0f s; it finishes in the background", timeout)
        else:
            self._thread = None
        while True:  # requests that came in after the stop: tell their clients rather than leave them hanging
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is not None and job.future.set_running_or_notify_cancel():
                job.future.set_exception(RuntimeError("the server is shutting down"))

    def submit(self, texts: Sequence[str], *, beam: int, attention: bool = False) -> Future[list[list[Translation]]]:
        """Queue sentences for translation; the future resolves to one n-best list per sentence.

        Cancelling the future before the worker takes the request drops it (the client went away);
        after that, the batch runs to the end regardless and the result is simply not read.
        """
        job = Job(list(texts), beam, attention)
        with self._lock:
            if not self._accepting:
                job.future.set_exception(RuntimeError("the translation worker is not running"))
                return job.future
            self._queue.put(job)
        return job.future

    # --- the worker ------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            batch, stop = self._collect()
            # set_running_or_notify_cancel() both skips cancelled jobs and stops later cancels:
            # from here on, every job's future is certain to get a result or an exception.
            live = [job for job in batch if job.future.set_running_or_notify_cancel()]
            self.stats.dropped += len(batch) - len(live)
            groups: dict[tuple[int, bool], list[Job]] = {}
            for job in live:
                groups.setdefault(job.key, []).append(job)
            for jobs in groups.values():
                self._translate_group(jobs)
            if stop:
                return

    def _collect(self) -> tuple[list[Job], bool]:
        """Block for a first request, then gather more for the window; and whether to stop after."""
        first = self._queue.get()
        if first is _STOP:
            return [], True
        batch, size = [first], len(first.texts)
        deadline = time.monotonic() + self.config.window_ms / 1000
        while size < self.config.max_sentences:
            remaining = deadline - time.monotonic()
            try:  # past the window, still take what is already waiting: it costs no latency
                job = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if job is _STOP:
                return batch, True
            batch.append(job)
            size += len(job.texts)
        return batch, False

    def _translate_group(self, jobs: list[Job]) -> None:
        """One model call for jobs sharing a key; each job gets back the slice for its own sentences.

        If a shared call fails, each job is tried again on its own, so one bad request (or a
        batch too large for memory) fails only the requests that fail alone, not its neighbours.
        """
        texts = [text for job in jobs for text in job.texts]
        beam, attention = jobs[0].key
        self.stats.calls += 1
        try:
            results = self.translator.translate_detailed(texts, beam=beam, return_attention=attention)
        except Exception as err:  # noqa: BLE001 - the worker must outlive any one bad batch
            if len(jobs) > 1:
                log.warning("a batch of %d requests failed (%s); translating them one by one", len(jobs), err)
                for job in jobs:
                    self._translate_group([job])
                return
            log.exception("translating a request of %d sentences failed", len(texts))
            jobs[0].future.set_exception(err)
        else:
            start = 0
            for job in jobs:
                job.future.set_result(results[start: start + len(job.texts)])
                start += len(job.texts)
        self.stats.requests += len(jobs)
        self.stats.sentences += len(texts)
