"""Server under load: batching gain, overload at twice capacity, abandoned requests, SIGTERM under load.

    python benchmarks/server_load.py --model runs/de_en [--phases batching,overload,abandon,sigterm]

Each phase starts `nmt.server` in a subprocess on 127.0.0.1 (a free port), waits for /health,
warms up, measures, and stops it. Sentences are Multi30k validation sources from the local mirror,
in the model's source language (or --src FILE), one per request.

batching   `--clients` threads send requests back to back (each waits for its answer) until
           `--requests` are answered or `--max-seconds` pass, with dynamic batching on and then off
           (max_sentences=1: one request per model call): requests/s, p50/p99, failures, and the
           mean batch. The gain is the throughput ratio. The "on" rate is the server's capacity C.
overload   `--overload-clients` clients, each sending on a fixed schedule whether or not its last
           request was answered (as a front end relaying its users would), together at
           `--overload-factor` x C, for `--overload-seconds`; then the same at 1.0 x C. Every
           request must be answered 200 or 503 within the deadline; reports p50/p99 of the 200s,
           the 503s by error code, the slowest answer, and the server's resident memory (peak).
abandon    the model is kept busy by one large request while `--abandon` clients send a request
           each and hang up; reports how many of theirs the model translated (should be 0) and
           how long the next request took.
sigterm    SIGTERM during the overload load: seconds until the process exited, and whether
           every request sent before it was answered.
hostile    `--rounds` times: `--abandon` clients each send `--hostile-sentences` sentences at
           `--hostile-beam` and hang up at once, then one one-sentence request is timed (it should
           be answered within 2 s, never 503); then one request of 64 sentences of 1,000
           characters at `--hostile-beam`, which must be answered within `--deadline` or refused
           at once. Reports each latency and status, and the server's dropped and cut counts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from common import load_multi30k

HOST = "127.0.0.1"  # loopback only: this is a benchmark, not a deployment

# The server process: nmt.server.serve with settings given as JSON (batching is not an `nmt serve` option set).
SERVER = """
import json, sys, torch
from nmt.server import BatchingConfig, ConnectionOptions, ServerLimits, serve
from nmt.translator import EngineOptions
model, port, threads, device, options = sys.argv[1:]
options = json.loads(options)
if int(threads) > 0:
    torch.set_num_threads(int(threads))
serve(model, host="127.0.0.1", port=int(port), batching=BatchingConfig(**options["batching"]),
      limits=ServerLimits(**options["limits"]), connections=ConnectionOptions(**options["connections"]),
      engine=EngineOptions(device=device, **options["engine"]))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def percentile_ms(values: list[float], q: int) -> float:
    if len(values) < 2:
        return round(values[0] * 1000, 1) if values else 0.0
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1] * 1000, 1)


