"""Who may talk to the translation server: the Host and Origin checks (cross-site protection).

A server on 127.0.0.1 is still reachable from every web page its user opens: the page cannot read
a foreign answer, but it can send a request, and through DNS rebinding (a hostile name that
resolves to 127.0.0.1) even read one. Two checks close that, on every request:

- Host must name this server (an allow-list; by default the loopback names), which defeats DNS
  rebinding: the browser sends the hostile name as Host;
- a request that carries an Origin (browsers send one on every cross-site request and every POST)
  must come from this server's own page (same host and port) or from an allowed origin.

The JSON content type that POST /translate requires (requests.py) completes the set: a page
cannot send application/json across sites without a CORS preflight, which this server never grants.
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
        if "*" in self.allowed_origins or origin in self.allowed_origins:
            return True
        parts = urlsplit(origin)
        # Same origin: the browser's Origin names exactly the host:port it sent as Host.
        return parts.scheme in ("http", "https") and parts.netloc.lower() == host_header.lower() != ""


class AccessGuard:
    """ASGI middleware: 400 without a usable Host, 403 for a Host or Origin the policy does not allow."""

    def __init__(self, app: ASGIApp, policy: AccessPolicy):
        self.app, self.policy = app, policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
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
        elif origin is not None and not self.policy.origin_allowed(origin, host):
            refusal = (
                403,
                "forbidden_origin",
                (f"requests from pages at {origin!r} are not accepted (option --allowed-origins)"),
            )
        if refusal is None:
            await self.app(scope, receive, send)
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
