"""The step-by-step state that greedy search, sampling and beam search share.

Every search runs the same loop: ask the model for next-token log-probs for each row,
choose tokens, turn some rows into finished hypotheses, then keep / reorder the other
rows. `SearchState` owns everything that must move together when rows move: the
prefixes, the KV cache, the encoder output and (optionally) the attention history.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch

from nmt.model import DecoderCache, Encoded, Transformer

from .hypothesis import Hypothesis
from .logits_rules import LogitsRule, rules_for
from .penalties import SearchLimits, length_penalty


class Step(NamedTuple):
    """What the model says about the next token of every row."""

    log_probs: torch.Tensor  # (rows, vocab)
    attention: torch.Tensor | None  # (rows, layers, heads, src_len) cross-attention, when collected


@dataclass
class SearchState:
    """The rows being decoded: one per sentence (greedy, sampling) or `beam` adjacent rows per sentence."""

    model: Transformer  # or anything with encode / new_cache / decode / logits (tests use a scripted fake)
    encoded: Encoded  # one row per sentence still being decoded (its beams share it)
    cache: DecoderCache | None  # None: re-decode the whole prefix every step (the slow reference path)
    prefix: torch.Tensor  # (rows, steps + 1): BOS, then the tokens chosen so far
    src_lengths: torch.Tensor  # (rows,) real source tokens of each row's sentence, to strip padding off attention
    collect_attention: bool = False
    attention: torch.Tensor | None = None  # (rows, layers, heads, steps, src_len) of the steps so far
    # A shortlist: the sorted target ids the search may emit, and the output projection onto just
    # those. Log-probs, tokens and eos_id are then positions in `vocabulary`; the prefix and the
    # finished hypotheses hold the model's own ids.
    vocabulary: torch.Tensor | None = None  # (k,)
    output: Callable[[torch.Tensor], torch.Tensor] | None = None  # (rows, d_model) -> (rows, k)
    refused: torch.Tensor | None = None  # (sentences, k) bool: the columns each sentence may not emit
    end_column: int | None = None  # where the end token is among the k columns
    limits: SearchLimits = SearchLimits()  # its minimum length and n-gram size become `rules`
    rules: tuple[LogitsRule, ...] = ()  # which tokens may come next (nmt.decoding.logits_rules)

    def __post_init__(self) -> None:
        self.rules = self.rules or rules_for(self.limits)  # by default, those the limits ask for

    @classmethod
    def start(
        cls,
        model: Transformer,
        src: torch.Tensor,
        *,
        use_cache: bool = True,
        return_attention: bool = False,
        vocabulary: torch.Tensor | None = None,
        allowed: torch.Tensor | None = None,
        limits: SearchLimits = SearchLimits(),
    ) -> SearchState:
        """Encode `src` (batch, src_len) once; one row per sentence holding just BOS.

        Beam search grows this to `beam` rows per sentence after the first step, by `advance`.
        The start and padding ids are the model's own (`model.config`). vocabulary: (k,) sorted,
        distinct target ids, the end id among them, to which the search is restricted (a lexical
        shortlist); the log-probs are then a distribution over those k tokens. allowed: (batch, k)
        bool, the columns of `vocabulary` each sentence may emit (its own shortlist within the
        batch's), so that a sentence's search does not depend on the others in its batch.
        limits: the search's limits; `next_step` applies the rules they ask for on the next token
        (nmt.decoding.logits_rules: a minimum length, no repeated n-gram).
        """
        encoded = model.encode(src)
        cache = model.new_cache(encoded) if use_cache else None  # cross K/V projected once per sentence
        prefix = torch.full((src.size(0), 1), model.config.bos_id, dtype=torch.long, device=src.device)
        src_lengths = (src != model.config.pad_id).sum(dim=1)
        state = cls(model, encoded, cache, prefix, src_lengths, return_attention, limits=limits)
        if vocabulary is not None:
            state.restrict(vocabulary.to(src.device), None if allowed is None else allowed.to(src.device))
        return state

    def restrict(self, vocabulary: torch.Tensor, allowed: torch.Tensor | None) -> None:
        """Search over `vocabulary`'s columns only (and each sentence over its `allowed` ones)."""
        config = self.model.config
        if vocabulary.dim() != 1 or not bool((vocabulary[1:] > vocabulary[:-1]).all()):
            raise ValueError("a search vocabulary must be sorted, distinct ids")
        end = torch.searchsorted(vocabulary, config.eos_id)
        if int(end) >= vocabulary.numel() or int(vocabulary[end]) != config.eos_id:
            raise ValueError("a search vocabulary must hold the end token")
        if allowed is not None and allowed.shape != (self.prefix.size(0), vocabulary.numel()):
            raise ValueError(f"allowed must be (sentences, {vocabulary.numel()}), not {tuple(allowed.shape)}")
        self.vocabulary, self.end_column = vocabulary, int(end)
        refused = vocabulary == config.pad_id  # (k,) padding is never a choice (see next_step)
        refused = refused.expand(self.prefix.size(0), -1) if allowed is None else refused | ~allowed
        self.refused = refused if bool(refused.any()) else None  # (sentences, k)
        self.output = output_rows(self.model.output, vocabulary)

    @property
    def eos_id(self) -> int:
        """The end token, as the log-probs' columns number it."""
        return self.model.config.eos_id if self.end_column is None else self.end_column

    def model_ids(self, tokens: torch.Tensor) -> torch.Tensor:
        """Tokens as the log-probs' columns number them -> the model's ids."""
        return tokens if self.vocabulary is None else self.vocabulary[tokens]

    def next_step(self) -> Step:
        """The next token's log-probabilities after each row's prefix, and this step's attention.

        Only the last position is projected to the vocabulary. Padding is no output token (and a
        PAD inside a prefix would be masked out by the uncached path): its logit is -inf before the
        softmax, so the log-probs are a distribution over the tokens a search may emit. (CTranslate2
        does the same through the exported model's output bias, so both engines score alike; so does
        Marian, whose models have no padding token at all. transformers and fairseq instead set its
        log-prob to -inf after the softmax, without renormalising.) The tokens `rules` refuse (the end
        token before min_len, n-gram repeats: nmt.decoding.logits_rules) go the same way, before the
        softmax as in CTranslate2 (which writes the lowest float rather than -inf: the same
        distribution over the tokens left).
        """
        if self.cache is not None:  # feed only the newest token; earlier ones are in the cache
            out = self.model.decode(
                self.prefix[:, -1:], self.encoded, cache=self.cache, need_weights=self.collect_attention
            )
        else:
            out = self.model.decode(self.prefix, self.encoded, need_weights=self.collect_attention)
        if self.output is not None:  # the shortlist's columns only
            logits = self.output(out.states[:, -1]).float()  # (rows, k)
            if self.refused is not None:  # each row to its own sentence's columns (beams are adjacent)
                per_sentence = logits.size(0) // self.refused.size(0)
                refused = self.refused if per_sentence == 1 else self.refused.repeat_interleave(per_sentence, dim=0)
                logits.masked_fill_(refused, float("-inf"))
        else:
            logits = self.model.logits(out.states[:, -1]).float()  # (rows, vocab); float32 even for a half model
            logits[:, self.model.config.pad_id] = float("-inf")
        for rule in self.rules:  # the end token before min_len, n-gram repeats: renormalised over the rest
            rule.apply(logits, self)
        attention = None
        if self.collect_attention:  # the last query's cross-attention, per layer
            attention = torch.stack([w[:, :, -1] for w in out.cross_weights], dim=1)
        return Step(log_softmax_in_place(logits), attention)

    def advance(
        self,
        step: Step,
        tokens: torch.Tensor,
        order: torch.Tensor | None = None,
        *,
        sentences: torch.Tensor | None = None,
    ) -> None:
        """Keep rows `order` (in that order), then append each kept row's chosen token.

        step: what `next_step` gave for the current rows (its attention joins the history).
        tokens: (len(order),) or (rows,) when order is None (every row kept in place).
        sentences: the sentences that stay in the batch, when finished ones leave it; their
        encoder output and cross-attention keys/values are kept, once per sentence. Rows must
        stay grouped by sentence, in sentence order, the same number of rows for each.
        """
        if step.attention is not None:  # the history follows its rows, so append before reordering
            new = step.attention.unsqueeze(3)  # (rows, layers, heads, 1, src_len)
            self.attention = new if self.attention is None else torch.cat([self.attention, new], dim=3)
        if order is not None:
            self.prefix = self.prefix[order]
            if self.attention is not None:
                self.attention = self.attention[order]
            self.src_lengths = self.src_lengths[order]
            if self.cache is not None:
                self.cache.reorder(order)
        if sentences is not None:
            self.encoded = self.encoded.select(sentences)
            if self.refused is not None:
                self.refused = self.refused[sentences]
            if self.cache is not None:
                self.cache.select_sentences(sentences)
        self.prefix = torch.cat([self.prefix, self.model_ids(tokens).unsqueeze(1)], dim=1)  # (rows, steps + 2)

    def finish(
        self,
        step: Step,
        rows: torch.Tensor,
        tokens: torch.Tensor,
        log_probs: torch.Tensor,
        *,
        alpha: float = 0.0,
        normalization: str = "gnmt",
    ) -> list[Hypothesis]:
        """Hypotheses made of rows `rows` extended by this `step`'s `tokens` (call before `advance`).

        rows, tokens, log_probs: (n,) each; log_probs are the totals including this step.
        A hypothesis whose token is EOS has ended; any other was cut off at the length limit.
        """
        eos_id = self.model.config.eos_id
        tokens = self.model_ids(tokens)
        sequences = torch.cat([self.prefix[rows, 1:], tokens.unsqueeze(1)], dim=1).tolist()  # drop BOS
        attention = None
        if step.attention is not None:
            new = step.attention[rows].unsqueeze(3)  # (n, layers, heads, 1, src_len)
            attention = new if self.attention is None else torch.cat([self.attention[rows], new], dim=3)
        lengths = self.src_lengths[rows].tolist()
        hypotheses = []
        for i, (sequence, log_prob) in enumerate(zip(sequences, log_probs.tolist(), strict=True)):
            length = len(sequence)  # output tokens, counting the EOS if there is one
            if sequence[-1] == eos_id:
                sequence.pop()
            # clone: a view would keep every row's history alive
            weights = attention[i, ..., : lengths[i]].clone() if attention is not None else None
            score = log_prob / length_penalty(length, alpha, normalization)
            hypotheses.append(Hypothesis(sequence, score, log_prob, weights))
        return hypotheses


def log_softmax_in_place(logits: torch.Tensor) -> torch.Tensor:
    """log_softmax over the last dimension, written over `logits` on CPU (elsewhere: a new tensor).

    Why in place: each step's (rows, vocab) table is large (15 MB at 450 rows x 8,192), and a new
    one every step comes from fresh pages: glibc does not hand back PyTorch's freed 64-byte-aligned
    blocks of that size for the next request (posix_memalign's padding no longer fits), so each
    step pays a page fault per 4 KiB of output (measured: docs/benchmarks-log.md). The
    CPU kernel reads every element before writing it (row max, sum of exp, then
    x - max - log(sum)), so writing over the input gives the same numbers; a test checks that.
    """
    if logits.device.type != "cpu" or logits.requires_grad:
        return logits.log_softmax(dim=-1)
    return torch.log_softmax(logits, dim=-1, out=logits)


def output_rows(layer: torch.nn.Module, ids: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """The output projection onto rows `ids` of its weight only: (..., d_model) -> (..., len(ids)).

    A layer that stores its weight in its own form (nmt.inference's int8 layer) makes the restricted
    layer itself (`select_outputs`); any other's `weight` rows are gathered once here.
    Either gives, column for column, the numbers of the whole projection.
    """
    if hasattr(layer, "select_outputs"):
        return layer.select_outputs(ids)
    weight = layer.weight[ids]  # (k, d_model), gathered once per batch rather than every step
    bias = None if layer.bias is None else layer.bias[ids]
    return lambda states: torch.nn.functional.linear(states, weight, bias)
