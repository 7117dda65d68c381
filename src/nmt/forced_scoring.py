"""Teacher-forced passes over outputs already chosen: each token's probability and word alignments.

The model reads a (source, output) pair as in training; the probability it gives each output token
is that token's confidence, and its cross-attention, read by nmt.alignment's method, the word
alignment. One pass serves `--scores`, `--alignments`, the alignment of given pairs and the case a
lower-cased model's output takes from its source (nmt.text_form).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .alignment import AlignmentMethod, Words, align_words, word_groups, word_index
from .decoding import SearchLimits
from .decoding.forced import ForcedScore
from .inference.contract import Engine
from .tokenizer import SubwordTokenizer


@dataclass
class ScoredOutput:
    """One output under teacher forcing.

    token_probs: the probability of each output piece, then of the end token (where it ended).
    confidence: their mean log-probability (the length-normalised log-probability): 0 is certain.
    alignment: (source word, output word) pairs, 0-based, when asked for.
    word_scores: each output word's mean piece log-probability (Bergamot's word score), with the
    probabilities: a word the model was unsure of scores low even where the sentence does not.
    """

    token_probs: list[float]
    confidence: float
    alignment: list[tuple[int, int]] | None = None
    word_scores: list[float] | None = None


@dataclass
class ForcedScorer:
    """Scores and aligns outputs of `engine` for sources of `src_tokenizer`; `limits` are the model's
    length limits, which tell an output cut at its limit (no end token to score) from one that ended."""

    engine: Engine
    src_tokenizer: SubwordTokenizer
    tgt_tokenizer: SubwordTokenizer
    limits: SearchLimits

    def check_aligns(self, method: AlignmentMethod | None = None) -> None:
        """A ValueError where the engine cannot give the attention that `method` reads (None: the
        model's own alignment, which an engine may give without giving every layer's attention)."""
        self.engine.capabilities.require(["alignment" if method is None else "attention"], self.engine.name)

    def forced(
        self,
        src_ids: Sequence[Sequence[int]],
        outputs: Sequence[Sequence[int]],
        *,
        need_attention: bool,
        need_log_probs: bool = True,
        dropout_seed: int | None = None,
    ) -> list[ForcedScore]:
        """The engine's teacher-forced pass over outputs of its own search: an output as long as its
        length limit was cut there (no end token to score), any shorter one ended. dropout_seed: an
        MC dropout pass (Engine.score_ids)."""
        limits = self.limits.max_steps(torch.tensor([len(s) for s in src_ids])).tolist()
        ended = [len(out) < limit for out, limit in zip(outputs, limits, strict=True)]
        return self.engine.score_ids(
            src_ids,
            outputs,
            ended=ended,
            need_attention=need_attention,
            need_log_probs=need_log_probs,
            dropout_seed=dropout_seed,
        )

    def score(
        self,
        src_ids: Sequence[Sequence[int]],
        outputs: Sequence[Sequence[int]],
        *,
        alignments: bool,
        probabilities: bool = True,
    ) -> list[ScoredOutput]:
        """One ScoredOutput per (source ids, output tokens) pair, from one teacher-forced pass; without
        `probabilities`, token_probs are empty and confidence 0 (the pass then skips the output layer)."""
        forced = self.forced(src_ids, outputs, need_attention=alignments, need_log_probs=probabilities)
        scored = []
        for src, out, f in zip(src_ids, outputs, forced, strict=True):
            log_probs = f.token_log_probs
            pairs = self.word_pairs(src, out, f.cross_attention) if alignments else None
            confidence = sum(log_probs) / max(1, len(log_probs))
            words = self.word_scores(out, log_probs) if probabilities else None
            scored.append(ScoredOutput([math.exp(lp) for lp in log_probs], confidence, pairs, words))
        return scored

    def mc_word_scores(
        self, src_ids: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]], *, passes: int, seed: int
    ) -> list[list[float]]:
        """Each output's word scores averaged over `passes` teacher-forced passes with the model's
        dropout on (MC dropout: nmt.inference.mc_dropout), pass k's masks drawn from seed + k. The
        mean of a sentence's averaged word scores is the mean of its per-pass sentence scores
        (Fomicheva et al.'s D-TP over Bergamot's sentence score)."""
        self.engine.capabilities.require(["mc_dropout"], self.engine.name)
        per_pass = []
        for k in range(passes):
            forced = self.forced(src_ids, outputs, need_attention=False, dropout_seed=seed + k)
            per_pass.append([self.word_scores(out, f.token_log_probs) for out, f in zip(outputs, forced, strict=True)])
        by_sentence = zip(*per_pass, strict=True)  # per_pass[k][sentence][word]: each sentence's passes
        return [[sum(word) / passes for word in zip(*passes_of, strict=True)] for passes_of in by_sentence]

    def word_scores(self, tgt_ids: Sequence[int], log_probs: Sequence[float]) -> list[float]:
        """The mean log-probability of each output word's pieces, words counted as alignments count
        them (the whitespace-separated words of the text the model wrote); the end token is no word."""
        pieces = self.tgt_tokenizer.lookup(list(tgt_ids))
        index = word_index(pieces, self.special_pieces(pieces), wordpiece=self.tgt_tokenizer.kind == "wordpiece")
        per_word: dict[int, list[float]] = {}
        for word, log_prob in zip(index, log_probs, strict=False):  # log_probs may end with the end token's
            if word is not None:
                per_word.setdefault(word, []).append(log_prob)
        return [sum(values) / len(values) for _, values in sorted(per_word.items())]

    def align(
        self, src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]], method: AlignmentMethod | None = None
    ) -> list[list[tuple[int, int]]]:
        """Word alignments of given pairs (each target read to its end token), by `method` (None: the
        model's own)."""
        self.check_aligns(method)
        scored = self.engine.score_ids(src_ids, tgt_ids, need_attention=True, need_log_probs=False)
        return [
            self.word_pairs(src, tgt, forced.cross_attention, method)
            for src, tgt, forced in zip(src_ids, tgt_ids, scored, strict=True)
        ]

    def word_pairs(
        self,
        src_ids: Sequence[int],
        tgt_ids: Sequence[int],
        attention: torch.Tensor,
        method: AlignmentMethod | None = None,
    ) -> list[tuple[int, int]]:
        """(source word, target word) pairs of one sentence from its teacher-forced cross-attention,
        read by `method` (None: the model's alignment, as the engine locates it)."""
        src_pieces = self.src_tokenizer.lookup(src_ids)
        tgt_pieces = self.tgt_tokenizer.lookup([*tgt_ids, self.tgt_tokenizer.eos_id])
        return align_words(
            attention,
            word_index(src_pieces, self.special_pieces(src_pieces), wordpiece=self.src_tokenizer.kind == "wordpiece"),
            word_index(tgt_pieces, self.special_pieces(tgt_pieces), wordpiece=self.tgt_tokenizer.kind == "wordpiece"),
            method or self.engine.alignment,
        )

    def special_pieces(self, pieces: Sequence[str]) -> set[str]:
        """The pieces among `pieces` that are no word: start, end, padding, and >>xx<< language tokens."""
        return set(self.special_labels(pieces))

    def special_labels(self, pieces: Sequence[str]) -> dict[str, str]:
        """The special pieces (those of special_pieces) as a reader is told them: "[START]" ->
        "(start)", "[END]" -> "(end)", ">>de<<" -> "(into de)". A piece that is both start and
        padding (Marian's decoder starts on <pad>) is the start."""
        labels: dict[str, str] = {}
        for tokenizer in (self.src_tokenizer, self.tgt_tokenizer):
            ids = (tokenizer.start_id, tokenizer.eos_id, tokenizer.pad_id)
            for piece, label in zip(tokenizer.lookup(ids), ("(start)", "(end)", "(padding)"), strict=True):
                labels.setdefault(piece, label)
        languages = {p: f"(into {p[2:-2]})" for p in pieces if p.startswith(">>") and p.endswith("<<")}
        return labels | languages

    def words(self, ids: Sequence[int], *, source: bool) -> Words:
        """A source's (or an output's) ids as the words a reader sees, for attention pictures."""
        tokenizer = self.src_tokenizer if source else self.tgt_tokenizer
        pieces = tokenizer.lookup(list(ids))
        return word_groups(pieces, self.special_labels(pieces), wordpiece=tokenizer.kind == "wordpiece")
