"""The model's hyper-parameters: a dataclass that round-trips through JSON, and presets."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHARING_MODES = ("none", "tgt_out", "all")


@dataclass
class ModelConfig:
    """Everything needed to rebuild a Transformer; saved next to its weights."""

    src_vocab_size: int = 8192  # source vocabulary size (rows of the source embedding)
    tgt_vocab_size: int = 8192  # target vocabulary size (rows of the target embedding and output)
    encoder_layers: int = 6  # N for the encoder stack
    decoder_layers: int = 6  # N for the decoder stack
    d_model: int = 512  # width of every residual stream
    num_heads: int = 8  # h; d_k = d_v = d_model / h
    d_ff: int = 2048  # inner width of the position-wise feed-forward network
    dropout: float = 0.1  # on embeddings+positions and on every sublayer output
    attention_dropout: float = 0.0  # on the attention weights (the paper uses none)
    activation: str = "relu"  # feed-forward activation: "relu" or "gelu"
    norm_position: str = "post"  # "post": LayerNorm(x + sublayer(x)) as in the paper; "pre": x + sublayer(LayerNorm(x))
    sharing: str = "all"  # "none": three matrices; "tgt_out": target embedding = output; "all": source = target = output
    pad_id: int = 0  # id of the padding token in both vocabularies
    positional_base: float = 10000.0  # b in PE(p, 2i) = sin(p / b^(2i/d))
    layer_norm_eps: float = 1e-6  # LayerNorm epsilon

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the field when the combination cannot be built."""
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})")
        if self.activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu' or 'gelu', not {self.activation!r}")
        if self.norm_position not in ("post", "pre"):
            raise ValueError(f"norm_position must be 'post' or 'pre', not {self.norm_position!r}")
        if self.sharing not in SHARING_MODES:
            raise ValueError(f"sharing must be one of {SHARING_MODES}, not {self.sharing!r}")
        if self.sharing == "all" and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                "sharing='all' needs one joint vocabulary, but src_vocab_size="
                f"{self.src_vocab_size} != tgt_vocab_size={self.tgt_vocab_size}"
            )
        for name in ("encoder_layers", "decoder_layers", "d_model", "num_heads", "d_ff"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")

    @property
    def d_head(self) -> int:
        return self.d_model // self.num_heads

    # --- files -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModelConfig:
        """Build from a dict; unknown keys are an error that lists the valid ones."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown model config keys {unknown}; valid keys: {sorted(known)}")
        return cls(**values)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> ModelConfig:
        return cls.from_dict(json.loads(Path(path).read_text()))

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModelConfig:
        """A named size (see PRESETS) with any field overridden, e.g. the vocabulary sizes."""
        if name not in PRESETS:
            raise ValueError(f"unknown model preset {name!r}; choose from {sorted(PRESETS)}")
        return cls.from_dict({**PRESETS[name], **overrides})


# layers (encoder=decoder), d_model, heads, d_ff, dropout
PRESETS: dict[str, dict[str, Any]] = {
    # The reference design's example configuration.
    "reference": dict(encoder_layers=4, decoder_layers=4, d_model=128, num_heads=8, d_ff=512, dropout=0.1),
    "small": dict(encoder_layers=3, decoder_layers=3, d_model=256, num_heads=4, d_ff=1024, dropout=0.1),
    # The paper's base and big models.
    "base": dict(encoder_layers=6, decoder_layers=6, d_model=512, num_heads=8, d_ff=2048, dropout=0.1),
    "big": dict(encoder_layers=6, decoder_layers=6, d_model=1024, num_heads=16, d_ff=4096, dropout=0.3),
}
