"""Marian's own release format, read into nmt's Transformer: what OPUS-MT publishes beside the
Hugging Face conversions.

    nmt import --from marian opus-2020-02-26/ --out models/opus-de-en

A release directory holds decoder.yml (which names the model file, the vocabularies and the search
settings), the weights as a NumPy archive (`model.npz`; its `special:model.yml` entry is the
training configuration), one vocabulary .yml per side (the same file twice where they share one)
and the SentencePiece models source.spm and target.spm.

Marian's names map onto the Hugging Face layout that marian.py already reads, as transformers'
own converter (convert_marian_to_pytorch) maps them:

    encoder_l3_self_Wq (d_model, d_model), input-major  -> model.encoder.layers.2.self_attn.q_proj.weight, transposed
    encoder_l3_self_bq (1, d_model)                      -> ...q_proj.bias (and k, v, o alike)
    encoder_l3_self_Wo_ln_scale / _ln_bias               -> ...self_attn_layer_norm.weight / .bias
    encoder_l3_ffn_W1, _b1, _W2, _b2                     -> ...fc1, fc2 (weights transposed)
    encoder_l3_ffn_ffn_ln_scale / _ln_bias               -> ...final_layer_norm
    decoder_l3_context_*                                 -> model.decoder.layers.2.encoder_attn(_layer_norm)
    Wemb (shared) or encoder_Wemb / decoder_Wemb         -> the embeddings
    decoder_ff_logit_out_b (1, vocab)                    -> final_logits_bias
    decoder_ff_logit_out_Wt (vocab, d_model), untied     -> lm_head.weight (older Marian: _W, (d_model, vocab))

Marian has no padding token and starts decoding from a zero vector; as in transformers'
conversion, a `<pad>` is appended to each vocabulary with a zero embedding row and a zero output
bias, and decoding starts from it (a zero row scaled is still zero). Where transformers'
conversion departs from what Marian computes, nmt keeps Marian's: layer norms with epsilon 1e-6
(transformers: 1e-5), and Marian's own sinusoidal positions, whose frequencies step by
log(10000) / (d/2 - 1) (transformers and CTranslate2 use the paper's log(10000) / (d/2); at
position 50 the tables differ by up to 0.07): `position_layout: marian`.
Supported: post-norm Transformers (`--transformer-preprocess ''`, `--transformer-postprocess dan`),
swish or relu, tied or untied embeddings, one model. Refused in one line naming the file and
field: pre-norm, average-attention or SSRU decoders, learned positions, layer-normalised
embeddings, Marian's gelu (x * sigmoid(1.702 x), which nmt does not compute), ensembles, a
vocabulary whose size is not the weights', one embedding shared by both sides with an untied output.
"""

from __future__ import annotations

import dataclasses
import logging
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
import yaml

from ..model import Transformer
from ..sentencepiece_tokenizer import SOURCE_MODEL, TARGET_MODEL, SentencePieceTokenizer, SpecialTokens
from .marian import MarianFormatError, build_model, model_config

log = logging.getLogger(__name__)

DECODER_YML = "decoder.yml"
CONFIG_KEY = "special:model.yml"
PAD = "<pad>"
LAYER_NORM_EPS = 1e-6  # Marian's transformer layer norm (transformers' conversion uses 1e-5)
POSITION_LAYOUT = "marian"  # Marian's own sinusoid (transformers' conversion uses "halves")
ACTIVATIONS = ("swish", "relu")

# Marian -> transformers, per layer (the q/k/v/o projections take _W and _b; norms _ln_scale / _ln_bias).
ATTENTION = {"self": "self_attn", "context": "encoder_attn"}
PROJECTIONS = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "out_proj"}
# (option, value it must have, what nmt would need to run anything else): the post-norm Transformer.
# Each but `type` is also Marian's default, taken where the saved options leave it out.
REQUIRED = (
    ("type", "transformer", "a Transformer"),
    ("transformer-decoder-autoreg", "self-attention", "decoder self-attention (no average attention or SSRU)"),
    ("transformer-preprocess", "", "a post-norm model"),
    ("transformer-postprocess", "dan", "a post-norm model"),
    ("transformer-postprocess-top", "", "a post-norm model"),
    ("transformer-train-position-embeddings", False, "sinusoidal positions"),
    ("transformer-ffn-depth", 2, "two-layer feed-forward blocks"),
    ("transformer-no-projection", False, "attention output projections"),
    ("right-left", False, "a left-to-right decoder"),
    ("layer-normalization", False, "no RNN layer normalisation"),
)


def is_marian_release(directory: str | Path) -> bool:
    """Whether `directory` looks like a Marian release (decoder.yml, no Hugging Face config.json)."""
    directory = Path(directory)
    return (directory / DECODER_YML).is_file() and not (directory / "config.json").is_file()


