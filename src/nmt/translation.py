"""A translation as the Translator returns it, and what a teacher-forced pass adds to it after the
search: each token's probability, the sentence's confidence and the word alignment (and, beside a
translation's attention, the words that label it for a reader)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .alignment import Words
from .decoding import Hypothesis
from .forced_scoring import ForcedScorer
from .tokenizer import SubwordTokenizer


@dataclass
class Translation:
    """One hypothesis for one input sentence, with what a person or a plot needs."""

    text: str
    score: float  # length-penalised log-probability (the ranking score)
    log_prob: float
    tokens: list[int]
    pieces: list[str]  # target subword pieces (no BOS/EOS)
    src_pieces: list[str] = field(default_factory=list)  # source pieces, BOS/EOS included
    attention: torch.Tensor | None = None  # (layers, heads, steps, src_len) cross-attention, when asked
    truncated: bool = False  # the source was cut to max_source_tokens
    # With scores=True: the probability of each output piece, then of the end token (where it ended);
    # confidence is their mean log-probability (the length-normalised log-probability): 0 is certain.
    token_probs: list[float] | None = None
    confidence: float | None = None
    # With scores=True: each word's mean piece log-probability, over the words of the text the model
    # wrote (as alignments count them): the words it was least sure of score lowest.
    word_scores: list[float] | None = None
    # With scores=True, on a model with a quality calibration (nmt.quality): whether the sentence is
    # among those its model is least sure of (a reviewer reads these first).
    doubtful: bool | None = None
    # With alignments=True: (source word, output word) pairs, 0-based, over the whitespace-separated
    # words of the text the model read and wrote (nmt.alignment).
    alignment: list[tuple[int, int]] | None = None
    # With a glossary: the target terms its source called for that this translation lacks (none
    # unless a term could not be placed within the sentence and its length limit).
    glossary_missed: list[str] | None = None
    # With attention: its source pieces and its steps' pieces (the end token's too, where the search
    # chose it) as the words a reader sees (nmt.alignment.word_groups; label_words).
    src_words: Words | None = None
    tgt_words: Words | None = None


def translation_of(
    h: Hypothesis, tgt_tokenizer: SubwordTokenizer, src_pieces: list[str], truncated: bool, empty: bool
) -> Translation:
    """A search's hypothesis as a Translation; for an empty input (`empty`), an empty translation:
    the model's guess for nothing is noise."""
    if empty:
        return Translation("", 0.0, 0.0, [], [], src_pieces, None, truncated)
    pieces = tgt_tokenizer.lookup(h.tokens)
    return Translation(
        tgt_tokenizer.decode(h.tokens), h.score, h.log_prob, h.tokens, pieces, src_pieces, h.attention, truncated
    )


def fill_scores(
    scorer: ForcedScorer,
    found: list[list[Translation]],
    src_ids: Sequence[Sequence[int]],
    has_text: Sequence[bool],
    *,
    alignments: bool,
    probabilities: bool = True,
    passes: int = 1,
    seed: int = 0,
) -> None:
    """Fill token_probs, confidence and word_scores (with `probabilities`) and the word alignment
    (with `alignments`) of every Translation in `found` (n-best lists for the sources `src_ids`;
    has_text[i]: source i is not blank) from one teacher-forced pass of `scorer`. An empty output of
    a real sentence is scored too (its end token: how sure the model was that there is nothing to
    say); that of a blank input is certain and aligns nothing. passes > 1: the word scores are
    those of MC dropout instead (ForcedScorer.mc_word_scores, from `seed`)."""
    rows = [(i, t) for i, sentence in enumerate(found) for t in sentence if has_text[i]]
    sources, outputs = [src_ids[i] for i, _ in rows], [t.tokens for _, t in rows]
    scored = scorer.score(sources, outputs, alignments=alignments, probabilities=probabilities)
    for (_, t), one in zip(rows, scored, strict=True):
        t.token_probs, t.confidence, t.word_scores = one.token_probs, one.confidence, one.word_scores
        if alignments:
            t.alignment = one.alignment
    if probabilities and passes > 1:
        averaged = scorer.mc_word_scores(sources, outputs, passes=passes, seed=seed)
        for (_, t), words in zip(rows, averaged, strict=True):
            t.word_scores = words
    for i, sentence in enumerate(found):
        for t in sentence:
            if not has_text[i]:
                t.token_probs, t.confidence, t.word_scores = [], 0.0, []
                t.alignment = [] if alignments else None


def label_words(scorer: ForcedScorer, found: list[list[Translation]], src_ids: Sequence[Sequence[int]]) -> None:
    """Fill src_words and tgt_words of every Translation in `found` (n-best lists for the sources
    `src_ids`) that carries attention: its columns' and rows' words."""
    end = scorer.tgt_tokenizer.eos_id
    for sentence, src in zip(found, src_ids, strict=True):
        for t in (t for t in sentence if t.attention is not None):
            t.src_words = scorer.words(src, source=True)
            # one row per step: each output piece's, then the end token's where the search chose it
            t.tgt_words = scorer.words([*t.tokens, end][: t.attention.size(2)], source=False)
