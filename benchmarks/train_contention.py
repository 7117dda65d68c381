"""Training speed beside other work: one process of two threads against one process per core.

    python benchmarks/train_contention.py [--seconds 60] [--placements threads,processes]
                                          [--conditions idle,busy,train,serve]

Each measurement is a real `nmt train` of the default recipe (configs/multi30k_de_en.yaml,
2,048-token batches, no validation) for a fixed wall-clock budget; the figure is the median
of its logged target tokens/s after the first two windows (start-up and a cold cache).
Placements (`train.processes`):

- threads: one process, torch's default intra-op threads (one per core), the old default;
- processes: `train.processes=auto`, one single-threaded worker per core, splitting the batch;
- passive: one process as `threads`, with OMP_WAIT_POLICY=PASSIVE (waiting threads sleep
  instead of spinning).

Conditions: idle; busy (a `python -c 'while True: pass'` beside it); train (a second `nmt train`
of the same placement started at the same moment: both figures); serve (`nmt serve` of a small
model beside it, with a client sending it one request of 8 sentences after another).
Placements alternate within each condition, so that drift in the machine hits all alike.
Needs the machine to itself: nothing else may run while it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from common import REPO, load_multi30k

PLACEMENTS = {
    "threads": (["train.processes=1"], {}),
    "processes": (["train.processes=auto"], {}),
    "passive": (["train.processes=1"], {"OMP_WAIT_POLICY": "PASSIVE"}),
}
QUIET = ["train.valid_every=1000000", "train.valid_bleu_sentences=0", "train.best_metric=loss", "train.log_every=10"]


def start_training(out: Path, placement: str, seconds: float) -> subprocess.Popen:
    sets, env = PLACEMENTS[placement]
    command = [sys.executable, "-m", "nmt", "train", str(REPO / "configs/multi30k_de_en.yaml"), "--out", str(out)]
    command += ["--quiet", "--set", f"train.max_time={seconds}s", *QUIET, *sets]
    return subprocess.Popen(command, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def tokens_per_s(out: Path) -> float:
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    speeds = [r["tokens_per_s"] for r in records if r["kind"] == "train"][2:]
    return statistics.median(speeds)


def finish(proc: subprocess.Popen) -> None:
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"nmt train failed:\n{err.decode()[-2000:]}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`nmt serve` of a small model, and a client keeping it busy with one request after another."""

    def __init__(self, model: Path, sentences: list[str]):
        self.port, self.sentences, self.stop, self.requests = free_port(), sentences, threading.Event(), 0
        command = [sys.executable, "-m", "nmt", "serve", "--model", str(model), "--port", str(self.port)]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            raise SystemExit("nmt serve did not start")
        self.client = threading.Thread(target=self.send, daemon=True)
        self.client.start()

    def send(self) -> None:
        i = 0
        while not self.stop.is_set():
            batch = self.sentences[i : i + 8]
            i = (i + 8) % (len(self.sentences) - 8)
            body = json.dumps({"text": batch}).encode()
            request = urllib.request.Request(
                f"http://127.0.0.1:{self.port}/translate", body, {"Content-Type": "application/json"}
            )
            urllib.request.urlopen(request, timeout=120).read()
            self.requests += 1

    def close(self) -> None:
        self.stop.set()
        self.client.join(timeout=120)
        self.proc.terminate()
        self.proc.wait()


def measure(placement: str, condition: str, tmp: Path, seconds: float, model: Path | None) -> list[float]:
    run = tmp / f"{placement}-{condition}"
    beside, server = None, None
    if condition == "busy":
        beside = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    elif condition == "serve":
        server = Server(model, [s for s, _ in load_multi30k("val")][:200])
    main = start_training(run, placement, seconds)
    if condition == "train":
        beside = start_training(tmp / f"{placement}-second", placement, seconds)
    finish(main)
    speeds = [tokens_per_s(run)]
    if condition == "train":
        finish(beside)
        speeds.append(tokens_per_s(tmp / f"{placement}-second"))
    elif beside is not None:
        beside.kill()
        beside.wait()
    if server is not None:
        server.close()
        print(f"  (the server answered {server.requests} requests of 8 sentences)", file=sys.stderr)
    return speeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60, help="training budget of each measurement")
    parser.add_argument("--placements", default="threads,processes")
    parser.add_argument("--conditions", default="idle,busy,train,serve")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object too")
    args = parser.parse_args()
    placements, conditions = args.placements.split(","), args.conditions.split(",")
    results: dict[str, dict[str, list[float]]] = {p: {} for p in placements}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = None
        if "serve" in conditions:  # a model to serve: a short run of the same recipe
            model = tmp / "served"
            finish(start_training(model, "threads", 30))
        for condition in conditions:
            for placement in placements:
                results[placement][condition] = measure(placement, condition, tmp, args.seconds, model)
                print(f"{placement:10s} {condition:6s} {results[placement][condition]}", file=sys.stderr)
    print(f"{'target tokens/s':16s}" + "".join(f"{c:>22s}" for c in conditions))
    for p in placements:
        idle = results[p].get("idle", [None])[0]
        cells = []
        for c in conditions:
            v = results[p][c]
            text = " / ".join(f"{x:,.0f}" for x in v)
            if idle and c != "idle":
                text += f" ({min(v) / idle:.0%})"
            cells.append(f"{text:>22s}")
        print(f"{p:16s}" + "".join(cells))
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
