"""State for incremental decoding, passed in and reordered by the caller (never hidden on modules)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LayerCache:
    """One decoder layer's state.

    cross_k, cross_v: (sentences, heads, src_len, d_head), projected from the encoder output
        once. Beam search decodes several rows per sentence; they all share their sentence's row.
    self_k, self_v: (rows, heads, capacity, d_head) buffers whose first `length` steps hold the
        keys/values decoded so far; capacity doubles when full, so a step writes one slice
        instead of copying the whole history (as torch.cat would).
    """

    cross_k: torch.Tensor
    cross_v: torch.Tensor
    self_k: torch.Tensor | None = None
    self_v: torch.Tensor | None = None
    length: int = 0

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add this step's keys/values (rows, heads, new, d_head); return views of all so far."""
        new = k.size(2)
        if self.self_k is None or self.length + new > self.self_k.size(2):
            capacity = max(2 * self.length, self.length + new, 16)
            grown_k = k.new_empty(k.size(0), k.size(1), capacity, k.size(3))
            grown_v = torch.empty_like(grown_k)
            if self.self_k is not None:
                grown_k[:, :, : self.length] = self.self_k[:, :, : self.length]
                grown_v[:, :, : self.length] = self.self_v[:, :, : self.length]
            self.self_k, self.self_v = grown_k, grown_v
        end = self.length + new
        self.self_k[:, :, self.length : end] = k
        self.self_v[:, :, self.length : end] = v
        self.length = end
        return self.self_k[:, :, :end], self.self_v[:, :, :end]


@dataclass
class DecoderCache:
    """Per-layer caches plus how many target positions have been decoded (the position offset)."""

    layers: list[LayerCache]
    length: int = 0

    def reorder(self, order: torch.Tensor) -> None:
        """Keep decoding rows `order` (beam search reordering, or dropping finished rows).

        Only the self-attention history moves; the sentences' cross-attention keys/values stay
        (see `select_sentences`). This copy runs every beam step, so it is kept small: only the
        steps in use are copied, not the buffer's spare capacity (3.5x less work early on, when
        capacity is twice the length), and by `index_select` rather than `tensor[order]` (on CPU,
        advanced indexing of these 4-d buffers is about 5x slower).
        """
        for layer in self.layers:
            if layer.self_k is not None:
                layer.self_k = take_rows(layer.self_k, order, layer.length)
                layer.self_v = take_rows(layer.self_v, order, layer.length)

    def select_sentences(self, sentences: torch.Tensor) -> None:
        """Keep the cross-attention keys/values of `sentences` (when finished sentences leave the batch)."""
        for layer in self.layers:
            layer.cross_k = layer.cross_k.index_select(0, sentences)
            layer.cross_v = layer.cross_v.index_select(0, sentences)


def take_rows(buffer: torch.Tensor, rows: torch.Tensor, length: int) -> torch.Tensor:
    """A new (len(rows), heads, capacity, d_head) buffer holding rows `rows` of `buffer`'s first
    `length` steps; the rest of its capacity is left unwritten, as in any cache buffer."""
    if buffer.requires_grad:  # out= cannot record a graph: copy it all, differentiably
        return buffer.index_select(0, rows)
    out = buffer.new_empty((rows.numel(), *buffer.shape[1:]))
    torch.index_select(buffer[:, :, :length], 0, rows, out=out[:, :, :length])
    return out
