"""Named corpora and their download into a local cache, verified by sha256.

A ``NamedCorpus`` lists the files of a public corpus by (split, language),
each with the sha256 and size of its exact bytes. ``corpus_path`` turns a
name into a local path to a verified file, from the first of these that
applies:

1. a mirror (the ``mirror`` argument or ``$NMT_MIRROR``) laid out like
   upstream: a local directory is verified and used in place; an http(s)://
   or file:// URL is downloaded into the cache;
2. the cache, ``<cache_dir or data_home()>/<corpus>/<relpath>``, reused when
   its checksum matches;
3. upstream, downloaded into the cache.

Downloads go to ``<dest>.part``, resume with an HTTP Range request after an
interruption, retry with exponential backoff on connection errors and 5xx
answers, and are moved into place only once the checksum matches, so a file
at its final path is always complete and correct. No download grows past
the file's registered size (``UNKNOWN_SIZE_CAP_BYTES`` where that is not
known): a server that sends an endless body is cut off, not allowed to fill
the disk. Every failure is a ``CorpusDownloadError`` whose one-line message
names the URL or file.

Several processes may share one cache (two ``nmt train`` runs started
together, torchrun ranks): they take turns per file through an exclusive
``flock`` on ``<dest>.lock``. The first downloads; the others log that they
wait, then find the verified file in the cache. A lock rather than a part
file per process because it downloads each file once instead of once per
process, and because the ``.part`` keeps a name the next run can find: only
the lock's holder writes it, so a ``.part`` found by a new holder is the
leftover of a writer that died or gave up, resumed when it can still be the
start of the file (shorter than its size) and deleted otherwise. The kernel
releases a flock when its holder exits, however it dies, so a crash never
leaves the lock taken; the holder deletes the lock file as it finishes (see
``_exclusive`` for why that is safe), so the cache holds only data files.
"""

from __future__ import annotations

import fcntl
import hashlib
import http.client
import logging
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

__all__ = [
    "CorpusFile",
    "NamedCorpus",
    "CorpusDownloadError",
    "MULTI30K",
    "CORPORA",
    "data_home",
    "sha256_of",
    "corpus_path",
    "parallel_files",
]

log = logging.getLogger(__name__)

BACKOFF_S = 1.0  # wait before the first retry; doubles for each further one (tests set 0)
TIMEOUT_S = 30.0  # per socket operation, not per file
# The most a download of a file of unknown size may write: generous for a corpus file,
# yet a bound on what a broken or hostile server can put on the disk.
UNKNOWN_SIZE_CAP_BYTES = 8 << 30
_CHUNK_BYTES = 1 << 16


@dataclass(frozen=True)
class CorpusFile:
    """One file of a corpus: where it lies below the base URL, its checksum and its size."""

    relpath: str  # e.g. "data/task1/raw/train.de.gz", relative to the base URL/dir
    sha256: str
    size: int | None  # bytes; a download stops past it. None: unknown, capped at UNKNOWN_SIZE_CAP_BYTES


@dataclass(frozen=True)
class NamedCorpus:
    """A public corpus: where it lives upstream and which files it is made of."""

    name: str  # "multi30k"
    base_url: str  # upstream base, pinned to a commit so the bytes never change
    languages: tuple[str, ...]
    splits: tuple[str, ...]
    files: dict[tuple[str, str], CorpusFile]  # (split, lang) -> file
    citation: str


class CorpusDownloadError(RuntimeError):
    """A corpus file could not be obtained, or what was obtained failed its checksum."""


_MULTI30K_COMMIT = "a3d2e0d26b56f3846f66a952536ffed4e401d05a"
_MULTI30K_FILES = {  # (split, lang) -> (sha256, size in bytes)
    ("train", "en"): ("d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f", 568929),
    ("train", "de"): ("726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6", 637044),
    ("train", "fr"): ("622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c", 604242),
    ("train", "cs"): ("a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077", 593827),
    ("val", "en"): ("14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28", 21650),
    ("val", "de"): ("f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a", 24681),
    ("val", "fr"): ("ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9", 23001),
    ("val", "cs"): ("b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc", 22096),
    ("test_2016_flickr", "en"): ("611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9", 21077),
    ("test_2016_flickr", "de"): ("9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8", 22890),
    ("test_2016_flickr", "fr"): ("6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90", 22310),
    ("test_2016_flickr", "cs"): ("200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1", 22572),
}

