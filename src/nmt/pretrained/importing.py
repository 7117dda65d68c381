"""`nmt import`: a Marian model, in either of its formats, written as an nmt model directory.

    nmt import --from marian opus-mt-de-en/ --out models/opus-de-en     # Hugging Face layout (marian.py)
    nmt import --from marian opus-2020-02-26/ --out models/opus-de-en   # Marian's release (marian_npz.py)

Both readers check every file before anything is written, and the directory appears whole or
not at all.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ..checkpoint import save_model_dir
from ..files import staged_directory
from ..model_dir import IMPORTED_FROM
from ..sentencepiece_tokenizer import save_sentencepiece_tokenizers
from .marian import read_marian
from .marian_npz import is_marian_release, read_marian_release

log = logging.getLogger(__name__)


def import_marian(
    directory: str | Path, out_dir: str | Path, *, source_lang: str | None = None, target_lang: str | None = None
) -> Path:
    """Write the Marian model in `directory` as an nmt model directory `out_dir` (which must not exist):
    a Hugging Face MarianMTModel directory, or Marian's own release (decoder.yml, .npz, vocabulary .yml).
    source_lang, target_lang: the languages' codes, where the files do not name them (a release) or
    name them wrongly."""
    out_dir = Path(out_dir)
    if out_dir.exists():
        raise FileExistsError(f"--out {out_dir} already exists: choose a new directory")
    read = read_marian_release if is_marian_release(directory) else read_marian
    model, src_tok, tgt_tok, origin = read(directory)
    for key, given in (("source_lang", source_lang), ("target_lang", target_lang)):
        if given is not None:
            origin[key] = given.lower()  # as the server reads every code a request names
    if origin.get("source_lang") is None or origin.get("target_lang") is None:
        log.warning(
            "%s does not name its languages: give --source-lang and --target-lang (the server's LibreTranslate "
            "API needs them, and sentences are split by the source language's rules)",
            directory,
        )
    with staged_directory(out_dir) as staging:
        save_model_dir(model, staging)
        save_sentencepiece_tokenizers(src_tok, tgt_tok, staging)
        (staging / IMPORTED_FROM).write_text(json.dumps(origin, indent=2) + "\n", encoding="utf-8")
    log.info("imported %s into %s", directory, out_dir)
    return out_dir
