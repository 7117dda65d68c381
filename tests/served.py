"""`nmt serve` started as a user starts it, in a process of its own, for the tests that need the
CLI's own choices (the engine auto picks, its worker layout) rather than an app built in the test."""

import contextlib
import re
import subprocess
import sys
import threading
import time

import httpx
import pytest


@contextlib.contextmanager
def nmt_serve(model_dir, *options):
    """`nmt serve` in a process of its own, as a user starts it; yields its URL and its log so far."""
    server = subprocess.Popen(
        [sys.executable, "-m", "nmt", "serve", "--model", str(model_dir), "--port", "0", *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        for line in server.stderr:  # the log names the port the system chose
            lines.append(line)
            if found := re.search(r"at (http://127\.0\.0\.1:\d+)/", line):
                break
        else:
            pytest.fail("nmt serve did not start:\n" + "".join(lines))
        threading.Thread(target=lambda: lines.extend(server.stderr), daemon=True).start()  # keep it draining
        url, deadline = found.group(1), time.monotonic() + 60
        while not answers(url + "/health"):  # the port is bound before uvicorn listens on it
            assert server.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.1)
        yield url, lines
    finally:
        server.terminate()
        server.wait(timeout=30)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False
