"""An nmt model that came from Marian (fine-tuned or not), written back in the Hugging Face layout.

    nmt export --model models/opus-de-en-medical --to huggingface --out opus-de-en-medical-hf

The output is a directory that transformers loads as `MarianMTModel` + `MarianTokenizer` and that
translates as nmt does: the inverse of nmt.pretrained.marian (the same name mapping, read the other
way). Only a model with Marian's tokenizers (SentencePiece) and Marian's architecture can be written
so; any other is refused in one line, before anything is written.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch

from ..checkpoint import load_model_dir
from ..files import staged_directory
from ..model import Transformer
from ..model.embedding import sinusoidal_encoding
from ..model_dir import IMPORTED_FROM
from ..sentencepiece_tokenizer import SETTINGS_FILE, SentencePieceTokenizer, save_sentencepiece_tokenizers
from ..tokenizer import load_tokenizers
from .marian import CONFIG, SAFETENSORS, TOKENIZER_CONFIG, attention_modules, layer_names

log = logging.getLogger(__name__)

TRANSFORMERS_LAYER_NORM_EPS = 1e-5  # fixed in transformers' Marian layers
DEFAULT_MAX_POSITIONS = 512  # OPUS-MT's max_position_embeddings, where the import did not record one


def check_marian_shaped(model: Transformer, src_tok, model_dir: Path) -> None:
    """Refuse, naming what differs, a model that MarianMTModel cannot hold."""
    if not isinstance(src_tok, SentencePieceTokenizer):
        raise ValueError(
            f"{model_dir}: its tokenizer is nmt's own ({src_tok.kind}), not Marian's SentencePiece models; "
            "only models imported with `nmt import --from marian` (fine-tuned or not) can be written as Hugging Face"
        )
    c = model.config
    differences = [
        f"{name}={getattr(c, name)!r} (Marian: {marian!r})"
        for name, marian in (("norm_position", "post"), ("position_layout", "halves"), ("output_bias", True))
        if getattr(c, name) != marian and (name, getattr(c, name)) != ("position_layout", "marian")
    ]
    if differences:
        raise ValueError(f"{model_dir}/model.json: MarianMTModel cannot hold {', '.join(differences)}")


def marian_state(model: Transformer, max_positions: int) -> dict[str, torch.Tensor]:
    """nmt's state dict -> transformers' MarianMTModel tensors (each its own copy: safetensors stores no aliases)."""
    c, state = model.config, model.state_dict()
    tensors = {theirs: state[ours] for ours, theirs in layer_names(c)}
    for ours, theirs in attention_modules(c):
        for kind in ("weight", "bias"):
            for name, part in zip("qkv", state[f"{ours}.in_proj.{kind}"].chunk(3), strict=True):
                tensors[f"{theirs}.{name}_proj.{kind}"] = part
    tensors["model.encoder.embed_tokens.weight"] = state["src_embed.weight"]
    tensors["model.decoder.embed_tokens.weight"] = state["tgt_embed.weight"]
    if c.sharing == "all":
        tensors["model.shared.weight"] = state["tgt_embed.weight"]
    tensors["lm_head.weight"] = state["output.weight"]
    tensors["final_logits_bias"] = state["output.bias"].reshape(1, -1)
    positions = sinusoidal_encoding(torch.arange(max_positions), c.d_model, c.positional_base, "halves")
    tensors["model.encoder.embed_positions.weight"] = tensors["model.decoder.embed_positions.weight"] = positions
    return {name: t.detach().float().contiguous().clone() for name, t in tensors.items()}


def marian_config(model: Transformer, max_positions: int) -> dict:
    """config.json for transformers' MarianConfig."""
    c = model.config
    return {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        "vocab_size": c.src_vocab_size,
        "decoder_vocab_size": c.tgt_vocab_size,
        "d_model": c.d_model,
        "encoder_layers": c.encoder_layers,
        "decoder_layers": c.decoder_layers,
        "encoder_attention_heads": c.num_heads,
        "decoder_attention_heads": c.num_heads,
        "encoder_ffn_dim": c.d_ff,
        "decoder_ffn_dim": c.d_ff,
        "activation_function": c.activation,
        "dropout": c.dropout,
        "attention_dropout": c.attention_dropout,
        "activation_dropout": c.activation_dropout,
        "scale_embedding": c.scale_embeddings,
        "share_encoder_decoder_embeddings": c.sharing == "all",
        "tie_word_embeddings": c.sharing != "none",
        "pad_token_id": c.pad_id,
        "eos_token_id": c.eos_id,
        "forced_eos_token_id": c.eos_id,
        "decoder_start_token_id": c.bos_id,
        "bad_words_ids": [[c.pad_id]],
        "max_position_embeddings": max_positions,
        "is_encoder_decoder": True,
    }


def export_huggingface(model_dir: str | Path, out_dir: str | Path, *, weights: str | Path | None = None) -> Path:
    """Write `model_dir` (imported from Marian, fine-tuned or not) as a Hugging Face Marian directory."""
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    if out_dir.exists():
        raise FileExistsError(f"--out {out_dir} already exists: choose a new directory")
    src_tok, tgt_tok = load_tokenizers(model_dir)
    model = load_model_dir(model_dir, weights=weights)
    check_marian_shaped(model, src_tok, model_dir)
    origin_path = model_dir / IMPORTED_FROM
    origin = json.loads(origin_path.read_text(encoding="utf-8")) if origin_path.is_file() else {}
    max_positions = origin.get("max_position_embeddings") or DEFAULT_MAX_POSITIONS
    if model.config.position_layout == "marian":  # a model read from Marian's own release
        log.info(
            "Marian's own positions and layer-norm epsilon %g become transformers' table and %g "
            "(MarianConfig has no field for either; transformers' own conversion from Marian does the same)",
            model.config.layer_norm_eps,
            TRANSFORMERS_LAYER_NORM_EPS,
        )
    from safetensors.torch import save_file  # noqa: PLC0415

    with staged_directory(out_dir) as staging:
        save_file(marian_state(model, max_positions), str(staging / SAFETENSORS), metadata={"format": "pt"})
        (staging / CONFIG).write_text(json.dumps(marian_config(model, max_positions), indent=2) + "\n")
        save_sentencepiece_tokenizers(src_tok, tgt_tok, staging)
        special = src_tok.special
        tokenizer_config = {
            "tokenizer_class": "MarianTokenizer",
            "source_lang": origin.get("source_lang"),
            "target_lang": origin.get("target_lang"),
            "separate_vocabs": special.separate_vocabs,
            "eos_token": special.eos,
            "unk_token": special.unk,
            "pad_token": special.pad,
            "model_max_length": max_positions,
        }
        (staging / TOKENIZER_CONFIG).write_text(json.dumps(tokenizer_config, indent=2) + "\n")
        (staging / SETTINGS_FILE).unlink()  # nmt's own marker: not part of the Hugging Face layout
    log.info("exported %s to %s (Hugging Face MarianMTModel)", model_dir, out_dir)
    return out_dir