class ServerProcess:
    """`nmt.server` in a subprocess, its log in a temporary file; stops when the `with` block ends."""

    def __init__(
        self,
        args: argparse.Namespace,
        *,
        batching: dict | None = None,
        limits: dict | None = None,
        connections: dict | None = None,
    ):
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", prefix="nmt-server-")
        options = {
            "batching": {"window_ms": args.window_ms, **(batching or {})},
            "limits": limits or {},
            "connections": connections or {},
            "engine": {"engine": args.engine, **({"workers": args.workers} if args.workers else {})},
        }
        argv = [args.model, self.port, args.threads, args.device, json.dumps(options)]
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER, *map(str, argv)], stdout=self.log, stderr=subprocess.STDOUT
        )

    def __enter__(self) -> ServerProcess:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.process.poll() is None:
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
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()

    def health(self) -> dict:
        return httpx.get(f"{self.url}/health", timeout=10).json()

    def rss_mib(self) -> float:
        """The server's resident memory now (Linux /proc)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0


# --- batching on and off: closed-loop clients ------------------------------------------------------------
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


def run_load(
    url: str, sentences: list[str], *, clients: int, requests: int, max_seconds: float, beam: int | None
) -> tuple[list[float], int, float]:
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


def measure_batching(
    args: argparse.Namespace, sentences: list[str], setting: str, max_sentences: int, *, clients: int, requests: int
) -> LoadResult:
    with ServerProcess(
        args, batching={"max_sentences": max_sentences, "window_ms": args.window_ms if max_sentences > 1 else 0}
    ) as server:
        # Warm-up: the first calls pay for lazy initialisation, which is not what we measure.
        run_load(server.url, sentences, clients=2, requests=8, max_seconds=30, beam=args.beam)
        before = server.health()["batching"]
        latencies, failed, seconds = run_load(
            server.url, sentences, clients=clients, requests=requests, max_seconds=args.max_seconds, beam=args.beam
        )
        after = server.health()["batching"]
    calls = after["calls"] - before["calls"]
    return LoadResult(
        setting,
        len(latencies),
        failed,
        round(seconds, 2),
        round(len(latencies) / seconds, 2),
        percentile_ms(latencies, 50),
        percentile_ms(latencies, 99),
        round((after["sentences"] - before["sentences"]) / max(calls, 1), 2),
    )


# --- open-loop load: clients on a schedule -------------------------------------------------------------------
@dataclass
class OpenLoopResult:
    setting: str
    rate_per_s: float  # offered
    sent: int
    ok: int
    refused: dict[str, int]  # 503s by error code ("uvicorn" for its plain-text 503)
    other: int  # any other status, or no answer: must be 0
    other_kinds: dict[str, int]  # what those were
    late: int  # answered after the deadline (+1 s of slack): must be 0
    ok_per_s: float
    p50_ms: float  # of the 200s
    p99_ms: float
    slowest_ms: float  # of every answer
    rss_start_mib: float = 0.0
    rss_peak_mib: float = 0.0
    exit_s: float | None = None  # sigterm: SIGTERM to process exit
    notes: list[str] = field(default_factory=list)


async def open_loop(
    url: str,
    sentences: list[str],
    *,
    clients: int,
    rate: float,
    seconds: float,
    beam: int | None,
    timeout: float,
    stop_at: float | None = None,
    on_stop=None,
) -> list[tuple[int | str, float]]:
    """`clients` clients sending together `rate` requests/s for `seconds`, none waiting for its answers.

    Returns (status or error name, seconds) per request. With stop_at, `on_stop()` is called that many
    seconds in, and requests the server no longer accepts are recorded as "refused_connect".
    """
    period = clients / rate
    results: list[tuple[int | str, float]] = []
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as http:
        start = time.monotonic()
        tasks: list[asyncio.Task] = []

        async def one(text: str) -> None:
            body = {"text": [text]} | ({"beam": beam} if beam else {})
            began = time.monotonic()
            try:
                response = await http.post(f"{url}/translate", json=body)
                status: int | str = response.status_code
                if status == 503:
                    try:
                        status = f"503 {response.json()['error']}"
                    except ValueError:
                        status = "503 uvicorn"
            except httpx.ConnectError:
                status = "refused_connect"
            except httpx.HTTPError as err:
                status = type(err).__name__
            results.append((status, time.monotonic() - began))

        async def client(i: int) -> None:
            n = 0
            while True:
                at = start + (i / clients + n) * period  # clients evenly staggered
                if at - start >= seconds:
                    return
                await asyncio.sleep(max(0.0, at - time.monotonic()))
                tasks.append(asyncio.create_task(one(sentences[(i * 7919 + n) % len(sentences)])))
                n += 1

        stopper = None
        if stop_at is not None:

            async def stop_later() -> None:
                await asyncio.sleep(stop_at)
                on_stop()

            stopper = asyncio.create_task(stop_later())
        await asyncio.gather(*(client(i) for i in range(clients)))
        await asyncio.gather(*tasks)
        if stopper:
            await stopper
    return results


def summarise(
    setting: str, rate: float, seconds: float, results: list[tuple[int | str, float]], deadline: float
) -> OpenLoopResult:
    ok = [t for s, t in results if s == 200]
    refused = Counter(str(s)[4:] for s, _ in results if str(s).startswith("503 "))
    other = Counter(str(s) for s, _ in results if s != 200 and not str(s).startswith("503 ") and s != "refused_connect")
    return OpenLoopResult(
        setting,
        round(rate, 1),
        len(results),
        len(ok),
        dict(refused),
        sum(other.values()),
        dict(other),
        sum(1 for _, t in results if t > deadline + 1),
        round(len(ok) / seconds, 2),
        percentile_ms(ok, 50),
        percentile_ms(ok, 99),
        round(max((t for _, t in results), default=0) * 1000, 1),
    )


class RssSampler:
    """The server's peak resident memory, sampled every 0.2 s in a thread while the `with` block runs."""

    def __init__(self, server: ServerProcess):
        self.server, self.start, self.peak, self._stop = server, server.rss_mib(), 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.peak = max(self.peak, self.server.rss_mib())
            except OSError:  # the process has exited
                return

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def measure_open_loop(
    args, sentences: list[str], capacity: float, factor: float, seconds: float, *, sigterm_at: float | None = None
) -> OpenLoopResult:
    """Open-loop load at factor x capacity; with sigterm_at, SIGTERM that many seconds in."""
    with ServerProcess(args, limits={"deadline_s": args.deadline}) as server:
        run_load(server.url, sentences, clients=2, requests=8, max_seconds=30, beam=args.beam)
        exit_s: list[float] = []

        def stop() -> None:  # SIGTERM, and a thread that notes when the process is gone
            signalled = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            threading.Thread(
                target=lambda: (server.process.wait(), exit_s.append(time.monotonic() - signalled)), daemon=True
            ).start()

        with RssSampler(server) as rss:
            results = asyncio.run(
                open_loop(
                    server.url,
                    sentences,
                    clients=args.overload_clients,
                    rate=factor * capacity,
                    seconds=seconds,
                    beam=args.beam,
                    timeout=args.deadline + 30,
                    stop_at=sigterm_at,
                    on_stop=stop,
                )
            )
        if sigterm_at is not None:
            server.process.wait(timeout=60)
            time.sleep(0.1)  # let the waiting thread note the time
    setting = f"{factor:g} x capacity" + (f", SIGTERM at {sigterm_at:g} s" if sigterm_at is not None else "")
    result = summarise(setting, factor * capacity, seconds, results, args.deadline)
    result.rss_start_mib, result.rss_peak_mib = round(rss.start, 1), round(rss.peak, 1)
    result.exit_s = round(exit_s[0], 2) if exit_s else None
    if sigterm_at is not None:
        result.notes.append(
            f"{sum(1 for s, _ in results if s == 'refused_connect')} sent after the server "
            "stopped listening (connection refused)"
        )
    return result


