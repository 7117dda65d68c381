"""Corpus-level scores through sacreBLEU (the standard, comparable implementation).

Raw text (Multi30k, IWSLT14, WMT14) is scored the standard way: sacreBLEU
tokenises hypotheses and references itself (13a). A corpus whose text is
tokenised already (ted_hrlr: tokenised and lower-cased; see
``nmt.data.registry.is_pretokenized``) is scored on its own tokens instead,
``tokenize="none"``: 13a would split again what is split already, and the
score would not be the one published for that data. The signature says which
(``tok:13a`` or ``tok:none``), and so does ``Scores.pretokenized``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import sacrebleu


@dataclass
class Scores:
    bleu: float  # cased sacreBLEU (13a tokenisation, or none for pretokenized text)
    bleu_lowercase: float  # the same, case-insensitive
    chrf: float  # chrF2 (characters: tokenisation changes it only through spaces, which it ignores)
    bleu_signature: str
    chrf_signature: str
    sentences: int
    pretokenized: bool = False  # BLEU on the text's own tokens (tokenize="none"), not sacreBLEU's

    def to_dict(self) -> dict:
        return asdict(self)


def sentence_chrf(hypotheses: list[str], references: list[str]) -> list[float]:
    """Each hypothesis's chrF against its reference (sacrebleu's sentence_chrf): a noisy judge of one
    sentence, the yardstick a quality score is calibrated by (nmt.quality)."""
    return [sacrebleu.sentence_chrf(h, [r]).score for h, r in zip(hypotheses, references, strict=True)]


def score_translations(hypotheses: list[str], references: list[str], *, pretokenized: bool = False) -> Scores:
    """BLEU (cased and lower-cased) and chrF of hypotheses against one reference each.

    ``pretokenized``: hypotheses and references are tokenised text (as in a
    pretokenized corpus, and the output of a model trained on it), so BLEU
    counts their own space-separated tokens (``tokenize="none"``, shown in
    the signature) instead of re-tokenising them with 13a.
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:  # sacreBLEU would fail with an IndexError
        raise ValueError("no sentences to score")
    tokenize = "none" if pretokenized else "13a"
    # force: sacreBLEU warns "you forgot to detokenize" on 100 lines ending in " .", which is what
    # pretokenized text is; the scores and signatures are the same either way.
    bleu = sacrebleu.metrics.BLEU(tokenize=tokenize, force=pretokenized)
    bleu_lc = sacrebleu.metrics.BLEU(lowercase=True, tokenize=tokenize, force=pretokenized)
    chrf = sacrebleu.metrics.CHRF()
    refs = [references]
    return Scores(
        bleu=bleu.corpus_score(hypotheses, refs).score,
        bleu_lowercase=bleu_lc.corpus_score(hypotheses, refs).score,
        chrf=chrf.corpus_score(hypotheses, refs).score,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        sentences=len(hypotheses),
        pretokenized=pretokenized,
    )
