"""Dynamic batching: requests that arrive close together are translated by one model call.

A server receives sentences one small request at a time, yet the model spends about as long on a
batch of eight short sentences as on one: most of a call is fixed cost (Python, kernel launches,
the search loop), not arithmetic. So one worker thread owns the translator and works like this:

    1. wait for a request;
    2. keep collecting requests for `window_ms` more (or until `max_sentences` are held);
    3. split what it holds into groups that can share a call: the same search request (beam, n-best,
       attention, ...: nmt.search_settings.SearchRequest), target language and extras;
    4. translate each group in calls of at most `max_sentences`, a large request split over
       several, and hand each request its translations once all are in.

While the worker translates, new requests wait in the queue, so under load the next batch is
already full when the worker comes back: batches grow with the load by themselves.

Work is bounded in time: a model call is never cut, but none is larger than `max_sentences`,
and between calls the worker drops the requests whose client hung up or whose deadline passed, so work nobody waits for
holds the worker for one call at most. And a request whose estimated cost (its own, plus the work
ahead of it, at the seconds per unit of cost measured on recent calls) cannot finish by its
deadline is refused at once (`Overloaded`), rather than after the deadline.

    queue = BatchingQueue(translator, BatchingConfig(window_ms=5, max_sentences=64))
    queue.start()
    future = queue.submit(["Ein Mann."], SearchRequest(beam=5))   # a concurrent.futures.Future
    future.result()   # -> [[Translation(...)]]
    queue.stop()

Under overload the queue protects itself and its clients:
- it holds at most `max_pending_sentences` waiting sentences; `submit` beyond that raises
  `Overloaded` (the server answers 503 with Retry-After) instead of growing without bound;
- a request carries a deadline; one still queued when its deadline passes is dropped, never
  translated, and its future fails with `DeadlineExceeded`;
- a request whose future was cancelled (its client hung up) leaves the count of pending sentences at
  once and is skipped by the worker; one already in the worker's hands is dropped before its next
  call: abandoned requests cost one call of model time at most;
- `close()` (at shutdown) stops accepting and fails what is still queued with `ShuttingDown`, so
  only the batch in hand is left to finish.
"""

from __future__ import annotations

import collections
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

from ..search_settings import SearchRequest
from ..translator import Translation
from .settings import BatchingConfig

log = logging.getLogger(__name__)


class Translates(Protocol):
    """What the queue needs from a Translator (tests pass stand-ins)."""

    def translate_detailed(self, texts: Sequence[str], request: SearchRequest, **extras) -> list[list[Translation]]: ...


class Overloaded(RuntimeError):
    """The queue is full, or too busy to finish the request by its deadline: try again after
    `retry_after_s` seconds (an estimate of the time to drain it). `limit`: the setting that refused it."""

    def __init__(self, message: str, retry_after_s: int, limit: str = "max_pending_sentences"):
        super().__init__(message)
        self.retry_after_s, self.limit = retry_after_s, limit


class DeadlineExceeded(RuntimeError):
    """The request's deadline passed before all of it was translated; its answer is not given."""


class Abandoned(RuntimeError):
    """The request's client left while it was being translated: the rest of it was dropped."""


RECENT_CALLS = 16  # the calls whose speed admission estimates with
CHARS_PER_UNIT = 50  # a sentence of c characters at beam b costs b x (1 + c / 50) x (1 + c / 1000) units
QUADRATIC_CHARS = 1000


def sentence_cost(text: str, beam: int) -> float:
    """The work of translating one sentence, in units of a 50-character greedy sentence: a search
    keeps `beam` hypotheses, its steps grow with the sentence, and so does each step's attention
    over the source and the output so far: a long sentence costs more than its length alone says
    (the two engines measured, docs/benchmarks-log.md, "Abandoned and oversized requests")."""
    chars = len(text)
    return beam * (1 + chars / CHARS_PER_UNIT) * (1 + chars / QUADRATIC_CHARS)


class JobFuture(Future):
    """A request's future that remembers a cancel the worker could not honour: once the worker has
    taken a job, Future.cancel() fails, but the client is gone all the same, so the worker drops
    the rest of the job before its next call."""

    abandoned = False

    def cancel(self) -> bool:
        self.abandoned = True
        return super().cancel()


class ShuttingDown(RuntimeError):
    """The server is stopping (or not started): the request was not translated."""