# --- abandoned requests ---------------------------------------------------------------------------------------
@dataclass
class AbandonResult:
    abandoned: int
    dropped_unseen: int  # abandoned requests the model never saw (from /health: dropped)
    translated_of_abandoned: int  # sentences the model translated beyond the busy request and the probe
    probe_ms: float  # the next request after them, once the busy request is done
    baseline_ms: float  # the same request on an idle server before


def raw_post(url: str, body: dict) -> socket.socket:
    """Send a POST /translate and return the socket, unread."""
    port = int(url.rsplit(":", 1)[1])
    sock = socket.create_connection((HOST, port), timeout=10)
    data = json.dumps(body).encode()
    sock.sendall(
        b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(data), data)
    )
    return sock


def measure_abandon(args, sentences: list[str]) -> AbandonResult:
    """Keep the model busy with one large request; meanwhile `--abandon` clients each send one and hang up."""
    probe = {"text": [sentences[0]]} | ({"beam": args.beam} if args.beam else {})
    with ServerProcess(args) as server:
        run_load(server.url, sentences, clients=2, requests=8, max_seconds=30, beam=args.beam)
        start = time.perf_counter()
        httpx.post(f"{server.url}/translate", json=probe, timeout=60)
        baseline = time.perf_counter() - start
        before = server.health()["batching"]
        busy = {"text": sentences[1:65]} | ({"beam": args.beam} if args.beam else {})
        worker = threading.Thread(
            target=httpx.post, args=(f"{server.url}/translate",), kwargs={"json": busy, "timeout": 300}
        )
        worker.start()
        while server.health()["batching"]["calls"] == before["calls"]:  # the busy request is with the model
            time.sleep(0.01)
        sockets = [
            raw_post(server.url, {"text": [sentences[100 + i]]} | ({"beam": args.beam} if args.beam else {}))
            for i in range(args.abandon)
        ]
        while server.health()["batching"]["pending_sentences"] < args.abandon:
            time.sleep(0.01)
        for sock in sockets:
            sock.close()
        worker.join()
        start = time.perf_counter()
        httpx.post(f"{server.url}/translate", json=probe, timeout=60)
        probe_s = time.perf_counter() - start
        after = server.health()["batching"]
    translated = after["sentences"] - before["sentences"] - len(busy["text"]) - 1
    return AbandonResult(
        args.abandon,
        after["dropped"] - before["dropped"],
        translated,
        round(probe_s * 1000, 1),
        round(baseline * 1000, 1),
    )


