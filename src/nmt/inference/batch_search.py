"""What one batch computes: padded source ids -> n-best hypotheses per sentence.

A free function of the model, the ids and the request, so that the caller's thread, a worker
thread and a worker process (which has its own copy of the model) run the very same code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..config import DecodeConfig
from ..decoding import Hypothesis, SearchLimits, beam_search, greedy_search, sample
from ..model import Transformer
from ..search_settings import SearchRequest
from .precision import autocast_for

# A batch's generator is seeded with seed * SEED_STRIDE + its index: a call's batches (fewer than
# this) draw apart from each other and from the next seed's.
SEED_STRIDE = 100_003


def search_limits(decode: DecodeConfig, request: SearchRequest | None = None) -> SearchLimits:
    """What a search may emit: the length limits of the model's decode section, with the rules a call
    may set (`request`'s settings) over them; each taken by its SearchLimits field's name, so that a
    rule declared in both reaches every search without being passed by hand."""
    names = [f.name for f in dataclasses.fields(SearchLimits)]
    given = {name: getattr(decode, name) for name in names if hasattr(decode, name)}
    if request is not None:
        given |= {name: getattr(request, name) for name in names if hasattr(request, name)}
    return SearchLimits(**given)


@torch.inference_mode()
def search_batch(
    model: Transformer,
    batch_ids: Sequence[Sequence[int]],
    request: SearchRequest,
    limits: SearchLimits,
    precision: str,
    batch_index: int = 0,
    vocabulary: torch.Tensor | None = None,
    allowed: torch.Tensor | None = None,
) -> list[list[Hypothesis]]:
    """n-best Hypotheses for one batch of source id lists (BOS/EOS included), in its order.

    batch_index: the batch's place in its call (in its group's: TorchEngine.translate_ids). Seeded
    sampling draws from a generator seeded by it, so a batch gets the same draws whichever worker
    runs it, and in whatever order.
    vocabulary, allowed: the batch's shortlist (`LexicalShortlist.restrict`), for greedy and beam
    search; sampling draws from the whole vocabulary.
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
        if vocabulary is not None:
            vocabulary = vocabulary.to(device)
            allowed = None if allowed is None else allowed.to(device)
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
            early_stopping=request.early_stopping,
            limits=limits,
            return_attention=attention,
            vocabulary=vocabulary,
            allowed=allowed,
        )


@dataclass(frozen=True)
class BatchJob:
    """One batch of a call, as a worker (thread or process) receives it."""

    index: int  # the batch's place in its call (see `search_batch`)
    ids: list[Sequence[int]]  # source id lists, BOS/EOS included
    request: SearchRequest
    limits: SearchLimits
    vocabulary: torch.Tensor | None = None  # (k,) the batch's shortlist candidates, if the engine has a shortlist
    allowed: torch.Tensor | None = None  # (batch, k) bool: which of them each sentence may emit

    def run(self, model: Transformer, precision: str) -> list[list[Hypothesis]]:
        """`search_batch` of this job on `model`."""
        return search_batch(
            model, self.ids, self.request, self.limits, precision, self.index, self.vocabulary, self.allowed
        )
