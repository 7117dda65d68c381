"""How long an output may grow, and how its length changes its score."""

from __future__ import annotations

import torch


def max_output_length(src_lengths: torch.Tensor, a: float, b: int, cap: int) -> torch.Tensor:
    """The most decoding steps allowed per sentence: floor(a * src_len + b), clamped to [1, cap].

    src_lengths: (batch,) real (non-padding) source tokens -> (batch,) long.
    A step emits one token, EOS included, so a sentence stopped at this limit holds
    max_len tokens and no EOS. At least one step is always taken, even for an empty source.
    """
    limit = (src_lengths.to(torch.float64) * a).floor().long() + b
    return limit.clamp(min=1, max=cap)


def gnmt_length_penalty(length: int | torch.Tensor, alpha: float) -> float | torch.Tensor:
    """((5 + length) / 6) ** alpha, from Wu et al. 2016 (GNMT). Divide a log-prob by it.

    Log-probs only fall as a sequence grows, so comparing raw sums favours short outputs;
    dividing by a penalty that grows with length offsets that. alpha = 0 gives 1 (plain
    log-prob); larger alpha favours longer outputs. `length` counts output tokens
    including EOS when the hypothesis ended with one (BOS never counts).
    """
    return ((5 + length) / 6) ** alpha
