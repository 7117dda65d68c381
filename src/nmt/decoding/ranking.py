"""The best tokens of each row of a large vocabulary, in two cheap passes instead of one slow one.

Every search step ranks a (rows, vocab) table: greedy takes each row's argmax, beam search
each row's 2 x beam best. On CPU, torch's `topk` and `argmax` walk each row element by element
(topk also copies it into (value, index) pairs first): for 450 rows of 8,192 they took 6-7 and
4-8 ms on one Zen 3 core, about as much as the log-softmax over the same table (5-6 ms), while
the vectorised `amax` reads it in under 1 ms. So the rows are cut into chunks of C tokens:

    1. each chunk's maximum                         (rows, vocab / C)   one vectorised pass
    2. the k chunks with the largest maxima         (rows, k)
    3. the k best tokens among those k * C          (rows, k)

Exact, not an approximation: let v be a row's k-th largest value. Each of the k chunks with the
largest maxima holds its maximum, k distinct tokens all >= the k-th largest chunk maximum, so
v >= that maximum; a chunk holding one of the k best tokens has a maximum >= v, so it is among
those k chunks (ties between equal maxima aside, where any choice holds tokens of equal value).
For k = 1 both passes use argmax, which keeps torch's first-index rule for ties exactly. A vocabulary
that 64 does not divide leaves a tail of fewer than 64 tokens, ranked with the chunks' candidates.
On CPU both passes together take less time than the one plain call (the measurements:
docs/benchmarks-log.md, "Top-k and argmax in two passes").
On GPUs the library kernels are already parallel, and below 8 rows the extra calls cost more than
they save, so there the plain calls run.
"""

from __future__ import annotations

import torch

CHUNK = 64  # tokens per chunk: 128 chunk maxima and 640 candidates per row for k = 10 at 8,192
MIN_ROWS = 8  # below this the plain calls are as fast (the chunked passes cost a few extra calls)


def _chunks(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(rows, vocab) -> a (rows, vocab // C, C) view of the first vocab // C * C tokens and the
    (rows, vocab % C) tail that no whole chunk holds (OPUS-MT's 58,101 pieces leave 53); None where
    the plain call should run (not on CPU, few rows, or too few chunks for k)."""
    rows, vocab = scores.shape
    if scores.device.type != "cpu" or rows < MIN_ROWS or vocab // CHUNK <= k:
        return None
    whole = vocab // CHUNK * CHUNK
    return scores[:, :whole].view(rows, vocab // CHUNK, CHUNK), scores[:, whole:]


def top_tokens(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`scores.topk(k, dim=-1)` for a (rows, vocab) table: (values, ids), each (rows, k), best first."""
    split = _chunks(scores, k)
    if split is None:
        values, ids = scores.topk(k, dim=-1)
        return values, ids
    chunks, tail = split
    rows, count, chunk = chunks.shape
    best_chunks = chunks.amax(dim=-1).topk(k, dim=-1).indices  # (rows, k)
    row = torch.arange(rows, device=scores.device).unsqueeze(1)
    candidates = chunks[row, best_chunks].view(rows, k * chunk)  # (rows, k * chunk)
    ids = (best_chunks.unsqueeze(2) * chunk + torch.arange(chunk, device=scores.device)).view(rows, k * chunk)
    if tail.size(1):  # the tail's tokens are candidates too, after the chunks' (its ids are the largest)
        candidates = torch.cat([candidates, tail], dim=1)
        tail_ids = torch.arange(count * chunk, count * chunk + tail.size(1), device=scores.device)
        ids = torch.cat([ids, tail_ids.expand(rows, -1)], dim=1)
    values, where = candidates.topk(k, dim=-1)
    return values, ids.gather(1, where)


def best_token(scores: torch.Tensor) -> torch.Tensor:
    """`scores.argmax(dim=-1)` for a (rows, vocab) table: (rows,) ids, the first on ties."""
    split = _chunks(scores, 1)
    if split is None:
        return scores.argmax(dim=-1)
    chunks, tail = split
    rows, count, chunk = chunks.shape
    maxima = chunks.amax(dim=-1)  # (rows, count)
    best_chunk = maxima.argmax(dim=-1)  # (rows,) the first chunk holding the chunks' maximum
    row = torch.arange(rows, device=scores.device)
    best = best_chunk * chunk + chunks[row, best_chunk].argmax(dim=-1)
    if tail.size(1):  # a tail token wins only if strictly larger: on ties the earlier id wins, as argmax
        tail_value, tail_at = tail.max(dim=-1)
        best = torch.where(tail_value > maxima[row, best_chunk], count * chunk + tail_at, best)
    return best
