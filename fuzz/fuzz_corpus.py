"""Harness: the corpus readers of nmt.data.corpus, each over a file holding the input.

    python fuzz/fuzz_corpus.py KIND [libFuzzer flags] [corpus folders or files]

KIND: plain (read_lines, count_lines, and read_parallel over the input cut in two at its first NUL
byte), gz (the input as a .gz file through read_lines, count_lines, read_tsv and read_jsonl), tsv
(read_tsv), jsonl (read_jsonl).

Contract: each reader reads the file to its end or raises a CorpusError naming the file (a
ValueError: the CLI's exit 2, "input the user can fix"); nothing else is raised. count_lines and
read_lines agree on the number of lines of a file they both read. The bounds are contract.py's.
"""

from __future__ import annotations

import gzip
import sys

import atheris

with atheris.instrument_imports(include=["nmt.data.corpus"]):
    from nmt.data.corpus import CorpusError, count_lines, read_jsonl, read_lines, read_parallel, read_tsv

from contract import Broken, fuzz, refused, scratch  # noqa: E402

KINDS = ("plain", "gz", "tsv", "jsonl")
FOLDER = scratch()


def agree(path) -> None:
    """count_lines and read_lines count the same lines (the progress bars and samplers rely on it)."""
    counted, read = count_lines(path), sum(1 for _ in read_lines(path))
    if counted != read:
        raise Broken(f"count_lines says {counted} lines, read_lines reads {read}")


def checker(kind: str):
    """The check of one input as a corpus file of `kind` (see the module's contract)."""
    path = FOLDER / {"plain": "corpus.txt", "gz": "corpus.txt.gz", "tsv": "corpus.tsv", "jsonl": "corpus.jsonl"}[kind]
    other = FOLDER / "corpus.en"

    def check(data: bytes) -> bool:
        if kind == "plain":
            source, _, target = data.partition(b"\0")
            path.write_bytes(source)
            other.write_bytes(target)
        else:
            path.write_bytes(data)
        try:
            if kind in ("plain", "gz"):
                agree(path)
            if kind == "plain":
                for _ in read_parallel(path, other):
                    pass
            if kind in ("tsv", "gz"):
                for _ in read_tsv(path):
                    pass
            if kind in ("jsonl", "gz"):
                for _ in read_jsonl(path):
                    pass
        except CorpusError as err:
            # read_parallel names whichever of its two files is at fault
            refused(err, other.name if kind == "plain" and other.name in str(err) else path.name)
            return True
        return False

    return check


def gz_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    """Half of the time the compressed bytes mutated (the gzip reader's paths); otherwise the text
    inside mutated and compressed again, so that the readers behind the decompression are fuzzed."""
    if seed % 2 == 0:
        return atheris.Mutate(data, max_size)
    try:
        text = gzip.decompress(data)
    except Exception:  # noqa: BLE001 - anything that does not decompress is mutated as bytes
        return atheris.Mutate(data, max_size)
    out = gzip.compress(atheris.Mutate(text, max(len(text) * 2, 64)), mtime=0)
    return out if len(out) <= max_size else atheris.Mutate(data, max_size)


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in KINDS:
        sys.exit(f"usage: {sys.argv[0]} KIND [libFuzzer flags] [corpus...]; KIND one of {' '.join(KINDS)}")
    kind = sys.argv.pop(1)
    fuzz(checker(kind), mutator=gz_mutator if kind == "gz" else None)


if __name__ == "__main__":
    main()
