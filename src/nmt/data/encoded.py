"""Tokenize a corpus once and keep the ids on disk, memory-mapped.

An encoded corpus is two ragged arrays of token ids (source and target). A ragged array is
one flat int32 array of ids plus the start and length of every sequence, so a sentence is a
zero-copy slice and a selection of sentences (`RaggedArray.take`) copies no token.

``cached_encode`` stores a corpus as ``<cache_dir>/<key>.enc`` and maps it into memory
(``np.memmap``) instead of reading it: a run on millions of pairs holds the pages it touches,
and the processes of one machine (torchrun's ranks) share one copy in the page cache. The
file is written as the corpus is encoded, chunk after chunk, so encoding holds one chunk of
text and ids at a time. Its layout (FORMAT_VERSION 2): a 4 KiB header (``MAGIC``, then the
length and text of a JSON object naming the sections), the ids of both sides as one int32
array in the order they were encoded, then four int64 arrays: the starts and lengths of the
source sequences, then of the target sequences.

The key should change whenever the corpus files or the tokenizer change (``cache_key``,
``file_fingerprint``).

The cache is shared: every training run on the machine (each with its own
output folder) reads and writes the same ``cache_dir``, possibly at the same
moment. So a file appears only by an atomic rename (``nmt.files.atomic_write``),
the temporary files of writers that died are swept before each save, and a
reader treats a file that vanished (pruned by another run) or cannot be read
as a miss and rebuilds it, rather than failing. A file pruned while a run has it
mapped stays readable by that run (POSIX keeps an unlinked file's pages until it
is unmapped). No lock: two runs that miss the same key both encode it and the
second rename wins with equal bytes, which costs one duplicate encoding, not a
wrong result.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ..files import atomic_write, remove_stale_temp_files

log = logging.getLogger(__name__)

FORMAT_VERSION = 2  # bump when the saved layout changes: old cache files are then encoded again
MAGIC = b"NMTENC\x00\x02"
HEADER_BYTES = 4096
SUFFIX = ".enc"
SIDES = ("src", "tgt")


@dataclass
class RaggedArray:
    """Sequences of ids: sequence ``i`` is ``ids[starts[i] : starts[i] + lengths[i]]``.

    ``ids`` may be shared: by the two sides of a cached corpus (one memory map), and by the
    selections `take` makes.
    """

    ids: np.ndarray  # (tokens,) int32, possibly a read-only memory map
    starts: np.ndarray  # (num_sequences,) int64
    lengths: np.ndarray  # (num_sequences,) int64

    @classmethod
    def from_sequences(cls, seqs: Iterable[Sequence[int]]) -> RaggedArray:
        """Pack a collection of id sequences back to back."""
        seqs = list(seqs)
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        ids = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int32, count=int(lengths.sum()))
        return cls(ids, _starts_of(lengths), lengths)

    @classmethod
    def concatenate(cls, parts: Sequence[RaggedArray]) -> RaggedArray:
        """Join ragged arrays end to end (their ids packed into one new array)."""
        parts = [p.packed() for p in parts]
        if not parts:
            return cls(np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        shifts = np.cumsum([0] + [len(p.ids) for p in parts[:-1]])  # each part's starts begin at 0
        return cls(
            np.concatenate([p.ids for p in parts]),
            np.concatenate([p.starts + s for p, s in zip(parts, shifts, strict=True)]),
            np.concatenate([p.lengths for p in parts]),
        )

    def take(self, rows: Sequence[int] | np.ndarray) -> RaggedArray:
        """Sequences ``rows``, in that order, sharing this array's ids (no token is copied)."""
        rows = np.asarray(rows, dtype=np.int64)
        return RaggedArray(self.ids, self.starts[rows], self.lengths[rows])

    def packed(self) -> RaggedArray:
        """The same sequences with their ids back to back and nothing else: self when already so."""
        starts = _starts_of(self.lengths)
        total = int(self.lengths.sum())
        if len(self.ids) == total and np.array_equal(self.starts, starts):
            return self
        # Output token k of sequence i comes from ids[self.starts[i] + (k - starts[i])].
        source = np.repeat(self.starts - starts, self.lengths) + np.arange(total, dtype=np.int64)
        return RaggedArray(np.asarray(self.ids)[source], starts, np.array(self.lengths))

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> np.ndarray:
        start = self.starts[i]
        return self.ids[start : start + self.lengths[i]]


def _starts_of(lengths: np.ndarray) -> np.ndarray:
    """(n,) int64 starts of sequences of these lengths laid back to back from 0."""
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return starts


