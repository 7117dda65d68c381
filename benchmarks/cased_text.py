"""A model of a lower-cased, tokenised corpus (TED pt->en) on real, cased text: how it reads.

    python benchmarks/cased_text.py --model runs/ted_20m [--limit N] [--no-source-case] [--no-truecase] [--out FILE]

Translates TICO-19's 2,100 Brazilian-Portuguese sentences (../shared/data/tico19/pt_BR-en, cased
English references) through the Python API, as `nmt translate` does (the model's own decoding
settings, its text form turning typed text into the corpus's form and the output back), and
prints: cased and lower-cased BLEU and their ratio, chrF, the lines whose output keeps tokenised
punctuation (a space before . , ! ? ; :, a Treebank quote `` or '', an escaped bracket -lrb-,
a doubled or free-standing quote, a split contraction " n't" / " 's"), and the TED transcript
annotations ("(laughter)", "(applause)", ...) written where the source holds none of its own
("(risos)", "(aplausos)", ...).
Run with PYTHONPATH pointing at another checkout to compare code on the same model.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import re
import time
from pathlib import Path

import sacrebleu

from nmt.text_form import TOKENISED_LEFTOVERS
from nmt.translator import Translator

TICO = Path(os.environ.get("NMT_MIRROR", Path(__file__).resolve().parents[2] / "shared" / "data")) / "tico19"
ANNOTATION = re.compile(r"\(\s*(?:laughter|laughs|applause|music|video|cheers|cheering|audio|singing)\s*\)", re.I)
SOURCE_ANNOTATION = re.compile(r"\(\s*(?:risos?|risadas|aplausos?|música|vídeo)\s*\)", re.I)  # TED's Portuguese ones


def read(name: str) -> list[str]:
    with gzip.open(TICO / "pt_BR-en" / name, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--limit", type=int, default=None, help="the first N sentences only")
    parser.add_argument("--no-source-case", action="store_true", help="sentence starts and 'I' only")
    parser.add_argument("--no-truecase", action="store_true", help="without the model directory's truecaser")
    parser.add_argument("--out", help="write the translations here, one a line")
    args = parser.parse_args()
    sources, references = read("test.pt.gz")[: args.limit], read("test.en.gz")[: args.limit]
    translator = Translator.load(args.model)
    if args.no_source_case:
        translator.text_form = dataclasses.replace(translator.text_form, case_from_source=False)
    if args.no_truecase:
        translator.text_form = dataclasses.replace(translator.text_form, truecaser=None)
    start = time.perf_counter()
    outputs = translator.translate(sources)
    seconds = time.perf_counter() - start
    if args.out:
        Path(args.out).write_text("\n".join(outputs) + "\n", encoding="utf-8")
    cased = sacrebleu.corpus_bleu(outputs, [references]).score
    lowered = sacrebleu.corpus_bleu(outputs, [references], lowercase=True).score
    pairs = zip(sources, outputs, strict=True)
    annotations = sum(len(ANNOTATION.findall(out)) for src, out in pairs if not SOURCE_ANNOTATION.search(src))
    result = {
        "sentences": len(sources),
        "bleu": round(cased, 2),
        "bleu_lowercase": round(lowered, 2),
        "cased_over_lowercase": round(cased / lowered, 4) if lowered else None,
        "chrf": round(sacrebleu.corpus_chrf(outputs, [references]).score, 2),
        "lines_with_tokenised_punctuation": sum(bool(TOKENISED_LEFTOVERS.search(out)) for out in outputs),
        "annotations_where_the_source_has_none": annotations,
        "seconds": round(seconds, 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
