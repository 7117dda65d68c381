"""What one batch computes: padded source ids -> n-best hypotheses per sentence.

A free function of the model, the ids and the request, so that the caller's thread, a worker
thread and a worker process (which has its own copy of the model) run the very same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..config import DecodeConfig
from ..decoding import Hypothesis, SearchLimits, beam_search, greedy_search, sample
from ..model import Transformer
from .plan import SearchRequest
from .precision import autocast_for

# A batch's generator is seeded with seed * SEED_STRIDE + its index: a call's batches (fewer than
# this) draw apart from each other and from the next seed's.
SEED_STRIDE = 100_003


def search_limits(decode: DecodeConfig) -> SearchLimits:
    """The output length limits a model directory's decode section asks for."""
    return SearchLimits(max_len_a=decode.max_len_a, max_len_b=decode.max_len_b)


@torch.inference_mode()
def search_batch(
    model: Transformer,
    batch_ids: Sequence[Sequence[int]],
    request: SearchRequest,
    limits: SearchLimits,
    precision: str,
    batch_index: int = 0,
    candidates: Sequence[Sequence[int]] | None = None,
) -> list[list[Hypothesis]]:
    """n-best Hypotheses for one batch of source id lists (BOS/EOS included), in its order.

    batch_index: the batch's place in its call. Seeded sampling draws from a generator seeded by
    it, so a batch gets the same draws whichever worker runs it, and in whatever order.
    candidates: each sentence's shortlist candidates (sorted target ids), for greedy and beam
    search (see `restricted_search`); sampling draws from the whole vocabulary.
    """
    device = next(model.parameters()).device
    src = torch.nn.utils.rnn.pad_sequence(
        [torch.as_tensor(s) for s in batch_ids], batch_first=True, padding_value=model.config.pad_id
    ).to(device)  # (batch, src_len)
    attention = request.return_attention
    with autocast_for(precision, device):
        if (sampling := request.sampling) is not None:
            generator = None
            if sampling.seed is not None:
                generator = torch.Generator(device).manual_seed(sampling.seed * SEED_STRIDE + batch_index)
            found = sample(
                model,
                src,
                temperature=sampling.temperature,
                top_k=sampling.top_k,
                generator=generator,
                limits=limits,
                return_attention=attention,
            )
            return [[h] for h in found]
        vocabulary, allowed = restricted_search(candidates, 2 * request.beam, device)
        if request.beam == 1:
            found = greedy_search(
                model, src, limits=limits, return_attention=attention, vocabulary=vocabulary, allowed=allowed
            )
            return [[h] for h in found]
        return beam_search(
            model,
            src,
            beam_size=request.beam,
            n_best=request.n_best,
            length_penalty=request.length_penalty,
            length_normalization=request.length_normalization,
            limits=limits,
            return_attention=attention,
            vocabulary=vocabulary,
            allowed=allowed,
        )


def restricted_search(
    candidates: Sequence[Sequence[int]] | None, least: int, device: torch.device
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The search vocabulary of a batch whose sentences have these shortlist candidates: the union
    (k,), projected onto once per step, and (batch, k) which of it each sentence may emit.

    Beam search ranks 2 x beam candidates per beam: a sentence with fewer candidates than `least`
    may emit the whole union, and a union smaller than that means no restriction (None, None).
    """
    if candidates is None:
        return None, None
    union = sorted(set().union(*map(set, candidates)))
    if len(union) < least:
        return None, None
    vocabulary = torch.tensor(union, dtype=torch.long)
    allowed = torch.zeros(len(candidates), len(union), dtype=torch.bool)
    for row, own in zip(allowed, candidates, strict=True):
        if len(own) >= least:
            row[torch.searchsorted(vocabulary, torch.as_tensor(own, dtype=torch.long))] = True
        else:
            row[:] = True
    return vocabulary.to(device), allowed.to(device)


@dataclass(frozen=True)
class BatchJob:
    """One batch of a call, as a worker (thread or process) receives it."""

    index: int  # the batch's place in its call (see `search_batch`)
    ids: list[Sequence[int]]  # source id lists, BOS/EOS included
    request: SearchRequest
    limits: SearchLimits
    candidates: list[list[int]] | None = None  # each sentence's shortlist candidates, if the engine has a shortlist

    def run(self, model: Transformer, precision: str) -> list[list[Hypothesis]]:
        """`search_batch` of this job on `model`."""
        return search_batch(model, self.ids, self.request, self.limits, precision, self.index, self.candidates)
