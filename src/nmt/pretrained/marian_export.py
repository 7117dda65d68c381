"""An nmt model written in the Hugging Face layout, as a `MarianMTModel` that transformers loads.

    nmt export --model models/opus-de-en-medical --to huggingface --out opus-de-en-medical-hf
    nmt export --model runs/de_en --to huggingface --out de-en-hf

The output translates as nmt does. Two kinds of model can be written:

- one that came from Marian (fine-tuned or not): the inverse of nmt.pretrained.marian (the same name
  mapping, read the other way), with its SentencePiece models for `MarianTokenizer`;
- one that nmt trained, with a joint vocabulary: its `tokenizer.json` is Hugging Face's own format,
  read by `AutoTokenizer` as a fast tokenizer that adds nmt's [START] ... [END] around each source
  and keeps a multilingual model's `>>xx<<` tokens whole. Its interleaved position table becomes
  transformers' layout by re-ordering the hidden features (nmt.pretrained.feature_order).

A model whose architecture MarianMTModel cannot hold (pre-norm, for one) is refused in one line,
before anything is written.
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
from ..model_dir import IMPORTED_FROM, read_decode_config, read_directions, read_text_form
from ..search_settings import SEARCH_FIELD_INFO, SearchSettings
from ..sentencepiece_tokenizer import SETTINGS_FILE, SentencePieceTokenizer, save_sentencepiece_tokenizers
from ..tokenizer import BOS, EOS, JOINT_FILE, PAD, UNK, SubwordTokenizer, load_tokenizers
from .feature_order import with_halves_layout
from .marian import CONFIG, GENERATION_CONFIG, SAFETENSORS, TOKENIZER_CONFIG, attention_modules, layer_names

log = logging.getLogger(__name__)

TRANSFORMERS_LAYER_NORM_EPS = 1e-5  # fixed in transformers' Marian layers
DEFAULT_MAX_POSITIONS = 512  # OPUS-MT's max_position_embeddings, where the import did not record one
TRANSFORMERS_POSITIONAL_BASE = 10000.0  # fixed in transformers' Marian position table


def check_marian_shaped(model: Transformer, src_tok, tgt_tok, model_dir: Path) -> None:
    """Refuse, naming what differs, a model that MarianMTModel (and its tokenizer) cannot hold."""
    if not isinstance(src_tok, SentencePieceTokenizer) and src_tok is not tgt_tok:
        raise ValueError(
            f"{model_dir}: its source and target tokenizers are separate, and transformers' fast tokenizer "
            "is one; train with tokenizer.joint=true to export to Hugging Face"
        )
    c = model.config
    differences = []
    if c.norm_position != "post":
        differences.append(f"norm_position={c.norm_position!r} (Marian: 'post')")
    if c.position_layout != "marian" and c.positional_base != TRANSFORMERS_POSITIONAL_BASE:
        differences.append(f"positional_base={c.positional_base:g} (Marian: {TRANSFORMERS_POSITIONAL_BASE:g})")
    if differences:
        raise ValueError(f"{model_dir}/model.json: MarianMTModel cannot hold {', '.join(differences)}")


def marian_state(model: Transformer, max_positions: int) -> dict[str, torch.Tensor]:
    """nmt's state dict -> transformers' MarianMTModel tensors (each its own copy: safetensors stores no aliases)."""
    c, state = model.config, model.state_dict()
    if c.position_layout == "interleaved":  # nmt's own: re-order the features for transformers' table
        state = with_halves_layout(state, c)
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
    bias = state["output.bias"] if c.output_bias else torch.zeros(c.tgt_vocab_size)  # no bias: adds nothing
    tensors["final_logits_bias"] = bias.reshape(1, -1)
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


def generation_config(model: Transformer, max_positions: int, decode: SearchSettings, min_len: int) -> dict:
    """generation_config.json: what `model.generate()` does without arguments.

    Without a max_length transformers stops every output at 20 tokens, its model-agnostic default,
    saying so only in a warning; OPUS-MT's exports set it to their position table's length, as here.
    The model's own search (its decode settings, under transformers' names: nmt.search_settings) goes
    with it where transformers can run it: a model whose length penalty is transformers' (length **
    alpha, as an imported one's) keeps its beam, alpha, stopping rule and minimum length; under nmt's
    GNMT penalty, which transformers lacks, greedy search stays the default (docs/pretrained.md). A
    rule of every search (the n-gram ban, the same in both toolkits) goes either way, where it is on."""
    c = model.config
    settings = {
        "max_length": max_positions,
        "decoder_start_token_id": c.bos_id,
        "pad_token_id": c.pad_id,
        "eos_token_id": c.eos_id,
        "forced_eos_token_id": c.eos_id,
        "bad_words_ids": [[c.pad_id]],
    }
    beam_search = decode.length_normalization == "average" and decode.beam > 1
    for name, value in decode.search_settings().items():
        field = SEARCH_FIELD_INFO[name]
        if field["transformers"] is None:
            continue
        if beam_search if field["beam_only"] else value != field["default"]:  # transformers' default is off
            settings[field["transformers"]] = value
    if min_len > 0:
        settings["min_length"] = min_len + 1  # transformers counts the decoder's start token
    return settings


def export_huggingface(model_dir: str | Path, out_dir: str | Path, *, weights: str | Path | None = None) -> Path:
    """Write `model_dir` (imported from Marian, or trained by nmt) as a Hugging Face Marian directory."""
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    if out_dir.exists():
        raise FileExistsError(f"--out {out_dir} already exists: choose a new directory")
    src_tok, tgt_tok = load_tokenizers(model_dir)
    model = load_model_dir(model_dir, weights=weights)
    check_marian_shaped(model, src_tok, tgt_tok, model_dir)
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
    elif model.config.layer_norm_eps != TRANSFORMERS_LAYER_NORM_EPS:
        log.info(
            "layer-norm epsilon %g becomes transformers' %g (MarianConfig has no field for it; outputs "
            "can differ in the last digits, as in transformers' own conversion from Marian)",
            model.config.layer_norm_eps,
            TRANSFORMERS_LAYER_NORM_EPS,
        )
    if read_text_form(model_dir) is not None:
        log.warning(
            "%s was trained on tokenised, lower-cased text: transformers gets the model as it is, without "
            "nmt's conversion of typed text to that form and back",
            model_dir,
        )
    from safetensors.torch import save_file  # noqa: PLC0415

    with staged_directory(out_dir) as staging:
        save_file(marian_state(model, max_positions), str(staging / SAFETENSORS), metadata={"format": "pt"})
        (staging / CONFIG).write_text(json.dumps(marian_config(model, max_positions), indent=2) + "\n")
        decode = read_decode_config(model_dir)
        generation = generation_config(model, max_positions, decode, decode.min_len)
        (staging / GENERATION_CONFIG).write_text(json.dumps(generation, indent=2) + "\n")
        if isinstance(src_tok, SentencePieceTokenizer):
            tokenizer_config = write_marian_tokenizer(src_tok, tgt_tok, origin, staging)
        else:
            tokenizer_config = write_fast_tokenizer(src_tok, model_dir, staging)
        tokenizer_config["model_max_length"] = max_positions
        (staging / TOKENIZER_CONFIG).write_text(json.dumps(tokenizer_config, indent=2) + "\n")
    log.info("exported %s to %s (Hugging Face MarianMTModel)", model_dir, out_dir)
    return out_dir


def write_marian_tokenizer(src_tok, tgt_tok, origin: dict, staging: Path) -> dict:
    """An imported model's SentencePiece models, for `MarianTokenizer`; its tokenizer_config.json fields."""
    save_sentencepiece_tokenizers(src_tok, tgt_tok, staging)
    (staging / SETTINGS_FILE).unlink()  # nmt's own marker: not part of the Hugging Face layout
    special = src_tok.special
    return {
        "tokenizer_class": "MarianTokenizer",
        "source_lang": origin.get("source_lang"),
        "target_lang": origin.get("target_lang"),
        "separate_vocabs": special.separate_vocabs,
        "eos_token": special.eos,
        "unk_token": special.unk,
        "pad_token": special.pad,
    }


def write_fast_tokenizer(tokenizer: SubwordTokenizer, model_dir: Path, staging: Path) -> dict:
    """nmt's own joint tokenizer as it is (tokenizer.json is Hugging Face's format): its
    tokenizer_config.json fields, with the languages where the model has one pair."""
    tokenizer.save(staging / JOINT_FILE)
    directions = read_directions(model_dir)
    sources, targets = {s for s, _ in directions}, {t for _, t in directions}
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "source_lang": next(iter(sources)) if len(sources) == 1 else None,
        "target_lang": next(iter(targets)) if len(targets) == 1 else None,
        "bos_token": BOS,
        "eos_token": EOS,
        "unk_token": UNK,
        "pad_token": PAD,
    }
