"""Prometheus metrics for the translation server, served at GET /metrics in the text format.

    nmt_http_requests_total{path, status}       every answer, by path and status code
    nmt_request_seconds{outcome}                POST /translate latency: ok, refused (4xx), overloaded,
                                                deadline_exceeded, shutting_down, disconnected, ...
    nmt_queue_pending_sentences                 sentences waiting for the model (gauge)
    nmt_batch_sentences / nmt_batch_seconds     per model call: its sentences and its time
    nmt_sentences_translated_total              sentences the model answered (and model calls, seconds)
    nmt_requests_dropped_total{reason}          work skipped: disconnected, deadline, overloaded, too_slow,
                                                cut (between two of its calls), shutdown
    nmt_client_disconnects_total{stage}         clients gone before their answer: "body" (mid-body), "answer"
    nmt_translation_cache_lookups_total{result} sentences looked up in the translation cache: hit, miss
    nmt_shared_state_reachable                  1 while the state shared with other replicas answers (gauge)

Each app has its own CollectorRegistry (not prometheus_client's global one), so several apps in
one process, as in the tests, do not collide, and the numbers describe this app alone. With
several server processes, scrape each one (see docs/serving.md).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .batching_queue import BatchingQueue

# anything else is "other": labels stay few
KNOWN_PATHS = (
    "/",
    "/translate",
    "/health",
    "/livez",
    "/readyz",
    "/metrics",
    "/detect",
    "/languages",
    "/frontend/settings",
)
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class QueueCollector(Collector):
    """Reads the queues' own counters at scrape time, so the worker threads need no metrics code.

    With several models (one queue each), the figures are their sums; nmt_worker_running is 1 only
    while every worker runs."""

    def __init__(self, queues: list[BatchingQueue]):
        self.queues = queues

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        def total(read) -> float:
            return sum(read(q) for q in self.queues)

        yield GaugeMetricFamily(
            "nmt_queue_pending_sentences", "Sentences waiting for the model", value=total(lambda q: q.pending_sentences)
        )
        running = int(all(q.running for q in self.queues))
        yield GaugeMetricFamily("nmt_worker_running", "1 while the batching workers run", value=running)
        yield CounterMetricFamily(
            "nmt_sentences_translated", "Sentences the model answered", value=total(lambda q: q.stats.sentences)
        )
        yield CounterMetricFamily(
            "nmt_model_calls", "Calls to the model (retries included)", value=total(lambda q: q.stats.calls)
        )
        yield CounterMetricFamily(
            "nmt_model_seconds", "Seconds spent in the model", value=total(lambda q: q.stats.model_seconds)
        )
        dropped = CounterMetricFamily("nmt_requests_dropped", "Requests not translated, by reason", labels=["reason"])
        for reason, field in (
            ("disconnected", "dropped"),
            ("deadline", "timed_out"),
            ("overloaded", "rejected"),
            ("too_slow", "refused_cost"),  # refused at admission: the work ahead and its own past the deadline
            ("cut", "cut"),  # dropped between two of its calls: client gone or deadline passed
            ("shutdown", "shut_out"),
        ):
            dropped.add_metric([reason], total(lambda q, field=field: getattr(q.stats, field)))
        yield dropped


class ServerMetrics:
    """The app's registry and the metrics its handlers and middleware update."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "nmt_http_requests", "HTTP answers by path and status", ["path", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "nmt_request_seconds",
            "POST /translate time, from the headers in to the answer",
            ["outcome"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.disconnects = Counter(
            "nmt_client_disconnects",
            "POST /translate clients that left before their answer: while sending the body, or waiting for the answer",
            ["stage"],
            registry=self.registry,
        )
        self.memory_lookups = Counter(
            "nmt_memory_lookups",
            "Sentences looked up in the translation memory, by result: exact (served without a search), fuzzy "
            "(offered beside the model's translation) or none",
            ["result"],
            registry=self.registry,
        )
        self.cache_lookups = Counter(
            "nmt_translation_cache_lookups",
            "Sentences looked up in the translation cache, by result: hit (answered without a search) or miss",
            ["result"],
            registry=self.registry,
        )
        self.shared_state_reachable = Gauge(
            "nmt_shared_state_reachable",
            "1 while the state shared with other replicas (--state) answers, 0 while this replica serves alone",
            registry=self.registry,
        )
        self.batch_sentences = Histogram(
            "nmt_batch_sentences", "Sentences per model call", buckets=BATCH_BUCKETS, registry=self.registry
        )
        self.batch_seconds = Histogram(
            "nmt_batch_seconds", "Seconds per model call", buckets=LATENCY_BUCKETS, registry=self.registry
        )

    def watch(self, queues: list[BatchingQueue]) -> None:
        """Report the queues' depth and counters (call once per app)."""
        self.registry.register(QueueCollector(list(queues)))

    def batch(self, sentences: int, seconds: float) -> None:
        """The queue's on_batch hook: one model call of `sentences` that took `seconds`."""
        self.batch_sentences.observe(sentences)
        self.batch_seconds.observe(seconds)

    def exposition(self) -> tuple[bytes, str]:
        """The text format and its content type, for GET /metrics."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class StatusCounter:
    """ASGI middleware counting every answer by path and status, refusals by other middleware included."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"] if scope["path"] in KNOWN_PATHS else "other"
        status = 0  # stays 0 if the client left before any answer started

        async def counting_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            self.metrics.requests.labels(path, str(status or "none")).inc()
