"""The real tokens of a padded batch as one matrix, for the encoder's position-wise work.

A linear map, the feed-forward block and LayerNorm compute each position on its own, so on a
padded (batch, src_len, d_model) tensor they spend work on padding: the longest batch of a
length-sorted test set was 40% padding. Packed, those layers see (tokens, d_model), the real
positions only; attention, which mixes positions, unpacks to the padded layout and back
(CTranslate2's encoder does the same). The copies are not free, so only a batch with enough
padding is packed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

# Below this share of padding the copies into and out of the packed layout cost about what they
# save (per batch, fp32, one thread: docs/benchmarks-log.md, "A padding-free encoder").
PACK_FROM_PADDING = 0.15


@dataclass(frozen=True)
class TokenRows:
    """Where the real tokens of a (batch, length) batch are: `index` into its flattened positions."""

    index: torch.Tensor  # (tokens,) positions b * length + t of the real tokens, ascending
    batch: int
    length: int
    _scratch: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def worth_packing(cls, real: torch.Tensor, least_padding: float = PACK_FROM_PADDING) -> TokenRows | None:
        """real: (batch, length) bool, True at real tokens. None where padding is less than
        `least_padding` of the positions (none at all included): the copies would cost more."""
        batch, length = real.shape
        flat = real.reshape(-1)
        padding = batch * length - int(flat.sum())
        if padding == 0 or padding < least_padding * batch * length:
            return None
        return cls(flat.nonzero().squeeze(1), batch, length)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, length, ...) -> (tokens, ...): the real positions, in order."""
        return x.flatten(0, 1).index_select(0, self.index)

    def unpack(self, x: torch.Tensor, *, scratch: bool = False) -> torch.Tensor:
        """(tokens, ...) -> (batch, length, ...), zeros at padding (finite: masked keys still
        meet their values in attention, where 0 weight times a NaN would be NaN).

        scratch: into one buffer per shape kept for the next such call, which overwrites it (the
        layers' queries, keys and values, used before the next layer's): its padding is zeroed
        once, and a large new tensor costs more to page in than the copy itself.
        """
        shape = (self.batch * self.length, *x.shape[1:])
        key = (shape, x.dtype, x.device)
        padded = self._scratch.get(key) if scratch else None
        if padded is None:
            padded = x.new_zeros(shape)
            if scratch:
                self._scratch[key] = padded
        padded.index_copy_(0, self.index, x)
        return padded.view(self.batch, self.length, *x.shape[1:])
