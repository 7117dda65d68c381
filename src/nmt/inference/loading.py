"""A model directory and EngineOptions -> the engine that runs it: the one place that knows both engines."""

from __future__ import annotations

import dataclasses
import errno
import logging
from pathlib import Path

import torch

from ..checkpoint import load_model_dir
from ..config import DecodeConfig
from ..model import Transformer
from ..model_dir import WEIGHTS, stored_parameter_count
from ..tokenizer import SubwordTokenizer, load_tokenizers
from .contract import ENGINE_DEFAULTS, Engine, EngineOptions
from .engine_choice import cached_export, choose_engine, other_weights
from .export_ctranslate2 import is_ctranslate2_dir
from .precision import PrecisionError, check_precision
from .shortlist import LexicalShortlist, model_shortlist
from .torch_engine import TorchEngine

log = logging.getLogger(__name__)


def resolve_device(device: str) -> str:
    """ "auto" -> "cuda" where torch sees a GPU, else "cpu"; anything else as it is."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def model_precision(precision: str, engine: str, model_dir: str | Path) -> str | None:
    """A model's decode.precision for a run on this CPU that names none: as written, except where it
    cannot run (chosen on another CPU, e.g. bf16 on one with AMX and the model now on one without: see
    check_precision; or bf16 where CTranslate2 runs it, asked for or as the only engine of an export
    directory, since it has no bf16 on CPU): then None, fp32."""
    model_dir = Path(model_dir)
    ctranslate2_only = is_ctranslate2_dir(model_dir) and not (model_dir / WEIGHTS).is_file()
    try:
        check_precision(precision, torch.device("cpu"))
    except PrecisionError as err:
        log.info("precision fp32: the model's decode.precision %s cannot run here (%s)", precision, err)
        return None
    if precision == "bf16" and (engine == "ctranslate2" or ctranslate2_only):
        log.info("precision fp32: the model's decode.precision is bf16, which CTranslate2 lacks on CPU")
        return None
    log.info("precision %s: the model's decode.precision (`--precision fp32` to override)", precision)
    return precision


def load_engine(
    model_dir: str | Path, options: EngineOptions, decode: DecodeConfig
) -> tuple[Engine, SubwordTokenizer, SubwordTokenizer]:
    """The engine `options` ask for, on the model in `model_dir`, and the model's source and target
    tokenizers (which CTranslate2's engine needs to map ids onto its vocabulary).

    nmt's engine loads the weights frozen (requires_grad False): they are for translation, and fp32
    packs its output projection on CPUs where that is faster (nmt.inference.packed_linear); to
    train from a model directory, use `load_model_dir` instead. Its precision defaults to fp32 on
    CUDA too (bf16 decoding measured slower there: see nmt.inference.precision). On CPU a run that
    names no precision takes the model's decode.precision (int8, or bf16 on AMX, where `nmt
    tune-precision` chose it; see model_precision). A lexical shortlist in the directory is used
    unless options.shortlist is False (one that does not fit the tokenizers is refused: ShortlistError).
    """
    model_dir = Path(model_dir)
    device = resolve_device(options.device)
    if options.precision is None and decode.precision is not None and torch.device(device).type == "cpu":
        options = dataclasses.replace(options, precision=model_precision(decode.precision, options.engine, model_dir))
    own_weights = model_dir / WEIGHTS
    if options.engine == "auto":
        model_dir, options = resolve_auto(model_dir, options, device, transformers_stopping=not decode.early_stopping)
    if options.engine == "ctranslate2":
        from .ctranslate2_engine import CTranslate2Engine  # noqa: PLC0415 - an optional extra

        src_tokenizer, tgt_tokenizer = load_tokenizers(model_dir)
        engine = CTranslate2Engine.from_model_dir(
            model_dir,
            src_tokenizer,
            tgt_tokenizer,
            decode,
            weights=options.weights,
            precision=options.precision,
            device=device,
            workers=options.workers,
            threads=options.threads,
            shortlist=options.shortlist,
        )
        if own_weights.is_file() and options.weights is None:  # CTranslate2 cannot count them itself
            engine.parameter_count = stored_parameter_count(own_weights)
        return engine, src_tokenizer, tgt_tokenizer
    if is_ctranslate2_dir(model_dir) and options.weights is None and not (model_dir / WEIGHTS).exists():
        raise ValueError(
            f"{model_dir} holds a CTranslate2 export, not PyTorch weights: translate it on engine 'ctranslate2' "
            "(--engine ctranslate2), or give the model directory it was exported from"
        )
    model = load_model_dir(model_dir, weights=options.weights, device=device).requires_grad_(False)
    src_tokenizer, tgt_tokenizer = load_tokenizers(model_dir)
    shortlist = model_shortlist(model_dir, src_tokenizer, tgt_tokenizer) if options.shortlist else None
    return _torch_engine(model, decode, options, shortlist), src_tokenizer, tgt_tokenizer


def resolve_auto(
    model_dir: Path, options: EngineOptions, device: str, *, transformers_stopping: bool = False
) -> tuple[Path, EngineOptions]:
    """The model directory and options that `--engine auto` stands for here (transformers_stopping:
    the model searches by transformers' stopping rule, see choose_engine), its choice logged in one
    line: CTranslate2 runs the export cached in the model directory (made at the first load)."""
    options = dataclasses.replace(options, weights=other_weights(model_dir, options.weights))
    choice = choose_engine(
        model_dir, device, options.precision, options.weights, transformers_stopping=transformers_stopping
    )
    log.info(choice.line())
    if choice.engine == "ctranslate2" and not is_ctranslate2_dir(model_dir):
        try:
            model_dir = cached_export(model_dir, shortlist=options.shortlist)
        except OSError as err:
            if not (isinstance(err, PermissionError) or err.errno == errno.EROFS):
                raise
            # a model directory this user cannot write: an export for this run only
            log.info("cannot keep the CTranslate2 export in %s (%s): exporting for this run", model_dir, err)
    return model_dir, dataclasses.replace(options, engine=choice.engine)


def engine_for_model(model: Transformer, decode: DecodeConfig, options: EngineOptions) -> TorchEngine:
    """nmt's engine on a model already in memory, its device and weights as they are: options that
    choose those (engine, device, weights) belong to `load_engine` and are refused here."""
    misplaced = [
        name
        for name, given, default in (
            ("engine", options.engine, "torch"),
            ("device", options.device, ENGINE_DEFAULTS.device),
            ("weights", options.weights, None),
        )
        if given != default and not (name == "engine" and given == "auto")
    ]
    if misplaced:
        raise ValueError(f"a model in memory runs on nmt's engine as it is: {', '.join(misplaced)} apply to loading")
    return _torch_engine(model, decode, options)


def _torch_engine(
    model: Transformer, decode: DecodeConfig, options: EngineOptions, shortlist: LexicalShortlist | None = None
) -> TorchEngine:
    return TorchEngine(
        model,
        decode,
        precision=options.precision or "fp32",
        workers=options.workers,
        threads=options.threads,
        processes=options.worker_processes,
        shortlist=shortlist,
    )


def merge_options(options: EngineOptions | None, keywords: dict) -> EngineOptions:
    """`options`, or EngineOptions built from keywords (precision="int8", ...): not both."""
    if options is not None and keywords:
        raise TypeError(f"give EngineOptions or keywords ({', '.join(keywords)}), not both")
    return options or EngineOptions(**keywords)
