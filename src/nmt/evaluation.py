"""Corpus-level scores through sacreBLEU (the standard, comparable implementation)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import sacrebleu


@dataclass
class Scores:
    bleu: float  # cased sacreBLEU (13a tokenisation)
    bleu_lowercase: float  # the same, case-insensitive
    chrf: float  # chrF2
    bleu_signature: str
    chrf_signature: str
    sentences: int

    def to_dict(self) -> dict:
        return asdict(self)


def score_translations(hypotheses: list[str], references: list[str]) -> Scores:
    """BLEU (cased and lower-cased) and chrF of hypotheses against one reference each."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:  # sacreBLEU would fail with an IndexError
        raise ValueError("no sentences to score")
    bleu = sacrebleu.metrics.BLEU()
    bleu_lc = sacrebleu.metrics.BLEU(lowercase=True)
    chrf = sacrebleu.metrics.CHRF()
    refs = [references]
    return Scores(
        bleu=bleu.corpus_score(hypotheses, refs).score,
        bleu_lowercase=bleu_lc.corpus_score(hypotheses, refs).score,
        chrf=chrf.corpus_score(hypotheses, refs).score,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        sentences=len(hypotheses),
    )
