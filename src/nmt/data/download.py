"""Verified, resumable, shared downloads of one file into a local cache.

``download(url, dest, ...)`` leaves at ``dest`` the file whose sha256 (and
size) were asked for, or raises a ``CorpusDownloadError`` whose one-line
message names the URL or file:

- the bytes go to ``<dest>.part``, resume with an HTTP Range request after an
  interruption, retry with exponential backoff on connection errors and 5xx
  answers, and are moved into place only once the checksum matches, so a
  file at its final path is always complete and correct;
- no download grows past the file's size (``DownloadPolicy.unknown_size_cap``
  where that is not known): a server that sends an endless body is cut off,
  not allowed to fill the disk;
- a part file put together from several answers (a resumed download) that
  fails its checksum is fetched once more from the start, because the fault
  may lie in the splice (a server whose file changed between two requests)
  rather than in the file.

Several processes may share one cache (two ``nmt train`` runs started
together, torchrun ranks): they take turns per file through an exclusive
``flock`` on ``<dest>.lock`` (``exclusive``). The first downloads; the others
log that they wait, then find the verified file in the cache. A lock rather
than a part file per process because it downloads each file once instead of
once per process, and because the ``.part`` keeps a name the next run can
find: only the lock's holder writes it, so a ``.part`` found by a new holder
is the leftover of a writer that died or gave up, resumed when it can still
be the start of the file (shorter than its size) and deleted otherwise. The
kernel releases a flock when its holder exits, however it dies, so a crash
never leaves the lock taken; the holder deletes the lock file as it finishes
(see ``exclusive`` for why that is safe), so the cache holds only data files.
"""

from __future__ import annotations

import http.client
import logging
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ..files import exclusive, sha256_of

__all__ = [
    "CorpusDownloadError",
    "DownloadPolicy",
    "sha256_of",
    "is_url",
    "join_url",
    "exclusive",
    "is_verified",
    "download",
    "fetch_verified",
]

log = logging.getLogger(__name__)

_CHUNK_BYTES = 1 << 16


class CorpusDownloadError(RuntimeError):
    """A corpus file could not be obtained, or what was obtained failed its checksum."""


class MirrorSettingError(CorpusDownloadError, ValueError):
    """The mirror named (the mirror argument or NMT_MIRROR) is not a directory: the user's setting to
    mend (a ValueError, so the CLI exits 2 for it as for any bad value), not a failed download."""


@dataclass(frozen=True)
class DownloadPolicy:
    """How hard to try: passed in by the caller (the registry) so tests can make it fast."""

    retries: int = 3  # further attempts after a failed one, per address
    backoff_s: float = 1.0  # wait before the first retry; doubles for each further one
    timeout_s: float = 30.0  # per socket operation, not per file
    # The most a download of a file of unknown size may write: generous for a corpus file,
    # yet a bound on what a broken or hostile server can put on the disk.
    unknown_size_cap: int = 8 << 30

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")


def is_url(location: str) -> bool:
    """Whether ``location`` (a mirror) is a URL to download from rather than a local directory."""
    return urllib.parse.urlsplit(location).scheme in ("http", "https", "file")


def join_url(base: str, relpath: str) -> str:
    """``base`` + "/" + ``relpath``: not urljoin, which drops the last segment of a base without "/"."""
    return base.rstrip("/") + "/" + relpath


def is_verified(dest: Path, sha256: str | None, size: int | None) -> bool:
    """Whether ``dest`` holds the expected bytes (with ``sha256`` None: any file of the right size)."""
    try:
        if not dest.is_file() or (size is not None and dest.stat().st_size != size):
            return False
        return sha256 is None or sha256_of(dest) == sha256
    except FileNotFoundError:  # a corrupt copy, deleted by a process about to download it again
        return False
    except OSError as exc:
        raise CorpusDownloadError(f"cannot read the cached {dest}: {exc.strerror or exc}") from None