@dataclass
class Job:
    """One request waiting for its translations: the 1-best-first n-best list per sentence."""

    texts: list[str]
    request: SearchRequest  # the search, as the edge built it (its n_best: LibreTranslate's alternatives + 1)
    deadline: float = math.inf  # time.monotonic() after which the request is not worth translating
    target_lang: str | None = None  # a multi-target model's output language
    scores: bool = False  # token probabilities and confidence
    alignments: bool = False  # word alignments
    future: JobFuture = field(default_factory=JobFuture)
    queued: bool = True  # still counted in the pending sentences (guarded by the queue's lock)
    results: list[list[Translation]] = field(default_factory=list)  # of texts[:len(results)], so far

    @property
    def cost(self) -> float:
        """The work of what is left to translate (see sentence_cost)."""
        return sum(sentence_cost(text, self.request.beam) for text in self.texts[len(self.results) :])

    @property
    def key(self) -> tuple[SearchRequest, str | None, bool, bool]:
        """Requests with the same key can share one call to the translator."""
        return self.request, self.target_lang, self.scores, self.alignments


@dataclass
class BatchStats:
    """Counters for /health and the tests; written by the worker thread only."""

    requests: int = 0  # requests answered (or failed) by a model call
    sentences: int = 0
    calls: int = 0  # calls to translate_detailed (retries of a failed batch included)
    dropped: int = 0  # requests whose client gave up while they were still queued
    timed_out: int = 0  # requests whose deadline passed while they were still queued
    cut: int = 0  # requests dropped between two of their calls: the client left or the deadline passed
    rejected: int = 0  # requests refused because the queue was full (written under the lock by submit)
    refused_cost: int = 0  # requests refused because their work could not be done by their deadline
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
        self._pending_cost = 0.0  # the work of the pending sentences (sentence_cost)
        self._in_hand_cost = 0.0  # the work left in the worker's current batch
        self._lock = threading.Lock()
        # (work, seconds) of the last calls: admission and Retry-After estimate with their seconds per
        # unit of work, weighted by work, since a small call pays the same fixed cost per decoding
        # step as a large one and would otherwise make large requests look far slower than they are.
        self._recent_calls: collections.deque[tuple[float, float]] = collections.deque(maxlen=RECENT_CALLS)

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
        request: SearchRequest,
        *,
        deadline: float = math.inf,
        target_lang: str | None = None,
        scores: bool = False,
        alignments: bool = False,
    ) -> Future[list[list[Translation]]]:
        """Queue sentences for translation; the future resolves to one n-best list per sentence.

        Raises Overloaded when the pending sentences would pass max_pending_sentences (a request
        into an empty queue is always taken on that count), or when the work ahead of it and its
        own cannot be done by `deadline` at the speed measured so far (nothing is refused on
        that count before the first call is measured). `deadline` is a time.monotonic() value:
        still unanswered then, the request is dropped (DeadlineExceeded) before its next call.
        Cancelling the future drops the request: at once while it is queued, before its next
        call once the worker has it (the client went away).
        """
        job = Job(list(texts), request, deadline, target_lang=target_lang, scores=scores, alignments=alignments)
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
            cost, rate = job.cost, self._seconds_per_cost()
            if rate is not None:
                ahead_s, own_s = (self._pending_cost + self._in_hand_cost) * rate, cost * rate
                alone = time.monotonic() + own_s > deadline
                # With work ahead, the estimate decides; alone, only once it rests on enough calls
                # (a request into an idle server is otherwise taken, and cut at its deadline).
                too_slow = ahead_s > 0 or len(self._recent_calls) >= RECENT_CALLS // 2
                if too_slow and time.monotonic() + ahead_s + own_s > deadline:
                    self.stats.refused_cost += 1
                    raise Overloaded(
                        f"this request would take about {own_s:.1f} s alone, past its deadline: send fewer or "
                        "shorter sentences, or a smaller beam"
                        if alone
                        else f"the work ahead would take about {ahead_s:.1f} s, and this request's "
                        f"{own_s:.1f} s more, past its deadline",
                        retry_after_s=self.retry_after_s(),
                        limit="deadline_s",
                    )
            self._pending += len(job.texts)
            self._pending_cost += cost
            self._queue.put(job)
        # A cancelled request leaves the count now, not when the worker reaches it: a burst of
        # abandoned requests must not keep the queue "full" for the clients still waiting.
        job.future.add_done_callback(lambda f: f.cancelled() and self._release(job))
        return job.future

    def retry_after_s(self) -> int:
        """A client's fair wait before trying again: the time to translate what is queued and in
        hand (1-60 s; before any call is measured, 0.05 s per sentence)."""
        rate = self._seconds_per_cost()
        if rate is None:
            return max(1, min(math.ceil(self._pending * 0.05), 60))
        return max(1, min(math.ceil((self._pending_cost + self._in_hand_cost) * rate), 60))

    def _seconds_per_cost(self) -> float | None:
        """Seconds per unit of work over the last calls (None before the first)."""
        if not self._recent_calls:
            return None
        return sum(seconds for _, seconds in self._recent_calls) / max(sum(c for c, _ in self._recent_calls), 1e-9)

    def _release(self, job: Job) -> None:
        with self._lock:
            if job.queued:
                job.queued = False
                self._pending -= len(job.texts)
                self._pending_cost = max(0.0, self._pending_cost - job.cost)

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
            groups: dict[tuple, list[Job]] = {}
            for job in live:
                groups.setdefault(job.key, []).append(job)
            self._in_hand_cost = sum(job.cost for job in live)
            for jobs in groups.values():
                self._translate_group(jobs)
            self._in_hand_cost = 0.0
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
        """The sentences of jobs that share a key, in calls of at most max_sentences, oldest first;
        before each call, the jobs whose client left or whose deadline passed are dropped. Each job
        is answered as soon as its last sentence is in."""
        waiting = list(jobs)
        while waiting:
            waiting = [job for job in waiting if self._still_wanted(job)]
            if waiting:
                self._call(self._next_call(waiting))
                waiting = [job for job in waiting if not job.future.done()]

    def _still_wanted(self, job: Job) -> bool:
        """Whether the rest of a job in hand is still worth translating; if not, it fails now."""
        if job.texts and not (job.future.abandoned or job.deadline <= time.monotonic()):
            return True
        if not job.texts:
            job.future.set_result([])
            return False
        self._in_hand_cost -= job.cost
        self.stats.cut += 1
        if job.future.abandoned:
            job.future.set_exception(Abandoned("the client left"))
        else:
            job.future.set_exception(DeadlineExceeded("the deadline passed before the request was translated"))
        return False

    def _next_call(self, waiting: list[Job]) -> list[tuple[Job, int, int]]:
        """The next call's sentences: (job, first, end) runs of each job's next sentences, oldest
        job first, up to max_sentences."""
        parts: list[tuple[Job, int, int]] = []
        room = self.config.max_sentences
        for job in waiting:
            first = len(job.results)
            end = min(len(job.texts), first + room)
            parts.append((job, first, end))
            room -= end - first
            if not room:
                break
        return parts

    def _call(self, parts: list[tuple[Job, int, int]]) -> None:
        """One model call for these runs of sentences; each job's share joins its results.

        If a shared call fails, each job's part is tried again alone, so one bad request fails by
        itself and batching goes on for everyone else."""
        texts = [text for job, first, end in parts for text in job.texts[first:end]]
        request, target_lang, scores, alignments = parts[0][0].key
        more: dict = {}  # only asked of translators when wanted
        if target_lang is not None:
            more["target_lang"] = target_lang
        if scores:
            more["scores"] = True
        if alignments:
            more["alignments"] = True
        cost = sum(sentence_cost(text, request.beam) for text in texts)
        self.stats.calls += 1
        start = time.perf_counter()
        try:
            results = self.translator.translate_detailed(texts, request, **more)
        except Exception as err:  # noqa: BLE001 - the worker must outlive any one bad request
            self._observe(len(texts), cost, time.perf_counter() - start)
            if len(parts) > 1:
                log.warning("a call for %d requests failed (%s); trying each alone", len(parts), err)
                for part in parts:
                    self._call([part])
                return
            job = parts[0][0]
            log.exception("translating a request of %d sentences failed", len(job.texts))
            self._in_hand_cost -= job.cost
            self.stats.requests += 1
            job.future.set_exception(err)
            return
        self._observe(len(texts), cost, time.perf_counter() - start)
        self._in_hand_cost -= cost
        self.stats.sentences += len(texts)
        offset = 0
        for job, first, end in parts:
            job.results += results[offset : offset + end - first]
            offset += end - first
            if len(job.results) == len(job.texts):
                self.stats.requests += 1
                job.future.set_result(job.results)

    def _observe(self, sentences: int, cost: float, seconds: float) -> None:
        self.stats.model_seconds += seconds
        self._recent_calls.append((cost, seconds))
        if self.on_batch is not None:
            self.on_batch(sentences, seconds)
