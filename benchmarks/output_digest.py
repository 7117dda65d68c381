"""A fingerprint of what a model translates, to show that a refactor changed no output bit.

    python benchmarks/output_digest.py --model runs/de_en [--limit 1000] > before.txt
    ... change the code ...
    python benchmarks/output_digest.py --model runs/de_en [--limit 1000] > after.txt
    diff before.txt after.txt

Translates the first --limit sentences of Multi30k test_2016_flickr (de) under each setting below
through the Python API and prints one line per setting: a SHA-256 of every output text and score
(scores as their float's exact hex), and how long it took. Settings: greedy, beam 5 with its 4
best, and beam 5 with no repeated bigram, in fp32 and int8, on nmt's engine and CTranslate2's (where
installed), a seeded draw, and a web page of 100 sentences with bold words (fp32, beam 5).
Seconds are printed apart from the digest so that the digests can be diffed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sys
import time

from nmt.translator import Sampling, Translator

from common import load_multi30k


def digest(found) -> str:
    """SHA-256 over each sentence's n-best texts and their scores (exact)."""
    h = hashlib.sha256()
    for sentence in found:
        for t in sentence:
            h.update(f"{t.text}\t{float(t.score).hex()}\t{float(t.log_prob).hex()}\n".encode())
    return h.hexdigest()[:16]


def page_digest(translator: Translator, sources: list[str]) -> str:
    """SHA-256 of a web page of `sources` with bold words, translated with its markup placed by the
    word alignments (the route of `nmt translate --format html` and the server's format=html)."""
    from nmt.markup import translate_html
    from nmt.translation_io import aligned_translations

    def bolded(sentence: str) -> str:
        words = sentence.split()
        return " ".join(f"<b>{w}</b>" if i % 3 == 1 else w for i, w in enumerate(words))

    page = "".join(f"<p>{bolded(s)}</p>\n" for s in sources)
    request = translator.request(beam=5)
    out = translate_html(page, lambda batch: aligned_translations(translator, batch, request), lang="de")
    return hashlib.sha256(out.encode()).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--limit", type=int, default=1000)
    args = parser.parse_args()
    sources = [src for src, _ in load_multi30k("test_2016_flickr")][: args.limit]
    engines = ["torch"] + (["ctranslate2"] if importlib.util.find_spec("ctranslate2") else [])
    for engine in engines:
        for precision in ("fp32", "int8"):
            translator = Translator.load(args.model, engine=engine, precision=precision, workers=1)
            settings = {
                "greedy": dict(beam=1),
                "beam 5, 4 best": dict(beam=5, n_best=4),
                "beam 5, no repeated bigram": dict(beam=5, no_repeat_ngram_size=2),
            }
            if engine == "torch" and precision == "fp32":
                settings["seeded draw"] = dict(sampling=Sampling(temperature=0.8, top_k=10, seed=7))
            for name, options in settings.items():
                start = time.perf_counter()
                found = translator.translate_detailed(sources, **options)
                seconds = time.perf_counter() - start
                print(f"{engine} {precision} {name}: {digest(found)}")
                print(f"  ({seconds:.2f} s)", file=sys.stderr)
            if precision == "fp32":
                print(f"{engine} {precision} html page: {page_digest(translator, sources[:100])}")
            translator.close()


if __name__ == "__main__":
    main()