def read_yaml(path: Path) -> dict[str, Any]:
    """A Marian .yml as plain strings, lists and mappings (BaseLoader: "yes", "null" or "1e-4" stay text)."""
    if not path.is_file():
        raise MarianFormatError(f"{path}: not found (a Marian release names it in {DECODER_YML})")
    try:
        values = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    except (UnicodeDecodeError, yaml.YAMLError) as err:
        raise MarianFormatError(f"{path}: not valid YAML ({' '.join(str(err).split())})") from None
    if not isinstance(values, dict):
        raise MarianFormatError(f"{path}: not a YAML mapping")
    return values


def yaml_value(value: Any) -> Any:
    """A BaseLoader string as Marian means it: true/false, an int, a float, else the text."""
    if isinstance(value, list):
        return [yaml_value(v) for v in value]
    if not isinstance(value, str):
        return value
    if value in ("true", "false"):
        return value == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


class ReleaseFiles(NamedTuple):
    """What decoder.yml names: the weights, the two vocabularies, and its own search settings."""

    weights: Path
    source_vocab: Path
    target_vocab: Path
    decoder: dict[str, Any]


def release_files(directory: Path) -> ReleaseFiles:
    """The files decoder.yml names, and its settings."""
    decoder = read_yaml(directory / DECODER_YML)
    models, vocabs = decoder.get("models"), decoder.get("vocabs")
    if not isinstance(models, list) or not models:
        raise MarianFormatError(f"{directory / DECODER_YML}: field models is missing")
    if len(models) > 1:
        raise MarianFormatError(f"{directory / DECODER_YML}: models lists {len(models)} (an ensemble); nmt takes one")
    if not isinstance(vocabs, list) or len(vocabs) != 2:
        raise MarianFormatError(f"{directory / DECODER_YML}: field vocabs must list a source and a target vocabulary")
    return ReleaseFiles(directory / models[0], directory / vocabs[0], directory / vocabs[1], decoder)


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of a Marian .npz (allow_pickle off: plain arrays only)."""
    if not path.is_file():
        raise MarianFormatError(f"{path}: not found (decoder.yml names it under models)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise MarianFormatError(f"{path}: not a readable NumPy archive ({' '.join(str(err).split())})") from None


def training_config(arrays: dict[str, np.ndarray], path: Path) -> dict[str, Any]:
    """The model's options as Marian saved them in the archive (`special:model.yml`, NUL-terminated)."""
    if CONFIG_KEY not in arrays:
        raise MarianFormatError(f"{path}: entry {CONFIG_KEY} is missing (the model's options)")
    text = arrays[CONFIG_KEY].tobytes().rstrip(b"\0").decode("utf-8", errors="replace")
    try:
        values = yaml.load(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError as err:
        raise MarianFormatError(f"{path}: {CONFIG_KEY} is not valid YAML ({' '.join(str(err).split())})") from None
    if not isinstance(values, dict):
        raise MarianFormatError(f"{path}: {CONFIG_KEY} is not a YAML mapping")
    return {name: yaml_value(value) for name, value in values.items()}


def check_architecture(options: dict[str, Any], path: Path) -> None:
    """Refuse, in one line naming the option, a model nmt would not compute as Marian does."""
    where = f"{path}: {CONFIG_KEY}"
    for name, needed, meaning in REQUIRED:
        value = options.get(name, None if name == "type" else needed)
        if value != needed:
            raise MarianFormatError(f"{where}: {name} is {value!r}; nmt imports {meaning} ({name}: {needed!r})")
    if options.get("transformer-postprocess-emb", "d") not in ("", "d"):
        raise MarianFormatError(
            f"{where}: transformer-postprocess-emb is {options['transformer-postprocess-emb']!r}; "
            "nmt does not layer-normalise embeddings ('d' or '')"
        )
    activation = options.setdefault("transformer-ffn-activation", "swish")  # Marian's default
    if activation not in ACTIVATIONS:
        raise MarianFormatError(
            f"{where}: transformer-ffn-activation {activation!r} is not supported (nmt imports {', '.join(ACTIVATIONS)}"
            "; Marian's gelu is x * sigmoid(1.702 x), which nmt does not compute)"
        )
    if options.get("transformer-tied-layers"):
        raise MarianFormatError(f"{where}: transformer-tied-layers is set; nmt has no layers shared between depths")
    for name in ("enc-depth", "dec-depth", "dim-emb", "transformer-heads", "transformer-dim-ffn"):
        if not isinstance(options.get(name), int) or options[name] < 1:
            raise MarianFormatError(f"{where}: {name} is {options.get(name)!r}, not a positive integer")


def read_yaml_vocab(path: Path) -> dict[str, int]:
    """A Marian vocabulary .yml (piece: id), checked to number its pieces 0 .. n-1, each once."""
    values = read_yaml(path)
    vocab: dict[str, int] = {}
    for piece, i in values.items():
        try:
            vocab[str(piece)] = int(i)
        except (TypeError, ValueError):
            raise MarianFormatError(f"{path}: piece {piece!r} has id {i!r}, not an integer") from None
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise MarianFormatError(f"{path}: the ids are not 0 .. {len(vocab) - 1}, each once")
    if PAD in vocab:
        raise MarianFormatError(f"{path}: already has {PAD}; a Marian vocabulary has none")
    return vocab


def with_pad_row(table: np.ndarray) -> torch.Tensor:
    """A (vocab, d) embedding or (1, vocab) bias with the appended <pad> as zeros."""
    tensor = torch.from_numpy(np.ascontiguousarray(table, dtype=np.float32))
    if tensor.dim() == 2 and tensor.size(0) == 1:  # the output bias
        return torch.cat([tensor.reshape(-1), torch.zeros(1)])
    return torch.cat([tensor, torch.zeros(1, tensor.size(1))])


def huggingface_tensors(arrays: dict[str, np.ndarray], options: dict[str, Any], path: Path) -> dict[str, torch.Tensor]:
    """Marian's arrays under transformers' Marian names (see the module docstring); unused ones refused."""
    used = {CONFIG_KEY}

    def take(name: str, transpose: bool = False) -> torch.Tensor:
        if name not in arrays:
            raise MarianFormatError(f"{path}: array {name} is missing")
        used.add(name)
        array = arrays[name].T if transpose else arrays[name]
        return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).squeeze(0)

    tensors: dict[str, torch.Tensor] = {}
    for side in ("encoder", "decoder"):
        blocks = ("self",) if side == "encoder" else ("self", "context")
        for i in range(int(options[f"{'enc' if side == 'encoder' else 'dec'}-depth"])):
            ours, theirs = f"{side}_l{i + 1}", f"model.{side}.layers.{i}"
            for block in blocks:
                attention = ATTENTION[block]
                for p, proj in PROJECTIONS.items():
                    tensors[f"{theirs}.{attention}.{proj}.weight"] = take(f"{ours}_{block}_W{p}", transpose=True)
                    tensors[f"{theirs}.{attention}.{proj}.bias"] = take(f"{ours}_{block}_b{p}")
                tensors[f"{theirs}.{attention}_layer_norm.weight"] = take(f"{ours}_{block}_Wo_ln_scale")
                tensors[f"{theirs}.{attention}_layer_norm.bias"] = take(f"{ours}_{block}_Wo_ln_bias")
            for k in ("1", "2"):
                tensors[f"{theirs}.fc{k}.weight"] = take(f"{ours}_ffn_W{k}", transpose=True)
                tensors[f"{theirs}.fc{k}.bias"] = take(f"{ours}_ffn_b{k}")
            tensors[f"{theirs}.final_layer_norm.weight"] = take(f"{ours}_ffn_ffn_ln_scale")
            tensors[f"{theirs}.final_layer_norm.bias"] = take(f"{ours}_ffn_ffn_ln_bias")
    if "Wemb" in arrays:
        used.add("Wemb")
        tensors["model.shared.weight"] = with_pad_row(arrays["Wemb"])
    else:
        for side in ("encoder", "decoder"):
            if f"{side}_Wemb" not in arrays:
                raise MarianFormatError(f"{path}: array Wemb (or {side}_Wemb) is missing")
            used.add(f"{side}_Wemb")
            tensors[f"model.{side}.embed_tokens.weight"] = with_pad_row(arrays[f"{side}_Wemb"])
    if "decoder_ff_logit_out_Wt" in arrays:  # an output matrix of its own, stored (vocab, d_model)
        used.add("decoder_ff_logit_out_Wt")
        tensors["lm_head.weight"] = with_pad_row(arrays["decoder_ff_logit_out_Wt"])
    elif "decoder_ff_logit_out_W" in arrays:  # the same from older Marian, stored (d_model, vocab)
        used.add("decoder_ff_logit_out_W")
        tensors["lm_head.weight"] = with_pad_row(arrays["decoder_ff_logit_out_W"].T)
    if "lm_head.weight" in tensors and "model.shared.weight" in tensors:
        raise MarianFormatError(
            f"{path}: one embedding (Wemb) for both sides but an output matrix of its own "
            "(decoder_ff_logit_out_W[t]); nmt ties the output to the embedding there"
        )
    if "decoder_ff_logit_out_b" not in arrays:
        raise MarianFormatError(f"{path}: array decoder_ff_logit_out_b is missing")
    used.add("decoder_ff_logit_out_b")
    tensors["final_logits_bias"] = with_pad_row(arrays["decoder_ff_logit_out_b"])
    unused = sorted(set(arrays) - used)
    if unused:  # learned positions (Wpos), factors, alignment heads' extras...: weights nmt would drop
        raise MarianFormatError(f"{path}: arrays nmt has no place for: {', '.join(unused[:5])}")
    return tensors