@dataclass
class EncodedCorpus:
    """Parallel source/target id sequences (each already wrapped in BOS ... EOS)."""

    src: RaggedArray
    tgt: RaggedArray

    def __post_init__(self) -> None:
        if len(self.src) != len(self.tgt):
            raise ValueError(f"{len(self.src)} source but {len(self.tgt)} target sequences")

    def __len__(self) -> int:
        return len(self.src)

    def src_lengths(self) -> np.ndarray:
        """(n,) source lengths in tokens, BOS and EOS included."""
        return self.src.lengths

    def tgt_lengths(self) -> np.ndarray:
        """(n,) target lengths in tokens, BOS and EOS included."""
        return self.tgt.lengths

    def take(self, rows: Sequence[int] | np.ndarray) -> EncodedCorpus:
        """Pairs ``rows``, in that order, sharing this corpus's ids."""
        return EncodedCorpus(self.src.take(rows), self.tgt.take(rows))

    @classmethod
    def concatenate(cls, parts: Sequence[EncodedCorpus]) -> EncodedCorpus:
        return cls(RaggedArray.concatenate([p.src for p in parts]), RaggedArray.concatenate([p.tgt for p in parts]))

    def save(self, path: str | Path) -> None:
        """Write to ``path`` atomically (see `save_chunks`)."""
        save_chunks(path, [self])

    @classmethod
    def load(cls, path: str | Path) -> EncodedCorpus:
        """Map a file written by `save_chunks` (read-only; nothing is read until it is used)."""
        path = Path(path)
        with open(path, "rb") as f:
            head = f.read(HEADER_BYTES)
        if not head.startswith(MAGIC) or len(head) < HEADER_BYTES:
            raise ValueError(f"{path}: not an encoded corpus of format version {FORMAT_VERSION}")
        size = int.from_bytes(head[len(MAGIC) : len(MAGIC) + 4], "little")
        meta = json.loads(head[len(MAGIC) + 4 : len(MAGIC) + 4 + size])
        ids = _map(path, np.int32, HEADER_BYTES, meta["tokens"])
        sections = {name: _map(path, np.int64, offset, count) for name, (offset, count) in meta["sections"].items()}
        src, tgt = (RaggedArray(ids, sections[f"{side}_starts"], sections[f"{side}_lengths"]) for side in SIDES)
        return cls(src, tgt)


def _map(path: Path, dtype: type, offset: int, count: int) -> np.ndarray:
    if count == 0:  # mmap cannot map nothing
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=(count,))  # ValueError if cut short


def save_chunks(path: str | Path, chunks: Iterable[EncodedCorpus]) -> None:
    """Write the pairs of `chunks`, in order, as one encoded-corpus file, atomically.

    The ids go to disk chunk by chunk as `chunks` yields them: only the starts and lengths
    (16 bytes per sequence) stay in memory until the end. A crash, or an error raised by
    `chunks`, leaves no file at `path` (``nmt.files.atomic_write``); an error of `chunks` (a bad
    line in the corpus) is raised as it is, not as a failure to write the cache.
    """
    failed: list[Exception] = []

    def produced() -> Iterator[EncodedCorpus]:
        try:
            yield from chunks
        except Exception as err:
            failed.append(err)
            raise

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(bytes(HEADER_BYTES))  # the header is written last, when the sizes are known
            tokens, starts, lengths = 0, {side: [] for side in SIDES}, {side: [] for side in SIDES}
            for chunk in produced():
                for side in SIDES:
                    part = getattr(chunk, side).packed()
                    np.asarray(part.ids, dtype=np.int32).tofile(f)
                    starts[side].append(part.starts + tokens)
                    lengths[side].append(part.lengths)
                    tokens += len(part.ids)
            _pad_to(f, 8)
            sections = {}
            for side in SIDES:
                for name, arrays in (("starts", starts[side]), ("lengths", lengths[side])):
                    array = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
                    sections[f"{side}_{name}"] = (f.tell(), len(array))
                    array.astype(np.int64).tofile(f)
            meta = json.dumps({"format_version": FORMAT_VERSION, "tokens": tokens, "sections": sections}).encode()
            f.seek(0)
            f.write(MAGIC + len(meta).to_bytes(4, "little") + meta)  # ~200 bytes: far below HEADER_BYTES

    try:
        atomic_write(path, write)
    except OSError:
        if failed:  # atomic_write words every error as "cannot write <path>": not the cache's fault
            raise failed[0] from None
        raise


def _pad_to(f: BinaryIO, alignment: int) -> None:
    f.write(bytes(-f.tell() % alignment))


