"""`--engine auto`: the engine that runs a model directory fastest here, and why, in one line.

The rule follows what was measured side by side (docs/results.md, "How fast"): on CPU,
CTranslate2 translated the same weights 1.0-1.5x faster than nmt's own engine in fp32 and int8,
with the same outputs up to float rounding. So auto picks CTranslate2 where it can run the model:

- nmt's engine on a GPU (CTranslate2's wheel links one CUDA version; nmt's runs on the GPU torch
  runs on), for bf16 (CTranslate2 has none on CPU), and when ctranslate2 is not installed;
- nmt's engine for a model CTranslate2 cannot express (an activation or layer order it lacks);
- nmt's engine for a model whose search stops by transformers' rule (decode.early_stopping false),
  which CTranslate2's beam search does not have (a request for it is refused there);
- nmt's engine for a weights file other than the directory's (`--weights`), which CTranslate2
  would need converted at every run, and for a model imported from Marian: since large models run
  as one worker (nmt.inference.plan.WorkerPolicy) the two engines were within 10% on OPUS-MT's
  shape in fp32 (docs/results.md), and an
  imported model searches with transformers' stopping rule (decode.early_stopping false), which
  CTranslate2's beam search does not have, so nmt's engine gives the original's outputs;
- CTranslate2 otherwise, on an export cached in the model directory (`ctranslate2/`), made at the
  first load and made again when the directory's files (weights, model.json, tokenizers,
  shortlist), nmt's exporter or the installed CTranslate2 change; a change of the search settings
  alone (config.yaml, imported_from.json) is copied into it.

What only nmt's engine does (every layer's attention for plots, sampling, glossaries) is asked for
by the caller, which then names the torch engine (the CLI does so for --sample and --glossary).
Word alignments, and so HTML's markup placement, come from either: the export returns the attention
they read.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from ..files import atomic_write_text, exclusive, sha256_of
from ..model import ModelConfig
from ..model_dir import IMPORTED_FROM, METRICS, MODEL_CONFIG, RUN_CONFIG, WEIGHTS
from .export_ctranslate2 import EXPORT_FORMAT, check_exportable, export_ctranslate2, is_ctranslate2_dir
from .shortlist import SHORTLIST, VOCABULARY_MAP

log = logging.getLogger(__name__)

EXPORT_CACHE = "ctranslate2"  # the folder, in a model directory, of auto's CTranslate2 export
CACHE_KEY = "made_from.json"  # in it: the checksums of the files it was made from
LOCK = ".ctranslate2.lock"  # beside it: held while the export is checked and made (removed after)
# The search settings (decode section, an imported model's origin): read from the model directory at
# every load, and copied into the export only for its own use; a change to them (`nmt tune-length-penalty
# --write`, `nmt tune-precision --write`, `nmt distill`) is copied over, the weights not exported again.
SETTINGS_FILES = (RUN_CONFIG, IMPORTED_FROM)


@dataclass(frozen=True)
class EngineChoice:
    """Which engine auto runs a model directory on, and why."""

    engine: str  # "torch" or "ctranslate2"
    reason: str

    def line(self) -> str:
        name = {"torch": "nmt's engine", "ctranslate2": "CTranslate2"}[self.engine]
        return f"engine auto: {name} ({self.reason})"


def ctranslate2_installed() -> bool:
    try:
        import ctranslate2  # noqa: F401, PLC0415 - an optional extra
    except ImportError:
        return False
    return True


def choose_engine(
    model_dir: str | Path,
    device: str,
    precision: str | None,
    weights: str | Path | None = None,
    *,
    transformers_stopping: bool = False,
) -> EngineChoice:
    """The engine `--engine auto` runs `model_dir` on, on `device` ("cpu", "cuda:0", ...) in `precision`
    (and with a weights file other than the directory's, `weights`); transformers_stopping: the
    model's beam search stops by transformers' rule (decode.early_stopping false), which only nmt's
    engine has (CTranslate2's refuses it)."""
    model_dir = Path(model_dir)
    if is_ctranslate2_dir(model_dir) and not (model_dir / WEIGHTS).exists():
        return EngineChoice("ctranslate2", "the directory holds a CTranslate2 export")
    if other_weights(model_dir, weights) is not None:
        return EngineChoice("torch", "--weights: nmt's engine reads the file as it is, CTranslate2 would convert it")
    if device.startswith("cuda"):
        return EngineChoice("torch", "on a GPU nmt's engine runs where torch runs")
    if precision == "bf16":
        return EngineChoice("torch", "bf16 runs on nmt's engine only")
    if not ctranslate2_installed():
        return EngineChoice("torch", "ctranslate2 is not installed; pip install ctranslate2 for the faster engine")
    problem = unexportable(model_dir)
    if problem:
        return EngineChoice("torch", f"CTranslate2 cannot run this model: {problem}")
    if (model_dir / IMPORTED_FROM).is_file():
        # Within 10% of CTranslate2 on OPUS-MT's shape, and only nmt's engine has the stopping rule
        # imported models search with (docs/results.md, imported Marian models).
        return EngineChoice(
            "torch", "an imported Marian model: nmt's engine keeps transformers' stopping rule, within 10% in fp32"
        )
    if transformers_stopping:
        return EngineChoice("torch", "decode.early_stopping false: only nmt's engine has transformers' stopping rule")
    return EngineChoice("ctranslate2", "measured faster than nmt's engine on CPU at the same output")


def other_weights(model_dir: Path, weights: str | Path | None) -> Path | None:
    """`weights` unless it is the directory's own weights file (whose export the directory keeps)."""
    if weights is None or Path(weights).resolve() == (Path(model_dir) / WEIGHTS).resolve():
        return None
    return Path(weights)


def unexportable(model_dir: Path) -> str | None:
    """Why CTranslate2 cannot express the model in `model_dir` (from its model.json), or None."""
    try:
        check_exportable(ModelConfig.load(model_dir / MODEL_CONFIG))
    except (OSError, ValueError) as err:
        return str(err)
    return None


def sources_key(model_dir: Path, known: dict[str, dict] | None = None) -> dict[str, dict]:
    """Size, modification time and sha256 of each file an export is made from: the model directory's
    own files (weights, model.json, tokenizers, shortlist), not its metrics, other weights files or
    search settings (SETTINGS_FILES).

    A file whose size and time equal those in `known` keeps its known checksum without being read
    again (a 30-300 MB weights file would cost seconds at every load).
    """
    known = known or {}
    key = {}
    for path in sorted(model_dir.iterdir()):
        skipped = path.suffix == ".safetensors" and path.name not in (WEIGHTS, SHORTLIST)
        skipped = skipped or path.name in (METRICS, *SETTINGS_FILES)
        if not path.is_file() or path.name.startswith(".") or skipped:
            continue
        stat = path.stat()
        seen = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        before = known.get(path.name, {})
        if {k: before.get(k) for k in seen} == seen and "sha256" in before:
            key[path.name] = {**seen, "sha256": before["sha256"]}
            continue
        key[path.name] = {**seen, "sha256": sha256_of(path)}
    return key


def versions() -> dict[str, str]:
    """What else an export depends on: nmt's exporter and the CTranslate2 that reads it."""
    import ctranslate2  # noqa: PLC0415 - an optional extra, installed where auto exports

    return {"exporter": str(EXPORT_FORMAT), "ctranslate2": ctranslate2.__version__}


def read_made_from(out: Path) -> dict:
    try:
        made = json.loads((out / CACHE_KEY).read_text())
        return made if isinstance(made, dict) else {}
    except (OSError, ValueError):
        return {}


def is_current(out: Path, model_dir: Path, shortlist: bool) -> bool:
    """Whether `out` is an export of `model_dir`'s present files by this exporter and CTranslate2
    (with the vocabulary map, if `shortlist` asks for it)."""
    made = read_made_from(out)
    files = made.get("files") if isinstance(made.get("files"), dict) else {}
    checksums = {name: f.get("sha256") for name, f in files.items() if isinstance(f, dict)}
    now = {name: f["sha256"] for name, f in sources_key(model_dir, files).items()}
    return (
        is_ctranslate2_dir(out)
        and checksums == now
        and made.get("versions") == versions()
        and (made.get("shortlist") is True or not shortlist)
    )


def cached_export(model_dir: str | Path, *, shortlist: bool = True) -> Path:
    """The model directory's CTranslate2 export, made (again) if missing or made from other files.

    shortlist False: an export without the vocabulary map will do (one made with it serves too).
    Written whole or not at all, its record of what it was made from inside it. Where the model
    directory is read-only, PermissionError or OSError(EROFS).
    """
    model_dir = Path(model_dir)
    out = model_dir / EXPORT_CACHE
    with exclusive(model_dir / LOCK, waiting=f"waiting for another process to export {model_dir} to CTranslate2"):
        if is_current(out, model_dir, shortlist):
            copy_settings(model_dir, out)
            return out
        if out.exists() and not is_ctranslate2_dir(out):
            raise FileExistsError(f"{out} exists and is not a CTranslate2 export: move it, or use --engine torch")
        log.info("exporting %s to CTranslate2 once, into %s (made again when its files change)", model_dir, out)
        made = {"files": sources_key(model_dir), "versions": versions(), "shortlist": shortlist}
        export_ctranslate2(
            model_dir, out, force=True, shortlist=shortlist, extra_files={CACHE_KEY: json.dumps(made, indent=1)}
        )
    return out


def copy_settings(model_dir: Path, out: Path) -> None:
    """Bring the export's copies of the search settings up to the model directory's (see SETTINGS_FILES)."""
    for name in SETTINGS_FILES:
        source, copy = model_dir / name, out / name
        if not source.is_file():
            copy.unlink(missing_ok=True)
        elif not copy.is_file() or copy.read_bytes() != source.read_bytes():
            atomic_write_text(copy, source.read_text(encoding="utf-8"))


def export_status(model_dir: str | Path) -> str:
    """Whether the model directory's cached CTranslate2 export is there and made from its current files."""
    model_dir = Path(model_dir)
    out = model_dir / EXPORT_CACHE
    if not is_ctranslate2_dir(out):
        return "not made yet (auto makes it at the first CPU load)"
    if not is_current(out, model_dir, shortlist=False):
        return f"{out}, stale (made again at the next load)"
    with_map = "with" if (out / VOCABULARY_MAP).is_file() else "without"
    return f"{out}, made from the current files, {with_map} the shortlist's vocabulary map"