# --- hostile: abandoned batches, then an oversized request ----------------------------------------------------
@dataclass
class HostileResult:
    case: str
    statuses: dict[str, int]  # status code -> count
    median_ms: float
    max_ms: float
    dropped: int = 0  # abandoned requests the model never saw (from /health)
    cut: int = 0  # requests dropped between two of their calls (from /health; None where not counted)


LONG_SENTENCE = ("Ein Mann fährt mit dem Fahrrad auf der Straße, und die Kinder spielen im Park. " * 13)[:1000]


def measure_hostile(args, sentences: list[str]) -> list[HostileResult]:
    """The hostile client's two cases, on one server: abandoned batches, then an oversized request."""
    small_s, small_status, large_s, large_status = [], Counter(), [], Counter()
    with ServerProcess(args, limits={"deadline_s": args.deadline}) as server:
        httpx.post(f"{server.url}/translate", json={"text": [sentences[0]]}, timeout=60)  # warm
        before = server.health()["batching"]
        for round_ in range(args.rounds):
            first = (round_ * args.abandon * args.hostile_sentences) % max(1, len(sentences) - args.hostile_sentences)
            sockets = []
            for i in range(args.abandon):
                at = (first + i * args.hostile_sentences) % max(1, len(sentences) - args.hostile_sentences)
                body = {"text": sentences[at : at + args.hostile_sentences], "beam": args.hostile_beam}
                sockets.append(raw_post(server.url, body))
            for sock in sockets:
                sock.close()
            start = time.perf_counter()
            answer = httpx.post(f"{server.url}/translate", json={"text": [sentences[1]]}, timeout=120)
            small_s.append(time.perf_counter() - start)
            small_status[str(answer.status_code)] += 1
        start = time.perf_counter()
        body = {"text": [LONG_SENTENCE] * 64, "beam": args.hostile_beam}
        answer = httpx.post(f"{server.url}/translate", json=body, timeout=args.deadline * 4)
        large_s.append(time.perf_counter() - start)
        large_status[str(answer.status_code)] += 1
        after = server.health()["batching"]
    dropped = after["dropped"] - before["dropped"]
    cut = after["cut"] - before["cut"] if "cut" in after else None
    ms = lambda values: round(statistics.median(values) * 1000, 1)  # noqa: E731
    return [
        HostileResult(
            f"1 sentence after {args.abandon} abandoned x {args.hostile_sentences} sentences, beam {args.hostile_beam}",
            dict(small_status),
            ms(small_s),
            round(max(small_s) * 1000, 1),
            dropped,
            cut,
        ),
        HostileResult(f"64 x 1,000 characters, beam {args.hostile_beam}", dict(large_status), ms(large_s), ms(large_s)),
    ]


