"""The files of a model directory, each named once, and the checked readers of its settings.

    config.yaml           the experiment config the run was trained with (decode defaults, languages)
    model.json            the ModelConfig (rebuilds the network)
    model.safetensors     the weights used for translation (the best checkpoint so far)
    tokenizer.json        the joint tokenizer (or tokenizer.src.json + tokenizer.tgt.json)
    metrics.jsonl         training and validation records
    init_from             a fine-tuned model: the directory whose weights it started from
    imported_from.json    an imported model (nmt import): where it came from, its languages
    text_form.json        a model of a tokenised, lower-cased corpus (ted_hrlr): its form (nmt.text_form)
    truecase-model.xx     beside it, each word's usual case in the target language xx (nmt truecaser)
    truecase-pairs.xx     and the pairs of words with a case of their own ("United States")
    sentencepiece.json    an imported model's tokenizers: source.spm, target.spm, vocab.json
    checkpoints/          numbered checkpoints and `latest` (see nmt.checkpoint)

Every reader of a model directory goes through here, so a cut or hand-edited file is refused
the same way everywhere (naming the file and key) instead of being parsed loosely in each place.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

from .config import DecodeConfig, ExperimentConfig, load_config
from .files import atomic_write_text
from .text_form import TextForm
from .tokenizer import JOINT_FILE, SRC_FILE, TGT_FILE
from .truecaser import load_truecaser

RUN_CONFIG = "config.yaml"
MODEL_CONFIG = "model.json"
WEIGHTS = "model.safetensors"
METRICS = "metrics.jsonl"
CHECKPOINTS = "checkpoints"
LATEST = "latest"
# nmt's own tokenizers (joint, or one per side), then an imported model's SentencePiece files
TOKENIZER_FILES = (
    JOINT_FILE,
    SRC_FILE,
    TGT_FILE,
    "sentencepiece.json",
    "source.spm",
    "target.spm",
    "vocab.json",
    "target_vocab.json",
)
INIT_FROM = "init_from"  # a fine-tuning run: the model directory it started from (one line)
IMPORTED_FROM = "imported_from.json"  # an imported model: its format, source directory and languages
TEXT_FORM = "text_form.json"  # a model of a tokenised, lower-cased corpus: what typed text is turned into
TRUECASER = "truecase-model.{lang}"  # Moses' truecaser model of the target language (nmt.truecaser)
TRUECASE_PAIRS = "truecase-pairs.{lang}"  # and the word pairs with a case of their own ("United States")

log = logging.getLogger(__name__)


def read_run_config(model_dir: str | Path) -> ExperimentConfig | None:
    """The config a run saved, checked like any config and refused if cut short; None if there is none."""
    path = Path(model_dir) / RUN_CONFIG
    return load_config(path, complete=True) if path.exists() else None


def read_decode_config(model_dir: str | Path) -> DecodeConfig:
    """The decoding defaults a model was trained with; an imported model's are its origin's (the
    "decode" of imported_from.json); the library's defaults for a directory with neither."""
    config = read_run_config(model_dir)
    if config is not None:
        return config.decode
    origin = Path(model_dir) / IMPORTED_FROM
    if origin.is_file():
        try:
            decode = json.loads(origin.read_text(encoding="utf-8")).get("decode") or {}
            decode.setdefault("min_len", 0)  # imported before nmt read transformers' min_length (0)
            return DecodeConfig(**decode)
        except (ValueError, TypeError, AttributeError) as err:  # JSON, unknown keys, bad values
            raise ValueError(f"{origin}: not a readable decode section ({err})") from None
    return DecodeConfig()


def write_decode_settings(model_dir: str | Path, **fields: Any) -> Path:
    """Make `fields` (e.g. length_penalty=2.0) the model directory's decode settings, where
    `read_decode_config` reads them: config.yaml, an imported model's imported_from.json, or (a
    directory with neither) a new config.yaml of the library's defaults. Returns the file written."""
    model_dir = Path(model_dir)
    config = read_run_config(model_dir)
    origin = model_dir / IMPORTED_FROM
    if config is None and origin.is_file():
        dataclasses.replace(read_decode_config(model_dir), **fields)  # checks the file and the new values
        values = json.loads(origin.read_text(encoding="utf-8"))
        # only the fields given: the rest stays unset, to follow the library's defaults as before
        decode = {**(values.get("decode") or {}), **fields}
        atomic_write_text(origin, json.dumps({**values, "decode": decode}, indent=2) + "\n")
        return origin
    config = config or ExperimentConfig()
    config.decode = dataclasses.replace(config.decode, **fields)
    config.save(model_dir / RUN_CONFIG)
    return model_dir / RUN_CONFIG


