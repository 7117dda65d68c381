"""The server's settings: what a request may ask for, how requests are batched, what a connection may do.

Each field states its default, its `nmt serve` option and its help once, here: the CLI builds
its options from these fields (nmt.cli.serve), and docs/serving.md explains each limit. No
torch, FastAPI or uvicorn at import, so that `nmt --help` stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..config_checks import Rule, above, at_least, check_fields
from ..search_settings import BEAM

DEFAULT_HOST = "127.0.0.1"  # this machine only: there is no authentication
DEFAULT_PORT = 8000


def setting(default: Any, option: str, help: str) -> Any:  # noqa: A002 - argparse's word
    """A dataclass field with its command-line option and help text."""
    return field(default=default, metadata={"option": option, "help": help})


@dataclass(frozen=True)
class ServerLimits:
    """What one request may ask for and how long it may take; anything larger is refused with a 4xx
    naming the limit, anything slower with a JSON error (408 for a slow body, 503 past the deadline).

    Attention is (layers x heads x target pieces x source pieces) numbers per sentence: the one
    part of an answer that grows much faster than its request, so it has limits of its own.
    """

    RULES: ClassVar[dict[str, Rule]] = {
        "max_sentences": at_least(1),
        "max_chars": at_least(1),
        "max_beam": BEAM,
        "max_body_bytes": at_least(1),
        "max_attention_sentences": at_least(1),
        "max_attention_cells": at_least(1),
        "body_timeout_s": above(0),
        "deadline_s": above(0),
    }
    max_sentences: int = setting(64, "--max-sentences", "most sentences in one request")
    max_chars: int = setting(1000, "--max-chars", "most characters in one sentence")
    max_beam: int = setting(8, "--max-beam", "largest beam a request may ask for")
    max_body_bytes: int = setting(256 * 1024, "--max-body-bytes", "largest request body, checked before parsing")
    max_attention_sentences: int = setting(
        8, "--max-attention-sentences", "most sentences in a request that asks for attention"
    )
    max_attention_cells: int = setting(
        2_000_000, "--max-attention-cells", "most attention weights in one answer, about 8 bytes each as JSON"
    )
    body_timeout_s: float = setting(
        10.0, "--body-timeout", "seconds for the body to arrive once the headers are in; then 408"
    )
    deadline_s: float = setting(
        30.0, "--deadline", "seconds from a request's body to its answer; past it, 503 and the work is dropped"
    )

    def __post_init__(self) -> None:
        check_fields(self, "ServerLimits")


@dataclass(frozen=True)
class BatchingConfig:
    """How long to wait for company, and how much company to take (see nmt.server.batching_queue).

    window_ms = 0 still takes every request already waiting; max_sentences = 1 turns batching off
    (one request per call), which is what the load benchmark compares against.
    """

    RULES: ClassVar[dict[str, Rule]] = {
        "window_ms": at_least(0),
        "max_sentences": at_least(1),
        "max_pending_sentences": at_least(1),
        "stop_timeout_s": at_least(0),
    }
    window_ms: float = setting(5.0, "--batch-window-ms", "after the first request, ms to wait for more to batch")
    # A large request is split over calls of max_sentences, and between calls the worker drops the
    # requests whose client left or whose deadline passed. Smaller calls would bound that wait more
    # tightly, but lose batching: a call pays a fixed cost per decoding step, whatever its size.
    max_sentences: int = setting(64, "--batch-sentences", "sentences per model call, at most")
    max_pending_sentences: int = setting(
        256, "--max-pending-sentences", "sentences waiting for the model; more are refused with 503"
    )
    stop_timeout_s: float = setting(
        4.0, "--stop-timeout", "at shutdown, seconds for the batch in the model's hands before the process exits anyway"
    )

    def __post_init__(self) -> None:
        check_fields(self, "BatchingConfig")


@dataclass(frozen=True)
class ConnectionOptions:
    """The ASGI server's own limits (uvicorn settings, exposed as `nmt serve` options)."""

    RULES: ClassVar[dict[str, Rule]] = {
        "header_timeout_s": above(0),
        "keep_alive_s": at_least(1),
        "max_connections": at_least(0),
        "max_header_bytes": at_least(1),
        "backlog": at_least(1),
        "graceful_timeout_s": above(0),
    }
    header_timeout_s: float = setting(
        10.0, "--header-timeout", "seconds for a request's line and headers to arrive; then the connection closes"
    )
    keep_alive_s: int = setting(5, "--keep-alive", "seconds an idle keep-alive connection stays open")
    max_connections: int = setting(
        1024, "--max-connections", "connections plus requests in progress; more get 503 (0: no limit)"
    )
    max_header_bytes: int = setting(16 * 1024, "--max-header-bytes", "request line and headers; more is a 400")
    backlog: int = setting(128, "--backlog", "connections the kernel holds before they are accepted")
    graceful_timeout_s: float = setting(
        5.0, "--graceful-timeout", "at SIGTERM, seconds for requests in progress before they are answered 503"
    )
    # Off by default: trusted, X-Forwarded-For names the client, and the per-address rate limit
    # counts that name, so any client the list takes in could pose as another (uvicorn's own
    # default trusts 127.0.0.1, where a local client could then evade the limit).
    forwarded_allow_ips: str = setting(
        "",
        "--forwarded-allow-ips",
        "comma-separated addresses of the reverse proxies whose X-Forwarded-For and X-Forwarded-Proto "
        "are believed (e.g. 127.0.0.1 for a proxy on this machine; none by default)",
    )

    def __post_init__(self) -> None:
        check_fields(self, "ConnectionOptions")
