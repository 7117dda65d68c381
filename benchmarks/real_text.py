"""Real text, measured: documents against line mode, and what a glossary costs and gives.

Documents: the test set's sentences joined five to a paragraph, translated with `--format text`
(split into sentences, batched across the document, put back) against the same sentences one a
line; sentences per second of each, the same model and engine, medians of --repeats.

Glossary: terms taken from the test set itself (each a source word whose reference translation the
model aligns it to, where the model's own translation of that sentence lacks the word: a term the
glossary must force). On the sentences holding a term: the share of required terms present with
and without the glossary, BLEU with and without, and milliseconds per sentence of constrained
against plain beam search (the plain search batched on the engine's workers, as `nmt translate`
runs it; the constrained one a sentence at a time in the calling thread); on the others: BLEU with
the glossary loaded equals BLEU without.

    python benchmarks/real_text.py --model runs/de_en --test multi30k:test_2016_flickr:de-en
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import statistics
import time

import sacrebleu


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--test", required=True, help="corpus:split:src-tgt, e.g. multi30k:test_2016_flickr:de-en")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--terms", type=int, default=100, help="glossary size (default 100)")
    return parser.parse_args()


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def documents_against_lines(translator, sources: list[str], beam: int, repeats: int) -> dict:
    from nmt.translation_io import translate_stream

    lines = "\n".join(sources) + "\n"
    paragraphs = "\n".join(" ".join(sources[i : i + 5]) for i in range(0, len(sources), 5)) + "\n"

    def run(text: str, split: bool) -> None:
        translate_stream(
            translator, io.BytesIO(text.encode()), io.StringIO(), translator.request(beam=beam), split_sentences=split
        )

    line_s = timed(lambda: run(lines, False), repeats)
    doc_s = timed(lambda: run(paragraphs, True), repeats)
    return {
        "sentences": len(sources),
        "lines_sentences_per_s": round(len(sources) / line_s, 1),
        "documents_sentences_per_s": round(len(sources) / doc_s, 1),
        "documents_paragraphs_per_s": round(len(sources) / 5 / doc_s, 1),
        "documents_over_lines": round(line_s / doc_s, 3),
    }


def glossary_from(translator, sources, references, hypotheses, size: int):
    """(source word, reference word) pairs the model aligns, where its own output lacks the word."""
    from nmt.glossary import Glossary

    counts: collections.Counter = collections.Counter()
    # a tokenised corpus's test set is in its form already: its words are the ones counted here
    aligned = translator.align(sources, references, pretokenized=translator.text_form is not None)
    for pairs, src, ref, hyp in zip(aligned, sources, references, hypotheses, strict=True):
        s_words, r_words, h_words = src.split(), ref.split(), set(hyp.lower().split())
        for i, j in pairs:
            s, r = s_words[i].strip(".,;:!?\"'"), r_words[j].strip(".,;:!?\"'")
            if len(s) >= 5 and len(r) >= 4 and s.isalpha() and r.isalpha() and r.lower() not in h_words:
                counts[(s.lower(), r.lower())] += 1
    best: dict[str, str] = {}
    for (s, r), _ in counts.most_common():
        best.setdefault(s, r)  # one translation per source term: its most frequent
    return Glossary(list(best.items())[:size])


def main() -> None:
    args = parse_args()
    from nmt.data.corpus import read_parallel
    from nmt.data.registry import parallel_files
    from nmt.translator import Translator

    corpus, split, pair = args.test.split(":")
    src_lang, tgt_lang = pair.split("-")
    pairs = list(read_parallel(*parallel_files(corpus, split, src_lang, tgt_lang)))
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    translator = Translator.load(args.model)
    print(json.dumps({"documents": documents_against_lines(translator, sources, args.beam, args.repeats)}), flush=True)

    plain = translator.translate(sources, beam=args.beam)
    glossary = glossary_from(translator, sources, references, plain, args.terms)
    with_terms = [i for i, s in enumerate(sources) if glossary.matches(s)]
    without = [i for i in range(len(sources)) if i not in set(with_terms)]
    subset = [sources[i] for i in with_terms]
    start = time.perf_counter()
    forced = translator.translate_detailed(subset, beam=args.beam, glossary=glossary)
    constrained_ms = 1000 * (time.perf_counter() - start) / max(1, len(subset))
    start = time.perf_counter()
    translator.translate(subset, beam=args.beam)
    plain_ms = 1000 * (time.perf_counter() - start) / max(1, len(subset))

    def present(texts: list[str]) -> float:
        wanted = found = 0
        for i, text in zip(with_terms, texts, strict=True):
            for _, target in glossary.matches(sources[i]):
                wanted += 1
                found += target.lower() in text.lower()
        return found / max(1, wanted)

    forced_texts = [best[0].text for best in forced]
    plain_texts = [plain[i] for i in with_terms]
    refs_with = [references[i] for i in with_terms]
    others = [sources[i] for i in without]
    others_with_glossary = translator.translate_detailed(others, beam=args.beam, glossary=glossary)
    others_plain = [plain[i] for i in without]
    refs_without = [references[i] for i in without]
    print(
        json.dumps(
            {
                "glossary": {
                    "terms": len(glossary),
                    "sentences_with_terms": len(with_terms),
                    "terms_present_with_glossary": round(present(forced_texts), 4),
                    "terms_present_without": round(present(plain_texts), 4),
                    "bleu_with_terms_glossary": round(sacrebleu.corpus_bleu(forced_texts, [refs_with]).score, 2),
                    "bleu_with_terms_plain": round(sacrebleu.corpus_bleu(plain_texts, [refs_with]).score, 2),
                    "bleu_without_terms_glossary": round(
                        sacrebleu.corpus_bleu([b[0].text for b in others_with_glossary], [refs_without]).score, 2
                    ),
                    "bleu_without_terms_plain": round(sacrebleu.corpus_bleu(others_plain, [refs_without]).score, 2),
                    "ms_per_sentence_constrained": round(constrained_ms, 1),
                    "ms_per_sentence_plain": round(plain_ms, 1),
                }
            }
        )
    )


if __name__ == "__main__":
    main()
