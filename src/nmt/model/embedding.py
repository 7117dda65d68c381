"""Token embeddings scaled by sqrt(d_model), and sinusoidal positional encodings."""

from __future__ import annotations

import math

import torch
from torch import nn

from .dropout import Dropout


class TokenEmbedding(nn.Module):
    """Embedding lookup multiplied by sqrt(d_model) (section 3.4 of the paper).

    Weights start at N(0, d_model^-1/2) so the scaled embedding has unit variance, and so
    that, when the same matrix is the output projection, initial logits are O(1).
    """

    def __init__(self, vocab_size: int, d_model: int, pad_id: int = 0, scaled: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        self.pad_id = pad_id
        self.scale = math.sqrt(d_model) if scaled else 1.0  # unscaled: some imported models (Marian's option)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.weight, mean=0.0, std=self.weight.size(1) ** -0.5)
        with torch.no_grad():
            self.weight[self.pad_id].zero_()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # (batch, len) -> (batch, len, d_model)
        vectors = nn.functional.embedding(ids, self.weight, padding_idx=self.pad_id)
        return vectors * self.scale if self.scale != 1.0 else vectors


def sinusoidal_encoding(
    positions: torch.Tensor, d_model: int, base: float = 10000.0, layout: str = "interleaved"
) -> torch.Tensor:
    """PE(p, 2i) = sin(p / base^(2i/d)), PE(p, 2i+1) = cos(p / base^(2i/d)).

    positions: (len,) integer or float positions -> (len, d_model) float32.
    layout "halves" puts the same numbers as [sin(p / base^(2i/d)) for every i, then every cos]:
    the table transformers (and CTranslate2) give Marian models. "marian" is the table Marian
    itself computes, and trained its models with (tensor2tensor's): halves again, but with the
    frequencies base^(-i / (d/2 - 1)), so the last pair turns at exactly 1/base (at position 50 and
    d_model 512, up to 0.07 from "halves").
    Computed in float64 so large positions stay accurate to 1e-6.
    """
    i2 = torch.arange(0, d_model, 2, dtype=torch.float64, device=positions.device)  # 2i
    inv_freq = base ** (-i2 / d_model)  # base^(-2i/d)
    if layout == "marian":
        inv_freq = base ** (-(i2 / 2) / max(d_model // 2 - 1, 1))  # base^(-i / (d/2 - 1))
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]  # (len, ceil(d/2))
    pe = torch.empty(positions.numel(), d_model, dtype=torch.float64, device=positions.device)
    if layout in ("halves", "marian"):
        half = angles.size(1)
        pe[:, :half] = torch.sin(angles)
        pe[:, half:] = torch.cos(angles[:, : d_model - half])
    else:
        pe[:, 0::2] = torch.sin(angles)
        pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return pe.to(torch.float32)


class PositionalEncoding(nn.Module):
    """Adds sinusoidal positions to embeddings, then dropout.

    The table is a cache, not a limit: it grows to cover whatever length arrives, so no
    input is too long for it. `offset` is the position of the first input step, used by
    incremental decoding where step t sees only its own token.
    """

    def __init__(self, d_model: int, dropout: float, base: float = 10000.0, layout: str = "interleaved"):
        super().__init__()
        self.d_model, self.base, self.layout = d_model, base, layout
        self.dropout = Dropout(dropout)
        table = sinusoidal_encoding(torch.arange(256), d_model, base, layout)
        self.register_buffer("table", table, persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        # x: (batch, len, d_model)
        end = offset + x.size(1)
        table = self.table  # read once: parallel decoding workers may grow it at the same time
        if end > table.size(0):
            table = sinusoidal_encoding(torch.arange(2 * end, device=x.device), self.d_model, self.base, self.layout)
            self.table = table
        return self.dropout(x + table[offset:end].to(x.dtype))
