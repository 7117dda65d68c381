"""Guided alignment: one attention head trained to point at the source words a target word translates.

Garg et al. (2019), as fairseq and Marian train it: head 0 of one decoder layer's cross-attention
is pulled toward the links a statistical aligner found in the training pair (nmt.data.corpus_alignment).
For target piece t with linked source pieces S_t, the target distribution is uniform over S_t and

    L_align = - sum_t sum_{s in S_t} log a[t, s] / |S_t|        (target pieces without links add nothing)

which is added, times a weight (train.alignment_weight), to the label-smoothed loss, over the same
normaliser (the batch's real target tokens). Row t of the attention is the step that outputs
target piece t (tgt_out's position t), the row nmt.alignment reads; so afterwards the head gives
word alignments (and places formatting) without the averaging over heads that untrained models need.
"""

from __future__ import annotations

import numpy as np
import torch

from ..data.encoded import RaggedArray


def batch_links(links: RaggedArray, indices: np.ndarray | torch.Tensor, *, shift: bool = False) -> torch.Tensor:
    """(n, 3) int64 [row, step, column] for the pairs `indices` of a batch, in its row order: column is
    the source piece's position in `src`, step the decoder step whose attention learns the target
    piece: the one that outputs it, its position in `tgt_out` (its position in the encoded target,
    after BOS, minus one), or with `shift` the one after, where it is the input (its position)."""
    rows = np.asarray(indices, dtype=np.int64)
    chosen = links.take(rows).packed()
    flat = np.asarray(chosen.ids, dtype=np.int64).reshape(-1, 2)  # (n, 2): source, target position
    row = np.repeat(np.arange(len(rows)), chosen.lengths // 2)
    step = flat[:, 1] if shift else flat[:, 1] - 1
    return torch.from_numpy(np.stack([row, step, flat[:, 0]], axis=1))


def guided_alignment_loss(weights: torch.Tensor, links: torch.Tensor) -> torch.Tensor:
    """The summed L_align above. weights: (batch, tgt_len, src_len) one head's attention; links: (n, 3)
    from `batch_links`. A scalar (0 with no links)."""
    if links.numel() == 0:
        return weights.sum() * 0.0  # keeps the graph (and DDP's view of the parameters) the same
    row, step, column = links.unbind(dim=1)
    _, target, per_target = torch.unique(links[:, :2], dim=0, return_inverse=True, return_counts=True)
    probability = weights[row, step, column].clamp_min(1e-9)  # a link the head gives 0 costs 20.7, not inf
    return -(probability.log() / per_target[target]).sum()
