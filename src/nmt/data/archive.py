"""Corpus archives (.tar.gz, .tgz): fetched from the first address that answers, verified, read member by member.

A ``NamedArchive`` is one file with one or more addresses, tried in order
after the mirror (the ``mirror`` argument or ``$NMT_MIRROR``; the archive
lies in it under its file name: a local directory is used in place, and may
hold it directly or in a folder named after the corpus, as the cache does;
a URL is downloaded from). Every download is checked against the
registered size and sha256, resumes after an interruption and holds the
archive's lock (see ``download.py``); a failure at one address, a wrong
checksum included, moves on to the next, and only when all have failed is
there an error, one line naming every address and what went wrong there.

Some archives have no published checksum (IWSLT14's). For those the size
and sha256 of the first copy obtained are recorded in ``<archive>.json``
beside it in the cache, and every later copy, downloaded or found in a
mirror, must match them: trust on first use, so that at least a changed or
damaged file upstream does not pass unnoticed.

``extract_members`` reads only the members asked for, in one pass over the
compressed stream, stopping once it has them all, and writes each to a file
named by the caller, never by the archive, so no member name can point
outside the target folder.
"""

from __future__ import annotations

import gzip
import json
import logging
import shutil
import tarfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from ..files import atomic_write_text
from .download import (
    CorpusDownloadError,
    DownloadPolicy,
    MirrorSettingError,
    exclusive,
    fetch_verified,
    is_url,
    is_verified,
    join_url,
    sha256_of,
)
from .mirror import find

