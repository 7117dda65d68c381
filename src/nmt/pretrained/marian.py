"""Marian / OPUS-MT models in the Hugging Face layout, read into nmt's Transformer.

    nmt import --from marian opus-mt-de-en/ --out models/opus-de-en

A `MarianMTModel` directory holds config.json, the weights (model.safetensors, or
pytorch_model.bin read with weights_only=True), source.spm / target.spm, vocab.json (and
target_vocab.json where the sides have their own) and tokenizer_config.json. Marian's Transformer
is the paper's post-norm model with a few choices nmt's ModelConfig names as options:

    activation        swish (OPUS-MT), gelu or relu
    scale_embeddings  config.scale_embedding (OPUS-MT: embeddings times sqrt(d_model))
    position_layout   "halves": sin(p / 10000^(2i/d)) for every i, then every cos, from position 0
                      (transformers' table: Marian's own steps its frequencies by 1/(d/2 - 1),
                      see marian_npz.py, which imports Marian's releases with that table)
    output_bias       final_logits_bias
    bos_id            decoder_start_token_id, which is the pad id: Marian starts decoding from <pad>
    layer_norm_eps    1e-5 (torch's default, which transformers uses)
    sharing           "all" where both sides share the embedding (and the output tied to it),
                      "tgt_out" where only the target embedding and the output are one matrix

Nothing is written until every file has been read and checked: another model_type, an unknown
activation, a missing file, a vocabulary whose size is not the weights', or a cut weights file is
refused in one line naming the file and field, and the output directory appears whole or not at all.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch

from ..checkpoint import apply_weights
from ..model import ModelConfig, Transformer
from ..model.embedding import sinusoidal_encoding
from ..sentencepiece_tokenizer import (
    SOURCE_MODEL,
    TARGET_MODEL,
    TARGET_VOCAB,
    VOCAB,
    SentencePieceTokenizer,
    SpecialTokens,
    read_vocab,
)

log = logging.getLogger(__name__)

CONFIG, TOKENIZER_CONFIG, GENERATION_CONFIG = "config.json", "tokenizer_config.json", "generation_config.json"
SAFETENSORS, PICKLED = "model.safetensors", "pytorch_model.bin"
ACTIVATIONS = {"swish": "swish", "silu": "swish", "gelu": "gelu", "relu": "relu"}  # transformers' name -> nmt's
LAYER_NORM_EPS = 1e-5


class MarianFormatError(ValueError):
    """A Marian directory nmt cannot import, with the file (and field) at fault."""


# --- config.json -> ModelConfig ---------------------------------------------------------------


def read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise MarianFormatError(f"{path}: not found (a Hugging Face Marian directory has it)")
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise MarianFormatError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(values, dict):
        raise MarianFormatError(f"{path}: not a JSON object")
    return values


def model_config(hf: dict[str, Any], path: Path) -> ModelConfig:
    """The ModelConfig of a transformers MarianConfig (as its config.json holds it)."""

    def field(name: str, default: Any = None) -> Any:
        if name not in hf and default is None:
            raise MarianFormatError(f"{path}: field {name} is missing")
        return hf.get(name, default)

    if field("model_type") != "marian":
        raise MarianFormatError(
            f"{path}: model_type is {hf['model_type']!r}; nmt imports Marian models (model_type 'marian') only"
        )
    activation = field("activation_function", "gelu")
    if activation not in ACTIVATIONS:
        raise MarianFormatError(
            f"{path}: activation_function {activation!r} is not supported (nmt has {', '.join(ACTIVATIONS)})"
        )
    for enc, dec in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        if field(enc) != field(dec):
            raise MarianFormatError(f"{path}: {enc} ({hf[enc]}) differs from {dec} ({hf[dec]}); nmt needs them equal")
    shared = field("share_encoder_decoder_embeddings", True)
    tied = field("tie_word_embeddings", True)
    if shared and not tied:
        raise MarianFormatError(f"{path}: tie_word_embeddings is false with shared embeddings; nmt cannot build that")
    eos = field("eos_token_id")
    if isinstance(eos, list):
        if len(eos) != 1:
            raise MarianFormatError(f"{path}: eos_token_id lists several ids {eos}; nmt takes one")
        eos = eos[0]
    src_vocab = field("vocab_size")
    tgt_vocab = hf.get("decoder_vocab_size") or src_vocab
    try:
        return ModelConfig(
            src_vocab_size=src_vocab,
            tgt_vocab_size=tgt_vocab,
            encoder_layers=field("encoder_layers"),
            decoder_layers=field("decoder_layers"),
            d_model=field("d_model"),
            num_heads=field("encoder_attention_heads"),
            d_ff=field("encoder_ffn_dim"),
            dropout=float(field("dropout", 0.1)),
            attention_dropout=float(field("attention_dropout", 0.0)),
            activation_dropout=float(field("activation_dropout", 0.0)),
            activation=ACTIVATIONS[activation],
            norm_position="post",
            sharing=("all" if shared else "tgt_out") if tied else "none",
            pad_id=field("pad_token_id"),
            bos_id=field("decoder_start_token_id", hf.get("pad_token_id")),
            eos_id=eos,
            layer_norm_eps=LAYER_NORM_EPS,
            scale_embeddings=bool(field("scale_embedding", False)),
            position_layout="halves",
            output_bias=True,
        )
    except ValueError as err:
        raise MarianFormatError(f"{path}: {err}") from None


# --- the weights ----------------------------------------------------------------------------


def read_marian_weights(directory: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """The tensors of model.safetensors, else pytorch_model.bin (loaded with weights_only=True)."""
    if (directory / SAFETENSORS).is_file():
        from safetensors.torch import load_file  # noqa: PLC0415

        path = directory / SAFETENSORS
        try:
            return load_file(str(path)), path
        except Exception as err:  # safetensors raises its own error types for a cut or foreign file
            raise MarianFormatError(f"{path}: not a readable safetensors file ({' '.join(str(err).split())})") from None
    path = directory / PICKLED
    if not path.is_file():
        raise MarianFormatError(f"{directory}: no weights ({SAFETENSORS} or {PICKLED})")
    try:  # weights_only: tensors and plain containers, never arbitrary pickled objects
        tensors = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise MarianFormatError(f"{path}: not a readable weights file ({str(err).splitlines()[0]})") from None
    if not isinstance(tensors, dict) or not all(isinstance(t, torch.Tensor) for t in tensors.values()):
        raise MarianFormatError(f"{path}: not a state dict of tensors")
    return tensors, path


def layer_names(config: ModelConfig) -> list[tuple[str, str]]:
    """(nmt name, transformers name) of every per-layer weight; q, k, v are fused in nmt (see `fuse`)."""
    pairs = []
    norms = {"attn_residual": "self_attn_layer_norm", "ff_residual": "final_layer_norm"}
    decoder_norms = {
        "self_residual": "self_attn_layer_norm",
        "cross_residual": "encoder_attn_layer_norm",
        "ff_residual": "final_layer_norm",
    }
    for side, count, attentions, layer_norms in (
        ("encoder", config.encoder_layers, {"self_attn": "self_attn"}, norms),
        ("decoder", config.decoder_layers, {"self_attn": "self_attn", "cross_attn": "encoder_attn"}, decoder_norms),
    ):
        for i in range(count):
            ours, theirs = f"{side}_layers.{i}", f"model.{side}.layers.{i}"
            for kind in ("weight", "bias"):
                for nmt_attn, hf_attn in attentions.items():
                    pairs.append((f"{ours}.{nmt_attn}.out_proj.{kind}", f"{theirs}.{hf_attn}.out_proj.{kind}"))
                pairs.append((f"{ours}.feed_forward.w_1.{kind}", f"{theirs}.fc1.{kind}"))
                pairs.append((f"{ours}.feed_forward.w_2.{kind}", f"{theirs}.fc2.{kind}"))
                for nmt_norm, hf_norm in layer_norms.items():
                    pairs.append((f"{ours}.{nmt_norm}.norm.{kind}", f"{theirs}.{hf_norm}.{kind}"))
    return pairs


def attention_modules(config: ModelConfig) -> list[tuple[str, str]]:
    """(nmt module, transformers module) of every attention block: nmt's in_proj is [q; k; v] of theirs."""
    modules = [
        (f"encoder_layers.{i}.self_attn", f"model.encoder.layers.{i}.self_attn") for i in range(config.encoder_layers)
    ]
    for i in range(config.decoder_layers):
        modules.append((f"decoder_layers.{i}.self_attn", f"model.decoder.layers.{i}.self_attn"))
        modules.append((f"decoder_layers.{i}.cross_attn", f"model.decoder.layers.{i}.encoder_attn"))
    return modules


