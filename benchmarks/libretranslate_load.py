"""LibreTranslate's POST /translate under load: requests/s and latency with 1, 8 and 32 clients,
one model served and two.

    python benchmarks/libretranslate_load.py --model MODEL_DIR [--second MODEL_DIR] [--seconds 15]

Starts `nmt serve` in a subprocess (a free port on 127.0.0.1), waits for /health, warms up, then
for each client count runs that many threads sending form-encoded requests back to back (one
Multi30k validation sentence each, as LibreTranslate's clients send them) for --seconds, and
reports requests/s and p50/p90/p99 latency. With --second, a second server serves both models and
the clients alternate between the two directions (the second model's languages are its own, e.g.
a copy of the first with imported_from.json's languages swapped).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

from common import load_multi30k

CLIENTS = (1, 8, 32)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def languages(model_dir: Path) -> tuple[str, str]:
    origin = model_dir / "imported_from.json"
    if origin.is_file():
        values = json.loads(origin.read_text())
        return values["source_lang"], values["target_lang"]
    from nmt.model_dir import read_run_config

    config = read_run_config(model_dir)
    return config.data.src_lang, config.data.tgt_lang


def start_server(models: list[Path], port: int) -> subprocess.Popen:
    argv = [sys.executable, "-m", "nmt", "serve", "--port", str(port), "--max-pending-sentences", "4096"]
    for model in models:
        argv += ["--model", str(model)]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                if json.load(answer)["ready"]:
                    return server
        except OSError:
            time.sleep(0.5)
        if server.poll() is not None:
            raise RuntimeError(f"the server exited: {server.stderr.read()[-2000:]}")
    raise RuntimeError("the server did not become ready")


def translate(port: int, text: str, source: str, target: str) -> None:
    data = urllib.parse.urlencode({"q": text, "source": source, "target": target}).encode()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/translate", data=data, timeout=120) as answer:
        assert "translatedText" in json.load(answer)


def load(port: int, clients: int, seconds: float, sentences: list[str], directions: list[tuple[str, str]]):
    """(requests/s, latencies in s) of `clients` threads sending back to back for `seconds`."""
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(index: int) -> None:
        i = index
        while time.monotonic() < stop:
            source, target = directions[i % len(directions)]
            start = time.perf_counter()
            translate(port, sentences[i % len(sentences)], source, target)
            with lock:
                latencies.append(time.perf_counter() - start)
            i += clients

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(latencies) / (time.perf_counter() - started), sorted(latencies)


def percentile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--second", type=Path, help="a second model, for the two-model runs")
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sentences = [s for s, _ in load_multi30k("val")][:500]
    setups = [("one model", [args.model])]
    if args.second:
        setups.append(("two models", [args.model, args.second]))
    rows = []
    for name, models in setups:
        port = free_port()
        server = start_server(models, port)
        try:
            directions = [languages(m) for m in models]
            for source, target in directions:  # warm-up: each model's first calls
                for text in sentences[:8]:
                    translate(port, text, source, target)
            for clients in CLIENTS:
                rate, latencies = load(port, clients, args.seconds, sentences, directions)
                rows.append(
                    {
                        "setup": name,
                        "clients": clients,
                        "requests_per_s": round(rate, 2),
                        "p50_ms": round(percentile(latencies, 0.5)),
                        "p90_ms": round(percentile(latencies, 0.9)),
                        "p99_ms": round(percentile(latencies, 0.99)),
                        "mean_ms": round(statistics.mean(latencies) * 1000),
                    }
                )
        finally:
            server.terminate()
            server.wait(60)
    if args.json:
        print(json.dumps(rows))
        return
    print("setup | clients | requests/s | p50 ms | p90 ms | p99 ms")
    for row in rows:
        print(
            f"{row['setup']:10s} {row['clients']:3d} {row['requests_per_s']:8.2f} {row['p50_ms']:7d} "
            f"{row['p90_ms']:7d} {row['p99_ms']:7d}"
        )


if __name__ == "__main__":
    main()
