"""A text whose every sentence comes twice: how long one call takes (run once with the code before
the repeated-sentence search and once after, to compare).

    python benchmarks/repeated_sentences.py --model runs/fr_en --src-lang fr [--rounds 3]

Multi30k test_2016_flickr's source, each line twice (2,000 lines, 1,000 distinct), translated in
one call by nmt's engine (int8, beam 5, default workers) after a warm-up; prints each call's time
and the median. Needs the machine to itself.
"""

from __future__ import annotations

import argparse

from nmt.inference.contract import EngineOptions
from nmt.translator import Translator

from common import load_multi30k, median, timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="trained nmt model directory")
    parser.add_argument("--src-lang", default="de", help="the model's source language in Multi30k")
    parser.add_argument("--rounds", type=int, default=3, help="timed calls")
    args = parser.parse_args()

    sources = [src for src, _ in load_multi30k("test_2016_flickr", args.src_lang, "en")]
    translator = Translator.load(args.model, EngineOptions(engine="torch", precision="int8"))
    translator.translate(sources[:50], beam=5)  # warm-up
    text = [s for s in sources for _ in range(2)]
    times = timed(lambda: translator.translate(text, beam=5), args.rounds)
    print(f"{len(text)} lines ({len(set(text))} distinct): " + ", ".join(f"{t:.2f}" for t in times) + " s")
    print(f"median {median(times):.2f} s")


if __name__ == "__main__":
    main()
