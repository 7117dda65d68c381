"""Connections: uvicorn's limits and timeouts as one config, slow-header protection, graceful shutdown.

uvicorn closes a keep-alive connection left idle after an answer (timeout_keep_alive), but not
one that never sends a complete request line and headers: a client can open sockets and trickle
bytes into them for ever (slowloris). HeaderTimeoutProtocol closes any connection whose next
request's headers have not all arrived within header_timeout_s. A slow *body* is the app's
business (ServerLimits.body_timeout_s, 408).

On SIGTERM (or Ctrl-C) uvicorn stops listening, lets the requests in progress finish for up to
graceful_timeout_s and then cancels them. DrainingServer first tells the batching queue, so the
requests still queued are answered 503 at once; only the batch in the model's hands finishes.
The process then exits within graceful_timeout_s plus one batch.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Callable

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from .settings import ConnectionOptions


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port, as uvicorn binds its own, for the server to listen on.

    Bound before the model loads, so that a port in use (or an address this machine does not have)
    is one line at once rather than uvicorn's log lines after the load. OSError naming the address.
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not past a live listener: only TIME_WAIT
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise OSError(
                f"port {port} on {host} is already in use: stop what holds it, or choose another port"
            ) from None
        raise OSError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    except (OverflowError, TypeError) as err:  # a port out of range
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {err}") from None
    sock.set_inheritable(True)
    return sock


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol, plus: a connection waiting for a request's headers longer than
    header_timeout_s is closed (armed when the connection opens and after every answer)."""

    header_timeout_s = 10.0  # set per server by protocol_class()
    shutdown_grace_s = 0.5  # at shutdown, for a request already on its way on an idle connection

    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def on_response_complete(self) -> None:
        # Armed before uvicorn goes on to a pipelined request, which replaces self.cycle at once.
        self._arm_header_timer()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        super().connection_lost(exc)

    def shutdown(self) -> None:
        """At server shutdown. uvicorn closes a connection between requests at once, but a request
        may be on its way on it (a new connection, or a kept-alive one being reused): closed under
        it, the client sees a reset instead of an answer. So such a connection gets a moment to
        deliver it (then answered 503 with Connection: close) before it is closed."""
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:
            self.loop.call_later(self.shutdown_grace_s, self._shutdown_later)
        else:
            super().shutdown()

    def _shutdown_later(self) -> None:
        if not self.transport.is_closing():
            super().shutdown()  # idle still: closes; a request arrived meanwhile: closes after its answer

    def _arm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        waiting_after = self.cycle  # uvicorn makes a new cycle when a request's headers are complete
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_timeout, waiting_after)

    def _header_timeout(self, waiting_after: object) -> None:
        if self.cycle is waiting_after and not self.transport.is_closing():
            # Nothing useful to answer a client that has not finished its headers: just close.
            self.transport.close()


def protocol_class(header_timeout_s: float) -> type[HeaderTimeoutProtocol]:
    """A HeaderTimeoutProtocol subclass with this timeout (uvicorn takes a class, not an instance)."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout_s": header_timeout_s})


class NoQueryInAccessLog(logging.Filter):
    """Drops the query string from uvicorn's access lines: LibreTranslate's clients may send their
    api_key and text there (deep-translator does), and neither belongs in a log."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (*args[:2], args[2].split("?", 1)[0] + "?…", *args[3:])
        return True


def uvicorn_config(
    app: object, options: ConnectionOptions, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info"
) -> uvicorn.Config:
    """uvicorn's Config for the app with these limits (the one place they are translated)."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=protocol_class(options.header_timeout_s),
        ws="none",
        lifespan="on",
        timeout_keep_alive=options.keep_alive_s,
        limit_concurrency=options.max_connections or None,  # 0: no limit
        backlog=options.backlog,
        h11_max_incomplete_event_size=options.max_header_bytes,
        timeout_graceful_shutdown=options.graceful_timeout_s,
        server_header=False,
        # only the proxies the user names: an empty list makes uvicorn fall back to 127.0.0.1
        proxy_headers=bool(options.forwarded_allow_ips.strip()),
        forwarded_allow_ips=options.forwarded_allow_ips.strip() or None,
    )
    access = logging.getLogger("uvicorn.access")  # configured by uvicorn.Config just above
    if not any(isinstance(f, NoQueryInAccessLog) for f in access.filters):
        access.addFilter(NoQueryInAccessLog())
    return config


class DrainingServer(uvicorn.Server):
    """uvicorn's Server, calling `on_shutdown` (say, BatchingQueue.close) as the shutdown begins."""

    drain_pause_s = 0.25

    def __init__(self, config: uvicorn.Config, on_shutdown: Callable[[], None]):
        super().__init__(config)
        self.on_shutdown = on_shutdown

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.on_shutdown()
        # Still listening for a moment, now answering 503 at once with Connection: close
        # (CloseWhenDraining): the connections waiting in the kernel's backlog get that answer
        # rather than a reset when the listening socket closes.
        await asyncio.sleep(self.drain_pause_s)
        await super().shutdown(sockets)


class CloseWhenDraining:
    """ASGI middleware: once `draining()` is true, every answer says Connection: close, so that no
    client sends another request on a connection the server is about to close."""

    def __init__(self, app: ASGIApp, draining: Callable[[], bool]):
        self.app, self.draining = app, draining

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def closing_send(message: Message) -> None:
            if message["type"] == "http.response.start" and self.draining():
                message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        await self.app(scope, receive, closing_send if scope["type"] == "http" else send)
