"""Attention masks.

Convention (the same as torch's scaled_dot_product_attention with a boolean mask):
a mask is a bool tensor that broadcasts to (batch, heads, query_len, key_len) and is
True where the query MAY attend to the key. Masked scores become -inf before softmax,
so masked keys get exactly zero weight.
"""

from __future__ import annotations

import torch


def padding_mask(ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """(batch, len) ids -> (batch, 1, 1, len): True at real tokens, False at padding."""
    return (ids != pad_id)[:, None, None, :]


def causal_mask(query_len: int, key_len: int | None = None, *, device: torch.device | None = None) -> torch.Tensor:
    """(query_len, key_len) lower-triangular look-ahead mask: query i sees keys <= i.

    With key_len > query_len the queries are the last `query_len` positions of the
    sequence (incremental decoding with `key_len - query_len` cached positions), so
    query i sits at absolute position key_len - query_len + i.
    """
    key_len = query_len if key_len is None else key_len
    offset = key_len - query_len
    return torch.ones(query_len, key_len, dtype=torch.bool, device=device).tril(diagonal=offset)


def decoder_self_mask(tgt_ids: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """(batch, tgt_len) ids -> (batch, 1, tgt_len, tgt_len): causal AND key is not padding.

    The first input is the start token, never padding, even where it has the pad id (Marian
    models start decoding from <pad>): masking it would leave the first query no key at all.
    """
    tgt_len = tgt_ids.size(1)
    keys = padding_mask(tgt_ids, pad_id).clone()
    keys[..., 0] = True
    return causal_mask(tgt_len, device=tgt_ids.device) & keys
