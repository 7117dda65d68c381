"""nmt info: what a model directory holds and how `--engine auto` will run it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..inference.choices import PRECISIONS
from .common import require_model_dir


def add_info(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "info",
        help="show a model directory: its model, vocabulary, decoding settings, shortlist and engine",
        description="Print what MODEL_DIR holds (architecture and size, tokenizer, languages, decoding "
        "settings, lexical shortlist, training record) and which engine `--engine auto` runs it on here, "
        "and why. Reads the directory's files (the weights' header only) and writes nothing.",
    )
    p.add_argument("model", metavar="MODEL_DIR", help="a model directory (or a CTranslate2 export)")
    p.add_argument("--device", default="auto", help="the device to choose the engine for: auto | cpu | cuda[:N]")
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=None,
        help="the precision to choose the engine for (default: the model's own)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_info)


def cmd_info(args: argparse.Namespace) -> int:
    import torch

    from ..inference.engine_choice import choose_engine, export_status
    from ..inference.export_ctranslate2 import is_ctranslate2_dir
    from ..inference.loading import model_precision, resolve_device
    from ..inference.precision import int8_here
    from ..model_dir import (
        WEIGHTS,
        read_decode_config,
        read_directions,
        read_languages,
        read_metrics,
        stored_parameter_count,
    )
    from ..quality import QualityCalibration
    from ..search_settings import describe_search
    from ..training.precision import training_precision
    from .common import check_device

    require_model_dir(args.model, "MODEL_DIR")
    check_device(args.device)
    model_dir = Path(args.model)
    info: dict[str, object] = {"directory": str(model_dir), **model_lines(model_dir)}
    if (model_dir / WEIGHTS).is_file():
        weights = model_dir / WEIGHTS
        info["weights"] = f"{stored_parameter_count(weights):,} parameters stored, {mib(weights)}"
    src, tgt = read_languages(model_dir)
    directions = read_directions(model_dir)
    if len(directions) > 1:  # a multilingual model: each language its data.pairs name, in their order
        sources, targets = ({d[side]: None for d in directions} for side in (0, 1))
        info["languages"] = f"{', '.join(sources)} -> {', '.join(targets)}"
    elif src or tgt:
        info["languages"] = f"{src or '?'} -> {tgt or '?'}"
    decode = read_decode_config(model_dir)
    info["decoding"] = f"{describe_search(decode)}, min_len {decode.min_len}, {decode.precision or 'fp32'} on CPU"
    info["shortlist"] = shortlist_line(model_dir)
    quality = QualityCalibration.load(model_dir)
    info["quality scores"] = quality.describe() if quality else "not calibrated (`nmt calibrate` fits them)"
    try:
        records = read_metrics(model_dir)
        valid = [r for r in records if r.get("kind") == "valid" and r.get("bleu") is not None]
        if records:
            trained = f"{max(r['step'] for r in records):,} steps"
            if valid:
                trained += f", best validation BLEU {max(r['bleu'] for r in valid):.2f}"
            info["training"] = trained
    except (OSError, ValueError):
        pass
    if not is_ctranslate2_dir(model_dir):
        info["ctranslate2 export"] = export_status(model_dir)
    device = resolve_device(args.device)
    precision = args.precision
    if precision is None and decode.precision is not None and device == "cpu":  # as loading takes it
        precision = model_precision(decode.precision, "auto", model_dir)
    choice = choose_engine(model_dir, device, precision, transformers_stopping=not decode.early_stopping)
    info["engine auto"] = choice.line().removeprefix("engine auto: ")
    if device == "cpu":
        info["nmt int8 here"] = int8_here()  # --engine torch --precision int8: what it runs on this CPU
    # what `nmt train` (train.precision: auto) would compute in on this machine, and how to force either
    info["training here"] = training_precision("auto", torch.device(device)).reason
    if args.json:
        print(json.dumps(info))
    else:
        width = max(map(len, info))
        for key, value in info.items():
            print(f"{key:<{width}}  {value}")
    sys.stdout.flush()
    return 0


def model_lines(model_dir: Path) -> dict[str, str]:
    """The model's shape, vocabulary and word alignments, from its model.json (a line saying why not)."""
    from ..alignment import model_alignment
    from ..model_dir import MODEL_CONFIG

    try:
        config = json.loads((model_dir / MODEL_CONFIG).read_text())
        layer, heads = config.get("alignment_layer", -1), config.get("alignment_heads", 0)
        return {
            "model": f"{config['encoder_layers']}+{config['decoder_layers']} layers, d_model {config['d_model']}, "
            f"{config['num_heads']} heads, d_ff {config['d_ff']}, {config.get('norm_position', 'post')}-norm, "
            f"{config.get('activation', 'relu')}",
            "vocabulary": f"{config['src_vocab_size']:,} source / {config['tgt_vocab_size']:,} target pieces",
            "word alignments": model_alignment(layer, heads, config.get("alignment_shift", False)).describe(),
        }
    except (OSError, ValueError, KeyError, TypeError) as err:
        return {"model": f"{model_dir / MODEL_CONFIG} unreadable ({type(err).__name__}: {err})"}


def shortlist_line(model_dir: Path) -> str:
    """Whether the model has a lexical shortlist, and its size."""
    from ..inference.shortlist import SHORTLIST, LexicalShortlist, ShortlistError

    if not (model_dir / SHORTLIST).is_file():
        return "none (`nmt shortlist` builds one)"
    try:
        shortlist = LexicalShortlist.load(model_dir / SHORTLIST)
    except ShortlistError as err:
        return f"unusable: {err}"
    per_piece, always = shortlist.table.size(1), shortlist.always.numel()
    return f"yes: up to {per_piece} candidates per source piece, {always} for every sentence"


def mib(path: Path) -> str:
    return f"{path.stat().st_size / 2**20:.1f} MiB"
