"""Teacher-forced scoring of outputs already chosen: what the model thinks of each token, and where
it looked while choosing it.

A search keeps only a hypothesis's total log-probability. Confidence (per-token probabilities) and
word alignments (cross-attention) come from one more pass over the finished outputs with the whole
output given at once, as in training: one batched forward pass, cheap next to the search itself.

    log p(y_j | y_<j, x) = log_softmax(logits)_j[y_j]      for j = 1 .. len(y), then the end token

with the padding token's logit at -inf, as in the search, and the end token's too within the
first `min_len` steps where the output went on (the search could not end there), so that the
scores add up to the search's own log-probability of the output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..model import Transformer


@dataclass
class ForcedScore:
    """One output scored under teacher forcing.

    token_log_probs: the log-probability of each output token, then of the end token where the output
        ended with one (len(tokens) + 1 values; len(tokens) for an output cut at its length limit).
    cross_attention: (layers, heads, steps, src_len) with steps = len(token_log_probs): row j is the
        attention while predicting step j's token, as in Hypothesis.attention; None unless asked for.
    """

    token_log_probs: list[float]
    cross_attention: torch.Tensor | None = None


@torch.inference_mode()  # not no_grad: no version counters to keep, a measurably faster pass
def force_decode(
    model: Transformer,
    sources: Sequence[Sequence[int]],
    outputs: Sequence[Sequence[int]],
    *,
    ended: Sequence[bool] | None = None,
    need_attention: bool = False,
    need_log_probs: bool = True,
    min_len: int = 0,
) -> list[ForcedScore]:
    """Score each output (ids without BOS/EOS) given its source (ids with the tokenizer's BOS/EOS).

    ended[i]: whether output i ended with the end token, so that its probability is scored too
    (default: all did). min_len: the search's `SearchLimits.min_len`. need_log_probs=False: the
    attention alone (token_log_probs left empty), without the output projection over the whole
    vocabulary, which is most of the pass's cost.
    """
    if len(sources) != len(outputs):
        raise ValueError(f"{len(sources)} sources but {len(outputs)} outputs")
    if not sources:
        return []
    config = model.config
    ended = [True] * len(outputs) if ended is None else list(ended)
    device = next(model.parameters()).device
    src = _padded([list(s) for s in sources], config.pad_id, device)  # (batch, src_len)
    tgt_in = _padded([[config.bos_id, *o] for o in outputs], config.pad_id, device)  # (batch, steps)
    gold = _padded([[*o, config.eos_id] for o in outputs], config.pad_id, device)  # (batch, steps)
    encoded = model.encode(src)
    decoded = model.decode(tgt_in, encoded, need_weights=need_attention)
    chosen = _chosen_log_probs(model, decoded.states, outputs, gold, min_len) if need_log_probs else None
    attention = torch.stack(decoded.cross_weights, dim=1).float() if need_attention else None
    # attention: (batch, layers, heads, steps, src_len)
    scores = []
    for i, output in enumerate(outputs):
        steps = len(output) + (1 if ended[i] else 0)
        weights = None
        if attention is not None:
            weights = attention[i, :, :, :steps, : len(sources[i])].cpu()
        scores.append(ForcedScore(chosen[i, :steps].tolist() if chosen is not None else [], weights))
    return scores


def _chosen_log_probs(
    model: Transformer, states: torch.Tensor, outputs: Sequence[Sequence[int]], gold: torch.Tensor, min_len: int
) -> torch.Tensor:
    """(batch, steps) log-probability of each gold token given the decoder states before it."""
    config, device = model.config, states.device
    logits = model.logits(states).float()  # (batch, steps, vocab)
    logits[..., config.pad_id] = float("-inf")  # as in the search (nmt.decoding.state): never a choice
    if min_len > 0:  # where the search could not have ended: an output shorter than min_len did not come from it
        lengths = torch.tensor([len(o) for o in outputs], device=device)
        step = torch.arange(logits.size(1), device=device)
        too_early = (step < min_len) & (step < lengths.unsqueeze(1))  # (batch, steps)
        logits[..., config.eos_id].masked_fill_(too_early, float("-inf"))
    log_probs = torch.log_softmax(logits, dim=-1)
    return log_probs.gather(-1, gold.unsqueeze(-1)).squeeze(-1)


def _padded(rows: list[list[int]], pad: int, device: torch.device) -> torch.Tensor:
    """(len(rows), longest) ids, right-padded with `pad`."""
    longest = max(1, max(len(r) for r in rows))
    out = torch.full((len(rows), longest), pad, dtype=torch.long, device=device)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out
