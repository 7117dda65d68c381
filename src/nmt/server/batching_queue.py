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

Under overload the queue protects itself and its clients:
- it holds at most `max_pending_sentences` waiting sentences; `submit` beyond that raises
  `Overloaded` (the server answers 503 with Retry-After) instead of growing without bound;
- a request carries a deadline; one still queued when its deadline passes is dropped, never
  translated, and its future fails with `DeadlineExceeded`;
- a request whose future was cancelled (its client hung up) leaves the count of pending sentences at
  once and is skipped by the worker: abandoned requests cost no model time;
- `close()` (at shutdown) stops accepting and fails what is still queued with `ShuttingDown`, so
  only the batch in hand is left to finish.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from ..translator import Translation
from .settings import BatchingConfig

log = logging.getLogger(__name__)


class Translates(Protocol):
    """What the queue needs from a Translator (tests pass stand-ins)."""

    def translate_detailed(
        self, texts: Sequence[str], *, beam: int | None = None, return_attention: bool = False, **n_best: int
    ) -> list[list[Translation]]: ...


class Overloaded(RuntimeError):
    """The queue is full: try again after `retry_after_s` seconds (an estimate of the time to drain it)."""

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class DeadlineExceeded(RuntimeError):
    """The request's deadline passed while it waited; it was not translated."""


class ShuttingDown(RuntimeError):
    """The server is stopping (or not started): the request was not translated."""


@dataclass
class Job:
    """One request waiting for its translations: the 1-best-first n-best list per sentence."""

    texts: list[str]
    beam: int
    attention: bool
    deadline: float = math.inf  # time.monotonic() after which the request is not worth translating
    n_best: int = 1  # translations wanted per sentence (LibreTranslate's alternatives + 1)
    target_lang: str | None = None  # a multi-target model's output language
    scores: bool = False  # token probabilities and confidence
    alignments: bool = False  # word alignments
    future: Future[list[list[Translation]]] = field(default_factory=Future)
    queued: bool = True  # still counted in the pending sentences (guarded by the queue's lock)

    @property
    def key(self) -> tuple[int, bool, int, str | None, bool, bool]:
        """Requests with the same key can share one call to the translator."""
        return self.beam, self.attention, self.n_best, self.target_lang, self.scores, self.alignments


@dataclass
class BatchStats:
    """Counters for /health and the tests; written by the worker thread only."""

    requests: int = 0  # requests answered (or failed) by a model call
    sentences: int = 0
    calls: int = 0  # calls to translate_detailed (retries of a failed batch included)
    dropped: int = 0  # requests whose client gave up while they were still queued
    timed_out: int = 0  # requests whose deadline passed while they were still queued
    rejected: int = 0  # requests refused because the queue was full (written under the lock by submit)
    shut_out: int = 0  # requests failed unanswered by close()/stop()
    model_seconds: float = 0.0  # time spent inside translate_detailed


_STOP = None  # put on the queue to end the worker after the batch in hand
BatchObserver = Callable[[int, float], None]  # (sentences, seconds) of each model call, for metrics


