"""How fast a translation memory answers, and a memory hit against a search, through nmt serve's API.

The memory: Multi30k's 29,000 training pairs (de->en) and, to reach --size segments, sentences made
by recombining their words (real words, real lengths). Lookups: training sentences (exact hits),
test sentences with one word changed (fuzzy matches or none), and test sentences as they are.
Printed: the load time, and the median and 99th percentile per lookup of each kind.

Then nmt's JSON API on the model (in-process, TestClient): one sentence a request, the memory's
exact hits against the same number of test sentences searched; median and p99 of the request.

    python benchmarks/memory_lookup.py --model runs/de_en_base [--size 1000000]
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import statistics
import sys
import time

from nmt.memory import TranslationMemory


def lines(path: str) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.strip() for line in f]


def percentiles(seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    return f"median {statistics.median(ms):.3f} ms, p99 {ms[int(0.99 * (len(ms) - 1))]:.3f} ms ({len(ms)} lookups)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a de->en model directory (for the API comparison)")
    parser.add_argument("--size", type=int, default=1_000_000, help="segments in the memory (default 1,000,000)")
    args = parser.parse_args()
    raw = os.path.join(os.environ.get("NMT_MIRROR", "../shared/data"), "multi30k/data/task1/raw")
    de, en = lines(f"{raw}/train.de.gz"), lines(f"{raw}/train.en.gz")
    test_de = lines(f"{raw}/test_2016_flickr.de.gz")
    rng = random.Random(0)
    words = [w for sentence in de for w in sentence.split()]
    pairs = list(zip(de, en, strict=True))
    while len(pairs) < args.size:
        n = len(rng.choice(de).split())
        pairs.append((" ".join(rng.choices(words, k=n)), f"synthetic {len(pairs)}"))

    start = time.perf_counter()
    memory = TranslationMemory(pairs)
    print(f"{len(memory):,} segments loaded and indexed in {time.perf_counter() - start:.1f} s")

    def timed(queries: list[str]) -> tuple[list[float], int]:
        took, found = [], 0
        for q in queries:
            t0 = time.perf_counter()
            found += memory.lookup(q) is not None
            took.append(time.perf_counter() - t0)
        return took, found

    exact = rng.sample(de, 1000)
    changed = []
    for sentence in test_de:
        tokens = sentence.split()
        tokens[rng.randrange(len(tokens))] = rng.choice(words)
        changed.append(" ".join(tokens))
    for name, queries in (("exact hits", exact), ("test, one word changed", changed), ("test as it is", test_de)):
        took, found = timed(queries)
        print(f"{name:24s} {percentiles(took)}; {found} matched")

    if args.model:
        from fastapi.testclient import TestClient  # noqa: PLC0415

        from nmt.server import ServerLimits, create_app, model_info  # noqa: PLC0415
        from nmt.translator import Translator  # noqa: PLC0415

        translator = Translator.load(args.model)
        app = create_app(translator, ServerLimits(), info=model_info(args.model, translator), memory=memory)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            client.post("/translate", json={"text": [test_de[0]]})  # warm
            for name, queries in (("API, memory hit", exact[:200]), ("API, searched", test_de[:200])):
                took = []
                for q in queries:
                    t0 = time.perf_counter()
                    answer = client.post("/translate", json={"text": [q]}).json()["translations"][0]
                    took.append(time.perf_counter() - t0)
                print(f"{name:24s} {percentiles(took)}; origin {answer['origin']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