def encode_chunks(
    pairs: Iterable[tuple[str, str]],
    encode_src: Callable[[list[str]], list[list[int]]],
    encode_tgt: Callable[[list[str]], list[list[int]]],
    *,
    chunk_size: int = 10_000,
) -> Iterator[EncodedCorpus]:
    """Encode sentence pairs with batch encoders, ``chunk_size`` pairs at a time, one corpus per chunk.

    Streaming in chunks keeps memory to one chunk of text, and lets fast batch tokenizers
    (which use every core) work on many sentences per call. The encoders must return one id
    list per sentence, BOS/EOS included.
    """
    pairs = iter(pairs)
    while chunk := list(itertools.islice(pairs, chunk_size)):
        src_text, tgt_text = zip(*chunk, strict=True)
        src_ids, tgt_ids = encode_src(list(src_text)), encode_tgt(list(tgt_text))
        if len(src_ids) != len(chunk) or len(tgt_ids) != len(chunk):
            raise ValueError("an encoder returned a different number of sequences than it was given")
        yield EncodedCorpus(RaggedArray.from_sequences(src_ids), RaggedArray.from_sequences(tgt_ids))


def encode_corpus(
    pairs: Iterable[tuple[str, str]],
    encode_src: Callable[[list[str]], list[list[int]]],
    encode_tgt: Callable[[list[str]], list[list[int]]],
    *,
    chunk_size: int = 10_000,
) -> EncodedCorpus:
    """`encode_chunks` joined into one corpus in memory."""
    return EncodedCorpus.concatenate(list(encode_chunks(pairs, encode_src, encode_tgt, chunk_size=chunk_size)))


def cache_key(*parts: str | bytes) -> str:
    """A 16-hex-digit sha256 digest of ``parts``, in order.

    Each part is prefixed with its length so that ("ab", "c") and
    ("a", "bc") give different keys.
    """
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()[:16]


def file_fingerprint(path: str | Path) -> str:
    """Cheap identity of a file for ``cache_key``: absolute path, size, mtime (ns).

    Reading whole corpora to checksum them would cost as much as encoding;
    size plus mtime catches any ordinary edit or re-download.
    """
    path = Path(path).resolve()
    stat = path.stat()
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


def cached_encode(
    cache_dir: str | Path,
    key: str,
    make: Callable[[], EncodedCorpus | Iterable[EncodedCorpus]],
    *,
    keep: int = 32,
) -> EncodedCorpus:
    """Map ``<cache_dir>/<key>.enc`` if it can be read, else build it with ``make()``, save it and map it.

    ``make`` returns the corpus, or its chunks one after another (then they are written as they
    come: see `save_chunks`). Saving is atomic, so a cache file that exists is complete. Every
    tokenizer trained gives new keys, so after a save only the ``keep`` most recently used files
    stay (a load counts as a use): the cache cannot grow without bound across many runs.
    """
    cache_dir = Path(cache_dir)
    path = cache_dir / f"{key}{SUFFIX}"
    corpus = _load_if_usable(path)
    if corpus is not None:
        return corpus
    made = make()
    cache_dir.mkdir(parents=True, exist_ok=True)  # no error when a concurrent run makes it first
    remove_stale_temp_files(cache_dir)  # what writers killed mid-save left behind
    save_chunks(path, [made] if isinstance(made, EncodedCorpus) else made)
    corpus = EncodedCorpus.load(path)  # mapped before pruning: another run's prune cannot take it away
    prune_cache(cache_dir, keep)
    return corpus


def _load_if_usable(path: Path) -> EncodedCorpus | None:
    """The corpus cached at ``path``, or None if there is none to use (then the caller rebuilds it).

    Between any two steps here another run may prune the file, so a missing
    file is a miss at every step; a damaged or outdated one is a miss too.
    """
    try:
        corpus = EncodedCorpus.load(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("encoded-data cache %s is unusable (%s); encoding again", path, exc)
        return None
    try:
        os.utime(path)  # recently used: pruning spares it
    except FileNotFoundError:
        pass  # pruned meanwhile by another run; we hold the data already
    return corpus


def prune_cache(cache_dir: Path, keep: int) -> None:
    """Delete all but the ``keep`` most recently used cache files in ``cache_dir``, and any of an older format."""

    def last_used(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except FileNotFoundError:  # removed by a concurrent run
            return float("inf")

    for old in cache_dir.glob("*.npz"):  # format version 1, never read again
        old.unlink(missing_ok=True)
    files = sorted(cache_dir.glob(f"*{SUFFIX}"), key=last_used, reverse=True)
    for stale in files[keep:]:
        stale.unlink(missing_ok=True)
