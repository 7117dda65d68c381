"""Re-order a model's hidden features so that its position table has transformers' layout.

nmt's own models interleave the sinusoids (the paper): PE(p, 2i) = sin(p / 10000^(2i/d)) and
PE(p, 2i+1) = cos(p / 10000^(2i/d)). transformers' Marian puts all the sines first, then all the
cosines, and computes that table itself (it does not even save it). The two tables hold the same
columns in another order:

    halves[:, i] = interleaved[:, 2i]        halves[:, d/2 + i] = interleaved[:, 2i + 1]

so with the permutation ``perm = [0, 2, 4, ..., 1, 3, 5, ...]``, ``halves = interleaved[:, perm]``.

A Transformer does not care in which order the features of its residual stream are stored, as
long as every weight agrees. Call the stream h (d features). Permuting it to h' = h[perm]:

- a matrix that *reads* the stream (q, k, v projections, the first feed-forward layer, the output
  layer and the embedding tables) permutes its input columns: W' = W[:, perm], so W' h' = W h;
- a matrix that *writes* to it (the attention's output projection, the second feed-forward layer)
  permutes its output rows, and its bias with them: W' = W[perm, :], b' = b[perm];
- LayerNorm's mean and variance do not depend on the order; its gain and bias are per feature and
  are permuted: g' = g[perm], b' = b[perm].

Nothing inside attention (the heads' own features) or the feed-forward's hidden units moves. The
permuted model computes the same logits as the original with a "halves" position table, exactly
up to the order of floating-point sums in LayerNorm.
"""

from __future__ import annotations

import torch

from ..model import ModelConfig

# Parameter-name endings and the dimension of each that runs along the residual stream
# (None: the tensor does not touch the stream). Any other name is an error, so that a new kind of
# parameter cannot be exported unpermuted.
_STREAM_DIM = {
    "embed.weight": 1,  # (vocab, d) src_embed / tgt_embed
    "output.weight": 1,  # (vocab, d)
    "output.bias": None,  # (vocab,)
    "in_proj.weight": 1,  # (3 d, d): reads q, k and v from the stream
    "in_proj.bias": None,
    "out_proj.weight": 0,  # (d, d): writes the heads back to the stream
    "out_proj.bias": 0,
    "w_1.weight": 1,  # (d_ff, d)
    "w_1.bias": None,
    "w_2.weight": 0,  # (d, d_ff)
    "w_2.bias": 0,
    "norm.weight": 0,
    "norm.bias": 0,
}


def interleaved_to_halves(d_model: int) -> torch.Tensor:
    """The permutation of the hidden features that turns the interleaved table into halves (see above)."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def with_halves_layout(state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """An interleaved-position model's state dict with its hidden features re-ordered for a halves table.

    Loaded into the same architecture with ``position_layout="halves"``, it computes the same outputs.
    """
    if config.position_layout != "interleaved":
        raise ValueError(f"position_layout is {config.position_layout!r}, not 'interleaved'")
    if config.d_model % 2:
        raise ValueError(f"d_model={config.d_model} is odd: the two tables differ by more than an order")
    perm = interleaved_to_halves(config.d_model)
    out = {}
    for name, tensor in state.items():
        ending = next((e for e in _STREAM_DIM if name.endswith(e)), None)
        if ending is None:
            raise ValueError(f"{name}: no rule for which of its dimensions is the hidden features")
        dim = _STREAM_DIM[ending]
        out[name] = tensor if dim is None else tensor.index_select(dim, perm)
    return out
