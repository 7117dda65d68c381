"""A translation as the Translator returns it, and what is added to it after the search: each
token's probability, the sentence's confidence and the word alignment (a teacher-forced pass), the
words that label its attention for a reader, and the output step: the text as running text, a
lower-cased model's capitals carried through the alignment, glossary terms spelled as given
(`add_details`, through nmt.text_form)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .alignment import Words
from .decoding import Hypothesis
from .forced_scoring import ForcedScorer
from .quality import QualityCalibration, sentence_score
from .text_form import TextForm
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


def translations_of(
    hyps: list[list[Hypothesis]],
    encoded: Sequence[tuple[list[int], bool]],
    texts: Sequence[str],
    src_tokenizer: SubwordTokenizer | None,
    tgt_tokenizer: SubwordTokenizer,
    missed: dict[int, list[str]],
) -> list[list[Translation]]:
    """Each source's n-best hypotheses as Translations (encoded: each source's ids and whether they
    were truncated; src_tokenizer: given where the source pieces label attention), with the glossary
    terms `missed` for source i as its glossary_missed."""
    out = []
    for i, ((src_ids, truncated), text, sentence_hyps) in enumerate(zip(encoded, texts, hyps, strict=True)):
        src_pieces = src_tokenizer.lookup(src_ids) if src_tokenizer is not None else []
        out.append([translation_of(h, tgt_tokenizer, src_pieces, truncated, not text.strip()) for h in sentence_hyps])
        for t in out[-1]:
            t.glossary_missed = missed.get(i, t.glossary_missed)
    return out


def check_details(scorer: ForcedScorer, *, scores: bool, alignments: bool, passes: int) -> None:
    """A ValueError, before any search, for details that `scorer`'s engine cannot give (alignments,
    MC dropout's `passes`) or that a call cannot ask for (passes without scores)."""
    if alignments:
        scorer.check_aligns()
    if passes != 1:
        if passes < 1 or not scores:
            raise ValueError(f"qe_passes ({passes}) averages quality scores: at least 1, with scores=True")
        scorer.engine.capabilities.require(["mc_dropout"], scorer.engine.name)


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


def capitals_by_alignment(form: TextForm | None) -> bool:
    """Whether a lower-cased model's output takes the source's capitals through a word alignment,
    which a teacher-forced pass after the search gives (where the engine gives alignments)."""
    return form is not None and form.lowercased and form.case_from_source


def add_details(
    out: list[list[Translation]],
    ids: list[list[int]],
    has_text: list[bool],
    typed: list[str],
    terms: list[list[tuple[str, str]]],
    form: TextForm | None,
    scorer: ForcedScorer,
    quality: QualityCalibration | None,
    case_aligns: bool,
    *,
    scores: bool,
    alignments: bool,
    in_search: bool,
    keep_attention: bool,
    passes: int = 1,
    seed: int = 0,
) -> None:
    """What a call asked for beyond the search, into each of `out` (the n-best of the sources
    `ids`, as `typed`; has_text[i]: source i is not blank): scores and word alignments (read off
    the search's own attention where `in_search`, which is then dropped unless `keep_attention`;
    else from one teacher-forced pass of `scorer`; word scores from `passes` of MC dropout drawn from
    `seed` on, fill_scores), each scored one's `doubtful` by `quality`, and
    the text as running text (`form`, with the glossary `terms` each source called for spelled as
    given). case_aligns: the engine gives word alignments to carry a lower-cased model's capitals."""
    # A lower-cased model's names take the source's capitals through the word alignment: one
    # teacher-forced pass over the sentences whose source has any (all of them, if scores or
    # alignments are asked for anyway).
    case_by_alignment = capitals_by_alignment(form) and case_aligns
    if in_search:
        for sentence, src_ids, text in zip(out, ids, has_text, strict=True):
            for t in sentence:
                t.alignment = scorer.word_pairs(src_ids, t.tokens, t.attention) if text else []
                t.attention = t.attention if keep_attention else None
    elif scores or alignments:
        aligned = alignments or case_by_alignment
        fill_scores(scorer, out, ids, has_text, alignments=aligned, probabilities=scores, passes=passes, seed=seed)
    elif case_by_alignment and (rows := [i for i, source in enumerate(typed) if form.has_own_capitals(source)]):
        pick = [out[i] for i in rows], [ids[i] for i in rows], [has_text[i] for i in rows]
        fill_scores(scorer, *pick, alignments=True, probabilities=False)
    if form is not None:
        for sentence, source, found in zip(out, typed, terms, strict=True):
            for t in sentence:
                t.text = form.output_text(t.text, source, t.alignment if case_by_alignment else None, found)
    for t in (t for sentence in out for t in sentence):  # what was not asked for is not given
        if scores and quality is not None:
            t.doubtful = quality.flag(sentence_score(t.word_scores), passes)
        if not scores:
            t.token_probs = t.confidence = t.word_scores = None
        if not alignments:
            t.alignment = None
    if keep_attention:  # the words that label it for a reader
        label_words(scorer, out, ids)