MULTI30K = NamedCorpus(
    name="multi30k",
    base_url=f"https://raw.githubusercontent.com/multi30k/dataset/{_MULTI30K_COMMIT}/",
    languages=("en", "de", "fr", "cs"),
    splits=("train", "val", "test_2016_flickr"),
    files={
        (split, lang): CorpusFile(f"data/task1/raw/{split}.{lang}.gz", sha256, size)
        for (split, lang), (sha256, size) in _MULTI30K_FILES.items()
    },
    citation=(
        "Elliott et al. (2016), Multi30K: Multilingual English-German Image Descriptions (en, de); "
        "Elliott et al. (2017) (fr); Barrault et al. (2018) (cs). "
        "Partly derived from Flickr30k: non-commercial research and education use."
    ),
)

CORPORA: dict[str, NamedCorpus] = {"multi30k": MULTI30K}


def data_home() -> Path:
    """The cache root: ``$NMT_DATA_HOME`` if set, else ``~/.cache/nmt``."""
    return Path(os.environ.get("NMT_DATA_HOME") or Path.home() / ".cache" / "nmt")


def sha256_of(path: str | Path) -> str:
    """The hex sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def corpus_path(
    name: str,
    split: str,
    lang: str,
    *,
    mirror: str | None = None,
    cache_dir: Path | None = None,
    retries: int = 3,
) -> Path:
    """Return a local path to the verified file of ``name``'s ``split`` in ``lang``.

    ``mirror`` (default ``$NMT_MIRROR``) is a local directory, used in place,
    or an http(s)/file URL, downloaded into the cache; either way it must be
    laid out like upstream. Without one the file comes from the cache or from
    upstream. ``retries`` is how many times a failed download is tried again.
    Raises ``ValueError`` for an unknown corpus, split or language and
    ``CorpusDownloadError`` when no verified file can be had.
    """
    corpus, file = _lookup(name, split, lang)
    mirror = mirror if mirror is not None else os.environ.get("NMT_MIRROR") or None
    if mirror is not None and not _is_url(mirror):
        return _from_local_mirror(Path(mirror).expanduser(), file)

    cache_root = Path(cache_dir if cache_dir is not None else data_home()) / corpus.name
    dest = cache_root / file.relpath
    if _is_cached(dest, file):  # the common case needs no lock: dest only ever appears complete
        return dest

    if mirror is not None:
        url = _join(mirror, file.relpath)
        hint = f" from the mirror {mirror} (the mirror argument or NMT_MIRROR)."
    else:
        url = _join(corpus.base_url, file.relpath)
        hint = (
            ". Without network access, point NMT_MIRROR at a local copy laid out like upstream "
            f"(e.g. NMT_MIRROR=../shared/data/{corpus.name}) or put the files under {cache_root}."
        )
    _download(url, dest, file, retries=retries, hint=hint)
    return dest


def parallel_files(
    name: str, split: str, src_lang: str, tgt_lang: str, **kwargs
) -> tuple[Path, Path]:
    """Paths to the aligned source and target files of one split; see ``corpus_path``."""
    for lang in (src_lang, tgt_lang):  # a bad name is refused before anything is fetched
        _lookup(name, split, lang)
    return (
        corpus_path(name, split, src_lang, **kwargs),
        corpus_path(name, split, tgt_lang, **kwargs),
    )


# --- lookup and mirrors --------------------------------------------------------


def _lookup(name: str, split: str, lang: str) -> tuple[NamedCorpus, CorpusFile]:
    """The corpus and file asked for, or a ValueError listing the valid choices."""
    if name not in CORPORA:
        raise ValueError(f"unknown corpus {name!r}; known corpora: {', '.join(sorted(CORPORA))}")
    corpus = CORPORA[name]
    if split not in corpus.splits:
        raise ValueError(f"{name} has no split {split!r}; splits: {', '.join(corpus.splits)}")
    if lang not in corpus.languages:
        raise ValueError(f"{name} has no language {lang!r}; languages: {', '.join(corpus.languages)}")
    if (split, lang) not in corpus.files:
        raise ValueError(f"{name} has no file for split {split!r} in language {lang!r}")
    return corpus, corpus.files[(split, lang)]


def _is_url(mirror: str) -> bool:
    return urllib.parse.urlsplit(mirror).scheme in ("http", "https", "file")


def _join(base: str, relpath: str) -> str:
    # Not urljoin: it would drop the last segment of a base without a trailing "/".
    return base.rstrip("/") + "/" + relpath


def _from_local_mirror(root: Path, file: CorpusFile) -> Path:
    """The mirror's own copy of ``file``, once its checksum is checked (no copy is made)."""
    if not root.is_dir():
        raise CorpusDownloadError(f"mirror {root} (the mirror argument or NMT_MIRROR) is not a directory")
    path = root / file.relpath
    if not path.is_file():
        raise CorpusDownloadError(
            f"{path} not found: the mirror {root} must be laid out like upstream ({file.relpath})"
        )
    try:
        got = sha256_of(path)
    except OSError as exc:
        raise CorpusDownloadError(f"cannot read {path} in the mirror {root}: {exc.strerror or exc}") from None
    if got != file.sha256:
        raise CorpusDownloadError(
            f"{path} in the mirror {root} is corrupt: sha256 expected {file.sha256}, got {got}; "
            "replace it with a fresh copy"
        )
    return path


