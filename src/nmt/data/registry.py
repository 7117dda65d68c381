"""The catalog of named corpora, and the local paths to their files.

``parallel_files(name, split, src_lang, tgt_lang)`` gives the two aligned
files of one split of any registered corpus (``CORPORA``), fetched and
verified first if need be. Corpora come in two kinds:

- a ``NamedCorpus`` (Multi30k) is a set of files, one per (split,
  language), each with the sha256 and size of its exact bytes; the path of
  one is ``corpus_path``;
- an ``ArchiveCorpus`` (ted_hrlr, iwslt14, wmt14) is made from archives,
  whose members are extracted once into the cache, split by split (see
  ``archive_corpus.py``); its pairs may be used in either direction.

Files come from the first of these that applies:

1. a mirror (the ``mirror`` argument or ``$NMT_MIRROR``): for a
   ``NamedCorpus`` laid out like upstream (a local directory is verified
   and used in place, a copy kept in the cache for later commands run
   without the mirror; an http(s):// or file:// URL is downloaded into the
   cache); for an archive, the archive under its own file name, in the
   directory or below the URL (a mirror without it is passed over), or, in
   a local directory, the members a build needs as files of their own,
   each checked against its pinned sha256 (``mirror.py``). A local
   directory may hold the corpus itself or a folder per corpus
   (``<mirror>/multi30k/``, ``<mirror>/ted_hrlr/``), so one mirror serves all;
2. the cache, ``<cache_dir or data_home()>/<corpus>/...``, reused when its
   checksum matches;
3. upstream, downloaded into the cache (an archive tries its addresses in
   order).

Downloads are verified, resumable, capped at the file's size and shared
safely by processes (``download.py``). Every failure is a
``CorpusDownloadError`` whose one-line message names the URL or file; an
unknown corpus, split, language or pair is a ``ValueError`` listing the
valid ones.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..files import atomic_write
from .archive import NamedArchive
from .archive_corpus import ArchiveCorpus
from .download import (
    CorpusDownloadError,
    DownloadPolicy,
    MirrorSettingError,
    download,
    is_url,
    is_verified,
    join_url,
    sha256_of,
)
from .iwslt14 import IWSLT14
from .mirror import candidates, find
from .ted_hrlr import TED_HRLR
from .wmt14 import WMT14

log = logging.getLogger(__name__)

__all__ = [
    "CorpusFile",
    "NamedCorpus",
    "NamedArchive",
    "ArchiveCorpus",
    "CorpusDownloadError",
    "MULTI30K",
    "CORPORA",
    "data_home",
    "sha256_of",
    "get_corpus",
    "is_pretokenized",
    "corpus_path",
    "parallel_files",
]

# How hard downloads try (module constants, read at each call, so tests can set them).
BACKOFF_S = 1.0  # wait before the first retry; doubles for each further one (tests set 0)
TIMEOUT_S = 30.0  # per socket operation, not per file
# The most a download of a file of unknown size may write: generous for a corpus file,
# yet a bound on what a broken or hostile server can put on the disk.
UNKNOWN_SIZE_CAP_BYTES = 8 << 30


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
    pretokenized: bool = False  # the text is tokenised already: BLEU with tokenize="none"


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

# The default corpus first: error messages list them in this order.
CORPORA: dict[str, NamedCorpus | ArchiveCorpus] = {
    "multi30k": MULTI30K,
    "ted_hrlr": TED_HRLR,
    "iwslt14": IWSLT14,
    "wmt14": WMT14,
}


def data_home() -> Path:
    """The cache root: ``$NMT_DATA_HOME`` if set, else ``~/.cache/nmt``."""
    return Path(os.environ.get("NMT_DATA_HOME") or Path.home() / ".cache" / "nmt")


def download_policy(retries: int = 3) -> DownloadPolicy:
    """The download policy of this module's constants, read now (tests change them)."""
    return DownloadPolicy(
        retries=retries, backoff_s=BACKOFF_S, timeout_s=TIMEOUT_S, unknown_size_cap=UNKNOWN_SIZE_CAP_BYTES
    )


def get_corpus(name: str) -> NamedCorpus | ArchiveCorpus:
    """The registered corpus ``name``, or a ValueError listing the known ones."""
    if name not in CORPORA:
        raise ValueError(f"unknown corpus {name!r}; known corpora: {', '.join(CORPORA)}")
    return CORPORA[name]


def is_pretokenized(name: str) -> bool:
    """Whether corpus ``name``'s text is tokenised already.

    If so, score translations of it with ``score_translations(..., pretokenized=True)``.
    """
    return get_corpus(name).pretokenized


def corpus_path(
    name: str,
    split: str,
    lang: str,
    *,
    mirror: str | None = None,
    cache_dir: Path | None = None,
    retries: int = 3,
) -> Path:
    """Return a local path to the verified file of ``name``'s ``split`` in ``lang`` (a ``NamedCorpus``).

    ``mirror`` (default ``$NMT_MIRROR``) is a local directory, used in place,
    or an http(s)/file URL, downloaded into the cache; either way it must be
    laid out like upstream (a local directory may instead hold a folder named
    after the corpus laid out so). Without one the file comes from the cache or from
    upstream. ``retries`` is how many times a failed download is tried again.
    Raises ``ValueError`` for an unknown corpus, split or language (or a
    corpus made of archives: see ``parallel_files``) and
    ``CorpusDownloadError`` when no verified file can be had.
    """
    corpus, file = _lookup(name, split, lang)
    mirror = _mirror(mirror)
    cache_root = _cache_root(cache_dir) / corpus.name
    dest = cache_root / file.relpath
    if mirror is not None and not is_url(mirror):
        root = Path(mirror).expanduser()
        found = _from_local_mirror(root, corpus.name, file)
        _keep_the_language(root, corpus, lang, cache_root)  # this file among them
        return found

    # The common case needs no lock: dest only ever appears complete.
    if is_verified(dest, file.sha256, file.size):
        return dest

    if mirror is not None:
        url = join_url(mirror, file.relpath)
        hint = f" from the mirror {mirror} (the mirror argument or NMT_MIRROR)."
    else:
        url = join_url(corpus.base_url, file.relpath)
        hint = (
            ". Without network access, point NMT_MIRROR at a local copy laid out like upstream, or at a "
            f"directory with a {corpus.name}/ folder holding one (e.g. NMT_MIRROR=../shared/data), "
            f"or put the files under {cache_root}."
        )
    download(url, dest, sha256=file.sha256, size=file.size, policy=download_policy(retries), hint=hint)
    return dest