__all__ = ["NamedArchive", "fetch_archive", "known_size", "archive_path_if_cached", "record_path", "extract_members"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NamedArchive:
    """One downloadable archive: its file name, its addresses in order, and its checksum if published."""

    filename: str  # the name in the cache and in a mirror, e.g. "qi18naacl-dataset.tar.gz"
    urls: tuple[str, ...]  # tried in this order (after the mirror)
    sha256: str | None  # None: not published; recorded on first download (see record_path)
    size: int | None  # bytes; None: not published (a download is capped, see DownloadPolicy)


def record_path(dest: Path) -> Path:
    """Where the size and sha256 of an archive without a published checksum are recorded: ``<dest>.json``."""
    return dest.with_name(dest.name + ".json")


def _recorded(dest: Path) -> tuple[str | None, int | None]:
    """The (sha256, size) recorded for ``dest``, or (None, None) if nothing was recorded yet."""
    path = record_path(dest)
    if not path.exists():
        return None, None
    try:
        values = json.loads(path.read_text())
        return str(values["sha256"]), int(values["size"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorpusDownloadError(
            f"cannot read the recorded checksum {path}: {exc}; delete it to record the next download's checksum afresh"
        ) from None


def _record(dest: Path, *, sha256: str, size: int, source: str) -> None:
    """Record ``size`` and ``sha256`` of the copy of ``dest``'s archive obtained from ``source``."""
    values = {
        "sha256": sha256,
        "size": size,
        "source": source,
        "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(record_path(dest), json.dumps(values, indent=2) + "\n")
    log.info(
        "%s has no published checksum: recorded size %d and sha256 %s (from %s) in %s",
        dest.name,
        size,
        sha256,
        source,
        record_path(dest),
    )


def known_size(archive: NamedArchive, corpus_dir: Path) -> int | None:
    """The archive's size: published, or recorded on first download into ``corpus_dir``; None if neither."""
    return archive.size if archive.size is not None else _recorded(corpus_dir / archive.filename)[1]


def archive_path_if_cached(archive: NamedArchive, corpus_dir: Path) -> Path | None:
    """The cached copy of ``archive`` if one is there (by its size only: no hashing), else None."""
    dest = corpus_dir / archive.filename
    size = known_size(archive, corpus_dir)
    try:
        return dest if dest.is_file() and (size is None or dest.stat().st_size == size) else None
    except OSError:
        return None


def fetch_archive(archive: NamedArchive, corpus_dir: Path, *, mirror: str | None, policy: DownloadPolicy) -> Path:
    """A local path to a verified copy of ``archive``: in a local mirror, in ``corpus_dir``, or downloaded there.

    ``corpus_dir`` is the cache folder named after the corpus
    (``<cache>/<corpus>``): a local mirror may hold the archive in a folder
    of that name too.
    """
    dest = corpus_dir / archive.filename
    # Unpublished checksum: what was recorded on first download, or (first time) nothing to check.
    sha256, size = (archive.sha256, archive.size) if archive.sha256 is not None else _recorded(dest)
    errors: list[str] = []
    addresses = list(archive.urls)
    if mirror is not None and is_url(mirror):
        addresses.insert(0, join_url(mirror, archive.filename))
    elif mirror is not None:
        in_mirror = _from_local_mirror(Path(mirror).expanduser(), dest, sha256, size, errors)
        if in_mirror is not None:
            return in_mirror
    try:
        corpus_dir.mkdir(parents=True, exist_ok=True)  # safe when another process makes it too
        with exclusive(
            dest.with_name(dest.name + ".lock"), waiting=f"waiting for another process to finish downloading {dest}"
        ):
            if archive.sha256 is None:  # the process we waited for may have recorded it meanwhile
                sha256, size = _recorded(dest)
            if is_verified(dest, sha256, size):
                if sha256 is None:  # a copy put there by hand, or the record was deleted
                    _record(dest, sha256=sha256_of(dest), size=dest.stat().st_size, source=str(dest))
                return dest
            if dest.exists():
                log.warning("cached %s fails its checksum; downloading it again", dest)
                dest.unlink()
            for url in addresses:
                try:
                    fetch_verified(url, dest, sha256=sha256, size=size, policy=policy)
                except CorpusDownloadError as exc:
                    log.warning("%s", exc)
                    errors.append(str(exc))
                    continue
                if sha256 is None:
                    _record(dest, sha256=sha256_of(dest), size=dest.stat().st_size, source=url)
                return dest
    except OSError as exc:  # network errors were turned into CorpusDownloadError: this is the local disk
        raise CorpusDownloadError(f"could not download {archive.filename} into {dest}: {exc}") from None
    raise CorpusDownloadError(
        f"could not get {archive.filename} from any of its {len(errors)} sources: {'; '.join(errors)}. "
        f"Without network access, put a copy at {dest} or in a directory named by NMT_MIRROR"
    )


def _from_local_mirror(root: Path, dest: Path, sha256: str | None, size: int | None, errors: list[str]) -> Path | None:
    """The mirror's own copy of the archive cached at ``dest``, once verified (no copy is made).

    The copy lies in ``root`` or in its folder named after the corpus (the
    cache's, ``dest.parent``). None, with the reason in ``errors`` if there is
    one, when the mirror has no copy that passes: the caller goes on to the
    archive's addresses.
    """
    if not root.is_dir():
        raise MirrorSettingError(f"mirror {root} (the mirror argument or NMT_MIRROR) is not a directory")
    path = find(root, dest.parent.name, dest.name)
    if path is None:
        log.info("the mirror %s has no %s; trying its addresses", root, dest.name)
        return None
    try:
        got_size, got = path.stat().st_size, sha256_of(path)
    except OSError as exc:
        errors.append(f"cannot read {path} in the mirror {root}: {exc.strerror or exc}")
        return None
    if sha256 is None:  # nothing published or recorded yet: this copy sets the record
        _record(dest, sha256=got, size=got_size, source=str(path))
        return path
    if got != sha256 or (size is not None and got_size != size):
        errors.append(f"{path} in the mirror {root} is corrupt: sha256 expected {sha256}, got {got}")
        log.warning("%s", errors[-1])
        return None
    return path


def extract_members(archive_path: Path, names: dict[str, Path]) -> None:
    """Copy each member ``name`` of the archive to the file ``names[name]``, in one pass; only those are read.

    Member names are compared without a leading "./". Raises a
    ``CorpusDownloadError`` naming the archive when it cannot be read or
    lacks a member (the archive's layout is not the registered one).
    """
    remaining = dict(names)
    try:
        # "r|*": a forward-only stream, so each member is decompressed once, in order.
        with tarfile.open(archive_path, mode="r|*") as tar:
            for member in tar:
                target = remaining.pop(member.name.removeprefix("./"), None)
                if target is None:
                    continue
                if not member.isfile():
                    raise CorpusDownloadError(f"{archive_path}: member {member.name} is not a regular file")
                source = tar.extractfile(member)
                with source, open(target, "wb") as out:
                    shutil.copyfileobj(source, out, 1 << 20)
                if not remaining:
                    break  # the rest of the stream is never decompressed
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise CorpusDownloadError(
            f"cannot read the archive {archive_path} ({exc}); delete it to download it again"
        ) from None
    if remaining:
        raise CorpusDownloadError(
            f"{archive_path} has no member {', '.join(sorted(remaining))}: not the "
            "layout this corpus is registered with"
        )
