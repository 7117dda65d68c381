"""Export a trained model to CTranslate2, the C++ inference engine (the optional extra `ctranslate2`).

    nmt export --model runs/de_en --to ctranslate2 --out runs/de_en.ct2 [--quantization int8]

The result is itself a model directory that `Translator.load(..., engine="ctranslate2")` and
`nmt translate --engine ctranslate2` read: CTranslate2's model.bin, config.json and vocabulary
files, beside copies of nmt's tokenizer(s), model.json and config.yaml (so tokenisation, length
limits and the length penalty stay nmt's).

The weights go through CTranslate2's documented spec API (`TransformerSpec.from_config`, then
each layer's fields), which fixes how nmt's model maps onto CTranslate2's:
- one encoder and one decoder embedding (a tied matrix is stored once: CTranslate2 aliases equal
  arrays), both scaled by sqrt(d_model) unless the model says not (an imported Marian model may), and
  nmt's own sinusoidal table, in the model's layout, as the position encodings;
- self-attention's fused [W_Q; W_K; W_V] as is; cross-attention's W_Q apart from [W_K; W_V];
- post-norm (the paper's) or pre-norm with a final LayerNorm per stack, nmt's LayerNorm epsilon;
- the output layer gets a bias of -1e4 on the padding id (added to the model's own output bias, if
  it has one), so CTranslate2, like nmt, never emits padding (nmt sets its log-probability to -inf);
- the tokenizer's start token starts the decoder ([START]), its end token stops it; sources are
  given with the tokenizer's own special tokens. A model that starts from a zero padding row, as
  Marian's do (the last id, both the start and the padding token: `starts_from_zero_row`), is
  written as CTranslate2's own Marian converter writes it: the decoder starts from a zero vector
  and the padding row leaves the vocabularies, embeddings and output layer;
- a lexical shortlist in the model directory (nmt.inference.shortlist) is written as CTranslate2's
  vocabulary map (vmap.txt), which its engine then uses as nmt's uses the shortlist;
- the attention CTranslate2 returns (`return_attention`) is the one nmt's word alignments read
  (`alignment_layer`, `alignment_heads`): the model's alignment head where guided alignment trained
  one (head 0 of its layer), else the decoder's top layer with every head averaged; so words and
  markup are placed alike on both engines. The export says which in alignment.json; an export
  without it (an older one) gives no alignments.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import torch

from ..checkpoint import load_model_dir
from ..files import staged_directory
from ..model import ModelConfig, Transformer
from ..model.embedding import sinusoidal_encoding
from ..model_dir import (
    IMPORTED_FROM,
    MODEL_CONFIG,
    RUN_CONFIG,
    read_run_config,
    text_form_files,
    write_decode_settings,
)
from ..tokenizer import SubwordTokenizer, load_tokenizers, save_tokenizers
from .choices import QUANTIZATIONS
from .shortlist import SHORTLIST, VOCABULARY_MAP, model_shortlist

log = logging.getLogger(__name__)

CT2_WEIGHTS = "model.bin"  # the file that marks a CTranslate2 model directory
POSITIONS = 1024  # rows of the position table written: nmt caps sources at 256 tokens, outputs at 512
PAD_BIAS = -1e4  # far below any logit, and still finite in float16
# What an export's layout means; raised when export_ctranslate2 writes the same model differently,
# so that exports kept by `--engine auto` (nmt.inference.engine_choice) are made again.
EXPORT_FORMAT = 3
ALIGNMENT = "alignment.json"  # which attention the export returns: {"layer": -1, "heads": "all"}
ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "swish": "SWISH"}  # nmt's -> ctranslate2.specs.common_spec.Activation


def require_ctranslate2():
    """The ctranslate2 module, or an ImportError that says how to install it."""
    try:
        import ctranslate2  # noqa: PLC0415 - an optional extra
    except ImportError:
        raise ImportError(
            "CTranslate2 is not installed (nmt brings it where CTranslate2 publishes wheels: Linux "
            "x86_64/aarch64, macOS arm64, Windows x64): pip install ctranslate2, or build it from source"
        ) from None
    return ctranslate2


def vocabulary(tokenizer: SubwordTokenizer) -> list[str]:
    """Every piece of the tokenizer, by id: the token strings CTranslate2 reads and writes."""
    return tokenizer.lookup(list(range(tokenizer.vocab_size)))


def check_exportable(c: ModelConfig) -> None:
    """Refuse, naming the model option, what CTranslate2's Transformer cannot express."""
    if c.activation not in ACTIVATIONS:
        raise ValueError(f"model.activation={c.activation!r} has no CTranslate2 equivalent ({', '.join(ACTIVATIONS)})")
    if c.norm_position not in ("post", "pre"):
        raise ValueError(f"model.norm_position={c.norm_position!r} has no CTranslate2 equivalent (post, pre)")


