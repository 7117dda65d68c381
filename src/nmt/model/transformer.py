"""The Transformer encoder-decoder: encode, decode (optionally incremental), output logits."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from .attention import MultiHeadAttention
from .cache import DecoderCache, LayerCache
from .config import ModelConfig
from .embedding import PositionalEncoding, TokenEmbedding
from .layers import DecoderLayer, EncoderLayer, FeedForward
from .masks import causal_mask, decoder_self_mask, padding_mask
from .packing import PACK_FROM_PADDING, TokenRows


@dataclass
class Encoded:
    """The encoder's output for a batch of source sentences."""

    memory: torch.Tensor  # (batch, src_len, d_model)
    src_mask: torch.Tensor  # (batch, 1, 1, src_len), True at real tokens
    self_weights: list[torch.Tensor] = field(default_factory=list)  # per layer (batch, heads, src_len, src_len)

    def select(self, rows: torch.Tensor) -> Encoded:
        """Rows `rows` of the batch, e.g. the sentences still being decoded."""
        return Encoded(self.memory.index_select(0, rows), self.src_mask.index_select(0, rows))


@dataclass
class Decoded:
    """The decoder's output states (before the vocabulary projection) and optional weights."""

    states: torch.Tensor  # (batch, tgt_len, d_model)
    self_weights: list[torch.Tensor] = field(default_factory=list)  # per layer (batch, heads, tgt_len, keys)
    cross_weights: list[torch.Tensor] = field(default_factory=list)  # per layer (batch, heads, tgt_len, src_len)
    alignment: torch.Tensor | None = None  # (batch, tgt_len, src_len) the alignment head's weights, when asked


class Transformer(nn.Module):
    """Encoder-decoder Transformer over padded id tensors. Knows nothing of text or files."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = c = config
        pre_norm = c.norm_position == "pre"

        self.tgt_embed = TokenEmbedding(c.tgt_vocab_size, c.d_model, c.pad_id, c.scale_embeddings)
        self.src_embed = (
            self.tgt_embed
            if c.sharing == "all"
            else TokenEmbedding(c.src_vocab_size, c.d_model, c.pad_id, c.scale_embeddings)
        )
        self.positions = PositionalEncoding(c.d_model, c.dropout, c.positional_base, c.position_layout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(c) for _ in range(c.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.decoder_layers))
        # Pre-norm leaves the residual stream un-normalised: each stack ends with a LayerNorm.
        self.encoder_norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps) if pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps) if pre_norm else nn.Identity()
        # logits = states W_out^T (+ b_out, where the model has one)
        self.output = nn.Linear(c.d_model, c.tgt_vocab_size, bias=c.output_bias)
        # The least share of padding at which `encode` packs a batch (nmt.model.packing): its
        # copies cost more than the padding's share of the layers below it. Measured for fp32;
        # int8 inference, whose layers are cheaper against the same copies, raises it.
        self.pack_encoder_from = PACK_FROM_PADDING
        self.reset_parameters()
        if c.sharing in ("tgt_out", "all"):
            self.output.weight = self.tgt_embed.weight

    def reset_parameters(self) -> None:
        """Every attention and feed-forward block initialises its own projections (Xavier-uniform)."""
        for module in self.modules():
            if isinstance(module, (MultiHeadAttention, FeedForward)):
                module.reset_parameters()
        # An untied output matrix starts like the embeddings: N(0, d^-1/2).
        nn.init.normal_(self.output.weight, std=self.config.d_model**-0.5)
        if self.output.bias is not None:
            nn.init.zeros_(self.output.bias)

    # --- the three entry points ------------------------------------------------------
    def encode(self, src: torch.Tensor, need_weights: bool = False) -> Encoded:
        """src: (batch, src_len) padded ids -> Encoded (memory and the source padding mask).

        On CPU in eval mode without gradients (translation, validation), a batch with enough
        padding is encoded packed (nmt.model.packing): the memory is then zero at padding, which
        every reader masks. Training keeps the padded layout.
        """
        src_mask = padding_mask(src, self.config.pad_id)
        x = self.positions(self.src_embed(src))
        rows = None
        # On CPU only, where the thresholds were measured (on a GPU the padded layers are cheap
        # and counting the padding would wait for the device); no graph: the scratch buffers hold none.
        if src.device.type == "cpu" and not (self.training or torch.is_grad_enabled()):
            rows = TokenRows.worth_packing(src_mask[:, 0, 0], self.pack_encoder_from)
        if rows is not None:
            x = rows.pack(x)  # (tokens, d_model)
        weights = []
        for layer in self.encoder_layers:
            x, w = layer(x, src_mask, need_weights, rows)
            if need_weights:
                weights.append(w)
        x = self.encoder_norm(x)
        if rows is not None:
            x = rows.unpack(x)
        return Encoded(x, src_mask, weights)

    def decode(
        self,
        tgt_in: torch.Tensor,
        encoded: Encoded,
        *,
        cache: DecoderCache | None = None,
        need_weights: bool = False,
        need_alignment: bool = False,
    ) -> Decoded:
        """Decoder states for target inputs.

        Without a cache, tgt_in is the whole (batch, tgt_len) right-padded input (teacher
        forcing) and position j sees positions <= j. With a cache (from `new_cache`),
        tgt_in holds only the new steps (batch, new_len), usually one token; they sit at
        positions cache.length ... and see everything cached before them.
        need_alignment: also return head 0 of the config's alignment_layer (`Decoded.alignment`,
        float32, differentiable): the head guided alignment trains.
        """
        offset = cache.length if cache is not None else 0
        new_len = tgt_in.size(1)
        if cache is None:
            self_mask = decoder_self_mask(tgt_in, self.config.pad_id)
        elif new_len > 1:
            self_mask = causal_mask(new_len, offset + new_len, device=tgt_in.device)
        else:
            self_mask = None  # one new step may see every earlier step
        x = self.positions(self.tgt_embed(tgt_in), offset=offset)
        out = Decoded(x)
        aligning = self.config.alignment_layer % len(self.decoder_layers) if need_alignment else None
        for i, layer in enumerate(self.decoder_layers):
            layer_cache = cache.layers[i] if cache is not None else None
            head = 0 if i == aligning else None
            x, self_w, cross_w = layer(x, encoded.memory, self_mask, encoded.src_mask, layer_cache, need_weights, head)
            if need_weights:
                out.self_weights.append(self_w)
                out.cross_weights.append(cross_w)
            if i == aligning:
                out.alignment = cross_w[:, 0].float()
        if cache is not None:
            cache.length += new_len
        out.states = self.decoder_norm(x)
        return out

    def logits(self, states: torch.Tensor) -> torch.Tensor:
        """(..., d_model) decoder states -> (..., tgt_vocab) unnormalised scores."""
        return self.output(states)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits: (batch, src_len), (batch, tgt_len) -> (batch, tgt_len, tgt_vocab)."""
        return self.logits(self.decode(tgt_in, self.encode(src)).states)

    # --- incremental decoding ----------------------------------------------------------
    def new_cache(self, encoded: Encoded) -> DecoderCache:
        """An empty decoding state with each layer's cross-attention keys/values projected once."""
        layers = []
        for layer in self.decoder_layers:
            k, v = layer.cross_attn.project_kv(encoded.memory)
            layers.append(LayerCache(cross_k=k, cross_v=v))
        return DecoderCache(layers)


def count_parameters(model: nn.Module) -> int:
    """Distinct trainable parameters (a shared matrix counts once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
