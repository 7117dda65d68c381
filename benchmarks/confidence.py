"""How well the quality scores rank bad translations: their correlation with sentence-level chrF.

Translates a test set with scores (Translator.translate_detailed(scores=True)), then compares two
sentence scores with each sentence's chrF against the reference: the confidence (mean token
log-probability, the end token included) and the mean of the word scores (each word's mean piece
log-probability: Bergamot's sentence score). For each: Pearson and Spearman correlation; how many
of the worst 10% by chrF are among the 10% least sure (chance: 10%); and, as a reviewer would use
a flag, how many of that worst tenth the least sure fifth holds (chance: 20%).

Word level: a word of the output is "absent" when no word of the reference is the same after
lower-casing and stripping punctuation (a crude label: a synonym or inflection counts as absent);
a word is "doubtful" when its score is below ln 0.5 (Bergamot's threshold). Printed: the share of
words doubtful, the precision (doubtful words that are absent) and recall (absent words that are
doubtful), and the share of all words absent (the precision of flagging at random).
Sentence-level chrF and this word label are themselves noisy judges. Where the model has a quality
calibration (`nmt calibrate`, fitted on other sentences), also: the share of the set its flag marks
doubtful, and the share of the worst tenth by chrF among them.

With --qe-passes N, a third sentence score: MC dropout (Fomicheva et al. 2020's D-TP), the mean word
score averaged over N teacher-forced passes with the model's dropout on (nmt's engine), and the
seconds the search, the one scoring pass and the N passes each took (indicative: one run).

    python benchmarks/confidence.py --model runs/ted_pt_en_q --test ted_hrlr:test:pt-en [--beam 5] [--qe-passes 10]
    python benchmarks/confidence.py --model runs/ted_pt_en_q \
        --files ../shared/data/tico19/pt_BR-en/test.pt.gz ../shared/data/tico19/pt_BR-en/test.en.gz
"""

from __future__ import annotations

import argparse
import json
import math
import re
import time

import numpy as np
import sacrebleu


def ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks (ties share theirs), for Spearman's correlation."""
    order = values.argsort(kind="stable")
    out = np.empty(len(values))
    out[order] = np.arange(len(values), dtype=float)
    for value in np.unique(values):  # ties: the mean of their ranks
        tied = values == value
        if tied.sum() > 1:
            out[tied] = out[tied].mean()
    return out


def bare(word: str) -> str:
    return re.sub(r"^\W+|\W+$", "", word.lower())


def word_level(found, references: list[str]) -> dict:
    """Doubtful words (score below ln 0.5) against words absent from the reference. The scores are
    over the words the model wrote; where its text became another (a tokenised corpus's output made
    running text), the words no longer match one to one and the sentence is left out."""
    doubtful = absent = both = total = 0
    for best, reference in zip(found, references, strict=True):
        t = best[0]
        words = t.text.split()
        if len(words) != len(t.word_scores or []):  # the text was recased or detokenised: not comparable
            continue
        in_reference = {bare(w) for w in reference.split()}
        for word, score in zip(words, t.word_scores, strict=True):
            is_doubtful, is_absent = score < math.log(0.5), bare(word) not in in_reference
            total += 1
            doubtful += is_doubtful
            absent += is_absent
            both += is_doubtful and is_absent
    return {
        "words": total,
        "doubtful_share": round(doubtful / max(total, 1), 3),
        "precision": round(both / max(doubtful, 1), 3),
        "recall": round(both / max(absent, 1), 3),
        "absent_share": round(absent / max(total, 1), 3),
    }