def read_marian_release(
    directory: str | Path,
) -> tuple[Transformer, SentencePieceTokenizer, SentencePieceTokenizer, dict]:
    """Read and check a Marian release directory: (model, source tokenizer, target tokenizer, origin)."""
    directory = Path(directory)
    weights, src_vocab_path, tgt_vocab_path, decoder = release_files(directory)
    arrays = read_npz(weights)
    options = training_config(arrays, weights)
    check_architecture(options, weights)
    src_vocab, tgt_vocab = read_yaml_vocab(src_vocab_path), read_yaml_vocab(tgt_vocab_path)
    shared = src_vocab_path.resolve() == tgt_vocab_path.resolve()
    if not shared and "Wemb" in arrays:
        raise MarianFormatError(f"{weights}: one embedding (Wemb) but two vocabularies in {directory / DECODER_YML}")
    for vocab in (src_vocab, tgt_vocab):
        vocab[PAD] = len(vocab)
    tensors = huggingface_tensors(arrays, options, weights)
    for side, vocab, path in (("encoder", src_vocab, src_vocab_path), ("decoder", tgt_vocab, tgt_vocab_path)):
        rows = tensors[f"model.{side}.embed_tokens.weight" if "Wemb" not in arrays else "model.shared.weight"]
        if rows.size(0) != len(vocab):
            raise MarianFormatError(
                f"{path}: the vocabulary has {len(vocab) - 1} pieces but the weights' {side} embedding has "
                f"{rows.size(0) - 1} rows"
            )
    if "</s>" not in tgt_vocab or "<unk>" not in tgt_vocab:
        raise MarianFormatError(f"{tgt_vocab_path}: </s> and <unk> are needed")
    hf = {
        "model_type": "marian",
        "vocab_size": len(src_vocab),
        "decoder_vocab_size": len(tgt_vocab),
        "encoder_layers": int(options["enc-depth"]),
        "decoder_layers": int(options["dec-depth"]),
        "d_model": options["dim-emb"],
        "encoder_attention_heads": options["transformer-heads"],
        "decoder_attention_heads": options["transformer-heads"],
        "encoder_ffn_dim": options["transformer-dim-ffn"],
        "decoder_ffn_dim": options["transformer-dim-ffn"],
        "activation_function": options["transformer-ffn-activation"],
        "share_encoder_decoder_embeddings": "Wemb" in arrays,
        "tie_word_embeddings": "lm_head.weight" not in tensors,
        "pad_token_id": tgt_vocab[PAD],
        "decoder_start_token_id": tgt_vocab[PAD],
        "eos_token_id": tgt_vocab["</s>"],
        "scale_embedding": True,  # Marian's Transformer always scales embeddings by sqrt(d_model)
        "dropout": float(options.get("transformer-dropout", 0.1)),
    }
    config = dataclasses.replace(
        model_config(hf, weights), layer_norm_eps=LAYER_NORM_EPS, position_layout=POSITION_LAYOUT
    )
    model = build_model(tensors, config, weights)
    special = SpecialTokens(separate_vocabs=not shared)
    try:
        src_tok = SentencePieceTokenizer(directory / SOURCE_MODEL, src_vocab, "source", special)
        tgt_tok = SentencePieceTokenizer(directory / TARGET_MODEL, tgt_vocab, "target", special)
    except (OSError, ValueError) as err:
        raise MarianFormatError(str(err)) from None
    origin = {
        "format": "marian",
        "release": "npz",
        "path": str(directory.resolve()),
        "source_lang": None,
        "target_lang": None,
        "max_position_embeddings": None,
        "decode": decode_settings(decoder, directory / DECODER_YML),
    }
    return model, src_tok, tgt_tok, origin


def decode_settings(decoder: dict[str, Any], path: Path) -> dict[str, Any]:
    """decoder.yml's search: its beam and length normalisation (`normalize`: log-prob / length^alpha,
    Marian's default 0, the plain log-prob). Marian sets no minimum length, and ends a sentence once
    `beam` hypotheses have finished (nmt's early_stopping)."""
    try:
        beam, alpha = int(decoder.get("beam-size", 12)), float(decoder.get("normalize", 0))
        word_penalty = float(decoder.get("word-penalty", 0))
    except (TypeError, ValueError) as err:
        raise MarianFormatError(f"{path}: beam-size, normalize or word-penalty is not a number ({err})") from None
    if word_penalty:
        log.warning("%s: word-penalty %g is not applied: nmt's search has no per-word bonus", path, word_penalty)
    return {
        "beam": beam,
        "length_penalty": alpha,
        "length_normalization": "average",
        "min_len": 0,
        "early_stopping": True,
    }
