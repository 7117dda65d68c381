"""The Transformer model: pure maths on id tensors (imports only torch)."""

from .cache import DecoderCache, LayerCache
from .config import PRESETS, ModelConfig
from .masks import causal_mask, decoder_self_mask, padding_mask
from .transformer import Decoded, Encoded, Transformer, count_parameters

__all__ = [
    "PRESETS",
    "ModelConfig",
    "Transformer",
    "Encoded",
    "Decoded",
    "DecoderCache",
    "LayerCache",
    "causal_mask",
    "decoder_self_mask",
    "padding_mask",
    "count_parameters",
]
