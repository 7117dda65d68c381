"""One replica against two behind nginx, sharing one Redis: requests/s, latency, cache hits, memory.

    PYTHONPATH=src python benchmarks/replica_load.py --model runs/de_en [--replicas 1,2] [--clients 8]
        [--requests 400] [--max-seconds 30] [-- nmt serve options, e.g. --threads 1]

For each replica count, deploy/replicas.py starts the deployment as it ships (a Redis of its own, the
replicas with --state, nginx with deploy/nginx/nmt.conf on free ports), and `--clients` clients send
one sentence per request through nginx, back to back (each waits for its answer), in two phases:

search  Multi30k validation sources (the model's source language, or --src FILE), each sent once:
        every one is searched (the cache is empty: this deployment's Redis is new).
hit     the same sentences again: each is answered from the shared translation cache, whichever
        replica nginx picks (the hits counted by the replicas' /metrics are reported).

Reports requests/s, p50/p99 latency, failures, and each replica's resident memory after the phases
(VmRSS from /proc, its worker processes included). Every part runs on this machine: two replicas
on the cores that one would have mostly compete for them (say how many cores there were).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx
from server_load import percentile_ms, run_load

from common import tree_rss_kib

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "deploy"))
from replicas import Deployment  # noqa: E402 - deploy/ is not a package


@dataclass
class PhaseResult:
    replicas: int
    phase: str
    answered: int
    failed: int
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    cache_hits: int
    rss_mib: str  # each replica's, "a / b"


def cache_hits(deployment: Deployment) -> int:
    """Translation cache hits counted so far by every replica's /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    hits = 0.0
    for replica in deployment.started:
        families = text_string_to_metric_families(httpx.get(f"{replica.url}/metrics", timeout=10).text)
        hits += sum(
            s.value
            for f in families
            for s in f.samples
            if s.name == "nmt_translation_cache_lookups_total" and s.labels["result"] == "hit"
        )
    return int(hits)


def measure(args: argparse.Namespace, replicas: int, sentences: list[str]) -> list[PhaseResult]:
    """The search and hit phases through nginx in front of `replicas` replicas."""
    options = ["--model", args.model, *args.serve]
    with tempfile.TemporaryDirectory(prefix="nmt-replica-load-") as folder:
        with Deployment(Path(folder), options, replicas=replicas) as deployment:
            run_load(deployment.url, sentences[:4], clients=1, requests=4, max_seconds=60, beam=args.beam)  # warm-up
            rows, sent = [], sentences[4 : 4 + args.requests]
            for phase in ("search", "hit"):
                hits = cache_hits(deployment)
                latencies, failed, seconds = run_load(
                    deployment.url,
                    sent,
                    clients=args.clients,
                    requests=len(sent),
                    max_seconds=args.max_seconds,
                    beam=args.beam,
                )
                sent = sent[: len(latencies) + failed]  # what the search phase reached is what hits
                rss = " / ".join(f"{tree_rss_kib(r.process.pid) / 1024:.0f}" for r in deployment.started)
                rows.append(
                    PhaseResult(
                        replicas,
                        phase,
                        len(latencies),
                        failed,
                        round(len(latencies) / seconds, 1),
                        percentile_ms(latencies, 50),
                        percentile_ms(latencies, 99),
                        cache_hits(deployment) - hits,
                        rss,
                    )
                )
            return rows


def read_sentences(args: argparse.Namespace) -> list[str]:
    if args.src:
        return [line.strip() for line in Path(args.src).read_text(encoding="utf-8").splitlines() if line.strip()]
    from common import load_multi30k

    return list(dict.fromkeys(source for source, _ in load_multi30k("val")))  # each sentence once


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="model directory (a de->en model, unless --src)")
    parser.add_argument("--src", help="source sentences, one a line (default: Multi30k validation, German)")
    parser.add_argument("--replicas", default="1,2", help="replica counts to compare (default %(default)s)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (default %(default)s)")
    parser.add_argument("--requests", type=int, default=400, help="sentences per phase (default %(default)s)")
    parser.add_argument("--max-seconds", type=float, default=30, help="at most, per phase (default %(default)s)")
    parser.add_argument("--beam", type=int, default=None, help="beam size (default: the model's)")
    parser.add_argument("serve", nargs=argparse.REMAINDER, help="-- then more nmt serve options")
    args = parser.parse_args()
    args.serve = args.serve[1:] if args.serve[:1] == ["--"] else args.serve
    sentences = read_sentences(args)
    rows = [row for count in map(int, args.replicas.split(",")) for row in measure(args, count, sentences)]
    print(f"\n{args.clients} clients through nginx, one sentence per request; nmt serve {' '.join(args.serve)}")
    print("| replicas | phase | answered | failed | requests/s | p50 ms | p99 ms | cache hits | RSS MiB per replica |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r.replicas} | {r.phase} | {r.answered} | {r.failed} | {r.requests_per_s} | {r.p50_ms} | "
            f"{r.p99_ms} | {r.cache_hits} | {r.rss_mib} |"
        )


if __name__ == "__main__":
    main()
