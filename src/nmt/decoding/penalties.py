"""How long an output may grow, and how its length changes its score."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SearchLimits:
    """How many decoding steps a sentence may take: floor(max_len_a * src_len + max_len_b), in [1, max_len_cap],
    how many tokens it must emit before it may end (min_len), and which n-grams it may not repeat.

    One value for every search (greedy, sampling, beam), so that a limit set by a user reaches
    each of them whole. The default, 1.5 * src_len + 10, leaves room for a target longer than
    its source while stopping a model that never says EOS.

    min_len: the end token cannot be chosen before this many tokens (its logit is -inf before the
    softmax, as CTranslate2's min_decoding_length does it). 0 here, the plain search; a model
    directory's translations use DecodeConfig.min_len, 1 by default (fairseq's min_len): with a
    length penalty an empty output can outscore every real one (one end token at log-prob -8 beats
    27 tokens at -22 under alpha 0.6), and an empty translation of a real sentence is never right.

    no_repeat_ngram_size: n > 0 bans any token that would repeat an n-gram the output already holds
    (fairseq's --no-repeat-ngram-size, CTranslate2's and transformers' no_repeat_ngram_size, with
    CTranslate2's rule: see nmt.decoding.logits_rules.NoRepeatNgram): once a model falls into a loop ("the man
    the man the man"), each turn makes the next more likely, and greedy and beam search alike tend to
    follow it to the length limit. 0, the default, bans nothing.
    """

    max_len_a: float = 1.5
    max_len_b: int = 10
    max_len_cap: int = 512  # whatever the source: bounds memory and time for one very long input
    min_len: int = 0
    no_repeat_ngram_size: int = 0

    def __post_init__(self) -> None:
        if (
            self.max_len_a < 0
            or self.max_len_b < 0
            or self.max_len_cap < 1
            or self.min_len < 0
            or self.no_repeat_ngram_size < 0
        ):
            raise ValueError(
                "search limits need max_len_a >= 0, max_len_b >= 0, max_len_cap >= 1, min_len >= 0 and "
                f"no_repeat_ngram_size >= 0, got {self}"
            )

    def max_steps(self, src_lengths: torch.Tensor) -> torch.Tensor:
        """(batch,) real (non-padding) source tokens -> (batch,) long: the steps each sentence may take.

        A step emits one token, EOS included, so a sentence stopped at this limit holds
        that many tokens and no EOS. At least one step is always taken, even for an empty source.
        """
        limit = (src_lengths.to(torch.float64) * self.max_len_a).floor().long() + self.max_len_b
        return limit.clamp(min=1, max=self.max_len_cap)


def length_penalty(length: int | torch.Tensor, alpha: float, normalization: str = "gnmt") -> float | torch.Tensor:
    """What a finished hypothesis's log-prob is divided by to rank it: GNMT's penalty (nmt's default),
    or "average": length ** alpha (transformers' and fairseq's; alpha 1 ranks by the mean log-prob
    per token). `length` counts the output tokens, EOS included (never BOS)."""
    if normalization == "average":
        return length**alpha
    if normalization != "gnmt":
        raise ValueError(
            f"length normalization must be one of {', '.join(LENGTH_NORMALIZATIONS)}, got {normalization!r}"
        )
    return gnmt_length_penalty(length, alpha)


LENGTH_NORMALIZATIONS = ("gnmt", "average")


def gnmt_length_penalty(length: int | torch.Tensor, alpha: float) -> float | torch.Tensor:
    """((5 + length) / 6) ** alpha, from Wu et al. 2016 (GNMT). Divide a log-prob by it.

    Log-probs only fall as a sequence grows, so comparing raw sums favours short outputs;
    dividing by a penalty that grows with length offsets that. alpha = 0 gives 1 (plain
    log-prob); larger alpha favours longer outputs. `length` counts output tokens
    including EOS when the hypothesis ended with one (BOS never counts).
    """
    return ((5 + length) / 6) ** alpha