def starts_from_zero_row(model: Transformer) -> bool:
    """Whether the decoder starts from the padding token, the last id, whose embedding is zeros
    (an imported Marian model: Marian itself starts from a zero vector and has no padding token)."""
    c = model.config
    last = c.tgt_vocab_size - 1
    return c.bos_id == c.pad_id == last and not bool(model.tgt_embed.weight[last].any())


def ctranslate2_spec(model: Transformer, src_tok: SubwordTokenizer, tgt_tok: SubwordTokenizer):
    """A ctranslate2 TransformerSpec holding `model`'s weights and the two tokenizers' vocabularies."""
    require_ctranslate2()
    from ctranslate2.specs import common_spec, transformer_spec  # noqa: PLC0415

    check_exportable(model.config)
    c = model.config
    activation = getattr(common_spec.Activation, ACTIVATIONS[c.activation])
    spec = transformer_spec.TransformerSpec.from_config(
        (c.encoder_layers, c.decoder_layers),
        c.num_heads,
        pre_norm=c.norm_position == "pre",
        activation=activation,
        # the attention nmt.alignment reads: the model's alignment head, or every head of the top layer
        alignment_layer=c.alignment_layer,
        alignment_heads=c.alignment_heads or c.num_heads,
    )
    spec.config.layer_norm_epsilon = c.layer_norm_eps
    unk, start, eos = tgt_tok.lookup([tgt_tok.unk_id, tgt_tok.start_id, tgt_tok.eos_id])
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = unk, start, eos
    spec.config.decoder_start_token = start
    positions = sinusoidal_encoding(torch.arange(POSITIONS), c.d_model, c.positional_base, c.position_layout)

    def array(t: torch.Tensor):
        return t.detach().float().cpu().numpy()

    def linear(target, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        target.weight = array(weight)
        if bias is not None:
            target.bias = array(bias)

    def norm(target, layer_norm: torch.nn.LayerNorm) -> None:
        target.gamma, target.beta = array(layer_norm.weight), array(layer_norm.bias)

    def attention(target, mha, cross: bool) -> None:
        d = c.d_model
        w, b = mha.in_proj.weight, mha.in_proj.bias
        if cross:  # query from the decoder; keys and values from the encoder output, fused
            linear(target.linear[0], w[:d], b[:d])
            linear(target.linear[1], w[d:], b[d:])
        else:
            linear(target.linear[0], w, b)
        linear(target.linear[-1], mha.out_proj.weight, mha.out_proj.bias)

    def feed_forward(target, ff, residual) -> None:
        norm(target.layer_norm, residual.norm)
        linear(target.linear_0, ff.w_1.weight, ff.w_1.bias)
        linear(target.linear_1, ff.w_2.weight, ff.w_2.bias)

    enc, dec = spec.encoder, spec.decoder
    enc.scale_embeddings = dec.scale_embeddings = c.scale_embeddings
    src_rows, tgt_rows = c.src_vocab_size, c.tgt_vocab_size  # the rows written: all, or all but padding
    if starts_from_zero_row(model):
        dec.start_from_zero_embedding = True
        spec.config.bos_token = spec.config.decoder_start_token = eos  # any token: the zero vector is fed
        tgt_rows -= 1
        src_rows -= 1 if c.sharing == "all" else 0  # one table: stored once, as CTranslate2 aliases it
    enc.embeddings[0].weight = array(model.src_embed.weight[:src_rows])
    dec.embeddings.weight = array(model.tgt_embed.weight[:tgt_rows])
    enc.position_encodings.encodings = dec.position_encodings.encodings = array(positions)
    if c.norm_position == "pre":  # each stack ends with a LayerNorm
        norm(enc.layer_norm, model.encoder_norm)
        norm(dec.layer_norm, model.decoder_norm)
    for target, layer in zip(enc.layer, model.encoder_layers, strict=True):
        attention(target.self_attention, layer.self_attn, cross=False)
        norm(target.self_attention.layer_norm, layer.attn_residual.norm)
        feed_forward(target.ffn, layer.feed_forward, layer.ff_residual)
    for target, layer in zip(dec.layer, model.decoder_layers, strict=True):
        attention(target.self_attention, layer.self_attn, cross=False)
        norm(target.self_attention.layer_norm, layer.self_residual.norm)
        attention(target.attention, layer.cross_attn, cross=True)
        norm(target.attention.layer_norm, layer.cross_residual.norm)
        feed_forward(target.ffn, layer.feed_forward, layer.ff_residual)
    bias = model.output.bias.detach().clone() if model.output.bias is not None else torch.zeros(c.tgt_vocab_size)
    bias[c.pad_id] += PAD_BIAS
    linear(dec.projection, model.output.weight[:tgt_rows], bias[:tgt_rows])

    spec.register_source_vocabulary(vocabulary(src_tok)[:src_rows])
    spec.register_target_vocabulary(vocabulary(tgt_tok)[:tgt_rows])
    return spec


def export_ctranslate2(
    model_dir: str | Path,
    out_dir: str | Path,
    *,
    quantization: str = "float32",
    weights: str | Path | None = None,
    force: bool = False,
    shortlist: bool = True,
    extra_files: dict[str, str] | None = None,
) -> Path:
    """Write `model_dir`'s model (or `weights`) as a CTranslate2 model directory `out_dir`; returns it.

    quantization: how the weights are stored (float32, int8, int16). The engine can still compute
    in another type at load time (--precision), e.g. quantise float32 weights to int8; int8 weights
    make int8 the export's decode.precision, so that they are computed as stored unless a run says.
    shortlist: write the model directory's lexical shortlist, if it has one, as a vocabulary map
    (one that does not fit the tokenizers is refused); False leaves it out. extra_files: name ->
    text, written into the export before it appears.
    """
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"--quantization must be one of {', '.join(QUANTIZATIONS)}, not {quantization!r}")
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    if is_ctranslate2_dir(model_dir) and weights is None:
        raise ValueError(f"{model_dir} is already a CTranslate2 export: export from the nmt model directory")
    if model_dir.resolve().is_relative_to(out_dir.resolve()):
        raise ValueError(f"--out {out_dir} holds the model directory {model_dir}: choose a new directory")
    if out_dir.exists():
        if not force:
            raise FileExistsError(f"{out_dir} already exists: choose another --out, or --force to replace it")
        if not is_ctranslate2_dir(out_dir):  # --force replaces an earlier export, never anything else
            raise FileExistsError(f"{out_dir} exists and is not a CTranslate2 export: --force will not replace it")
    read_run_config(model_dir)  # copied into the export: a bad one is refused now, not at translation
    model = load_model_dir(model_dir, weights=weights)
    src_tok, tgt_tok = load_tokenizers(model_dir)
    # a shortlist that does not fit is refused now, not at translation
    candidates = model_shortlist(model_dir, src_tok, tgt_tok) if shortlist else None
    spec = ctranslate2_spec(model, src_tok, tgt_tok)
    spec.validate()
    spec.optimize(quantization=quantization)
    with staged_directory(out_dir, replace=True) as staging:  # a failed export leaves no half directory
        spec.save(str(staging))
        save_tokenizers(src_tok, tgt_tok, staging)
        if candidates is not None:  # CTranslate2's form of it, which its engine reads (use_vmap)
            tgt_pieces = vocabulary(tgt_tok)
            if starts_from_zero_row(model):  # its <pad> is no longer in the target vocabulary: left out
                tgt_pieces[-1] = ""
            text = candidates.vocabulary_map(vocabulary(src_tok), tgt_pieces)
            (staging / VOCABULARY_MAP).write_text(text, encoding="utf-8")
        shortlist_file = [SHORTLIST] if candidates is not None else []
        for name in (MODEL_CONFIG, RUN_CONFIG, IMPORTED_FROM, *shortlist_file, *text_form_files(model_dir)):
            if (model_dir / name).is_file():
                shutil.copy2(model_dir / name, staging / name)
        if quantization == "int8":  # int8 weights computed in fp32 would be slower than fp32 weights
            write_decode_settings(staging, precision="int8")
        alignment = alignment_said(model.config)
        for name, text in {ALIGNMENT: json.dumps(alignment), **(extra_files or {})}.items():
            (staging / name).write_text(text, encoding="utf-8")
    log.info("exported %s to %s (CTranslate2, %s weights)", model_dir, out_dir, quantization)
    return out_dir


def is_ctranslate2_dir(model_dir: str | Path) -> bool:
    """Whether `model_dir` holds an exported CTranslate2 model."""
    return (Path(model_dir) / CT2_WEIGHTS).is_file()


def exported_model_config(ct2_dir: str | Path) -> ModelConfig:
    """The model.json an export carries (an export without one: the defaults, whose alignment it has)."""
    path = Path(ct2_dir) / MODEL_CONFIG
    return ModelConfig.load(path) if path.is_file() else ModelConfig()


def alignment_said(config: ModelConfig) -> dict:
    """What ALIGNMENT says of an export of a model with `config`: the layer and heads its attention is."""
    return {"layer": config.alignment_layer, "heads": config.alignment_heads or "all"}


def returns_alignment_attention(ct2_dir: str | Path) -> bool:
    """Whether the export returns the attention nmt's word alignments read (see ALIGNMENT): its
    model's alignment head (model.json, copied with it; an older one's: every head of the top layer)."""
    ct2_dir = Path(ct2_dir)
    try:
        said = json.loads((ct2_dir / ALIGNMENT).read_text(encoding="utf-8"))
        config = exported_model_config(ct2_dir)
    except (OSError, ValueError):
        return False
    return said == alignment_said(config)