def nmt_state(tensors: dict[str, torch.Tensor], config: ModelConfig, path: Path) -> dict[str, torch.Tensor]:
    """transformers' Marian tensors -> nmt's state dict (float32); a missing or misshapen one names itself."""
    tensors = {
        name.removeprefix("model.") if name.startswith("model.model.") else name: t for name, t in tensors.items()
    }
    if not any(name.startswith("model.") for name in tensors):  # a MarianModel saved without the LM head's prefix
        tensors = {f"model.{name}": t for name, t in tensors.items()}

    def get(*names: str) -> torch.Tensor:
        for name in names:
            if name in tensors:
                return tensors[name].float()
        raise MarianFormatError(f"{path}: tensor {names[0]} is missing")

    state = {}
    for ours, theirs in layer_names(config):
        state[ours] = get(theirs)
    for ours, theirs in attention_modules(config):
        for kind in ("weight", "bias"):
            state[f"{ours}.in_proj.{kind}"] = torch.cat([get(f"{theirs}.{p}_proj.{kind}") for p in "qkv"])
    # A tied matrix is saved once, under any of its names; nmt's tied names all get it.
    target = get("model.decoder.embed_tokens.weight", "model.shared.weight", "lm_head.weight")
    state["tgt_embed.weight"] = target
    source = target if config.sharing == "all" else get("model.encoder.embed_tokens.weight", "model.shared.weight")
    state["src_embed.weight"] = source
    state["output.weight"] = get("lm_head.weight") if config.sharing == "none" else target
    bias = tensors.get("final_logits_bias")  # a buffer: older saves may leave it out (zeros)
    state["output.bias"] = bias.float().reshape(-1) if bias is not None else torch.zeros(config.tgt_vocab_size)
    check_positions(tensors, config, path)
    return state


