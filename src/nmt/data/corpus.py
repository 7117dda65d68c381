"""Reading and validating parallel corpora.

Three layouts are supported, all plain or gzip-compressed (by the ".gz" suffix):

* two aligned files, one sentence a line (``read_parallel``): line N of the
  source file translates line N of the target file;
* one file of ``source<TAB>target`` lines (``read_tsv``);
* one file of JSON objects, one a line (``read_jsonl``).

Every reader streams: nothing is loaded whole, so a corpus of any size costs
the memory of one line. Every problem is reported as a ``CorpusError`` that
names the file and the 1-based line at fault, and nothing is dropped silently:
pairs skipped because a side is empty are counted in a ``ReadStats``.

Lines are split on "\\n" only (a "\\r\\n" ending is accepted too), never on a
lone "\\r" or on Unicode line separators, so that "line N" means the same
thing here as in ``wc -l``, ``sed -n Np`` and every other tool.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import IO, TextIO

__all__ = [
    "CorpusError",
    "ReadStats",
    "open_text",
    "read_lines",
    "read_parallel",
    "read_tsv",
    "read_jsonl",
]

_GZIP_MAGIC = b"\x1f\x8b"
_BOM = "\ufeff"


class CorpusError(ValueError):
    """A problem in a corpus file, with the file and (1-based) line at fault in the message.

    ``str(error)`` reads ``"path:line: message"`` (the form editors and
    compilers use, so the location is clickable); ``path``, ``line`` and
    ``reason`` are kept as attributes for programs.
    """

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.reason = message
        self.path = None if path is None else str(path)
        self.line = line
        location = ""
        if self.path is not None:
            location = self.path + (f":{line}" if line is not None else "") + ": "
        super().__init__(location + message)


@dataclass
class ReadStats:
    """What a reader yielded and what it skipped; pass one in to find out afterwards."""

    pairs: int = 0  # pairs yielded
    empty: int = 0  # pairs skipped because a side is empty (after strip)

    def report(self) -> str:
        """One human-readable line, e.g. ``"read 29000 pairs; skipped 0 empty pairs"``."""
        return f"read {self.pairs} pairs; skipped {self.empty} empty pairs"


def open_text(path: str | Path) -> TextIO:
    """Open a plain or gzip-compressed (".gz") UTF-8 text file for reading.

    Decoding is strict: invalid UTF-8 raises ``UnicodeDecodeError`` rather
    than being replaced. Lines are split on "\\n" only and keep their ending
    (strip "\\n" or "\\r\\n" yourself). Decoding happens in blocks, so the
    error cannot name a line: use ``read_lines`` when you want that.
    """
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="strict", newline="\n")
    return open(path, encoding="utf-8", errors="strict", newline="\n")


def read_lines(path: str | Path) -> Iterator[str]:
    """Yield the lines of a plain or ".gz" UTF-8 file without their "\\n"/"\\r\\n" ending.

    Unlike ``open_text``, invalid UTF-8 raises a ``CorpusError`` naming the
    line. Whitespace inside the line is kept as it is.
    """
    for number, raw in enumerate(_raw_lines(path), start=1):
        yield _decode(raw, path, number)


def count_lines(path: str | Path) -> int:
    """The number of lines of a plain or ".gz" file (a last line without "\\n" counts), read in 1 MiB blocks.

    For progress bars and sampling: about a second per GB, against minutes to read pairs as text.
    A damaged gzip stream is a CorpusError naming the file.
    """
    count, last = 0, b"\n"
    with _open_binary(Path(path)) as file:
        try:
            while block := file.read(1 << 20):
                count += block.count(b"\n")
                last = block[-1:]
        except DECOMPRESSION_ERRORS as exc:
            raise decompression_error(exc, path) from exc
    return count + (last != b"\n")


def read_parallel(
    src_path: str | Path, tgt_path: str | Path, stats: ReadStats | None = None
) -> Iterator[tuple[str, str]]:
    """Yield ``(source, target)`` pairs from two aligned one-sentence-a-line files.

    Both files are read line by line in step. Sides are stripped of
    surrounding whitespace; a pair with an empty side is skipped and counted
    in ``stats.empty``. If one file ends before the other, a ``CorpusError``
    names both files and both line counts.
    """
    stats = stats if stats is not None else ReadStats()
    src_lines, tgt_lines = _raw_lines(src_path), _raw_lines(tgt_path)
    for number, (src_raw, tgt_raw) in enumerate(zip_longest(src_lines, tgt_lines), start=1):
        if src_raw is None or tgt_raw is None:
            # zip_longest has already taken line `number` from the longer
            # file; count what is left so the message gives its real length.
            longer = tgt_lines if src_raw is None else src_lines
            longer_count = number + sum(1 for _ in longer)
            src_count = number - 1 if src_raw is None else longer_count
            tgt_count = number - 1 if tgt_raw is None else longer_count
            raise CorpusError(
                f"parallel files differ in length: {src_path} has {src_count} lines, {tgt_path} has {tgt_count} lines"
            )
        src = _decode(src_raw, src_path, number).strip()
        tgt = _decode(tgt_raw, tgt_path, number).strip()
        if _keep(src, tgt, stats):
            yield src, tgt


def read_tsv(path: str | Path, stats: ReadStats | None = None) -> Iterator[tuple[str, str]]:
    """Yield ``(source, target)`` pairs from a file of ``source<TAB>target`` lines.

    Every line must hold exactly one tab (a blank line has none, so it is an
    error too: a TSV file has no reason to contain one). Sides are stripped;
    a pair with an empty side is skipped and counted in ``stats.empty``.
    """
    stats = stats if stats is not None else ReadStats()
    for number, raw in enumerate(_raw_lines(path), start=1):
        # Split before stripping: strip() would eat a tab at either end and
        # turn "src<TAB>" (an empty target) into a line with no tab at all.
        fields = _decode(raw, path, number).split("\t")
        if len(fields) != 2:
            found = "no tab" if len(fields) == 1 else f"{len(fields) - 1} tabs"
            raise CorpusError(f"expected 'source<TAB>target', found {found}", path, number)
        src, tgt = fields[0].strip(), fields[1].strip()
        if _keep(src, tgt, stats):
            yield src, tgt


def read_jsonl(
    path: str | Path,
    src_key: str = "src",
    tgt_key: str = "tgt",
    stats: ReadStats | None = None,
) -> Iterator[tuple[str, str]]:
    """Yield ``(obj[src_key], obj[tgt_key])`` from a file of JSON objects, one a line.

    Blank lines are skipped (JSON Lines allows a trailing one). Every other
    line must be an object holding both keys with string values; other keys
    are ignored. Sides are stripped; a pair with an empty side is skipped and
    counted in ``stats.empty``.
    """
    stats = stats if stats is not None else ReadStats()
    for number, raw in enumerate(_raw_lines(path), start=1):
        line = _decode(raw, path, number)
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"invalid JSON: {exc.msg} (column {exc.colno})", path, number) from exc
        if not isinstance(obj, dict):
            raise CorpusError(f"expected a JSON object, found {type(obj).__name__}", path, number)
        sides = []
        for key in (src_key, tgt_key):
            if key not in obj:
                raise CorpusError(f"missing key {key!r} (keys: {sorted(obj)})", path, number)
            if not isinstance(obj[key], str):
                found = type(obj[key]).__name__
                raise CorpusError(f"key {key!r} must be a string, found {found}", path, number)
            sides.append(obj[key].strip())
        if _keep(sides[0], sides[1], stats):
            yield sides[0], sides[1]


# --- helpers -----------------------------------------------------------------


def _keep(src: str, tgt: str, stats: ReadStats) -> bool:
    """Count the pair in ``stats``; False when a side is empty and it must be skipped."""
    if not src or not tgt:
        stats.empty += 1
        return False
    stats.pairs += 1
    return True


DECOMPRESSION_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


def decompression_error(exc: Exception, path: str | Path, line: int | None = None) -> CorpusError:
    """What a damaged ".gz" file is, in words, as a CorpusError naming it (and the line it broke in)."""
    if isinstance(exc, gzip.BadGzipFile):
        reason = f"not a gzip file, though its name ends in .gz ({exc}): compress it, or rename it without .gz"
    elif isinstance(exc, EOFError):
        reason = "the gzip stream is cut short (an interrupted download or copy?): fetch or compress it again"
    else:
        reason = f"corrupt gzip data (zlib: {exc}): fetch or compress it again"
    return CorpusError(reason, path, line)


def _open_binary(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def _raw_lines(path: str | Path) -> Iterator[bytes]:
    """Yield the undecoded lines of a file, split on b"\\n" only.

    Decoding is left to the caller, one line at a time, which is what lets a
    UTF-8 error name its line. A damaged gzip stream is reported with the
    line it broke in.
    """
    path = Path(path)
    count = 0
    with _open_binary(path) as file:
        try:
            for raw in file:
                count += 1
                yield raw
        except DECOMPRESSION_ERRORS as exc:
            raise decompression_error(exc, path, count + 1) from exc


def _decode(raw: bytes, path: str | Path, number: int) -> str:
    """Decode one line as strict UTF-8, removing its "\\n" or "\\r\\n" ending."""
    if raw.endswith(b"\n"):
        raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        hint = ""
        if number == 1 and raw.startswith(_GZIP_MAGIC):
            hint = " (the file looks gzip-compressed: name it *.gz)"
        raise CorpusError(f"invalid UTF-8 at byte {exc.start} of the line: {exc.reason}{hint}", path, number) from exc
    # A byte-order mark is valid UTF-8 but not text; left in, it would glue
    # itself to the first word of the corpus.
    if number == 1 and text.startswith(_BOM):
        text = text[1:]
    return text
