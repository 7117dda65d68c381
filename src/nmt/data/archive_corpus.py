"""Corpora made from archives: their splits extracted once into the cache, atomically, shared by processes.

An ``ArchiveCorpus`` knows its language pairs and splits, and for each
(split, pair) the ``Build`` that makes it: the members to read from which
archives, and a function that turns them into aligned pairs. A build writes
every split it makes into one folder, ``<cache>/<corpus>/<build.folder>``,
as ``<split>.<lang>`` files of one sentence a line, ready for
``read_parallel``:

- only the archive members the build names are read (``extract_members``);
- a build may pin the sha256 of its members' text (``Build.loose``): then a
  local mirror that holds every one of them as a file of its own, plain or
  ``.gz`` (a repack of the archive's folder), serves them instead of the
  archive, each checked as it is copied (``mirror.copy_verified``); a
  mirror that lacks one is passed over for the archives, and a corrupt one
  is an error naming the file;
- it runs under the folder's lock (``<folder>.lock``), so processes that
  share the cache take turns and the later ones find the folder made;
- it writes into a temporary folder renamed into place once complete, so
  a folder at its final path is always whole; a temporary folder found by
  the lock's next holder is the leftover of a killed process, and removed;
- a pair with an empty side (empty once stripped of spaces) is dropped,
  and counted: the count goes to the log and to ``manifest.json`` in the
  folder, beside where each split came from.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import IO

from ..files import atomic_write_text, fsync_dir
from .archive import NamedArchive, extract_members, fetch_archive
from .download import CorpusDownloadError, DownloadPolicy, exclusive
from .mirror import LooseFile, copy_verified, find_loose, local_mirror

__all__ = [
    "Members",
    "PairWriter",
    "Build",
    "ArchiveCorpus",
    "is_blank_pair",
    "aligned",
    "build_folder",
    "loose_in_mirror",
    "MANIFEST",
]

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"


def is_blank_pair(src: str, tgt: str) -> bool:
    """The drop rule: a pair is dropped when either side is empty once stripped of spaces."""
    return not src.strip() or not tgt.strip()


class Members:
    """The extracted archive members of one build, by member name, read as text lines."""

    def __init__(self, paths: dict[str, Path], labels: dict[str, str]):
        self._paths = paths  # member name -> extracted file
        self._labels = labels  # member name -> where it came from, "<archive>:<member>" or a mirror file (for errors)

    def lines(self, name: str) -> Iterator[str]:
        """The lines of member ``name`` without their "\\n" (or "\\r\\n"), split on "\\n" only.

        Undecodable bytes are kept as they are (surrogateescape) and written
        back unchanged: the corpus readers name the file and line of any
        invalid UTF-8, which extraction would only hide.
        """
        with open(self._paths[name], encoding="utf-8", errors="surrogateescape", newline="\n") as file:
            for line in file:
                yield line.removesuffix("\n").removesuffix("\r")

    def pairs(self, src_name: str, tgt_name: str) -> Iterator[tuple[str, str]]:
        """Aligned (source, target) lines of two members; different line counts are an error naming both."""
        return aligned(
            self.lines(src_name),
            self.lines(tgt_name),
            self._labels[src_name],
            self._labels[tgt_name],
        )


def aligned(src: Iterator[str], tgt: Iterator[str], src_label: str, tgt_label: str) -> Iterator[tuple[str, str]]:
    """Zip two line streams that must be equally long, or raise a ``CorpusDownloadError`` giving both lengths."""
    count = 0
    for a, b in zip_longest(src, tgt):
        if a is None or b is None:
            rest = 1 + sum(1 for _ in (tgt if a is None else src))
            src_count, tgt_count = (count, count + rest) if a is None else (count + rest, count)
            raise CorpusDownloadError(
                f"{src_label} has {src_count} lines but {tgt_label} has {tgt_count}: they must be aligned line by line"
            )
        count += 1
        yield a, b


@dataclass
class SplitCounts:
    """What one split of a build kept and dropped."""

    pairs: int = 0
    dropped_empty: int = 0


class PairWriter:
    """Writes aligned pairs of the given splits into ``<folder>/<split>.<lang>``, dropping blank pairs.

    Every split's two files exist from the start, so a split left empty is
    an empty split, not a missing file.
    """

    def __init__(self, folder: Path, langs: tuple[str, str], splits: tuple[str, ...]):
        self.counts = {split: SplitCounts() for split in splits}
        self._files: dict[str, list[IO[str]]] = {}
        try:
            for split in splits:
                self._files[split] = [
                    open(folder / f"{split}.{lang}", "w", encoding="utf-8", errors="surrogateescape", newline="\n")
                    for lang in langs
                ]
        except BaseException:
            self.close()
            raise

    def add(self, split: str, src: str, tgt: str) -> bool:
        """Write one pair to ``split``; False (and counted) when the drop rule drops it."""
        counts = self.counts[split]
        if is_blank_pair(src, tgt):
            counts.dropped_empty += 1
            return False
        src_file, tgt_file = self._files[split]
        src_file.write(src + "\n")
        tgt_file.write(tgt + "\n")
        counts.pairs += 1
        return True

    def drop(self, split: str) -> None:
        """Count a pair that the build dropped by the same rule before it knew the split (see iwslt14)."""
        self.counts[split].dropped_empty += 1

    def close(self) -> dict[str, SplitCounts]:
        """Flush every file to disk and close it (so a folder renamed into place survives a power cut); the counts."""
        for files in self._files.values():
            for file in files:
                if not file.closed:
                    file.flush()
                    os.fsync(file.fileno())
                file.close()
        self._files.clear()
        return self.counts


@dataclass(frozen=True)
class Build:
    """How one folder of extracted splits is made: which members of which archives, turned into pairs how."""

    folder: str  # below the corpus's cache folder, e.g. "pt_to_en"
    langs: tuple[str, str]  # the file suffixes of the two sides, e.g. ("pt", "en")
    splits: tuple[str, ...]  # the splits it writes (each gets its two files, even if left empty)
    members: tuple[tuple[NamedArchive, tuple[str, ...]], ...]  # the members it reads, archive by archive
    write: Callable[[Members, PairWriter], None]  # fills the writer from the members
    # Members whose text has a pinned sha256, so a local mirror may hold them as files of their own
    # (member name -> file); a mirror serves the build only if it holds every member read.
    loose: Mapping[str, LooseFile] = field(default_factory=dict)


def build_folder(corpus_dir: Path, build: Build, *, mirror: str | None, policy: DownloadPolicy) -> Path:
    """``<corpus_dir>/<build.folder>`` with every split of ``build``, made now unless it is there already."""
    final = corpus_dir / build.folder
    if final.is_dir():  # the common case needs no lock: the folder only ever appears complete
        return final
    try:
        corpus_dir.mkdir(parents=True, exist_ok=True)
        with exclusive(
            corpus_dir / f"{build.folder}.lock", waiting=f"waiting for another process to finish extracting {final}"
        ):
            if not final.is_dir():  # else the process we waited for made it
                _make(corpus_dir, build, final, mirror=mirror, policy=policy)
    except OSError as exc:  # the local disk: full, read-only, a file where a folder should be
        raise CorpusDownloadError(f"could not extract {build.folder} into {corpus_dir}: {exc}") from None
    return final


def loose_in_mirror(build: Build, corpus: str, root: Path | None) -> tuple[dict[str, Path], list[str]]:
    """The files of ``build``'s members in the local mirror ``root`` (every one, or none) and what it lacks.

    ``({}, [])`` when there is no local mirror or the build pins no member
    (the mirror then has nothing to offer in place of the archives).
    Otherwise the lacking are member files (``pt_to_en/pt.train``) or, for
    a member without a pinned checksum, the member's own name.
    """
    if root is None or not build.loose:
        return {}, []
    found: dict[str, Path] = {}
    missing: list[str] = []
    for _, names in build.members:
        for name in names:
            file = build.loose.get(name)
            path = find_loose(root, corpus, file) if file is not None else None
            if path is None:
                missing.append(file.relpath if file is not None else name)
            else:
                found[name] = path
    places = {path.is_relative_to(root / corpus) for path in found.values()}
    if len(places) > 1:  # one copy of the pair: its files are never mixed from two folders
        raise CorpusDownloadError(
            f"the mirror {root} holds files of {build.folder} both at its top and in {root / corpus}: keep one copy"
        )
    return ({}, missing) if missing else (found, [])


def _make(corpus_dir: Path, build: Build, final: Path, *, mirror: str | None, policy: DownloadPolicy) -> None:
    """Get the members (from a local mirror's own files of them, or from the archives), write the splits
    into a temporary folder, rename it to ``final``."""
    # We hold the lock: a temporary folder of this build is a killed process's leftover.
    for stale in corpus_dir.glob(f".{build.folder}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    root = local_mirror(mirror)
    loose, missing = loose_in_mirror(build, corpus_dir.name, root)
    if missing:
        log.info("the mirror %s has no %s; extracting %s from the archive", root, missing[0], build.folder)
    archives = {} if loose else _fetch_archives(corpus_dir, build, missing, mirror=mirror, policy=policy)
    tmp = Path(tempfile.mkdtemp(prefix=f".{build.folder}.tmp-", dir=corpus_dir))
    try:
        tmp.chmod(0o755)  # mkdtemp's 0o700 would hide the folder from others sharing the cache
        raw = tmp / "members"
        raw.mkdir()
        if loose and root is not None:  # (loose is only ever found in a local mirror)
            paths, labels, sources = _copy_from_mirror(build, loose, raw, root=root)
        else:
            paths, labels, sources = _extract(build, archives, raw)
        writer = PairWriter(tmp, build.langs, build.splits)
        try:
            build.write(Members(paths, labels), writer)
        finally:
            counts = writer.close()
        shutil.rmtree(raw)
        manifest = {
            "splits": {split: vars(c) for split, c in counts.items()},
            "drop_rule": "a pair with an empty side (once stripped of spaces) is dropped",
            "sources": sources,
        }
        atomic_write_text(tmp / MANIFEST, json.dumps(manifest, indent=2) + "\n")
        os.replace(tmp, final)  # atomic: the folder appears whole or not at all
        fsync_dir(corpus_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for split, c in counts.items():
        log.info("%s %s: %d pairs; dropped %d pairs with an empty side", final, split, c.pairs, c.dropped_empty)


# What a build's members became: member -> file in the temporary folder, member -> where it came from
# (for error messages), member -> the same for the manifest.
_Got = tuple[dict[str, Path], dict[str, str], dict[str, str]]


def _copy_from_mirror(build: Build, loose: dict[str, Path], raw: Path, *, root: Path) -> _Got:
    """Copy each member's own file from the mirror into ``raw``, checking its text against the pinned sha256."""
    log.info("copying %d file(s) of %s from the mirror %s", len(loose), build.folder, root)
    paths: dict[str, Path] = {}
    for name, path in loose.items():
        paths[name] = raw / str(len(paths))
        copy_verified(path, paths[name], build.loose[name].sha256, root=root)
    labels = {name: str(path) for name, path in loose.items()}
    return paths, labels, dict(labels)


def _extract(build: Build, archives: dict[str, Path], raw: Path) -> _Got:
    """Extract the members the build reads from each archive into ``raw``, in one pass per archive."""
    paths: dict[str, Path] = {}
    labels: dict[str, str] = {}
    sources: dict[str, str] = {}
    for archive, names in build.members:
        path = archives[archive.filename]
        targets = {name: raw / str(len(paths) + i) for i, name in enumerate(names)}
        log.info("extracting %d member(s) of %s", len(targets), path)
        extract_members(path, targets)
        paths.update(targets)
        labels.update({name: f"{path}:{name}" for name in names})
        sources.update({name: f"{path.name}:{name}" for name in names})
    return paths, labels, sources


def _fetch_archives(
    corpus_dir: Path, build: Build, missing: list[str], *, mirror: str | None, policy: DownloadPolicy
) -> dict[str, Path]:
    """The build's archives by file name; when none can be had, the error says what a mirror could hold instead."""
    try:
        return {
            archive.filename: fetch_archive(archive, corpus_dir, mirror=mirror, policy=policy)
            for archive, _ in build.members
        }
    except CorpusDownloadError as exc:
        if not build.loose:
            raise
        example = missing[0] if missing else next(iter(build.loose.values())).relpath
        where = f"the mirror {mirror} has no {example}" if missing else f"e.g. {example}"
        raise CorpusDownloadError(
            f"{exc}; or put the files of {build.folder}, plain or .gz, in that directory or its "
            f"{corpus_dir.name}/ folder ({where}[.gz])"
        ) from None


@dataclass(frozen=True)
class ArchiveCorpus:
    """A corpus whose splits are extracted from archives; every pair may be used in either direction."""

    name: str  # "ted_hrlr"
    pairs: tuple[tuple[str, str], ...]  # the language pairs as the corpus names them, e.g. ("pt", "en")
    splits: tuple[str, ...]
    archives: tuple[NamedArchive, ...]  # everything it may download
    build: Callable[[str, tuple[str, str]], Build]  # (split, pair as listed) -> the build that makes it
    citation: str
    pretokenized: bool = False  # the text is tokenised (and lower-cased): BLEU with tokenize="none"
    notes: str = ""  # one line shown by `nmt data list`
    # Splits not extracted from archives (wmt14's test sets, from sacreBLEU): split -> (pair, root) -> files.
    extra: dict[str, Callable[[tuple[str, str], Path], tuple[Path, Path]]] = field(default_factory=dict)

    def pair_for(self, src: str, tgt: str) -> tuple[str, str]:
        """The listed pair that ``src``/``tgt`` is, in either direction; a ValueError listing the pairs if none."""
        for pair in self.pairs:
            if pair in ((src, tgt), (tgt, src)):
                return pair
        listed = ", ".join(f"{a}-{b}" for a, b in self.pairs)
        raise ValueError(f"{self.name} has no pair {src}-{tgt}; pairs (either direction): {listed}")

    def check(self, split: str, src: str, tgt: str) -> tuple[str, str]:
        """Refuse an unknown split or pair with a ValueError listing the valid ones; the listed pair."""
        if split not in self.splits:
            raise ValueError(f"{self.name} has no split {split!r}; splits: {', '.join(self.splits)}")
        return self.pair_for(src, tgt)

    def files(
        self, split: str, src: str, tgt: str, *, root: Path, mirror: str | None, policy: DownloadPolicy
    ) -> tuple[Path, Path]:
        """Paths to the aligned ``src`` and ``tgt`` files of ``split``, extracted into ``root/<name>`` if need be."""
        pair = self.check(split, src, tgt)
        corpus_dir = root / self.name
        if split in self.extra:
            paths = dict(zip((src, tgt), self.extra[split]((src, tgt), corpus_dir), strict=True))
            return paths[src], paths[tgt]
        folder = build_folder(corpus_dir, self.build(split, pair), mirror=mirror, policy=policy)
        return folder / f"{split}.{src}", folder / f"{split}.{tgt}"