def build_model(tensors: dict[str, torch.Tensor], config: ModelConfig, path: Path) -> Transformer:
    """nmt's Transformer holding transformers' Marian tensors (read from `path`), in eval mode."""
    state = nmt_state(tensors, config, path)
    model = Transformer(config)
    try:
        apply_weights(model, state, path)
    except ValueError as err:
        raise MarianFormatError(str(err)) from None
    return model.eval()


def check_positions(tensors: dict[str, torch.Tensor], config: ModelConfig, path: Path) -> None:
    """A saved position table must be Marian's sinusoid, the one nmt computes; learned positions are refused."""
    for side in ("encoder", "decoder"):
        table = tensors.get(f"model.{side}.embed_positions.weight")
        if table is None:
            continue
        ours = sinusoidal_encoding(torch.arange(table.size(0)), config.d_model, layout="halves")
        if table.shape != ours.shape or not torch.allclose(table.float(), ours, atol=1e-4):
            raise MarianFormatError(
                f"{path}: model.{side}.embed_positions.weight is not transformers' sinusoidal table for Marian; "
                "nmt imports that one only"
            )


# --- the tokenizers -----------------------------------------------------------------------------


def token_text(value: Any, default: str) -> str:
    """A special token as tokenizer_config.json writes it: a string or an AddedToken's {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else default


def read_tokenizers(directory: Path, config: ModelConfig) -> tuple[SentencePieceTokenizer, SentencePieceTokenizer]:
    """The source and target tokenizers, checked against the model's vocabulary sizes and special ids."""
    settings = read_json(directory / TOKENIZER_CONFIG) if (directory / TOKENIZER_CONFIG).is_file() else {}
    special = SpecialTokens(
        eos=token_text(settings.get("eos_token"), "</s>"),
        unk=token_text(settings.get("unk_token"), "<unk>"),
        pad=token_text(settings.get("pad_token"), "<pad>"),
        separate_vocabs=bool(settings.get("separate_vocabs", False)),
    )
    vocabs = {"source": read_vocab_checked(directory / VOCAB)}
    vocabs["target"] = read_vocab_checked(directory / TARGET_VOCAB) if special.separate_vocabs else vocabs["source"]
    rows = {"source": config.src_vocab_size, "target": config.tgt_vocab_size}
    for side, vocab in vocabs.items():
        file = directory / (TARGET_VOCAB if side == "target" and special.separate_vocabs else VOCAB)
        if max(vocab.values()) + 1 != rows[side]:
            raise MarianFormatError(
                f"{file}: the vocabulary has {max(vocab.values()) + 1} ids but the weights' {side} embedding has "
                f"{rows[side]} rows"
            )
    target = vocabs["target"]
    for name, token, expected in (("pad", special.pad, config.pad_id), ("eos", special.eos, config.eos_id)):
        if target.get(token) != expected:
            raise MarianFormatError(
                f"{directory / CONFIG}: {name}_token_id is {expected}, "
                f"but {token!r} has id {target.get(token)} in the vocabulary"
            )
    start = next((piece for piece, i in target.items() if i == config.bos_id), None)
    special = SpecialTokens(special.eos, special.unk, special.pad, start or special.pad, special.separate_vocabs)
    try:
        return (
            SentencePieceTokenizer(directory / SOURCE_MODEL, vocabs["source"], "source", special),
            SentencePieceTokenizer(directory / TARGET_MODEL, vocabs["target"], "target", special),
        )
    except (OSError, ValueError) as err:
        raise MarianFormatError(str(err)) from None


