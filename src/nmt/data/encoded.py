"""Tokenize a corpus once and keep the ids on disk.

An encoded corpus is two ragged arrays of token ids (source and target),
each stored as one flat int32 array plus offsets: compact in memory, one
``np.savez`` to save, and a sentence is a zero-copy slice.

``cached_encode`` stores it as ``<cache_dir>/<key>.npz``; the key should
change whenever the corpus files or the tokenizer change (``cache_key``,
``file_fingerprint``).

The cache is shared: every training run on the machine (each with its own
output folder) reads and writes the same ``cache_dir``, possibly at the same
moment. So a file appears only by an atomic rename (``nmt.files.atomic_write``),
the temporary files of writers that died are swept before each save, and a
reader treats a file that vanished (pruned by another run) or cannot be read
as a miss and rebuilds it, rather than failing. No lock: two runs that miss
the same key both encode it and the second rename wins with equal bytes,
which costs one duplicate encoding, not a wrong result.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..files import atomic_write, remove_stale_temp_files

log = logging.getLogger(__name__)

FORMAT_VERSION = 1  # bump when the saved layout changes: old cache files are then encoded again


@dataclass
class RaggedArray:
    """Sequences of ids: sequence ``i`` is ``ids[offsets[i]:offsets[i+1]]``."""

    ids: np.ndarray  # (total_tokens,) int32
    offsets: np.ndarray  # (num_sequences + 1,) int64, offsets[0] == 0

    @classmethod
    def from_sequences(cls, seqs: Iterable[Sequence[int]]) -> RaggedArray:
        """Pack a collection of id sequences."""
        seqs = list(seqs)
        lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int32, count=int(offsets[-1]))
        return cls(ids, offsets)

    @classmethod
    def concatenate(cls, parts: Sequence[RaggedArray]) -> RaggedArray:
        """Join ragged arrays end to end."""
        if not parts:
            return cls(np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64))
        # Each part's offsets start at 0: shift them by the tokens before it.
        starts = np.cumsum([0] + [len(p.ids) for p in parts[:-1]])
        offsets = np.concatenate(
            [parts[0].offsets[:1]] + [p.offsets[1:] + s for p, s in zip(parts, starts, strict=True)]
        )
        return cls(np.concatenate([p.ids for p in parts]), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.ids[self.offsets[i] : self.offsets[i + 1]]

    def lengths(self) -> np.ndarray:
        """(num_sequences,) int64 length of every sequence."""
        return np.diff(self.offsets)


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
        return self.src.lengths()

    def tgt_lengths(self) -> np.ndarray:
        """(n,) target lengths in tokens, BOS and EOS included."""
        return self.tgt.lengths()

    def save(self, path: str | Path) -> None:
        """Write to ``path`` (an .npz file), atomically.

        The data goes to a temporary file in the same folder that is then
        renamed into place (``nmt.files.atomic_write``), so a crash or a
        concurrent writer (another run, another DDP rank) never leaves a
        half-written file that a later run would load.
        """

        def write(tmp: str) -> None:
            with open(tmp, "wb") as f:  # a file object: savez then adds no ".npz" to the name
                np.savez(
                    f,
                    format_version=np.array(FORMAT_VERSION),
                    src_ids=self.src.ids,
                    src_offsets=self.src.offsets,
                    tgt_ids=self.tgt.ids,
                    tgt_offsets=self.tgt.offsets,
                )

        atomic_write(path, write)

    @classmethod
    def load(cls, path: str | Path) -> EncodedCorpus:
        """Read a corpus written by ``save``."""
        with np.load(path, allow_pickle=False) as data:
            version = int(data["format_version"])
            if version != FORMAT_VERSION:
                raise ValueError(f"{path}: format version {version}, expected {FORMAT_VERSION}")
            return cls(
                RaggedArray(data["src_ids"], data["src_offsets"]),
                RaggedArray(data["tgt_ids"], data["tgt_offsets"]),
            )


def encode_corpus(
    pairs: Iterable[tuple[str, str]],
    encode_src: Callable[[list[str]], list[list[int]]],
    encode_tgt: Callable[[list[str]], list[list[int]]],
    *,
    chunk_size: int = 10_000,
) -> EncodedCorpus:
    """Encode sentence pairs with batch encoders, ``chunk_size`` pairs at a time.

    Streaming in chunks keeps memory to the packed ids plus one chunk of
    text, and lets fast batch tokenizers work on many sentences per call.
    The encoders must return one id list per sentence, BOS/EOS included.
    """
    src_parts, tgt_parts = [], []
    pairs = iter(pairs)
    while chunk := list(itertools.islice(pairs, chunk_size)):
        src_text, tgt_text = zip(*chunk, strict=True)
        src_ids, tgt_ids = encode_src(list(src_text)), encode_tgt(list(tgt_text))
        if len(src_ids) != len(chunk) or len(tgt_ids) != len(chunk):
            raise ValueError("an encoder returned a different number of sequences than it was given")
        src_parts.append(RaggedArray.from_sequences(src_ids))
        tgt_parts.append(RaggedArray.from_sequences(tgt_ids))
    return EncodedCorpus(RaggedArray.concatenate(src_parts), RaggedArray.concatenate(tgt_parts))


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
    cache_dir: str | Path, key: str, make: Callable[[], EncodedCorpus], *, keep: int = 32
) -> EncodedCorpus:
    """Load ``<cache_dir>/<key>.npz`` if it can be read, else build it with ``make()`` and save it.

    Saving is atomic (see ``EncodedCorpus.save``), so a cache file that
    exists is complete. Every tokenizer trained gives new keys, so after a
    save only the ``keep`` most recently used files stay (a load counts as a
    use): the cache cannot grow without bound across many runs.
    """
    cache_dir = Path(cache_dir)
    path = cache_dir / f"{key}.npz"
    corpus = _load_if_usable(path)
    if corpus is not None:
        return corpus
    corpus = make()
    cache_dir.mkdir(parents=True, exist_ok=True)  # no error when a concurrent run makes it first
    remove_stale_temp_files(cache_dir)  # what writers killed mid-save left behind
    corpus.save(path)
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
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        log.warning("encoded-data cache %s is unusable (%s); encoding again", path, exc)
        return None
    try:
        os.utime(path)  # recently used: pruning spares it
    except FileNotFoundError:
        pass  # pruned meanwhile by another run; we hold the data already
    return corpus


def prune_cache(cache_dir: Path, keep: int) -> None:
    """Delete all but the ``keep`` most recently used ``*.npz`` files in ``cache_dir``."""

    def last_used(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except FileNotFoundError:  # removed by a concurrent run
            return float("inf")

    files = sorted(cache_dir.glob("*.npz"), key=last_used, reverse=True)
    for stale in files[keep:]:
        stale.unlink(missing_ok=True)
