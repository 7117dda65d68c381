"""Scaled dot-product attention and multi-head attention (section 3.2 of the paper).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O,  head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i)

Two paths compute the same thing: torch's fused `scaled_dot_product_attention` (flash /
memory-efficient kernels, used for training and decoding) and an explicit path that
also returns the weights, used when a caller wants to look at them.
Masks follow nmt.model.masks: bool, True where attention is allowed.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def explicit_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, dropout_p: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """The textbook formula, returning (values, weights).

    q: (batch, heads, q_len, d_k); k, v: (batch, heads, k_len, d_k)
    returns values (batch, heads, q_len, d_k) and weights (batch, heads, q_len, k_len).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (batch, heads, q_len, k_len)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights


def fused_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, dropout_p: float = 0.0
) -> torch.Tensor:
    """torch's fused kernel (flash / memory-efficient): the values of `explicit_attention`, no weights.

    One exception to computing in the caller's type: on CPU, the flash kernel's backward pass
    in bf16 is several times slower than in fp32, while its forward pass is faster. So when a
    bf16 CPU call will be differentiated (bf16 mixed-precision training), the attention runs in
    fp32 and returns bf16; decoding, which has no backward pass, keeps bf16.
    """
    if q.dtype == torch.bfloat16 and q.device.type == "cpu" and torch.is_grad_enabled() and q.requires_grad:
        with torch.autocast("cpu", enabled=False):  # autocast would cast the fp32 inputs back to bf16
            q, k, v = q.float(), k.float(), v.float()
            values = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        return values.to(torch.bfloat16)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)