# --- downloading -----------------------------------------------------------------


class _Interrupted(ConnectionError):
    """A response that ended early or answered the wrong byte range: worth retrying."""


class _TooLarge(Exception):
    """The server sends more than the file's size limit: not retried (it would do it again)."""


def _is_cached(dest: Path, file: CorpusFile) -> bool:
    """Whether ``dest`` holds ``file``'s exact bytes."""
    try:
        return dest.is_file() and sha256_of(dest) == file.sha256
    except FileNotFoundError:  # a corrupt copy, deleted by a process about to download it again
        return False
    except OSError as exc:
        raise CorpusDownloadError(f"cannot read the cached {dest}: {exc.strerror or exc}") from None


def _download(url: str, dest: Path, file: CorpusFile, *, retries: int, hint: str) -> None:
    """Fetch ``url`` into ``dest``, holding ``dest``'s lock, unless the process we waited for did.

    Errors of the local disk (full, read-only, a file where a folder should
    be) become a ``CorpusDownloadError`` naming the URL and ``dest``, like
    network errors do.
    """
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries}")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)  # safe when another process makes it too
        waiting = f"waiting for another process to finish downloading {dest}"
        with _exclusive(dest.with_name(dest.name + ".lock"), waiting=waiting):
            if _is_cached(dest, file):
                return  # the process we waited for got it
            if dest.exists():
                log.warning("cached %s fails its checksum; downloading it again", dest)
                dest.unlink()
            _fetch_verified(url, dest, file, retries=retries, hint=hint)
    except OSError as exc:  # network errors were handled below: this is the local disk
        raise CorpusDownloadError(f"could not download {url} into {dest}: {exc}") from None


