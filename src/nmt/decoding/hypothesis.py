"""What every search returns: one finished output sequence with its scores."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Hypothesis:
    """One output sequence for one source sentence.

    tokens: the output ids, without BOS and without EOS.
    score: the ranking score, log_prob / gnmt_length_penalty(length, alpha), where length
        counts the output tokens including EOS when the hypothesis ended with one. Greedy
        search and sampling use alpha = 0, so there score == log_prob.
    log_prob: the sum of the model's log-probabilities of every chosen token, including the
        EOS step when there is one. A hypothesis cut off at the maximum length has no EOS:
        `len(tokens) == max_len` and neither log_prob nor the penalty's length counts an EOS.
    attention: only with return_attention=True: (layers, heads, steps, src_len) cross-attention,
        one row per decoding step (len(tokens) + 1 when it ended with EOS, else len(tokens)),
        row j being the attention while predicting output token j; src_len is this sentence's
        own source length (padding stripped), and each row sums to 1.
    """

    tokens: list[int]
    score: float
    log_prob: float
    attention: torch.Tensor | None = None