def parallel_files(
    name: str,
    split: str,
    src_lang: str,
    tgt_lang: str,
    *,
    mirror: str | None = None,
    cache_dir: Path | None = None,
    retries: int = 3,
) -> tuple[Path, Path]:
    """Paths to the aligned ``src_lang`` and ``tgt_lang`` files of ``split`` of any registered corpus.

    For a ``NamedCorpus`` see ``corpus_path``. For an ``ArchiveCorpus`` the
    archives are fetched (see ``archive.fetch_archive``; ``mirror`` holds
    them under their file names), or a local ``mirror`` gives the members as
    files of their own (see ``archive_corpus.build_folder``), and the split's folder is extracted into
    ``<cache_dir>/<name>/`` once; the pair may be asked in either direction.
    A bad name is refused with a ``ValueError`` before anything is fetched.
    """
    corpus = get_corpus(name)
    if isinstance(corpus, ArchiveCorpus):
        return corpus.files(
            split,
            src_lang,
            tgt_lang,
            root=_cache_root(cache_dir),
            mirror=_mirror(mirror),
            policy=download_policy(retries),
        )
    for lang in (src_lang, tgt_lang):
        _lookup(name, split, lang)
    options = dict(mirror=mirror, cache_dir=cache_dir, retries=retries)
    return corpus_path(name, split, src_lang, **options), corpus_path(name, split, tgt_lang, **options)


# --- lookup and mirrors --------------------------------------------------------


def _mirror(mirror: str | None) -> str | None:
    return mirror if mirror is not None else os.environ.get("NMT_MIRROR") or None


def _cache_root(cache_dir: str | Path | None) -> Path:
    return Path(cache_dir) if cache_dir is not None else data_home()


def _lookup(name: str, split: str, lang: str) -> tuple[NamedCorpus, CorpusFile]:
    """The corpus and file asked for, or a ValueError listing the valid choices."""
    corpus = get_corpus(name)
    if not isinstance(corpus, NamedCorpus):
        raise ValueError(
            f"{name} is made from archives, a pair at a time: ask for "
            f"parallel_files({name!r}, split, src_lang, tgt_lang)"
        )
    if split not in corpus.splits:
        raise ValueError(f"{name} has no split {split!r}; splits: {', '.join(corpus.splits)}")
    if lang not in corpus.languages:
        raise ValueError(f"{name} has no language {lang!r}; languages: {', '.join(corpus.languages)}")
    if (split, lang) not in corpus.files:
        raise ValueError(f"{name} has no file for split {split!r} in language {lang!r}")
    return corpus, corpus.files[(split, lang)]


def _keep_a_copy(found: Path, dest: Path, file: CorpusFile) -> None:
    """A verified copy of a mirror's file in the cache, where none is yet, so that a later command
    without NMT_MIRROR (`nmt evaluate` after `nmt train`) finds it offline. Best effort: a cache
    that cannot be written is logged, and the mirror's copy serves this run all the same."""
    if is_verified(dest, file.sha256, file.size):
        return
    try:
        atomic_write(dest, lambda tmp: shutil.copyfile(found, tmp))
    except OSError as err:
        log.info(
            "could not keep a copy of %s in the cache (%s): commands without NMT_MIRROR will download it", found, err
        )


_KEPT: set[tuple[Path, str, str, Path]] = set()  # (mirror, corpus, language, cache) copied by this process


def _keep_the_language(root: Path, corpus: NamedCorpus, lang: str, cache_root: Path) -> None:
    """Copies of every split of `corpus` in `lang` that the mirror holds, once per process: training
    reads train and val, and `nmt evaluate --test multi30k:test_2016_flickr:de-en` after it needs a
    test set that training never asked for."""
    if (root, corpus.name, lang, cache_root) in _KEPT:
        return
    _KEPT.add((root, corpus.name, lang, cache_root))
    for (_, file_lang), file in corpus.files.items():
        path = find(root, corpus.name, file.relpath) if file_lang == lang else None
        try:
            if path is not None and sha256_of(path) == file.sha256:
                _keep_a_copy(path, cache_root / file.relpath, file)
        except OSError:
            continue  # a mirror file this user cannot read: the command that needs it will say so


def _from_local_mirror(root: Path, corpus: str, file: CorpusFile) -> Path:
    """The mirror's own copy of ``file``, below ``root`` or ``root/<corpus>``, once its checksum is checked.

    No copy is made. A mirror without the file is an error rather than a
    download: a local mirror stands for the network, which may not be there.
    """
    if not root.is_dir():
        raise MirrorSettingError(f"mirror {root} (the mirror argument or NMT_MIRROR) is not a directory")
    path = find(root, corpus, file.relpath)
    if path is None:
        tried = " nor ".join(str(p) for p in candidates(root, corpus, file.relpath))
        raise CorpusDownloadError(
            f"{file.relpath} not found in the mirror {root}: it must be laid out like upstream, "
            f"in the mirror or in a {corpus}/ folder of it (there is no {tried})"
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
