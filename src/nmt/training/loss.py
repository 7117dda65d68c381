"""Label-smoothed cross-entropy, masked on padding and normalised by real tokens.

The reference design divides a loss averaged over *all* positions by a correction
factor; here padding never enters the sum, so the loss (and its gradient) is the same
whatever padding a batch carries. The sum is divided by the number of real target
tokens, which the caller passes in: under gradient accumulation or several processes
it is the token count of the whole global batch, not of one piece of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class LossOutput:
    loss: torch.Tensor  # scalar: summed smoothed loss / normaliser (what backward sees)
    nll_sum: torch.Tensor  # scalar: summed negative log-likelihood of real tokens (no smoothing), detached
    correct: torch.Tensor  # scalar: real tokens whose argmax is the label, detached
    tokens: int  # real tokens in this piece


def label_smoothed_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    *,
    normaliser: int | float,
    smoothing: float = 0.1,
    pad_id: int = 0,
) -> LossOutput:
    """Cross-entropy against (1 - eps) one-hot + eps uniform, summed over real tokens.

    logits: (batch, tgt_len, vocab); labels: (batch, tgt_len) with pad_id at padding.
        loss = sum_t [ (1 - eps) * -log p(y_t) + eps * mean_v -log p(v) ] / normaliser
    """
    flat_logits = logits.reshape(-1, logits.size(-1))  # (tokens, vocab)
    flat_labels = labels.reshape(-1)
    mask = flat_labels != pad_id
    # Drop padding rows before the softmax: they cost no vocabulary-sized work at all.
    flat_logits, flat_labels = flat_logits[mask], flat_labels[mask]
    log_probs = F.log_softmax(flat_logits.float(), dim=-1)  # (real_tokens, vocab)
    nll = -log_probs.gather(1, flat_labels[:, None]).squeeze(1)  # (real_tokens,)
    smooth = -log_probs.mean(dim=-1)  # (real_tokens,)
    loss = ((1.0 - smoothing) * nll + smoothing * smooth).sum() / normaliser
    with torch.no_grad():
        correct = (flat_logits.argmax(dim=-1) == flat_labels).sum()
    return LossOutput(loss=loss, nll_sum=nll.detach().sum(), correct=correct, tokens=int(flat_labels.numel()))
