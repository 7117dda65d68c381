"""Harness: translation memory files (nmt.memory_files through TranslationMemory.load).

    python fuzz/fuzz_memory.py KIND [libFuzzer flags] [corpus folders or files]

KIND: tmx (the input as memory.tmx) or tsv (as memory.tsv, two columns).

Contract: the memory loads, or a ValueError of one line naming the file refuses it; nothing else is
raised. A loaded memory answers a lookup of its first segments, exactly and fuzzily (the placeholders
of the text asked for carried into the match), without raising. Every other input is read with the
languages named (de, en), the rest with the file's own. The bounds are contract.py's.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["nmt.memory", "nmt.memory_files", "nmt.placeholders"]):
    from nmt.memory import TranslationMemory

from contract import LANG, TARGET, fuzz, refused, scratch  # noqa: E402

KINDS = ("tmx", "tsv")
FOLDER = scratch()


def checker(kind: str):
    """The check of one input as a memory file of `kind` (see the module's contract)."""
    path = FOLDER / f"memory.{kind}"

    def check(data: bytes) -> bool:
        path.write_bytes(data)
        languages = {"source": LANG, "target": TARGET} if len(data) & 1 else {}
        try:
            memory = TranslationMemory.load(path, **languages)
        except ValueError as err:
            refused(err, path.name)
            return True
        for source in memory.sources[:20]:
            memory.lookup(source)
            memory.lookup(f"{source} %s")  # no exact match: a fuzzy one, a placeholder to carry
        return False

    return check


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in KINDS:
        sys.exit(f"usage: {sys.argv[0]} KIND [libFuzzer flags] [corpus...]; KIND one of {' '.join(KINDS)}")
    fuzz(checker(sys.argv.pop(1)))


if __name__ == "__main__":
    main()
