"""`--engine auto`: the engine that runs a model directory fastest here, and why, in one line.

The rule follows what was measured side by side (docs/results.md, "How fast"): on CPU,
CTranslate2 translated the same weights 1.0-1.5x faster than nmt's own engine in fp32 and int8,
with the same outputs up to float rounding. So auto picks CTranslate2 where it can run the model:

- nmt's engine on a GPU (CTranslate2's wheel links one CUDA version; nmt's runs on the GPU torch
  runs on), for bf16 (CTranslate2 has none on CPU), and when ctranslate2 is not installed;
- nmt's engine for a model CTranslate2 cannot express (an activation or layer order it lacks);
- CTranslate2 otherwise, on an export cached in the model directory (`ctranslate2/`), made at the
  first load and made again when the weights or the shortlist change.

What only nmt's engine does (attention weights for alignments and plots, sampling, glossaries) is
asked for by the caller, which then names the torch engine (the CLI does so for --alignments,
--sample and --glossary).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from ..files import atomic_write_text
from ..model_dir import MODEL_CONFIG, WEIGHTS
from .export_ctranslate2 import ACTIVATIONS, export_ctranslate2, is_ctranslate2_dir
from .shortlist import SHORTLIST

log = logging.getLogger(__name__)

EXPORT_CACHE = "ctranslate2"  # the folder, in a model directory, of auto's CTranslate2 export
CACHE_KEY = "made_from.json"  # in it: the checksums of the files it was made from


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


def choose_engine(model_dir: str | Path, device: str, precision: str | None) -> EngineChoice:
    """The engine `--engine auto` runs `model_dir` on, on `device` ("cpu", "cuda:0", ...) in `precision`."""
    model_dir = Path(model_dir)
    if is_ctranslate2_dir(model_dir) and not (model_dir / WEIGHTS).exists():
        return EngineChoice("ctranslate2", "the directory holds a CTranslate2 export")
    if device.startswith("cuda"):
        return EngineChoice("torch", "on a GPU nmt's engine runs where torch runs")
    if precision == "bf16":
        return EngineChoice("torch", "bf16 runs on nmt's engine only")
    if not ctranslate2_installed():
        return EngineChoice("torch", "ctranslate2 is not installed; pip install ctranslate2 for the faster engine")
    problem = unexportable(model_dir)
    if problem:
        return EngineChoice("torch", f"CTranslate2 cannot run this model: {problem}")
    return EngineChoice("ctranslate2", "measured faster than nmt's engine on CPU at the same output")


def unexportable(model_dir: Path) -> str | None:
    """Why CTranslate2 cannot express the model in `model_dir` (from its model.json), or None."""
    try:
        config = json.loads((model_dir / MODEL_CONFIG).read_text())
    except (OSError, ValueError) as err:
        return f"{model_dir / MODEL_CONFIG} is unreadable ({err})"
    activation, norm = config.get("activation", "relu"), config.get("norm_position", "post")
    if activation not in ACTIVATIONS:
        return f"model.activation={activation!r}"
    if norm not in ("post", "pre"):
        return f"model.norm_position={norm!r}"
    return None


def sources_key(model_dir: Path, weights: Path) -> dict[str, str]:
    """sha256 of each file an export is made from: the weights, the model config, the shortlist."""
    key = {}
    for path in (weights, model_dir / MODEL_CONFIG, model_dir / SHORTLIST):
        if path.is_file():
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            key[path.name] = digest.hexdigest()
    return key


def cached_export(model_dir: str | Path, *, shortlist: bool = True) -> Path:
    """The model directory's CTranslate2 export, made (again) if missing or made from other files.

    shortlist False: an export without the vocabulary map will do (one made with it serves too).
    Written whole or not at all (two processes making it at once each write their own, and the
    last rename wins: both are the same export). Where the model directory is read-only, OSError.
    """
    model_dir = Path(model_dir)
    out = model_dir / EXPORT_CACHE
    files = sources_key(model_dir, model_dir / WEIGHTS)
    try:
        made = json.loads((out / CACHE_KEY).read_text())
        if is_ctranslate2_dir(out) and made["files"] == files and (made["shortlist"] or not shortlist):
            return out
    except (OSError, ValueError, KeyError, TypeError):
        pass
    log.info("exporting %s to CTranslate2 once, into %s (made again when the weights change)", model_dir, out)
    if out.exists() and not is_ctranslate2_dir(out):
        raise FileExistsError(f"{out} exists and is not a CTranslate2 export: move it, or use --engine torch")
    export_ctranslate2(model_dir, out, force=True, shortlist=shortlist)
    made = {"files": files, "shortlist": shortlist}
    atomic_write_text(out / CACHE_KEY, json.dumps(made, indent=1) + "\n")  # after the export is whole
    return out


def export_status(model_dir: str | Path) -> str:
    """Whether the model directory's cached CTranslate2 export is there and made from its current files."""
    model_dir = Path(model_dir)
    out = model_dir / EXPORT_CACHE
    if not is_ctranslate2_dir(out):
        return "not made yet (auto makes it at the first CPU load)"
    try:
        current = json.loads((out / CACHE_KEY).read_text())["files"] == sources_key(model_dir, model_dir / WEIGHTS)
    except (OSError, ValueError, KeyError, TypeError):
        current = False
    return f"{out}, made from the current weights" if current else f"{out}, stale (made again at the next load)"
