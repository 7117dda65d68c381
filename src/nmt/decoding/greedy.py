"""Greedy search: at every step take the single most likely next token.

The loop is written once for any rule that picks one token per sentence per step;
sampling (sampling.py) reuses it with a random pick instead of argmax.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from nmt.model import Transformer

from .hypothesis import Hypothesis
from .penalties import SearchLimits
from .ranking import best_token
from .state import SearchState

# (rows, vocab) log-probs -> (rows,) chosen token ids
PickToken = Callable[[torch.Tensor], torch.Tensor]


def pick_argmax(log_probs: torch.Tensor) -> torch.Tensor:
    """The most likely token of each row: (rows, vocab) -> (rows,)."""
    return best_token(log_probs)


@torch.no_grad()
def one_best_search(
    model: Transformer,
    src: torch.Tensor,
    pick: PickToken,
    *,
    limits: SearchLimits = SearchLimits(),
    use_cache: bool = True,
    return_attention: bool = False,
    vocabulary: torch.Tensor | None = None,
    allowed: torch.Tensor | None = None,
) -> list[Hypothesis]:
    """Extend one hypothesis per sentence with `pick` until EOS or the length limit.

    src: (batch, src_len) right-padded ids. Returns one Hypothesis per sentence, in input
    order, with score == log_prob (no length penalty). Finished sentences leave the batch
    (a quarter at a time), so they cost little in later steps. Arguments as in `greedy_search`.
    """
    batch = src.size(0)
    if batch == 0:
        return []
    state = SearchState.start(
        model,
        src,
        use_cache=use_cache,
        return_attention=return_attention,
        vocabulary=vocabulary,
        allowed=allowed,
        limits=limits,
    )
    max_len = limits.max_steps(state.src_lengths)  # (active,)
    sentence = torch.arange(batch, device=src.device)  # (active,) input position of each row
    total = torch.zeros(batch, device=src.device)  # (active,) log-prob so far
    alive = torch.ones(batch, dtype=torch.bool, device=src.device)  # (active,) not finished yet
    results: list[Hypothesis | None] = [None] * batch
    step = 0
    while alive.any() and step < int(max_len[alive].max()):
        step += 1
        now = state.next_step()
        tokens = pick(now.log_probs)  # (active,)
        total = total + now.log_probs.gather(1, tokens.unsqueeze(1)).squeeze(1)
        done = alive & ((tokens == state.eos_id) | (max_len <= step))  # (active,)
        if done.any():
            rows = done.nonzero().squeeze(1)
            finished = state.finish(now, rows, tokens[rows], total[rows])
            for i, hypothesis in zip(sentence[rows].tolist(), finished, strict=True):
                results[i] = hypothesis
            alive &= ~done
        # Finished rows leave the batch once they are a quarter of it: compacting the cache
        # copies every row, so doing it for each sentence that ends would cost more than it saves.
        if 4 * int((~alive).sum()) >= alive.numel() and alive.any():
            keep = alive.nonzero().squeeze(1)
            state.advance(now, tokens[keep], keep, sentences=keep)
            sentence, total, max_len, alive = sentence[keep], total[keep], max_len[keep], alive[keep]
        else:
            state.advance(now, tokens)  # finished rows ride along; their tokens are never read
    return results


@torch.no_grad()
def greedy_search(
    model: Transformer,
    src: torch.Tensor,
    *,
    limits: SearchLimits = SearchLimits(),
    use_cache: bool = True,
    return_attention: bool = False,
    vocabulary: torch.Tensor | None = None,
    allowed: torch.Tensor | None = None,
) -> list[Hypothesis]:
    """Translate a batch by taking the argmax token at every step.

    model: a Transformer in eval mode. src: (batch, src_len) right-padded source ids.
    At most `limits.max_steps` steps are taken per sentence, EOS included. use_cache=False
    re-decodes the whole prefix each step: slower, same tokens; a reference for tests.
    return_attention fills Hypothesis.attention. vocabulary: (k,) sorted target ids (the end id
    among them) that the search is restricted to, a lexical shortlist, and allowed (batch, k) the
    columns each sentence may emit (see SearchState.start).
    The start, end and padding ids are the model's (`model.config`). Returns one Hypothesis per
    sentence, in input order (an empty batch gives []); score == log_prob.
    """
    return one_best_search(
        model,
        src,
        pick_argmax,
        limits=limits,
        use_cache=use_cache,
        return_attention=return_attention,
        vocabulary=vocabulary,
        allowed=allowed,
    )
