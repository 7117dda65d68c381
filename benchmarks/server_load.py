"""Server under load: requests/s and latency with dynamic batching on, then off.

    python benchmarks/server_load.py --model runs/de_en [--clients 8] [--requests 200] [--max-seconds 20]

For each setting it starts `nmt.server` in a subprocess on 127.0.0.1 (a free port), waits for
/health, warms up, then lets `--clients` threads send one-sentence requests back to back (each
waits for its answer before sending the next) until `--requests` are answered or `--max-seconds`
pass. Sentences are Multi30k validation sources from the local mirror, in the model's source language
(or --src FILE). "Batching off" is the same server with max_sentences=1: one request per model call.
It reports requests/s, p50/p99 latency, failed requests, and the mean batch the model saw; the
server is stopped at the end of each run.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from common import load_multi30k

HOST = "127.0.0.1"  # loopback only: this is a benchmark, not a deployment

# The server process: nmt.server.serve with a batching setting that `nmt serve` does not expose.
SERVER = """
import sys, torch
from nmt.batching_queue import BatchingConfig
from nmt.server import serve
model, port, window_ms, max_sentences, threads, device = sys.argv[1:]
if int(threads) > 0:
    torch.set_num_threads(int(threads))
serve(model, host="127.0.0.1", port=int(port), device=device,
      batching=BatchingConfig(window_ms=float(window_ms), max_sentences=int(max_sentences)))
"""


@dataclass
class LoadResult:
    setting: str
    requests: int  # answered with 200
    failed: int  # any other status, or no answer
    seconds: float
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    mean_batch: float  # sentences per model call, from /health


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class ServerProcess:
    """`nmt.server` in a subprocess, its log in a temporary file; stops when the `with` block ends."""

    def __init__(self, model: str, *, window_ms: float, max_sentences: int, threads: int, device: str):
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", prefix="nmt-server-")
        args = [model, self.port, window_ms, max_sentences, threads, device]
        self.process = subprocess.Popen([sys.executable, "-c", SERVER, *map(str, args)],
                                        stdout=self.log, stderr=subprocess.STDOUT)

    def __enter__(self) -> ServerProcess:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.__exit__()
        self.log.seek(0)
        raise RuntimeError(f"the server did not become ready; its log:\n{self.log.read()[-3000:]}")

    def __exit__(self, *exc) -> None:
        self.process.terminate()  # uvicorn shuts down cleanly on SIGTERM
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def run_load(url: str, sentences: list[str], *, clients: int, requests: int, max_seconds: float,
             beam: int | None) -> tuple[list[float], int, float]:
    """Latencies (s) of answered requests, the number failed, and the wall time."""
    latencies: list[float] = []
    failed = 0
    sent = 0
    lock = threading.Lock()
    deadline = time.monotonic() + max_seconds

    def client() -> None:
        nonlocal sent, failed
        with httpx.Client(timeout=60) as http:  # one keep-alive connection per client, like a real one
            while time.monotonic() < deadline:
                with lock:
                    if sent >= requests:
                        return
                    text, sent = sentences[sent % len(sentences)], sent + 1
                body = {"text": [text]} | ({"beam": beam} if beam else {})
                start = time.perf_counter()
                try:
                    ok = http.post(f"{url}/translate", json=body).status_code == 200
                except httpx.HTTPError:
                    ok = False
                with lock:
                    if ok:
                        latencies.append(time.perf_counter() - start)
                    else:
                        failed += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, failed, time.perf_counter() - start


def measure(args: argparse.Namespace, setting: str, *, window_ms: float, max_sentences: int,
            sentences: list[str] | None) -> LoadResult:
    with ServerProcess(args.model, window_ms=window_ms, max_sentences=max_sentences, threads=args.threads,
                       device=args.device) as server:
        health = httpx.get(f"{server.url}/health").json()
        if sentences is None:
            sentences = [src for src, _ in load_multi30k("val", health["src_lang"], health["tgt_lang"])]
        # Warm-up: the first calls pay for lazy initialisation, which is not what we measure.
        run_load(server.url, sentences, clients=2, requests=8, max_seconds=30, beam=args.beam)
        before = httpx.get(f"{server.url}/health").json()["batching"]
        latencies, failed, seconds = run_load(server.url, sentences, clients=args.clients, requests=args.requests,
                                              max_seconds=args.max_seconds, beam=args.beam)
        after = httpx.get(f"{server.url}/health").json()["batching"]
    calls = after["calls"] - before["calls"]
    percentiles = statistics.quantiles(latencies, n=100, method="inclusive") if len(latencies) > 1 else [0] * 99
    return LoadResult(setting, len(latencies), failed, round(seconds, 2), round(len(latencies) / seconds, 2),
                      round(percentiles[49] * 1000, 1), round(percentiles[98] * 1000, 1),
                      round((after["sentences"] - before["sentences"]) / max(calls, 1), 2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="model directory to serve")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    parser.add_argument("--requests", type=int, default=200, help="requests per setting (default 200)")
    parser.add_argument("--max-seconds", type=float, default=20, help="time limit per setting (default 20)")
    parser.add_argument("--beam", type=int, default=None, help="beam size (default: the model's)")
    parser.add_argument("--window-ms", type=float, default=5, help="batching window with batching on (default 5)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads in the server (default: torch's)")
    parser.add_argument("--device", default="cpu", help="cpu | cuda | auto")
    parser.add_argument("--src", help="sentences to send, one per line (default: Multi30k val sources)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per setting")
    args = parser.parse_args()
    if not (Path(args.model) / "config.yaml").exists():
        parser.error(f"{args.model} is not a model directory (no config.yaml)")
    sentences = Path(args.src).read_text(encoding="utf-8").splitlines() if args.src else None

    results = [measure(args, f"batching on ({args.window_ms:g} ms window)", window_ms=args.window_ms,
                       max_sentences=64, sentences=sentences),
               measure(args, "batching off", window_ms=0, max_sentences=1, sentences=sentences)]
    if args.json:
        for result in results:
            print(json.dumps(asdict(result)))
        return
    print(f"{args.clients} clients, up to {args.requests} requests or {args.max_seconds:g} s, beam "
          f"{args.beam or 'default'}, model {args.model}")
    print(f"{'setting':<28} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'failed':>7} {'answered':>9} {'batch':>6}")
    for r in results:
        print(f"{r.setting:<28} {r.requests_per_s:>8.1f} {r.p50_ms:>8.1f} {r.p99_ms:>8.1f} {r.failed:>7} "
              f"{r.requests:>9} {r.mean_batch:>6.2f}")
    print(f"throughput gain from batching: {results[0].requests_per_s / max(results[1].requests_per_s, 1e-9):.2f}x")


if __name__ == "__main__":
    main()
