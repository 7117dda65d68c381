"""Every harness by name: the script that runs it and its argument. fuzz/run, fuzz/make_seeds.py and
tests/test_fuzz.py read this list; a new reader's harness is added here (and its seeds in make_seeds).

Seeds (committed) are in fuzz/seeds/NAME/, the corpus a run grows (git-ignored) in fuzz/corpus/NAME/.
"""

from __future__ import annotations

import sys
from pathlib import Path

FUZZ_DIR = Path(__file__).resolve().parent
DOCUMENT_FORMATS = ("docx", "pptx", "xlsx", "odt", "odp", "ods", "epub", "srt", "vtt", "md", "html")
LOCALISATION_FORMATS = ("po", "xlf", "json", "arb", "yml", "xml")

HARNESSES: dict[str, tuple[str, ...]] = {
    **{kind: ("fuzz_document.py", kind) for kind in (*DOCUMENT_FORMATS, *LOCALISATION_FORMATS)},
    "masked_text": ("fuzz_masked_text.py",),
    "html_page": ("fuzz_html_page.py",),
    "paragraphs": ("fuzz_paragraphs.py",),
    **{f"corpus_{kind}": ("fuzz_corpus.py", kind) for kind in ("plain", "gz", "tsv", "jsonl")},
    "config": ("fuzz_config.py",),
    "memory_tmx": ("fuzz_memory.py", "tmx"),
    "memory_tsv": ("fuzz_memory.py", "tsv"),
    "text_form": ("fuzz_text_form.py",),
    "tokenizer": ("fuzz_tokenizer.py",),
    "masked_nodes": ("fuzz_masked_nodes.py",),
}


def command(name: str) -> list[str]:
    """The command that runs harness `name` (libFuzzer's flags and corpus folders go after it)."""
    script, *args = HARNESSES[name]
    return [sys.executable, str(FUZZ_DIR / script), *args]


def seeds(name: str) -> Path:
    return FUZZ_DIR / "seeds" / name


def corpus(name: str) -> Path:
    return FUZZ_DIR / "corpus" / name
