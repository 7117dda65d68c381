"""Who may talk to the translation server: the Host and Origin checks (cross-site protection).

A server on 127.0.0.1 is still reachable from every web page its user opens: the page cannot read
a foreign answer, but it can send a request, and through DNS rebinding (a hostile name that
resolves to 127.0.0.1) even read one. Two checks close that, on every request:

- Host must name this server (an allow-list; by default the loopback names), which defeats DNS
  rebinding: the browser sends the hostile name as Host;
- a request that carries an Origin (browsers send one on every cross-site request and every POST)
  must come from this server's own page (same host and port) or from an allowed origin.

The JSON content type that POST /translate requires (requests.py) completes the set: a page
cannot send application/json across sites without a CORS preflight, which this server grants only
to an allowed origin. An allowed origin (`--allowed-origins`) gets CORS: its preflight (OPTIONS)
is answered and every answer names it in Access-Control-Allow-Origin, so its pages can read them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
HOST_HEADER = re.compile(r"(?P<name>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?")  # name or [IPv6], port


@dataclass(frozen=True)
class AccessPolicy:
    """The Host names and Origins the server answers; "*" in a list allows any.

    allowed_origins are exact "scheme://host[:port]" strings, for pages served elsewhere (say the
    reverse proxy's public name); the server's own page is always allowed.
    """

    allowed_hosts: tuple[str, ...] = LOOPBACK_NAMES
    allowed_origins: tuple[str, ...] = ()

    def host_allowed(self, host_header: str) -> bool:
        """Whether a Host header names this server (its port is not compared)."""
        if "*" in self.allowed_hosts:
            return True
        # Strictly name[:port]: urlsplit would read "evil@127.0.0.1" as 127.0.0.1 and pass a bad port.
        match = HOST_HEADER.fullmatch(host_header)
        return match is not None and match["name"].lower().strip("[]") in {
            h.lower().strip("[]") for h in self.allowed_hosts
        }

    def origin_allowed(self, origin: str, host_header: str) -> bool:
        """Whether a request from this Origin may be answered: the page's own origin, or an allowed one."""
        return self.cross_origin_allowed(origin) or same_origin(origin, host_header)

    def cross_origin_allowed(self, origin: str) -> bool:
        """Whether pages at this (other) Origin may call the API: named in allowed_origins, or "*"."""
        return "*" in self.allowed_origins or origin in self.allowed_origins


def same_origin(origin: str, host_header: str) -> bool:
    """Whether the browser's Origin names exactly the host:port it sent as Host (the server's own page)."""
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host_header.lower() != ""


# The probes answer whatever the Host: an orchestrator calls them by the replica's own address (a pod's
# IP), which no --allowed-hosts list names; they say only whether the process is alive and ready.
PROBE_PATHS = ("/livez", "/readyz")

# What a CORS preflight from an allowed origin is granted: the API's methods, for ten minutes.
CORS_METHODS = b"GET, POST"
CORS_MAX_AGE = b"600"


class AccessGuard:
    """ASGI middleware: 400 without a usable Host, 403 for a Host or Origin the policy does not allow."""

    def __init__(self, app: ASGIApp, policy: AccessPolicy):
        self.app, self.policy = app, policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["path"] in PROBE_PATHS and scope["method"] == "GET"):
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for name, value in scope["headers"]:  # several Host or Origin headers: refuse, do not guess
            key = name.decode("latin-1").lower()
            if key in ("host", "origin"):
                headers[key] = "\0" if key in headers else value.decode("latin-1")
        host, origin = headers.get("host", ""), headers.get("origin")
        refusal = None
        if not host or host == "\0":
            refusal = 400, "bad_host", "the request needs exactly one Host header"
        elif not self.policy.host_allowed(host):
            refusal = (
                403,
                "forbidden_host",
                (
                    f"Host {host!r} is not served here; allowed: "
                    f"{', '.join(self.policy.allowed_hosts)} (option --allowed-hosts)"
                ),
            )
        elif origin == "\0":
            refusal = 400, "bad_origin", "the request has more than one Origin header"
        elif origin is not None and not self.policy.origin_allowed(origin, host):
            refusal = (
                403,
                "forbidden_origin",
                (f"requests from pages at {origin!r} are not accepted (option --allowed-origins)"),
            )
        if refusal is None:
            if origin is None or same_origin(origin, host):
                await self.app(scope, receive, send)
            elif scope["method"] == "OPTIONS" and _header(scope, b"access-control-request-method"):
                await _answer_preflight(send, origin, _header(scope, b"access-control-request-headers"))
            else:
                await self.app(scope, receive, _with_cors(send, origin))
            return
        status, code, message = refusal
        body = json.dumps({"error": code, "message": message}, separators=(",", ":")).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((value for key, value in scope["headers"] if key.lower() == name), None)


def _cors_headers(origin: str) -> list[tuple[bytes, bytes]]:
    return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]


def _with_cors(send: Send, origin: str) -> Send:
    """`send`, with an allowed origin's CORS headers added to the answer's start."""

    async def sending(message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *_cors_headers(origin)]}
        await send(message)

    return sending


async def _answer_preflight(send: Send, origin: str, requested_headers: bytes | None) -> None:
    """204 to an allowed origin's preflight: its methods and the headers it asked for, for ten minutes."""
    headers = [
        *_cors_headers(origin),
        (b"access-control-allow-methods", CORS_METHODS),
        (b"access-control-max-age", CORS_MAX_AGE),
    ]
    if requested_headers:
        headers.append((b"access-control-allow-headers", requested_headers))
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