class BatchingQueue:
    """A bounded queue of translation requests and the one worker thread that serves it."""

    def __init__(
        self, translator: Translates, config: BatchingConfig | None = None, *, on_batch: BatchObserver | None = None
    ):
        self.translator = translator
        self.config = config or BatchingConfig()
        self.stats = BatchStats()
        self.on_batch = on_batch
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        # _lock guards _accepting, _pending and every Job.queued: no request may slip in while
        # stop() drains the queue, and a job leaves the pending count exactly once.
        self._accepting = False
        self._pending = 0
        self._lock = threading.Lock()
        self._seconds_per_sentence = 0.05  # running estimate, for Retry-After; refined by every call

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def accepting(self) -> bool:
        """Whether submit() takes requests: the worker was started and close()/stop() not yet called."""
        return self._accepting

    @property
    def pending_sentences(self) -> int:
        """Sentences queued and not yet taken by the worker (cancelled ones already left)."""
        return self._pending

    def start(self) -> None:
        if self.running:
            return
        # A daemon thread: a server killed mid-batch must not hang on it at exit.
        self._thread = threading.Thread(target=self._run, name="nmt-batching", daemon=True)
        self._thread.start()
        with self._lock:
            self._accepting = True

    def close(self) -> None:
        """Stop accepting and fail every queued request with ShuttingDown; the batch in hand goes on.

        The first step of a shutdown: clients waiting in the queue hear at once instead of when
        the server's grace period runs out.
        """
        with self._lock:
            self._accepting = False
        self._fail_queued()

    def stop(self, timeout: float | None = None) -> None:
        """Fail whatever is still queued, let the batch in hand finish (for up to `timeout` seconds,
        default config.stop_timeout_s), and end the worker."""
        if self._thread is None:
            return
        timeout = self.config.stop_timeout_s if timeout is None else timeout
        self.close()
        self._queue.put(_STOP)
        self._thread.join(timeout)
        if self._thread.is_alive():  # keep it: start() must not run a second worker beside it
            log.warning("the batching worker did not stop within %.1f s; it finishes in the background", timeout)
        else:
            self._thread = None
        self._fail_queued()  # anything that raced in before the lock closed the door

    def submit(
        self,
        texts: Sequence[str],
        *,
        beam: int,
        attention: bool = False,
        deadline: float = math.inf,
        n_best: int = 1,
        target_lang: str | None = None,
        scores: bool = False,
        alignments: bool = False,
    ) -> Future[list[list[Translation]]]:
        """Queue sentences for translation; the future resolves to one n-best list per sentence.

        Raises Overloaded when the pending sentences would pass max_pending_sentences (a request
        into an empty queue is always taken, so no request size is refused here). `deadline` is a
        time.monotonic() value: still queued then, the request is dropped (DeadlineExceeded).
        Cancelling the future before the worker takes the request drops it (the client went away);
        after that, the batch runs to the end regardless and the result is simply not read.
        """
        job = Job(
            list(texts),
            beam,
            attention,
            deadline,
            n_best=n_best,
            target_lang=target_lang,
            scores=scores,
            alignments=alignments,
        )
        with self._lock:
            if not self._accepting:
                job.future.set_exception(ShuttingDown("the translation worker is not running"))
                return job.future
            if self._pending and self._pending + len(job.texts) > self.config.max_pending_sentences:
                self.stats.rejected += 1
                raise Overloaded(
                    f"{self._pending} sentences are waiting (at most {self.config.max_pending_sentences})",
                    retry_after_s=self.retry_after_s(),
                )
            self._pending += len(job.texts)
            self._queue.put(job)
        # A cancelled request leaves the count now, not when the worker reaches it: a burst of
        # abandoned requests must not keep the queue "full" for the clients still waiting.
        job.future.add_done_callback(lambda f: f.cancelled() and self._release(job))
        return job.future

    def retry_after_s(self) -> int:
        """A client's fair wait before trying again: the time to translate what is queued (1-60 s)."""
        return max(1, min(math.ceil(self._pending * self._seconds_per_sentence), 60))

    def _release(self, job: Job) -> None:
        with self._lock:
            if job.queued:
                job.queued = False
                self._pending -= len(job.texts)

    def _fail_queued(self) -> None:
        """Fail every request still in the queue with ShuttingDown (the _STOP marker stays)."""
        kept_stop = False
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is _STOP:
                kept_stop = True
                continue
            self._release(job)
            if job.future.set_running_or_notify_cancel():
                self.stats.shut_out += 1
                job.future.set_exception(ShuttingDown("the server is shutting down"))
        if kept_stop:
            self._queue.put(_STOP)

    # --- the worker ------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            batch, stop = self._collect()
            live = [job for job in batch if self._take(job)]
            groups: dict[tuple[int, bool], list[Job]] = {}
            for job in live:
                groups.setdefault(job.key, []).append(job)
            for jobs in groups.values():
                self._translate_group(jobs)
            if stop:
                return

    def _take(self, job: Job) -> bool:
        """Whether the worker translates this job: not cancelled, not past its deadline."""
        self._release(job)
        if job.deadline <= time.monotonic():
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(DeadlineExceeded("the request waited past its deadline"))
            self.stats.timed_out += 1  # cancelled at its deadline by the server, or found expired here
            return False
        # set_running_or_notify_cancel() both skips cancelled jobs and stops later cancels:
        # from here on, every job's future is certain to get a result or an exception.
        if not job.future.set_running_or_notify_cancel():
            self.stats.dropped += 1
            return False
        return True

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
            if not job.future.cancelled():  # an abandoned request takes no room in the batch
                size += len(job.texts)
        return batch, False

    def _translate_group(self, jobs: list[Job]) -> None:
        """One model call for jobs sharing a key; each job gets back the slice for its own sentences.

        If a shared call fails, the jobs are split in two halves and each half is tried again, so
        one bad request fails alone at the cost of about 2·log2(jobs) extra calls: a request that
        always fails cannot turn batching off for everyone else, as retrying one by one would.
        """
        texts = [text for job in jobs for text in job.texts]
        beam, attention, n_best, target_lang, scores, alignments = jobs[0].key
        more: dict = {"n_best": n_best} if n_best > 1 else {}  # only asked of translators when wanted
        if target_lang is not None:
            more["target_lang"] = target_lang
        if scores:
            more["scores"] = True
        if alignments:
            more["alignments"] = True
        self.stats.calls += 1
        start = time.perf_counter()
        try:
            results = self.translator.translate_detailed(texts, beam=beam, return_attention=attention, **more)
        except Exception as err:  # noqa: BLE001 - the worker must outlive any one bad batch
            self._observe(len(texts), time.perf_counter() - start)
            if len(jobs) > 1:
                log.warning("a batch of %d requests failed (%s); retrying it in halves", len(jobs), err)
                half = len(jobs) // 2
                self._translate_group(jobs[:half])
                self._translate_group(jobs[half:])
                return
            log.exception("translating a request of %d sentences failed", len(texts))
            jobs[0].future.set_exception(err)
        else:
            self._observe(len(texts), time.perf_counter() - start)
            offset = 0
            for job in jobs:
                job.future.set_result(results[offset : offset + len(job.texts)])
                offset += len(job.texts)
        self.stats.requests += len(jobs)
        self.stats.sentences += len(texts)

    def _observe(self, sentences: int, seconds: float) -> None:
        self.stats.model_seconds += seconds
        # A slow-moving average: Retry-After needs a rough drain time, not the last batch's.
        self._seconds_per_sentence = 0.8 * self._seconds_per_sentence + 0.2 * seconds / max(sentences, 1)
        if self.on_batch is not None:
            self.on_batch(sentences, seconds)