def read_vocab_checked(path: Path) -> dict[str, int]:
    try:
        return read_vocab(path)
    except (OSError, ValueError) as err:
        raise MarianFormatError(str(err)) from None


def decode_defaults(generation: dict[str, Any], hf: dict[str, Any]) -> dict[str, Any]:
    """The model's own search, as transformers runs it by default: its beam (generation_config.json,
    else config.json; OPUS-MT's is 4 or 6) and length penalty, with transformers' normalisation, its
    stopping rule (early_stopping, False by default) and its minimum length (transformers' min_length
    counts the decoder's start token: 0 by default)."""
    beam = generation.get("num_beams") or hf.get("num_beams") or 1
    alpha = generation.get("length_penalty", hf.get("length_penalty", 1.0))
    min_length = generation.get("min_length", hf.get("min_length", 0)) or 0
    early_stopping = generation.get("early_stopping", hf.get("early_stopping", False))
    if early_stopping == "never":
        log.warning("early_stopping 'never' is read as False: nmt has transformers' default heuristic, not 'never'")
    return {
        "beam": int(beam),
        "length_penalty": float(alpha),
        "length_normalization": "average",
        "min_len": max(0, int(min_length) - 1),
        "early_stopping": early_stopping is True,  # transformers' "never" is not nmt's: its heuristic stands in
    }


# --- the whole directory --------------------------------------------------------------------------


def read_marian(directory: str | Path) -> tuple[Transformer, SentencePieceTokenizer, SentencePieceTokenizer, dict]:
    """Read and check a Hugging Face Marian directory: (model, source tokenizer, target tokenizer, origin)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise MarianFormatError(f"{directory}: not a directory")
    hf = read_json(directory / CONFIG)
    config = model_config(hf, directory / CONFIG)
    src_tok, tgt_tok = read_tokenizers(directory, config)
    tensors, weights_path = read_marian_weights(directory)
    model = build_model(tensors, config, weights_path)
    settings = read_json(directory / TOKENIZER_CONFIG) if (directory / TOKENIZER_CONFIG).is_file() else {}
    generation = read_json(directory / GENERATION_CONFIG) if (directory / GENERATION_CONFIG).is_file() else {}
    origin = {
        "format": "marian",
        "path": str(directory.resolve()),
        "source_lang": settings.get("source_lang"),
        "target_lang": settings.get("target_lang"),
        "max_position_embeddings": hf.get("max_position_embeddings"),
        "decode": decode_defaults(generation, hf),
    }
    return model.eval(), src_tok, tgt_tok, origin
