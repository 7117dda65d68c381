"""CTranslate2's worker layout in a process where torch has run, and in one where it has not.

    python benchmarks/ctranslate2_threads.py --model runs/de_en [--beam 8] [--sentences 64] [--repeats 3]

Each layout (workers x threads) is timed in a fresh process twice: once as it starts, and once after
a few torch matrix products (what exporting the model in the same process, nmt's engine, or any
torch work leaves behind). One CTranslate2 worker of several threads was found ~11x slower in the
second case, single-threaded workers not at all: why `nmt serve` keeps CTranslate2's own layout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from common import load_multi30k

CHILD = """
import json, sys, time, torch
from nmt.translator import Translator
model, workers, threads, torch_first, beam, repeats = sys.argv[1:7]
sentences = json.loads(sys.stdin.read())
if torch_first == "1":
    a = torch.randn(256, 256)
    for _ in range(10):
        a @ a
translator = Translator.load(model, engine="auto", device="cpu", workers=int(workers), threads=int(threads))
assert translator.engine.name == "ctranslate2", translator.engine.name
times = []
for _ in range(int(repeats)):
    start = time.perf_counter()
    translator.translate_detailed(sentences, beam=int(beam))
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="an nmt model directory (its CTranslate2 export is cached)")
    parser.add_argument("--beam", type=int, default=8, help="beam size (default 8)")
    parser.add_argument("--sentences", type=int, default=64, help="Multi30k val sentences per call (default 64)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per process (default 3)")
    args = parser.parse_args()
    from nmt.inference.engine_choice import cached_export

    cached_export(args.model)  # here, once: no timed process should pay for (or be slowed by) the export
    sentences = [src for src, _ in load_multi30k("val", "de", "en")][: args.sentences]
    print(f"{'layout':<22} {'clean process':>14} {'after torch':>12}  (median s per call of {args.sentences})")
    for workers, threads in ((1, 2), (2, 1), (1, 1)):
        row = []
        for torch_first in ("0", "1"):
            argv = [args.model, str(workers), str(threads), torch_first, str(args.beam), str(args.repeats)]
            done = subprocess.run(
                [sys.executable, "-c", CHILD, *argv], input=json.dumps(sentences), capture_output=True, text=True
            )
            if done.returncode:
                sys.exit(done.stderr[-2000:])
            row.append(statistics.median(json.loads(done.stdout.splitlines()[-1])))
        print(f"{workers} worker(s) x {threads} thread(s) {row[0]:>10.3f} {row[1]:>12.3f}")


if __name__ == "__main__":
    main()