class MultiHeadAttention(nn.Module):
    """h parallel heads of width d_k = d_model / h, then the output projection W_O.

    W_Q, W_K and W_V are the three row blocks of one (3 d_model, d_model) matrix, so
    self-attention projects with a single matmul and cross-attention with two (queries
    from the decoder, keys and values from the encoder output).

    kv_dtype: the type keys and values are kept in (None: the computation's). Incremental
    decoding reads every cached key and value at every step, so that read bounds the attention's
    time; a narrower type halves it. The queries are cast to it for the attention and its output
    cast back, so the projections around it keep their precision (see
    nmt.inference.precision.keep_decoder_keys_in).
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        self.in_proj = nn.Linear(d_model, 3 * d_model)  # rows: [W_Q; W_K; W_V]
        self.out_proj = nn.Linear(d_model, d_model)  # W_O
        self.dropout = dropout
        # Set by `split_cross_projections` (int8 inference): W_Q and [W_K; W_V] as layers of their own.
        self.q_proj: nn.Module | None = None
        self.kv_proj: nn.Module | None = None
        self.kv_dtype: torch.dtype | None = None

    def reset_parameters(self) -> None:
        """Xavier-uniform for W_Q, W_K and W_V each on its own (as three d x d matrices) and W_O; zero biases."""
        for block in self.in_proj.weight.data.chunk(3, dim=0):
            nn.init.xavier_uniform_(block)
        nn.init.xavier_uniform_(self.out_proj.weight)
        nn.init.zeros_(self.in_proj.bias)
        nn.init.zeros_(self.out_proj.bias)

    def _split_heads(self, x: torch.Tensor, parts: int) -> torch.Tensor:
        # (batch, len, parts * d_model) -> (parts, batch, heads, len, d_head)
        b, t, _ = x.shape
        return x.view(b, t, parts, self.num_heads, self.d_head).permute(2, 0, 3, 1, 4)

    def project_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Self-attention: queries, keys and values from the same input, one matmul."""
        return self.split_qkv(self.in_proj(x))

    def split_qkv(self, qkv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(batch, len, 3 d_model) in_proj output -> queries, keys, values (batch, heads, len, d_head)."""
        q, k, v = self._split_heads(qkv, 3)
        return q, *self._kept(k, v)

    def project_q(self, x: torch.Tensor) -> torch.Tensor:
        """Cross-attention queries from the decoder states (the W_Q rows of in_proj)."""
        if self.q_proj is not None:
            return self._split_heads(self.q_proj(x), 1)[0]
        d = self.d_model
        return self._split_heads(F.linear(x, self.in_proj.weight[:d], self.in_proj.bias[:d]), 1)[0]

    def project_kv(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-attention keys and values from the encoder output (computed once per sentence)."""
        if self.kv_proj is not None:
            k, v = self._split_heads(self.kv_proj(memory), 2)
            return self._kept(k, v)
        d = self.d_model
        k, v = self._split_heads(F.linear(memory, self.in_proj.weight[d:], self.in_proj.bias[d:]), 2)
        return self._kept(k, v)

    def _kept(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values in the type they are kept in (`kv_dtype`)."""
        if self.kv_dtype is None:
            return k, v
        return k.to(self.kv_dtype), v.to(self.kv_dtype)

    def split_cross_projections(self) -> None:
        """Give W_Q and [W_K; W_V] layers of their own, for a cross-attention module that uses them apart.

        Same numbers, same results. Needed where a layer's weight cannot be sliced, as in an int8
        quantized layer (which packs its weight); in_proj is dropped, so self-attention (project_qkv)
        no longer works on this module. Inference only: the parameters are copies.
        """
        d = self.d_model
        weight, bias = self.in_proj.weight.detach(), self.in_proj.bias.detach()
        like = dict(device=weight.device, dtype=weight.dtype)
        self.q_proj, self.kv_proj = nn.Linear(d, d, **like), nn.Linear(d, 2 * d, **like)
        with torch.no_grad():
            self.q_proj.weight.copy_(weight[:d]), self.q_proj.bias.copy_(bias[:d])
            self.kv_proj.weight.copy_(weight[d:]), self.kv_proj.bias.copy_(bias[d:])
        del self.in_proj

    def head_weights(self, q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, head: int) -> torch.Tensor:
        """One head's attention weights, in float32, beside the fused path that keeps none: what
        guided alignment supervises. q: (batch, heads, q_len, d_head); k: (batch, heads, k_len,
        d_head). Returns (batch, 1, q_len, k_len), before attention dropout."""
        scores = q[:, head : head + 1].float() @ k[:, head : head + 1].float().transpose(-2, -1)
        scores = scores / math.sqrt(q.size(-1))  # (batch, 1, q_len, k_len)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return scores.softmax(dim=-1)

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attention over projected heads, then W_O. Returns ((rows, q_len, d_model), weights or None);
        see `heads`, which this is before W_O."""
        values, weights = self.heads(q, k, v, mask, need_weights)
        return self.out_proj(values), weights

    def heads(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attention over projected heads, the heads concatenated: ((rows, q_len, d_model), weights or None).

        q: (rows, heads, q_len, d_head); k, v: (batch, heads, k_len, d_head); mask broadcasts to
        (batch, heads, q_len, k_len). rows may be a multiple of batch: then each group of
        rows // batch consecutive query rows shares one row of keys and values (the beams
        of one sentence in cross-attention), and the group is folded into the query length
        instead of copying the keys and values once per row. Keys kept in another type than the
        queries' (`kv_dtype`): the fused kernel runs in theirs (it keeps scores and softmax in fp32
        inside), the weights' explicit path in the queries' type (its scores and softmax would
        otherwise round to bf16); the values and weights come back in the queries' type.
        """
        rows, heads, q_len, d_head = q.shape
        query_dtype = q.dtype
        if need_weights:
            k, v = k.to(query_dtype), v.to(query_dtype)
        else:
            q = q.to(k.dtype)
        batch = k.size(0)
        group = rows // batch
        if group * batch != rows:
            raise ValueError(f"{rows} query rows cannot share {batch} rows of keys and values")
        if group > 1:  # (batch * group, heads, q_len, d) -> (batch, heads, group * q_len, d)
            q = q.view(batch, group, heads, q_len, d_head).transpose(1, 2).reshape(batch, heads, group * q_len, d_head)
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            values, weights = explicit_attention(q, k, v, mask, dropout_p)
        else:
            values, weights = fused_attention(q, k, v, mask, dropout_p), None
        if group > 1:  # unfold: (batch, heads, group * q_len, x) -> (batch * group, heads, q_len, x)
            values = values.view(batch, heads, group, q_len, d_head).transpose(1, 2).reshape(rows, heads, q_len, d_head)
            if weights is not None:
                k_len = weights.size(-1)
                weights = (
                    weights.view(batch, heads, group, q_len, k_len).transpose(1, 2).reshape(rows, heads, q_len, k_len)
                )
        values = values.transpose(1, 2).reshape(rows, q_len, self.d_model).to(query_dtype)  # concat heads
        return values, None if weights is None else weights.to(query_dtype)