def download(
    url: str, dest: Path, *, sha256: str | None, size: int | None, policy: DownloadPolicy, hint: str = ""
) -> None:
    """Fetch ``url`` into ``dest``, holding ``dest``'s lock, unless the process we waited for got it.

    ``hint`` ends every error message (what to do without network access).
    Errors of the local disk (full, read-only, a file where a folder should
    be) become a ``CorpusDownloadError`` naming the URL and ``dest``, like
    network errors do.
    """
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)  # safe when another process makes it too
        with exclusive(
            dest.with_name(dest.name + ".lock"), waiting=f"waiting for another process to finish downloading {dest}"
        ):
            if is_verified(dest, sha256, size):
                return  # the process we waited for got it
            if dest.exists():
                log.warning("cached %s fails its checksum; downloading it again", dest)
                dest.unlink()
            fetch_verified(url, dest, sha256=sha256, size=size, policy=policy, hint=hint)
    except OSError as exc:  # network errors were handled below: this is the local disk
        raise CorpusDownloadError(f"could not download {url} into {dest}: {exc}") from None


class _Interrupted(ConnectionError):
    """A response that ended early or answered the wrong byte range: worth retrying."""


class _TooLarge(Exception):
    """The server sends more than the file's size limit: not retried (it would do it again)."""


def fetch_verified(
    url: str, dest: Path, *, sha256: str | None, size: int | None, policy: DownloadPolicy, hint: str = ""
) -> None:
    """Fetch ``url`` into ``dest.part``, retrying, then verify it and move it to ``dest``.

    The caller holds ``dest``'s lock. With ``sha256`` None nothing is checked
    but the size: the caller records what it got (trust on first use).
    """
    part = dest.with_name(dest.name + ".part")
    limit = size if size is not None else policy.unknown_size_cap
    # Only the lock's holder writes the .part, so one found now was left by a writer that died
    # or gave up: resume it if it can still be the start of the file, else start over.
    if part.exists() and part.stat().st_size >= limit:
        part.unlink()
    for whole_tries_left in (1, 0):
        resumed = _fetch_with_retries(
            url, part, limit=limit, known_size=size is not None, policy=policy, hint=hint, label=dest.name
        )
        got = sha256_of(part)
        if sha256 is None or got == sha256:
            os.replace(part, dest)  # atomic: readers never see a half-written file at dest
            return
        part.unlink()
        if not (resumed and whole_tries_left):
            break
        log.warning("%s fails its checksum after a resumed download; fetching it again from the start", url)
    raise CorpusDownloadError(
        f"downloaded {url} is corrupt: sha256 expected {sha256}, got {got}; the partial file was deleted"
    )


def _fetch_with_retries(
    url: str, part: Path, *, limit: int, known_size: bool, policy: DownloadPolicy, hint: str, label: str
) -> bool:
    """Attempts of ``_fetch`` with exponential backoff; whether any of them resumed a partial file."""
    resumed = False
    for attempt in range(policy.retries + 1):
        if attempt:
            time.sleep(policy.backoff_s * 2 ** (attempt - 1))
        resumed = resumed or part.exists()
        try:
            _fetch(url, part, label=label, limit=limit, timeout_s=policy.timeout_s)
            return resumed
        except _TooLarge:
            what = "its registered size" if known_size else "the cap for a file of unknown size"
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
    raise CorpusDownloadError(f"could not download {url} ({reason}; gave up after {policy.retries + 1} attempts){hint}")


def _fetch(url: str, part: Path, *, label: str, limit: int, timeout_s: float) -> None:
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
        response = urllib.request.urlopen(request, timeout=timeout_s)
    except urllib.error.HTTPError as exc:
        if exc.code != 416:
            raise
        # "Range not satisfiable": our .part is no prefix of the file (a
        # stale or already complete one). Start over; with no .part there is
        # no Range header, so this recurses at most once.
        exc.close()
        part.unlink()
        return _fetch(url, part, label=label, limit=limit, timeout_s=timeout_s)

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
    return tqdm(
        total=total,
        initial=offset,
        desc=label,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        file=sys.stderr,
        disable=not sys.stderr.isatty(),
        leave=False,
    )


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
