"""The rules on which tokens may come next: each sets to -inf, before the softmax, the logits of the
tokens it refuses at this step, so the search renormalises over the tokens left (as CTranslate2
does, which writes the lowest float instead: the same distribution).

    rules = rules_for(SearchLimits(min_len=1, no_repeat_ngram_size=3))
    for rule in rules:
        rule.apply(logits, state)     # logits: (rows, columns) of a SearchState's step, in place

A rule is a small class with one method; `rules_for` lists those a search's limits ask for. A new
rule (a repetition penalty, suppressed tokens) is one class here and one line in `rules_for`.
Padding, and the columns a lexical shortlist leaves a sentence, are not rules: they are which
tokens exist for it at all (SearchState.next_step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

from .penalties import SearchLimits


class Rows(Protocol):
    """What a rule reads of the rows being decoded (a nmt.decoding.state.SearchState)."""

    model: Any  # its config's eos_id: the end token's model id
    prefix: torch.Tensor  # (rows, steps + 1): the start token, then the model's ids chosen so far
    vocabulary: torch.Tensor | None  # (columns,) each column's model id under a shortlist; None: column = id

    @property
    def eos_id(self) -> int: ...  # the end token's column


class LogitsRule(Protocol):
    def apply(self, logits: torch.Tensor, state: Rows) -> None:
        """Refuse tokens in `logits` (rows, columns: state.vocabulary's under a shortlist, else the
        model's ids) in place, given the rows' prefixes so far (state.prefix)."""
        ...


@dataclass(frozen=True)
class EndNotBefore:
    """No row may end before it holds `min_len` tokens (CTranslate2's min_decoding_length)."""

    min_len: int

    def apply(self, logits: torch.Tensor, state: Rows) -> None:
        if state.prefix.size(1) <= self.min_len:
            logits[:, state.eos_id] = float("-inf")


@dataclass(frozen=True)
class NoRepeatNgram:
    """No row repeats an n-gram of its own output: every token that would complete an n-gram
    (n = `size`) the row already holds is refused.

    CTranslate2's rule (NoRepeatNgram::apply, src/decoding_utils.cc), so that both engines give the
    same output: the tokens that count are the output so far, without the start token (its
    sequences hold the chosen tokens only; the decoder start id is fed, never appended); nothing is
    banned before the output holds n tokens; n = 1 bans every token already emitted. The end token
    is never in a live row's output, so CTranslate2 never bans it; it is left alone here too, for
    the rows that ended and ride along in greedy search and sampling until the batch is compacted:
    their prefixes hold it, and a small shortlist could then have every column banned, which would
    make their log-probs NaN (and torch.multinomial raise).
    """

    size: int

    def apply(self, logits: torch.Tensor, state: Rows) -> None:
        n, vocabulary = self.size, state.vocabulary
        output = state.prefix[:, 1:]  # (rows, steps): the model's ids, BOS dropped
        steps = output.size(1)
        if steps < n:
            return
        windows = output.unfold(1, n, 1)  # (rows, steps - n + 1, n): every n-gram so far
        context = output[:, steps - n + 1 :].unsqueeze(1)  # (rows, 1, n - 1) the last n - 1 tokens (none for n = 1)
        repeated = (windows[:, :, :-1] == context).all(
            dim=2
        )  # (rows, steps - n + 1): n-grams the next token would redo
        banned = windows[:, :, -1]  # (rows, steps - n + 1) the token that would complete each
        repeated &= banned != state.model.config.eos_id
        if vocabulary is not None:  # model ids -> the shortlist's columns; an id outside it cannot come anyway
            columns = torch.searchsorted(vocabulary, banned.contiguous()).clamp_(max=vocabulary.numel() - 1)
            repeated &= vocabulary[columns] == banned
            banned = columns
        # A token may complete several n-grams, repeated or not: the minimum with -inf (repeated) or
        # +inf (not) gives -inf wherever any of them repeats, whatever the order of the writes.
        fill = logits.new_full(banned.shape, float("inf")).masked_fill_(repeated, float("-inf"))
        logits.scatter_reduce_(1, banned, fill, reduce="amin")


def rules_for(limits: SearchLimits) -> tuple[LogitsRule, ...]:
    """The rules `limits` asks of every step, in the order they apply (each only refuses, so the
    order does not change the result)."""
    rules: list[LogitsRule] = []
    if limits.min_len > 0:
        rules.append(EndNotBefore(limits.min_len))
    if limits.no_repeat_ngram_size > 0:
        rules.append(NoRepeatNgram(limits.no_repeat_ngram_size))
    return tuple(rules)
