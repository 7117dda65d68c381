"""State for incremental decoding, passed in and reordered by the caller (never hidden on modules)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LayerCache:
    """One decoder layer's state.

    self_k, self_v: (batch, heads, steps_so_far, d_head), grown by one step per call.
    cross_k, cross_v: (batch, heads, src_len, d_head), projected from the encoder output once.
    """

    cross_k: torch.Tensor
    cross_v: torch.Tensor
    self_k: torch.Tensor | None = None
    self_v: torch.Tensor | None = None

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add this step's keys/values; return all keys/values so far."""
        if self.self_k is None:
            self.self_k, self.self_v = k, v
        else:
            self.self_k = torch.cat([self.self_k, k], dim=2)
            self.self_v = torch.cat([self.self_v, v], dim=2)
        return self.self_k, self.self_v


@dataclass
class DecoderCache:
    """Per-layer caches plus how many target positions have been decoded (the position offset)."""

    layers: list[LayerCache]
    length: int = 0

    def reorder(self, order: torch.Tensor, *, cross: bool = True) -> None:
        """Keep rows `order` of the batch (beam search reordering, or dropping finished sentences).

        cross=False leaves the cross-attention keys/values alone: beam search reorders
        hypotheses only within a sentence, whose beams all share the same source rows.
        """
        for layer in self.layers:
            if cross:
                layer.cross_k, layer.cross_v = layer.cross_k[order], layer.cross_v[order]
            if layer.self_k is not None:
                layer.self_k, layer.self_v = layer.self_k[order], layer.self_v[order]
