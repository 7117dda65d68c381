"""Where nmt's engine spends a decoding run: torch.profiler's self CPU time per operator.

    python benchmarks/decode_profile.py --model runs/de_en [--precision int8] [--beam 5] [--sentences 300] [--shapes]

One worker, one intra-op thread (so the figures are per core), on the first `--sentences` of the
Multi30k test_2016_flickr German source, after a warm-up of 50. Prints the plain time of all 1,000
sentences first, then the operator table of the profiled subset; --shapes groups it by input shape.
Needs the machine to itself.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from nmt.inference.contract import EngineOptions
from nmt.translator import Translator

from common import load_multi30k


def operator_table(run: Callable[[], object], rows: int = 14, shapes: bool = False) -> str:
    """torch.profiler's table of `run()`'s operators by self CPU time (grouped by input shape with `shapes`)."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=shapes) as prof:
        run()
    return prof.key_averages(group_by_input_shape=shapes).table(sort_by="self_cpu_time_total", row_limit=rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="trained nmt model directory (German source)")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "int8", "bf16"])
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=300, help="how many sentences the profile covers")
    parser.add_argument("--rows", type=int, default=14, help="operators shown")
    parser.add_argument("--shapes", action="store_true", help="group the table by input shape")
    args = parser.parse_args()

    sources = [src for src, _ in load_multi30k("test_2016_flickr")]
    torch.set_num_threads(1)
    options = EngineOptions(engine="torch", precision=args.precision, workers=1, threads=1)
    translator = Translator.load(args.model, options)
    translator.translate(sources[:50], beam=args.beam)  # warm-up
    start = time.perf_counter()
    translator.translate(sources, beam=args.beam)
    print(f"{len(sources)} sentences, {args.precision}, beam {args.beam}: {time.perf_counter() - start:.2f} s")
    subset = sources[: args.sentences]
    print(operator_table(lambda: translator.translate(subset, beam=args.beam), args.rows, args.shapes))


if __name__ == "__main__":
    main()
