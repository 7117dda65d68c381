"""The model's hyper-parameters: a dataclass that round-trips through JSON, and presets."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ACTIVATIONS = ("relu", "gelu", "swish")  # swish = x * sigmoid(x) (SiLU): the OPUS-MT models' activation
NORM_POSITIONS = ("post", "pre")
SHARING_MODES = ("none", "tgt_out", "all")
POSITION_LAYOUTS = ("interleaved", "halves", "marian")


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
    activation_dropout: float = 0.0  # on the feed-forward's hidden units, after the activation (the paper: none)
    activation: str = "relu"  # feed-forward activation: "relu", "gelu" or "swish"
    norm_position: str = "post"  # "post": LayerNorm(x + sublayer(x)) as in the paper; "pre": x + sublayer(LayerNorm(x))
    sharing: str = (
        "all"  # "none": three matrices; "tgt_out": target embedding = output; "all": source = target = output
    )
    pad_id: int = 0  # id of the padding token in both vocabularies
    # target start token: the decoder's first input (model.json files older than it: 2). It may be
    # the pad id (Marian models start from <pad>); it is never an output token either way.
    bos_id: int = 2
    eos_id: int = 3  # target end token: a search stops when it is chosen (model.json files older than it: 3)
    positional_base: float = 10000.0  # b in PE(p, 2i) = sin(p / b^(2i/d))
    layer_norm_eps: float = 1e-6  # LayerNorm epsilon
    # How a model imported from another toolkit lays out what the paper leaves open (nmt's own
    # models keep the defaults):
    scale_embeddings: bool = True  # multiply token embeddings by sqrt(d_model) (section 3.4)
    # "interleaved": sin in even columns, cos in odd (the paper); "halves": all sins, then all cos
    # (transformers' Marian models); "marian": halves with Marian's own frequencies (embedding.py)
    position_layout: str = "interleaved"
    output_bias: bool = False  # a learned bias on the output logits (Marian's final_logits_bias)
    # Which cross-attention gives word alignments (nmt.alignment): a decoder layer (negative counts
    # from the top) and how many of its heads, from head 0, are averaged (0: all of them). Guided
    # alignment (train.guided_alignment) trains head 0 of one layer to align and sets 1 here.
    alignment_layer: int = -1
    alignment_heads: int = 0
    # The head aligns target piece j at the step after it, where j is the decoder's input (Chen et al.
    # 2020's "shift"), not at the step that outputs it.
    alignment_shift: bool = False

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the field when a value is of the wrong type or the combination cannot be built.

        Each field's type is its default's: an int where a float is wanted becomes a float, and
        a bool is no int (JSON's `true` is not a layer count).
        """
        for f in dataclasses.fields(self):
            value, kind = getattr(self, f.name), type(f.default)
            if kind is float and type(value) is int:
                value = float(value)
                setattr(self, f.name, value)
            if type(value) is not kind:
                raise ValueError(f"{f.name} must be {kind.__name__}, got {value!r}")
            if kind is float and not math.isfinite(value):
                raise ValueError(f"{f.name} must be a finite number, got {value!r}")
        for name in (
            "src_vocab_size",
            "tgt_vocab_size",
            "encoder_layers",
            "decoder_layers",
            "d_model",
            "num_heads",
            "d_ff",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        for name in ("positional_base", "layer_norm_eps"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(f"pad_id must be a row of both vocabularies, got {self.pad_id}")
        for name in ("bos_id", "eos_id"):
            if not 0 <= getattr(self, name) < self.tgt_vocab_size:
                raise ValueError(f"{name} must be a row of the target vocabulary, got {getattr(self, name)}")
        if not -self.decoder_layers <= self.alignment_layer < self.decoder_layers:
            raise ValueError(
                f"alignment_layer must name one of the {self.decoder_layers} decoder layers, got {self.alignment_layer}"
            )
        if not 0 <= self.alignment_heads <= self.num_heads:
            raise ValueError(f"alignment_heads must be in [0, {self.num_heads}], got {self.alignment_heads}")
        if self.eos_id in (self.pad_id, self.bos_id):
            raise ValueError(f"eos_id must differ from pad_id and bos_id, got {self.eos_id}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})")
        for name, choices in (
            ("activation", ACTIVATIONS),
            ("norm_position", NORM_POSITIONS),
            ("sharing", SHARING_MODES),
            ("position_layout", POSITION_LAYOUTS),
        ):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be one of {' | '.join(choices)}, got {getattr(self, name)!r}")
        if self.sharing == "all" and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                "sharing='all' needs one joint vocabulary, but src_vocab_size="
                f"{self.src_vocab_size} != tgt_vocab_size={self.tgt_vocab_size}"
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.num_heads

    # --- files -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModelConfig:
        """Build from a dict; unknown keys, wrong types and bad values are errors naming the key."""
        if not isinstance(values, dict):
            raise ValueError(f"a model config must be a mapping of fields, got {type(values).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(str(k) for k in set(values) - known)
        if unknown:
            raise ValueError(f"unknown model config keys {unknown}; valid keys: {sorted(known)}")
        return cls(**values)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> ModelConfig:
        """Read a model.json; any problem is a ValueError that names the file (and the key)."""
        try:
            return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
        except UnicodeDecodeError as err:
            raise ValueError(f"{path}: not valid UTF-8 (byte {err.start})") from None
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{err.lineno}: not valid JSON: {err.msg}") from None
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModelConfig:
        """A named size (see PRESETS) with any field overridden, e.g. the vocabulary sizes."""
        if name not in PRESETS:
            raise ValueError(f"unknown model preset {name!r}; choose from {sorted(PRESETS)}")
        return cls.from_dict({**PRESETS[name], **overrides})


# encoder and decoder layers, d_model, heads, d_ff, dropout
PRESETS: dict[str, dict[str, Any]] = {
    # The reference design's example configuration.
    "reference": dict(encoder_layers=4, decoder_layers=4, d_model=128, num_heads=8, d_ff=512, dropout=0.1),
    "small": dict(encoder_layers=3, decoder_layers=3, d_model=256, num_heads=4, d_ff=1024, dropout=0.1),
    # The paper's base and big models.
    "base": dict(encoder_layers=6, decoder_layers=6, d_model=512, num_heads=8, d_ff=2048, dropout=0.1),
    "big": dict(encoder_layers=6, decoder_layers=6, d_model=1024, num_heads=16, d_ff=4096, dropout=0.3),
    # Students for distillation (nmt distill): the decoder runs once per output token and the encoder
    # once per sentence, so depth moves to the encoder (deep encoder, shallow decoder: Kasai et al., 2021).
    "student-6-2": dict(encoder_layers=6, decoder_layers=2, d_model=256, num_heads=4, d_ff=1024, dropout=0.1),
    "student-6-1": dict(encoder_layers=6, decoder_layers=1, d_model=256, num_heads=4, d_ff=1024, dropout=0.1),
    # Narrower: about 0.56x the layers' multiply-adds of student-6-2 and 0.75x the output projection's.
    "student-6-2-narrow": dict(encoder_layers=6, decoder_layers=2, d_model=192, num_heads=4, d_ff=768, dropout=0.1),
}