def mc_dropout_scores(translator, sources: list[str], found, passes: int, pretokenized: bool):
    """Each sentence's MC dropout score (the mean of its word scores averaged over `passes` passes
    with dropout on), and the seconds one scoring pass and the `passes` took on these outputs."""
    ids = [translator.encode_source(translator.model_input(s, pretokenized=pretokenized))[0] for s in sources]
    outputs = [best[0].tokens for best in found]
    start = time.perf_counter()
    translator.scorer.score(ids, outputs, alignments=False)
    one_pass = time.perf_counter() - start
    start = time.perf_counter()
    words = translator.scorer.mc_word_scores(ids, outputs, passes=passes, seed=0)
    mc = time.perf_counter() - start
    score = np.array([np.mean(w) if w else 0.0 for w in words])
    return score, {"one_pass": one_pass, f"mc_dropout_{passes}_passes": mc}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    test = parser.add_mutually_exclusive_group(required=True)
    test.add_argument("--test", help="corpus:split:src-tgt, e.g. ted_hrlr:test:pt-en")
    test.add_argument(
        "--files", nargs=2, metavar=("SRC", "REF"), help="sources and references, a sentence a line (.gz read too)"
    )
    parser.add_argument("--beam", type=int, default=None)
    parser.add_argument("--limit", type=int, default=None, help="the first N sentences only")
    parser.add_argument("--qe-passes", type=int, default=1, help="also MC dropout over N passes (N > 1)")
    parser.add_argument("--dump", default=None, metavar="FILE", help="also each sentence's scores, as JSON lines")
    args = parser.parse_args()

    from nmt.data.corpus import read_parallel
    from nmt.data.registry import is_pretokenized, parallel_files
    from nmt.translator import Translator

    if args.files:  # running text (e.g. TICO-19), as users write it
        files, pretokenized = args.files, False
    else:
        corpus, split, pair = args.test.split(":")
        files, pretokenized = parallel_files(corpus, split, *pair.split("-")), is_pretokenized(corpus)
    pairs = list(read_parallel(*files))[: args.limit]
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    translator = Translator.load(args.model, engine="torch" if args.qe_passes > 1 else "auto")
    start = time.perf_counter()
    found = translator.translate_detailed(sources, beam=args.beam, scores=True, pretokenized=pretokenized)
    seconds = {"search_and_one_pass": time.perf_counter() - start}
    texts = [best[0].text for best in found]
    chrf = np.array([sacrebleu.sentence_chrf(t, [r]).score for t, r in zip(texts, references, strict=True)])
    tenth, fifth = max(1, len(chrf) // 10), max(1, len(chrf) // 5)
    worst = set(np.argsort(chrf, kind="stable")[:tenth].tolist())
    scores = {
        "confidence": np.array([best[0].confidence for best in found]),
        "word_mean": np.array([np.mean(best[0].word_scores) if best[0].word_scores else 0.0 for best in found]),
    }
    if args.qe_passes > 1:
        scores["mc_dropout"], more = mc_dropout_scores(translator, sources, found, args.qe_passes, pretokenized)
        seconds |= more
    result: dict = {"model": args.model, "test": args.test or args.files, "sentences": len(sources)}
    result["qe_passes"] = args.qe_passes
    for name, score in scores.items():
        order = np.argsort(score, kind="stable")
        result[name] = {
            "pearson": round(float(np.corrcoef(score, chrf)[0, 1]), 3),
            "spearman": round(float(np.corrcoef(ranks(score), ranks(chrf))[0, 1]), 3),
            "worst_10pct_in_least_sure_10pct": round(len(worst & set(order[:tenth].tolist())) / tenth, 3),
            "worst_10pct_in_least_sure_20pct": round(len(worst & set(order[:fifth].tolist())) / tenth, 3),
        }
    if translator.quality is not None:  # the model's calibration (nmt calibrate), fitted on other sentences
        flags = np.array([bool(best[0].doubtful) for best in found])
        result["flag"] = {
            "fitted_on": translator.quality.fitted_on,
            "flagged_share": round(float(flags.mean()), 3),
            "worst_10pct_flagged": round(sum(flags[i] for i in worst) / tenth, 3),
        }
    result["words"] = word_level(found, references)
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as out:
            for i, (source, best, reference) in enumerate(zip(sources, found, references, strict=True)):
                row = {"source": source, "text": best[0].text, "reference": reference, "chrf": float(chrf[i])}
                row |= {name: float(score[i]) for name, score in scores.items()}
                out.write(json.dumps(row | {"word_scores": best[0].word_scores}, ensure_ascii=False) + "\n")
    result["corpus_chrf"] = round(sacrebleu.corpus_chrf(texts, [references]).score, 2)
    result["seconds"] = {name: round(value, 2) for name, value in seconds.items()}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
