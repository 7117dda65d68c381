"""How well the confidence score ranks bad translations: its correlation with sentence-level chrF.

Translates a test set with scores (Translator.translate_detailed(scores=True)), then compares each
sentence's confidence (mean token log-probability) with its chrF against the reference: Pearson and
Spearman correlation, and how many of the worst 10% of translations by chrF are among the 10% with
the lowest confidence (chance: 10%). Sentence-level chrF is itself a noisy judge of one sentence.

    python benchmarks/confidence.py --model runs/ted_pt_en_q --test ted_hrlr:test:pt-en [--beam 5]
"""

from __future__ import annotations

import argparse
import json

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--test", required=True, help="corpus:split:src-tgt, e.g. ted_hrlr:test:pt-en")
    parser.add_argument("--beam", type=int, default=None)
    parser.add_argument("--limit", type=int, default=None, help="the first N sentences only")
    args = parser.parse_args()

    from nmt.data.corpus import read_parallel
    from nmt.data.registry import is_pretokenized, parallel_files
    from nmt.translator import Translator

    corpus, split, pair = args.test.split(":")
    src_lang, tgt_lang = pair.split("-")
    pairs = list(read_parallel(*parallel_files(corpus, split, src_lang, tgt_lang)))[: args.limit]
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    pretokenized = is_pretokenized(corpus)
    translator = Translator.load(args.model)
    found = translator.translate_detailed(sources, beam=args.beam, scores=True, pretokenized=pretokenized)
    confidence = np.array([best[0].confidence for best in found])
    texts = [best[0].text for best in found]
    chrf = np.array([sacrebleu.sentence_chrf(t, [r]).score for t, r in zip(texts, references, strict=True)])
    pearson = float(np.corrcoef(confidence, chrf)[0, 1])
    spearman = float(np.corrcoef(ranks(confidence), ranks(chrf))[0, 1])
    tenth = max(1, len(chrf) // 10)
    worst = set(np.argsort(chrf, kind="stable")[:tenth].tolist())
    least_sure = set(np.argsort(confidence, kind="stable")[:tenth].tolist())
    result = {
        "model": args.model,
        "test": args.test,
        "sentences": len(sources),
        "pearson": round(pearson, 3),
        "spearman": round(spearman, 3),
        "worst_10pct_found_in_least_confident_10pct": round(len(worst & least_sure) / tenth, 3),
        "corpus_chrf": round(sacrebleu.corpus_chrf(texts, [references]).score, 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
