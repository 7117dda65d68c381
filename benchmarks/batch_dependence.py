"""Does a sentence's translation depend on the sentences batched with it? Per engine and precision.

    python benchmarks/batch_dependence.py --model runs/de_en [--sentences 1000] [--alone 200]

Translates Multi30k test_2016_flickr (de, beam 5, one worker) twice, in batches of 8,000 and of
1,000 tokens, and counts the outputs that are the same text; then the first --alone sentences one
at a time against the same sentences in the 8,000-token batches. fp32 should give the same text
throughout (a batch changes only the order of float sums). nmt's int8 layers quantise each call's
input with one scale, which the whole batch sets, so there the batch can change a translation;
CTranslate2 (where installed) scales each row apart.
"""

from __future__ import annotations

import argparse
import importlib.util

from nmt.inference.export_ctranslate2 import export_ctranslate2
from nmt.translator import Translator

from common import load_multi30k


def same(a: list[str], b: list[str]) -> int:
    return sum(x == y for x, y in zip(a, b, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="trained nmt model directory (German source)")
    parser.add_argument("--sentences", type=int, default=1000, help="how many test sentences to batch")
    parser.add_argument("--alone", type=int, default=200, help="how many of them to translate one at a time")
    args = parser.parse_args()
    sources = [s for s, _ in load_multi30k("test_2016_flickr")][: args.sentences]
    settings = [("torch", args.model, "fp32"), ("torch", args.model, "int8")]
    if importlib.util.find_spec("ctranslate2"):
        import tempfile  # noqa: PLC0415 - only for the export
        from pathlib import Path  # noqa: PLC0415

        ct2_dir = export_ctranslate2(args.model, Path(tempfile.mkdtemp(prefix="batch-dependence-")) / "ct2")
        settings += [("ctranslate2", ct2_dir, "fp32"), ("ctranslate2", ct2_dir, "int8")]
    print("engine       precision  same text, 8,000 vs 1,000-token batches   same text, batched vs alone")
    for engine, model, precision in settings:
        load = dict(engine=engine, device="cpu", precision=precision, workers=1, threads=1)
        large = Translator.load(model, batch_tokens=8000, **load)
        small = Translator.load(model, batch_tokens=1000, **load)
        batched = large.translate(sources, beam=5)
        alone = [large.translate([s], beam=5)[0] for s in sources[: args.alone]]
        print(
            f"{engine:12s} {precision:9s}  {same(batched, small.translate(sources, beam=5)):5d} / {len(sources):<31d}"
            f"{same(batched[: args.alone], alone):5d} / {len(alone)}"
        )


if __name__ == "__main__":
    main()