# --- main --------------------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[4:]),
    )
    parser.add_argument("--model", required=True, help="model directory to serve")
    parser.add_argument(
        "--phases",
        default="batching,overload,abandon,sigterm",
        help="comma-separated: batching, overload, abandon, sigterm, hostile (default: all but hostile)",
    )
    parser.add_argument("--clients", type=int, default=8, help="batching: concurrent clients (default 8)")
    parser.add_argument("--requests", type=int, default=200, help="batching: requests per setting (default 200)")
    parser.add_argument("--max-seconds", type=float, default=20, help="batching: time limit per setting (default 20)")
    parser.add_argument(
        "--capacity", type=float, default=None, help="requests/s the server sustains (default: measured, see above)"
    )
    parser.add_argument("--overload-clients", type=int, default=64, help="overload: clients (default 64)")
    parser.add_argument("--overload-factor", type=float, default=2.0, help="overload: x capacity (default 2)")
    parser.add_argument("--overload-seconds", type=float, default=60, help="overload: seconds (default 60)")
    parser.add_argument("--at-capacity-seconds", type=float, default=20, help="the 1.0 x run: seconds (default 20)")
    parser.add_argument("--deadline", type=float, default=30, help="the server's --deadline (default 30)")
    parser.add_argument("--abandon", type=int, default=50, help="abandon: clients that hang up (default 50)")
    parser.add_argument("--beam", type=int, default=None, help="beam size (default: the model's)")
    parser.add_argument("--rounds", type=int, default=10, help="hostile: rounds of abandoned requests (default 10)")
    parser.add_argument(
        "--hostile-sentences", type=int, default=8, help="hostile: sentences per abandoned request (default 8)"
    )
    parser.add_argument("--hostile-beam", type=int, default=8, help="hostile: beam of its requests (default 8)")
    parser.add_argument("--window-ms", type=float, default=5, help="batching window with batching on (default 5)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads in the server (default: torch's)")
    parser.add_argument(
        "--workers", type=int, default=0, help="engine workers in the server (default: the server's own default)"
    )
    parser.add_argument(
        "--engine", default="torch", help="torch | ctranslate2 (a model directory is converted at load)"
    )
    parser.add_argument("--device", default="cpu", help="cpu | cuda | auto")
    parser.add_argument("--src", help="sentences to send, one per line (default: Multi30k val sources)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per result")
    args = parser.parse_args()
    if not (Path(args.model) / "config.yaml").exists():
        parser.error(f"{args.model} is not a model directory (no config.yaml)")
    phases = {p.strip() for p in args.phases.split(",") if p.strip()}
    known = {"batching", "overload", "abandon", "sigterm", "hostile"}
    if phases - known:
        parser.error(f"unknown phases: {', '.join(sorted(phases - known))}")
    if args.src:
        sentences = Path(args.src).read_text(encoding="utf-8").splitlines()
    else:
        import yaml

        data = (yaml.safe_load((Path(args.model) / "config.yaml").read_text()) or {}).get("data") or {}
        sentences = [src for src, _ in load_multi30k("val", data.get("src_lang", "de"), data.get("tgt_lang", "en"))]

    results: list = []
    capacity = args.capacity
    if "batching" in phases:
        on, off = (
            measure_batching(args, sentences, setting, max_sentences, clients=args.clients, requests=args.requests)
            for setting, max_sentences in ((f"batching on ({args.window_ms:g} ms window)", 64), ("batching off", 1))
        )
        results += [on, off]
        report(
            args,
            [on, off],
            f"{args.clients} clients, up to {args.requests} requests or {args.max_seconds:g} s, "
            f"beam {args.beam or 'default'}, model {args.model}",
        )
        if not args.json:
            print(f"throughput gain from batching: {on.requests_per_s / max(off.requests_per_s, 1e-9):.2f}x\n")
    if phases & {"overload", "sigterm"} and capacity is None:
        # Capacity: what the server sustains when it is never idle (every client waiting on it).
        saturated = measure_batching(args, sentences, "capacity", 64, clients=args.overload_clients, requests=10**9)
        results.append(saturated)
        report(args, [saturated], f"capacity: {args.overload_clients} clients back to back for {args.max_seconds:g} s")
        capacity = saturated.requests_per_s
    if "overload" in phases:
        load = [
            measure_open_loop(args, sentences, capacity, args.overload_factor, args.overload_seconds),
            measure_open_loop(args, sentences, capacity, 1.0, args.at_capacity_seconds),
        ]
        results += load
        report(
            args,
            load,
            f"{args.overload_clients} clients on a schedule, capacity {capacity:g} requests/s, "
            f"deadline {args.deadline:g} s",
        )
    if "abandon" in phases:
        abandon = measure_abandon(args, sentences)
        results.append(abandon)
        report(args, [abandon], "abandoned requests")
    if "hostile" in phases:
        hostile = measure_hostile(args, sentences)
        results += hostile
        report(args, hostile, f"a hostile client, {args.rounds} rounds, deadline {args.deadline:g} s")
    if "sigterm" in phases:
        seconds = min(args.overload_seconds, 20)  # SIGTERM half-way, with the queue full
        sigterm = measure_open_loop(args, sentences, capacity, args.overload_factor, seconds, sigterm_at=seconds / 2)
        results.append(sigterm)
        report(args, [sigterm], "SIGTERM under full load")


def report(args: argparse.Namespace, rows: list, title: str) -> None:
    """One JSON line per row with --json; otherwise a title and one line per row."""
    for row in rows:
        if args.json:
            print(json.dumps({"kind": type(row).__name__, **asdict(row)}))
    if args.json:
        return
    print(title)
    for row in rows:
        print("  " + ", ".join(f"{k}={v}" for k, v in asdict(row).items() if v not in (None, [], {})))
    print()


if __name__ == "__main__":
    main()
