"""Local mirrors: where a corpus's files may lie in one, and verified copies of files kept there one by one.

A local mirror (the ``mirror`` argument or ``$NMT_MIRROR``, a directory) may
hold one corpus, laid out as the registry names its files, or several, each
in a folder named after its corpus (``<mirror>/multi30k/data/task1/raw/...``,
``<mirror>/ted_hrlr/pt_to_en/pt.train.gz``). ``find`` looks in both places,
the first one first, so a mirror of one corpus keeps working and one
``NMT_MIRROR`` can serve every corpus.

An archive's members may lie in a mirror as files of their own (a
``LooseFile``: a repack of the archive's folder, plain or gzip-compressed
file by file). The archive's checksum says nothing about those, so each is
checked against the sha256 of its uncompressed text, pinned in the registry,
as it is copied out (``copy_verified``): a repack that compresses them
differently, or not at all, passes; a changed line does not.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .download import CorpusDownloadError, is_url

__all__ = ["LooseFile", "local_mirror", "candidates", "find", "find_loose", "copy_verified"]

_CHUNK_BYTES = 1 << 13  # small: a damaged .gz loses the text of the read that fails


@dataclass(frozen=True)
class LooseFile:
    """An archive member kept as a file of its own in a mirror: its path there and its uncompressed sha256."""

    relpath: str  # below the mirror or its corpus folder, without ".gz": e.g. "pt_to_en/pt.train"
    sha256: str  # of the text itself, however the mirror compresses it

    def __post_init__(self) -> None:
        path = Path(self.relpath)
        if path.is_absolute() or ".." in path.parts:  # a registry entry must stay inside the mirror
            raise ValueError(f"a mirror file's path must be relative and stay below the mirror, got {self.relpath!r}")


def local_mirror(mirror: str | None) -> Path | None:
    """The mirror as a local directory, or None when there is none or it is a URL."""
    return Path(mirror).expanduser() if mirror is not None and not is_url(mirror) else None


def candidates(root: Path, corpus: str, relpath: str) -> tuple[Path, Path]:
    """Where ``relpath`` of ``corpus`` may lie in the mirror ``root``, in the order they are tried."""
    return root / relpath, root / corpus / relpath


def find(root: Path, corpus: str, relpath: str) -> Path | None:
    """The first of ``candidates`` that is a file, or None."""
    return next((path for path in candidates(root, corpus, relpath) if path.is_file()), None)


def find_loose(root: Path, corpus: str, file: LooseFile) -> Path | None:
    """The mirror's copy of ``file``, compressed (``.gz``) or plain, in either place (the top first); or None.

    Both a ``.gz`` and a plain copy in one place is a CorpusDownloadError: which one is meant cannot
    be guessed, and a silent choice could hide a damaged copy behind a good one.
    """
    for base in candidates(root, corpus, file.relpath):
        found = [path for path in (base.with_name(base.name + ".gz"), base) if path.is_file()]
        if len(found) == 2:
            raise CorpusDownloadError(f"the mirror holds both {found[0]} and {found[1]}: keep one of them")
        if found:
            return found[0]
    return None


def copy_verified(path: Path, target: Path, sha256: str, *, root: Path) -> None:
    """Write the text of the mirror file ``path`` (decompressed if ``.gz``) to ``target``, checking its sha256.

    A truncated or damaged ``.gz`` is corrupt like a changed file: the
    message gives the sha256 of the text read before the fault. Every failure is a
    one-line ``CorpusDownloadError`` naming ``path``; ``target`` is then
    incomplete, and the caller (extracting into a temporary folder) drops it.
    """
    digest = hashlib.sha256()
    problem, read = "", 0
    try:
        source = _open(path)
    except OSError as exc:
        raise CorpusDownloadError(f"cannot read {path} in the mirror {root}: {exc.strerror or exc}") from None
    with source, open(target, "wb") as out:  # an error writing target is the local disk's: the caller names it
        while True:
            try:
                chunk = source.read(_CHUNK_BYTES)
            except (EOFError, zlib.error, gzip.BadGzipFile) as exc:  # truncated or damaged compressed data
                problem = f" ({exc}, after {read} bytes of text)"
                break
            except OSError as exc:
                raise CorpusDownloadError(f"cannot read {path} in the mirror {root}: {exc.strerror or exc}") from None
            if not chunk:
                break
            digest.update(chunk)
            out.write(chunk)
            read += len(chunk)
    got = digest.hexdigest()
    if problem or got != sha256:
        raise CorpusDownloadError(
            f"{path} in the mirror {root} is corrupt{problem}: sha256 of its text expected {sha256}, got {got}; "
            "replace it with a fresh copy"
        )


def _open(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")
