"""Encoder and decoder layers: attention and feed-forward sublayers with residual + LayerNorm."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention
from .cache import LayerCache
from .config import ModelConfig
from .dropout import Dropout
from .packing import TokenRows


class FeedForward(nn.Module):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2, applied at every position (section 3.3).

    activation_dropout drops units of act(...) before W_2 (fairseq's --activation-dropout): a
    regulariser for small data, separate from the residual dropout after W_2. The paper uses none.
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", activation_dropout: float = 0.0):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.activation = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}[activation]
        self.dropout = Dropout(activation_dropout)

    def reset_parameters(self) -> None:
        """Xavier-uniform for W_1 and W_2, zero biases."""
        for linear in (self.w_1, self.w_2):
            nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.w_1(x)  # (..., d_ff)
        if self.activation is F.relu and not hidden.requires_grad:
            # In place where no gradient is kept (inference): the hidden layer is a layer's largest
            # tensor (32 MB for an encoder batch of 8,000 tokens), and a new one comes from fresh,
            # page-faulted memory (measured: docs/benchmarks-log.md).
            hidden = hidden.relu_()
        else:
            hidden = self.activation(hidden)
        return self.w_2(self.dropout(hidden))


class Residual(nn.Module):
    """The sublayer connection around every attention and feed-forward block.

    post-norm (the paper): x = LayerNorm(x + Dropout(sublayer(x)))
    pre-norm (deep stacks): x = x + Dropout(sublayer(LayerNorm(x))); the stack then ends with a LayerNorm.
    Use as: y = sublayer(res.before(x)); x = res.after(x, y).
    """

    def __init__(self, d_model: int, dropout: float, pre_norm: bool, eps: float = 1e-6):
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = Dropout(dropout)
        self.pre_norm = pre_norm

    def before(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) if self.pre_norm else x

    def after(self, x: torch.Tensor, sublayer_out: torch.Tensor) -> torch.Tensor:
        x = x + self.dropout(sublayer_out)
        return x if self.pre_norm else self.norm(x)


def feed_forward(c: ModelConfig) -> FeedForward:
    return FeedForward(c.d_model, c.d_ff, c.activation, c.activation_dropout)


def residual(c: ModelConfig) -> Residual:
    return Residual(c.d_model, c.dropout, pre_norm=c.norm_position == "pre", eps=c.layer_norm_eps)


class EncoderLayer(nn.Module):
    """Self-attention, then feed-forward."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(c.d_model, c.num_heads, c.attention_dropout)
        self.feed_forward = feed_forward(c)
        self.attn_residual, self.ff_residual = residual(c), residual(c)

    def forward(
        self, x: torch.Tensor, src_mask: torch.Tensor, need_weights: bool = False, rows: TokenRows | None = None
    ):
        """x: (batch, src_len, d_model); src_mask: (batch, 1, 1, src_len). Returns (x, weights or None).

        rows: x is packed, (tokens, d_model), the real positions `rows` names: every sublayer but
        the attention itself runs on those alone (nmt.model.packing).
        """
        projected = self.self_attn.in_proj(self.attn_residual.before(x))  # (..., 3 d_model)
        if rows is not None:  # attention mixes positions: it runs on the padded layout
            projected = rows.unpack(projected, scratch=True)
        q, k, v = self.self_attn.split_qkv(projected)
        values, weights = self.self_attn.heads(q, k, v, src_mask, need_weights)  # (batch, src_len, d_model)
        if rows is not None:
            values = rows.pack(values)
        x = self.attn_residual.after(x, self.self_attn.out_proj(values))
        x = self.ff_residual.after(x, self.feed_forward(self.ff_residual.before(x)))
        return x, weights


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, then feed-forward."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.self_attn = MultiHeadAttention(c.d_model, c.num_heads, c.attention_dropout)
        self.cross_attn = MultiHeadAttention(c.d_model, c.num_heads, c.attention_dropout)
        self.feed_forward = feed_forward(c)
        self.self_residual, self.cross_residual, self.ff_residual = residual(c), residual(c), residual(c)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None,
        src_mask: torch.Tensor,
        cache: LayerCache | None = None,
        need_weights: bool = False,
        head_weights: int | None = None,
    ):
        """x: (batch, new_len, d_model) target states; memory: (batch, src_len, d_model).

        self_mask: broadcastable to (batch, 1, new_len, keys_so_far) or None (no masking needed).
        With a cache, keys/values of earlier steps come from it and this step's are appended;
        the cross-attention keys/values are the cached projection of `memory`.
        Returns (x, self_weights, cross_weights); weights are None unless need_weights, or, with
        `head_weights` (a head's index), cross_weights is that head's alone: (batch, 1, new_len,
        src_len), differentiable (guided alignment), while the values come from the fused kernel.
        """
        q, k, v = self.self_attn.project_qkv(self.self_residual.before(x))
        if cache is not None:
            k, v = cache.append(k, v)
        a, self_weights = self.self_attn.attend(q, k, v, self_mask, need_weights)
        x = self.self_residual.after(x, a)

        q = self.cross_attn.project_q(self.cross_residual.before(x))
        k, v = (cache.cross_k, cache.cross_v) if cache is not None else self.cross_attn.project_kv(memory)
        a, cross_weights = self.cross_attn.attend(q, k, v, src_mask, need_weights)
        if head_weights is not None and cross_weights is None:
            cross_weights = self.cross_attn.head_weights(q, k, src_mask, head_weights)
        x = self.cross_residual.after(x, a)

        x = self.ff_residual.after(x, self.feed_forward(self.ff_residual.before(x)))
        return x, self_weights, cross_weights
