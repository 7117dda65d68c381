"""Sampling: draw each next token at random from the (reshaped) model distribution.

Useful for back-translation and for looking at what a model believes beyond its single
best guess. Temperature flattens (> 1) or sharpens (< 1) the distribution; top-k keeps
only the k most likely tokens before drawing.
"""

from __future__ import annotations

import torch

from nmt.model import Transformer

from .greedy import PickToken, one_best_search
from .hypothesis import Hypothesis
from .penalties import SearchLimits


def sampling_distribution(log_probs: torch.Tensor, *, temperature: float = 1.0, top_k: int = 0) -> torch.Tensor:
    """(rows, vocab) log-probs -> (rows, vocab) probabilities to draw the next token from.

    softmax(log_probs / temperature), restricted to the top_k most likely tokens when
    top_k > 0 (tokens tied with the k-th are kept too).
    """
    scores = log_probs / temperature
    if 0 < top_k < scores.size(-1):
        kth_best = scores.topk(top_k, dim=-1).values[:, -1:]  # (rows, 1)
        scores = scores.masked_fill(scores < kth_best, float("-inf"))
    return scores.softmax(dim=-1)


def sampling_pick(*, temperature: float, top_k: int, generator: torch.Generator | None) -> PickToken:
    """A pick rule for `one_best_search` that draws one token per row."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, not {temperature} (use greedy_search for argmax)")

    def pick(log_probs: torch.Tensor) -> torch.Tensor:
        probs = sampling_distribution(log_probs, temperature=temperature, top_k=top_k)  # (rows, vocab)
        return torch.multinomial(probs, 1, generator=generator).squeeze(1)  # (rows,)

    return pick


@torch.no_grad()
def sample(
    model: Transformer,
    src: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    generator: torch.Generator | None = None,
    limits: SearchLimits = SearchLimits(),
    use_cache: bool = True,
    return_attention: bool = False,
) -> list[Hypothesis]:
    """Draw one output per sentence, token by token, from the model's distribution.

    temperature > 0 divides the log-probs before the softmax; top_k > 0 keeps only the k
    best tokens (top_k=1 is greedy search; 0 keeps all). Pass a seeded `generator` for
    reproducible draws (the draws depend on the batch too: finished sentences leave it).
    Hypothesis.log_prob and score are the model's own log-probabilities of the drawn
    tokens, before temperature and top-k, so they compare with greedy and beam search.
    Other arguments and the result as in `greedy_search`.
    """
    pick = sampling_pick(temperature=temperature, top_k=top_k, generator=generator)
    return one_best_search(model, src, pick, limits=limits, use_cache=use_cache, return_attention=return_attention)