@contextmanager
def _exclusive(lock_path: Path, *, waiting: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` for the ``with`` block; log ``waiting`` if it is taken.

    The lock file is created if missing and deleted on the way out while
    still locked. A waiter blocked on the old file then wakes up holding a
    file no longer at ``lock_path``, one that a newcomer would not see (it
    creates a new one): so a lock counts only while its file is the one at
    ``lock_path``, otherwise we try again on what is there now.
    """
    logged = False
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not logged:
                    log.info("%s", waiting)
                    logged = True
                fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel if its holder dies
            if _same_file(fd, lock_path):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        yield
    finally:
        lock_path.unlink(missing_ok=True)
        os.close(fd)  # releases the lock


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is the file now at ``path``."""
    try:
        at_path = path.stat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)


def _fetch_verified(url: str, dest: Path, file: CorpusFile, *, retries: int, hint: str) -> None:
    """Fetch ``url`` into ``dest.part``, retrying, then verify it and move it to ``dest``."""
    part = dest.with_name(dest.name + ".part")
    limit = file.size if file.size is not None else UNKNOWN_SIZE_CAP_BYTES
    # Only the lock's holder writes the .part, so one found now was left by a writer that died
    # or gave up: resume it if it can still be the start of the file, else start over.
    if part.exists() and part.stat().st_size >= limit:
        part.unlink()
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(BACKOFF_S * 2 ** (attempt - 1))
        try:
            _fetch(url, part, label=dest.name, limit=limit)
            break
        except _TooLarge:
            what = "its registered size" if file.size is not None else "the cap for a file of unknown size"
            raise CorpusDownloadError(
                f"refused {url}: the server sends more than {limit} bytes ({what}); nothing was kept"
            ) from None
        except urllib.error.HTTPError as exc:  # before URLError: it is a subclass
            reason = f"HTTP {exc.code} {exc.reason}"
            exc.close()
            # 4xx (bar timeouts and rate limits) will not change on a retry.
            if exc.code < 500 and exc.code not in (408, 429):
                raise CorpusDownloadError(f"could not download {url} ({reason}){hint}") from None
        except (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException) as exc:
            reason = str(exc.reason) if isinstance(exc, urllib.error.URLError) else repr(exc)
    else:
        raise CorpusDownloadError(
            f"could not download {url} ({reason}; gave up after {retries + 1} attempts){hint}"
        )

    got = sha256_of(part)
    if got != file.sha256:
        part.unlink()
        raise CorpusDownloadError(
            f"downloaded {url} is corrupt: sha256 expected {file.sha256}, got {got}; "
            "the partial file was deleted"
        )
    os.replace(part, dest)  # atomic: readers never see a half-written file at dest


def _fetch(url: str, part: Path, *, label: str, limit: int) -> None:
    """One attempt: append the rest of ``url`` to ``part``, or rewrite it whole.

    Raises ``_Interrupted`` when fewer bytes arrive than the server promised:
    the next attempt resumes from what was kept. Raises ``_TooLarge``, with
    ``part`` deleted, as soon as the file would grow past ``limit`` bytes.
    """
    offset = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url)
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        if exc.code != 416:
            raise
        # "Range not satisfiable": our .part is no prefix of the file (a
        # stale or already complete one). Start over; with no .part there is
        # no Range header, so this recurses at most once.
        exc.close()
        part.unlink()
        return _fetch(url, part, label=label, limit=limit)

    with response:
        status = response.status or 200  # file:// responses carry no status
        if offset and status != 206:
            offset = 0  # the server ignored the Range header and sends it all
        total = _expected_total(response, offset)
        if total is None and offset:
            part.unlink()  # a 206 we cannot place: start over cleanly
            raise _Interrupted(f"unusable Content-Range {response.headers.get('Content-Range')!r}")
        size = offset  # bytes of the file on disk so far
        if total is None or total <= limit:  # else refuse before writing a byte
            with open(part, "ab" if offset else "wb") as out, _progress_bar(label, offset, total) as bar:
                # http.client's read(n) returns b"" when the connection drops
                # early instead of raising, hence the size check afterwards.
                while size <= limit and (chunk := response.read(_CHUNK_BYTES)):
                    out.write(chunk)
                    bar.update(len(chunk))
                    size += len(chunk)
    if size > limit or (total is not None and total > limit):
        part.unlink(missing_ok=True)
        raise _TooLarge()
    if total is not None and size < total:
        raise _Interrupted(f"connection closed after {size} of {total} bytes")


def _progress_bar(label: str, offset: int, total: int | None) -> tqdm:
    """A bytes progress bar on stderr, shown only on a terminal and gone once done."""
    return tqdm(total=total, initial=offset, desc=label, unit="B", unit_scale=True, unit_divisor=1024,
                file=sys.stderr, disable=not sys.stderr.isatty(), leave=False)


def _expected_total(response, offset: int) -> int | None:
    """The full file size the server promises, or None if it does not say.

    For a resumed (206) answer this also checks that the range starts where
    our partial file ends, and returns None when it does not.
    """
    if offset:
        # "bytes 100-199/200" -> start 100, total 200
        content_range = response.headers.get("Content-Range", "")
        try:
            span, total = content_range.removeprefix("bytes ").split("/")
            start = int(span.split("-")[0])
            return int(total) if start == offset else None
        except ValueError:
            return None
    length = response.headers.get("Content-Length")
    return int(length) if length and length.isdigit() else None
