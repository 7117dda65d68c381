"""What the registry knows, as rows and as a table, and fetching a corpus ahead of a run (``nmt data``).

``list_corpora()`` looks without fetching or hashing anything: sizes on disk
against the registered sizes, the folders already extracted, and which
pairs a local mirror holds (the corpus's files, its archives, or a pair's
own files in place of an archive; see ``mirror.py``).
``fetch_corpus(name, pair)`` downloads, verifies and extracts what a run on
that pair will ask for, with the same progress bars, locks and errors as a
run, and returns the paths.
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from .archive import archive_path_if_cached, known_size
from .archive_corpus import MANIFEST, ArchiveCorpus, loose_in_mirror
from .download import CorpusDownloadError
from .mirror import find, local_mirror
from .registry import CORPORA, NamedCorpus, data_home, get_corpus, parallel_files

__all__ = ["CorpusRow", "list_corpora", "fetch_corpus", "format_corpus_table", "parse_pair", "human_bytes"]


@dataclass(frozen=True)
class CorpusRow:
    """One registered corpus, as ``nmt data list`` shows it."""

    name: str
    pairs: tuple[str, ...]  # "pt-en", ...: the pairs to ask for (either direction)
    splits: tuple[str, ...]
    download_bytes: int | None  # all its downloads together; None: not published nor recorded yet
    cached_bytes: int  # how much of that is in the cache now (by size; nothing is hashed)
    extracted: tuple[str, ...]  # folders already extracted from its archives, e.g. ("pt_to_en",)
    in_mirror: bool  # a local mirror ($NMT_MIRROR) holds every download
    pretokenized: bool  # tokenised, lower-cased text: BLEU with tokenize="none"
    notes: str
    citation: str
    mirror_pairs: tuple[str, ...] = ()  # the pairs a local mirror can give every split of, with or without archives

    @property
    def cached(self) -> bool:
        """Whether every download is in the cache."""
        return self.download_bytes is not None and self.cached_bytes >= self.download_bytes


def list_corpora(*, cache_dir: str | Path | None = None, mirror: str | None = None) -> list[CorpusRow]:
    """A row per registered corpus, in registry order; ``mirror`` defaults to ``$NMT_MIRROR``."""
    root = Path(cache_dir) if cache_dir is not None else data_home()
    mirror = mirror if mirror is not None else os.environ.get("NMT_MIRROR") or None
    return [_row(corpus, root / corpus.name, local_mirror(mirror)) for corpus in CORPORA.values()]


def _row(corpus: NamedCorpus | ArchiveCorpus, corpus_dir: Path, mirror: Path | None) -> CorpusRow:
    if isinstance(corpus, NamedCorpus):
        files = list(corpus.files.values())
        sizes = [f.size for f in files]
        cached = sum(f.size or 0 for f in files if _has_size(corpus_dir / f.relpath, f.size))
        in_mirror = mirror is not None and all(find(mirror, corpus.name, f.relpath) for f in files)
        pairs = tuple(f"{a}-{b}" for a, b in combinations(corpus.languages, 2))
        mirror_pairs = pairs if in_mirror else _named_pairs_in_mirror(corpus, mirror)
        extracted: tuple[str, ...] = ()
        notes = f"any two of {', '.join(corpus.languages)}; one file per split and language"
    else:
        sizes, cached = [], 0
        for archive in corpus.archives:
            try:
                path, size = archive_path_if_cached(archive, corpus_dir), known_size(archive, corpus_dir)
            except CorpusDownloadError:  # an unreadable record: shown as not cached, fetching says why
                path, size = None, archive.size
            sizes.append(size)
            cached += size if path is not None and size is not None else 0
        in_mirror = mirror is not None and all(find(mirror, corpus.name, a.filename) for a in corpus.archives)
        pairs = tuple(f"{a}-{b}" for a, b in corpus.pairs)
        mirror_pairs = pairs if in_mirror else _loose_pairs_in_mirror(corpus, mirror)
        extracted = tuple(sorted(p.name for p in corpus_dir.glob("*") if (p / MANIFEST).is_file()))
        notes = corpus.notes
    total = None if None in sizes else sum(sizes)
    return CorpusRow(
        corpus.name,
        pairs,
        corpus.splits,
        total,
        cached,
        extracted,
        in_mirror,
        corpus.pretokenized,
        notes,
        corpus.citation,
        mirror_pairs,
    )


def _named_pairs_in_mirror(corpus: NamedCorpus, mirror: Path | None) -> tuple[str, ...]:
    """The pairs of languages whose files of every split a local mirror holds (by name: nothing is hashed)."""
    if mirror is None:
        return ()
    held = [
        lang
        for lang in corpus.languages
        if all(find(mirror, corpus.name, f.relpath) for (_, f_lang), f in corpus.files.items() if f_lang == lang)
    ]
    return tuple(f"{a}-{b}" for a, b in combinations(held, 2))


def _loose_pairs_in_mirror(corpus: ArchiveCorpus, mirror: Path | None) -> tuple[str, ...]:
    """The pairs whose every split a local mirror holds as files of their own (``Build.loose``), archive or not."""
    if mirror is None:
        return ()
    return tuple(
        f"{a}-{b}"
        for a, b in corpus.pairs
        if all(
            loose_in_mirror(corpus.build(split, (a, b)), corpus.name, mirror)[0]
            for split in corpus.splits
            if split not in corpus.extra
        )
    )


def _has_size(path: Path, size: int | None) -> bool:
    try:
        return path.is_file() and (size is None or path.stat().st_size == size)
    except OSError:
        return False


def parse_pair(pair: str) -> tuple[str, str]:
    """ "pt-en" -> ("pt", "en") (codes may hold "_", as az_tr; never "-"); a ValueError for anything else."""
    parts = pair.split("-")
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"a language pair looks like pt-en (source-target), got {pair!r}")
    return parts[0], parts[1]


def fetch_corpus(
    name: str,
    pair: str | None = None,
    *,
    splits: tuple[str, ...] | None = None,
    mirror: str | None = None,
    cache_dir: str | Path | None = None,
    retries: int = 3,
) -> dict[str, dict[str, tuple[Path, Path]]]:
    """Download, verify and extract ``name`` now; ``{pair: {split: (src_path, tgt_path)}}``.

    ``pair`` ("pt-en", either direction the corpus allows) limits it to one
    pair; without it every pair the corpus lists is fetched (for wmt14 that
    is 1.7 GB of archives and sacreBLEU's test sets). ``splits`` limits the
    splits. Unknown names are a ``ValueError`` listing the valid ones, raised
    before anything is fetched; a failed download a ``CorpusDownloadError``.
    """
    corpus = get_corpus(name)
    if pair is not None:
        wanted = [parse_pair(pair)]
    elif isinstance(corpus, NamedCorpus):
        wanted = list(combinations(corpus.languages, 2))
    else:
        wanted = list(corpus.pairs)
    wanted_splits = tuple(splits) if splits is not None else corpus.splits
    for src, tgt in wanted:  # refuse a bad name before the first byte is fetched
        for split in wanted_splits:
            _check(corpus, split, src, tgt)
    options = dict(mirror=mirror, cache_dir=cache_dir, retries=retries)
    return {
        f"{src}-{tgt}": {split: parallel_files(name, split, src, tgt, **options) for split in wanted_splits}
        for src, tgt in wanted
    }


def _check(corpus: NamedCorpus | ArchiveCorpus, split: str, src: str, tgt: str) -> None:
    if isinstance(corpus, ArchiveCorpus):
        corpus.check(split, src, tgt)
        return
    if split not in corpus.splits:
        raise ValueError(f"{corpus.name} has no split {split!r}; splits: {', '.join(corpus.splits)}")
    for lang in (src, tgt):
        if lang not in corpus.languages:
            raise ValueError(f"{corpus.name} has no language {lang!r}; languages: {', '.join(corpus.languages)}")


def human_bytes(n: int | None) -> str:
    """1_310_059 -> "1.3 MB" (decimal units, as the sizes corpora publish); None -> "unknown"."""
    if n is None:
        return "unknown"
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def _cached_text(row: CorpusRow) -> str:
    if row.cached:
        text = "yes"
    elif row.cached_bytes and row.download_bytes:
        text = f"{row.cached_bytes / row.download_bytes:.0%}"
    elif row.in_mirror:
        text = "mirror"
    else:
        text = f"{' '.join(row.mirror_pairs)} in mirror" if row.mirror_pairs else "no"
    return text + (f" ({', '.join(row.extracted)} extracted)" if row.extracted else "")


def format_corpus_table(rows: list[CorpusRow], *, width: int = 100) -> str:
    """The rows as a plain-text table (pairs wrapped to ``width``), then one note line per corpus."""
    header = ("NAME", "DOWNLOAD", "CACHED", "SPLITS", "PAIRS (either direction)")
    cells = [
        (r.name, human_bytes(r.download_bytes), _cached_text(r), ", ".join(r.splits), " ".join(r.pairs)) for r in rows
    ]
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(4)]
    indent = sum(widths) + 2 * 4
    lines = []
    for cell in [header, *cells]:
        left = "  ".join(text.ljust(w) for text, w in zip(cell[:4], widths, strict=True))
        wrapped = textwrap.wrap(cell[4], max(20, width - indent), break_on_hyphens=False, break_long_words=False)
        wrapped = wrapped or [""]
        lines.append(f"{left}  {wrapped[0]}".rstrip())
        lines.extend(" " * indent + more for more in wrapped[1:])
    lines.append("")
    lines.extend(f"{r.name}: {r.notes}" for r in rows)
    return "\n".join(lines)
