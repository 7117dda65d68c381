"""A fake upstream for download tests: an http.server on 127.0.0.1 that can be told to fail.

It can answer 500, close the connection half-way, ignore Range requests,
send more than the file, or stall half-way until the test lets it go on;
``race`` uses the stall to make two processes meet on one lock, deterministically.
"""

import http.server
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class FakeUpstream:
    """Serves ``files`` (relpath -> bytes) below any first path segment (/up/, /mirror/), with scripted faults."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.fail_first = 0  # answer 500 to this many requests first
        self.truncate_first = 0  # then send only half the body to this many
        self.honour_range = True
        # "announced": a Content-Length past the file's size; "endless": a body that never ends.
        self.oversize: str | None = None
        self.stall: threading.Event | None = None  # if set: send half the body, then wait for this event
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)

    def handle(self, request: http.server.BaseHTTPRequestHandler) -> None:
        range_header = request.headers.get("Range")
        self.requests.append((request.path, range_header))
        if len(self.requests) <= self.fail_first:
            request.send_error(500)
            return
        body = self.files.get(request.path.split("/", 2)[-1])
        if body is None:
            request.send_error(404)
            return
        if self.oversize:
            self.send_oversized(request, body)
            return
        start = 0
        if range_header and self.honour_range:
            start = int(range_header.removeprefix("bytes=").rstrip("-"))
            request.send_response(206)
            request.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            request.send_response(200)
        payload = body[start:]
        request.send_header("Content-Length", str(len(payload)))
        request.end_headers()
        if self.truncate_first > 0:
            self.truncate_first -= 1
            payload = payload[: len(payload) // 2]  # HTTP/1.0: the socket closes after this
        if self.stall is not None:
            request.wfile.write(payload[: len(payload) // 2])
            self.stall.wait(timeout=60)
            payload = payload[len(payload) // 2 :]
        request.wfile.write(payload)

    def send_oversized(self, request: http.server.BaseHTTPRequestHandler, body: bytes) -> None:
        """The file, then more: announced by Content-Length, or streamed without end (up to 64 MiB)."""
        request.send_response(200)
        if self.oversize == "announced":
            request.send_header("Content-Length", str(len(body) + 1))
        request.end_headers()
        try:
            for _ in range((64 << 20) // len(body)):
                request.wfile.write(body)
        except OSError:  # the client hung up: what a client with a size limit does
            pass


@contextmanager
def serving(fake: FakeUpstream) -> Iterator[FakeUpstream]:
    """Run ``fake`` on a free port of 127.0.0.1 (its address in ``fake.url``) for the ``with`` block."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            fake.handle(self)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # A short poll interval keeps shutdown() from waiting the default 0.5 s per test.
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_port}"
    try:
        yield fake
    finally:
        if fake.stall is not None:
            fake.stall.set()  # no handler left waiting
        server.shutdown()
        server.server_close()


def race(fake: FakeUpstream, procs: list[subprocess.Popen], timeout: float = 60) -> list[str]:
    """Stall ``fake``'s first download until another of ``procs`` says it waits for it; their stderr.

    Deterministic, however the processes are scheduled: the first to take a
    file's lock holds it until a second one has queued behind it. A second
    request for the file instead means there was no lock: that fails at once.
    """
    fake.stall = threading.Event()
    lines: list[list[str]] = [[] for _ in procs]
    readers = [
        threading.Thread(target=lambda p=p, out=out: out.extend(p.stderr), daemon=True)
        for p, out in zip(procs, lines, strict=True)
    ]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + timeout
    try:
        while not any("waiting for another process" in line for out in lines for line in out):
            assert len(fake.requests) < 2, f"both processes downloaded: {fake.requests}"
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), lines
            time.sleep(0.02)
        fake.stall.set()
        for p in procs:
            p.wait(timeout=timeout)
    except BaseException:
        for p in procs:
            p.kill()
        raise
    for reader in readers:
        reader.join()
    return ["".join(out) for out in lines]