def read_languages(model_dir: str | Path) -> tuple[str | None, str | None]:
    """(source, target) language codes of a model directory: its config's, or an imported model's
    origin's; None where it does not say."""
    model_dir = Path(model_dir)
    config = read_run_config(model_dir)
    if config is not None:
        directions = config.data.directions  # several, for a multilingual model: a language if they share it
        sources, targets = {d.src_lang for d in directions}, {d.tgt_lang for d in directions}
        return (sources.pop() if len(sources) == 1 else None), (targets.pop() if len(targets) == 1 else None)
    if (model_dir / IMPORTED_FROM).is_file():
        try:
            origin = json.loads((model_dir / IMPORTED_FROM).read_text(encoding="utf-8"))
        except ValueError as err:
            raise ValueError(f"{model_dir / IMPORTED_FROM}: not JSON ({err})") from None
        return origin.get("source_lang"), origin.get("target_lang")
    return None, None


def read_directions(model_dir: str | Path) -> list[tuple[str, str]]:
    """The (source, target) directions a model of nmt's own was trained for: data.pairs' for a
    multilingual model, else its one pair; [] for an imported model (read_languages says what it can)."""
    config = read_run_config(Path(model_dir))
    return [] if config is None else [(d.src_lang, d.tgt_lang) for d in config.data.directions]


def read_text_form(model_dir: str | Path, *, truecaser: bool = True, case_from_source: bool = True) -> TextForm | None:
    """The written form of the corpus a model was trained on, where it is not running text (a
    tokenised, lower-cased corpus such as ted_hrlr: its run wrote text_form.json); None for running text.
    truecaser: with the directory's truecaser, where it has one (nmt.truecaser); case_from_source:
    the output takes the source's capitals (nmt.text_form)."""
    path = Path(model_dir) / TEXT_FORM
    if not path.is_file():
        return None
    try:
        form = json.loads(path.read_text(encoding="utf-8"))
        form.pop("case_from_source", None)  # written by some versions: a reader's choice, not the corpus's
        for side in ("src_annotations", "tgt_annotations"):
            form[side] = tuple(form.get(side, ()))
        form = TextForm(**form, case_from_source=case_from_source)
    except (ValueError, TypeError) as err:  # JSON, unknown or missing keys
        raise ValueError(f"{path}: not a text form ({err})") from None
    path = Path(model_dir) / TRUECASER.format(lang=form.tgt_lang)
    if truecaser and form.lowercased and path.is_file():
        pairs = Path(model_dir) / TRUECASE_PAIRS.format(lang=form.tgt_lang)
        form = dataclasses.replace(form, truecaser=load_truecaser(path, pairs))
    return form


def text_form_files(model_dir: str | Path) -> list[str]:
    """The names of the files in `model_dir` that say how its text is written (text_form.json and
    its truecaser's): an export nmt reads again copies them, or its output would stay in corpus form."""
    model_dir = Path(model_dir)
    names = [TEXT_FORM, TRUECASER.format(lang="*"), TRUECASE_PAIRS.format(lang="*")]
    return sorted(p.name for name in names for p in model_dir.glob(name) if p.is_file())


def write_text_form(model_dir: str | Path, form: TextForm | None) -> None:
    """Record (or, for running text, remove) the form of the corpus a model is trained on."""
    path = Path(model_dir) / TEXT_FORM
    if form is None:
        path.unlink(missing_ok=True)
    else:
        atomic_write_text(path, json.dumps(form.to_dict(), indent=2) + "\n")


def read_metrics(model_dir: str | Path) -> list[dict[str, Any]]:
    """All records of a model directory's metrics log.

    A last line cut short (the process was killed while appending it) is skipped with a
    warning; a bad line anywhere else is an error naming the file and line.
    """
    path = Path(model_dir) / METRICS
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: train a model into {model_dir} first")
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not (isinstance(record, dict) and isinstance(record.get("step"), int)):
                raise ValueError("not a record with a step")
        except ValueError as err:
            if number == len(lines):  # no newline after it: a torn append
                log.warning("%s:%d: skipping a metrics record cut short (%s)", path, number, err)
                continue
            raise ValueError(f"{path}:{number}: not a metrics record ({err})") from None
        records.append(record)
    return records


def holds_training_run(model_dir: str | Path) -> bool:
    """True when `model_dir` has a run's records or checkpoints (a tokenizer alone does not count)."""
    model_dir = Path(model_dir)
    checkpoints = model_dir / CHECKPOINTS
    return (model_dir / METRICS).exists() or (checkpoints.is_dir() and any(checkpoints.glob("step_*")))


def already_holds_run(model_dir: str | Path) -> str:
    """Why a new run may not start in `model_dir`, which holds one (holds_training_run)."""
    return (
        f"{model_dir} already holds a training run: add --resume to continue it, "
        "or choose another --out (a tokenizer alone there is reused)"
    )


def stored_parameter_count(weights: str | Path) -> int:
    """Parameters in a safetensors weights file, from its header (no tensor is read): the size an
    engine that holds no PyTorch model (CTranslate2) reports for the model it runs."""
    from safetensors import safe_open  # noqa: PLC0415 - only where a count is asked for

    total = 0
    with safe_open(str(weights), framework="pt") as f:
        for name in f.keys():  # noqa: SIM118 - safe_open is not a mapping
            count = 1
            for size in f.get_slice(name).get_shape():
                count *= size
            total += count
    return total
