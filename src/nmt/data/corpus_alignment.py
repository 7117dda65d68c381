"""Word alignments of an encoded training corpus, as links between subword pieces, cached on disk.

What guided alignment trains on (nmt.training.loss): for each pair, the (source piece, target piece)
positions that a statistical aligner (nmt.data.word_alignment) links. The aligner works on units
a little finer than the tokenizer's words: a word is split where punctuation starts or ends
("Hund." is "hund" and "."), so that a sentence's full stop is a word of its own, as in tokenised
text and the gold standards, and "Hund" and "Hund." count as one word. A link of two units links
every piece of the one with every piece of the other.

The links are computed once per encoded corpus and kept beside it in the data cache
(``<key>.links``, keyed by the encoded corpus's key and this module's ``VERSION``): a run resumed,
or another run on the same corpus and tokenizer, reads them back in a second.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..files import atomic_write, remove_stale_temp_files
from .encoded import EncodedCorpus, RaggedArray
from .word_alignment import FAST_ALIGN, AlignerConfig, Links, align_corpus

log = logging.getLogger(__name__)

VERSION = 1  # bump when the units, the aligner or the file change: cached links are then made again
SUFFIX = ".links"
METASPACE = "▁"
# The aligner holds every (sentence, target word, source word) cell in memory, about 100 bytes each:
# a corpus with more (counted in pieces, an upper bound) is not aligned.
MAX_ALIGNED_CELLS = 60_000_000
# Units are counted by their first letters: on a small corpus "hunde", "hundes" and "hund" then share
# their statistics (alignment error on RWTH de-en fell from 49.6 to 42.8 with 4; docs/benchmarks-log.md, "Real text").
UNIT_PREFIX = 4


def alignment_cells(corpus: EncodedCorpus) -> int:
    """An upper bound of the cells the aligner holds for `corpus`: one way's (target + 1) x source
    pieces per pair, BOS and EOS not counted."""
    src, tgt = corpus.src_lengths() - 2, corpus.tgt_lengths() - 2
    return int(np.sum(np.maximum(tgt, 0) * (np.maximum(src, 0) + 1)))


def alignment_units(pieces: Sequence[str], *, wordpiece: bool = False) -> list[int]:
    """The unit each piece belongs to: a unit starts with a word ("▁" or no "##"), with a piece of
    punctuation only, and after one. ["▁Ein", "▁Hund", "."] -> [0, 1, 2]; ["▁Hun", "de"] -> [0, 0]."""
    units, index, after_punctuation, open_space = [], -1, False, False
    for piece in pieces:
        if wordpiece:
            starts_word, text = not piece.startswith("##"), piece.removeprefix("##")
        else:
            starts_word, text = piece.startswith(METASPACE), piece.lstrip(METASPACE)
        punctuation = bool(text) and not any(ch.isalnum() for ch in text)
        # A bare "▁" (before punctuation, in some tokenizers) has started the unit its next piece ends.
        if index < 0 or (not open_space and (starts_word or punctuation or after_punctuation)):
            index += 1
        units.append(index)
        open_space = starts_word and not text
        after_punctuation = punctuation
    return units


def unit_words(pieces: Sequence[str], *, wordpiece: bool = False) -> list[str]:
    """What the aligner counts as each unit's word: its first UNIT_PREFIX letters, lower-cased,
    without word marks."""
    words: list[str] = []
    for unit, piece in zip(alignment_units(pieces, wordpiece=wordpiece), pieces, strict=True):
        text = piece.removeprefix("##") if wordpiece else piece.lstrip(METASPACE)
        if unit == len(words):
            words.append("")
        words[unit] += text.lower()
    return [w[:UNIT_PREFIX] for w in words]


class UnitVocabulary:
    """Unit text -> a dense int id, grown as sentences are read."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, words: Sequence[str]) -> list[int]:
        return [self.ids.setdefault(w, len(self.ids)) for w in words]


def piece_links(
    corpus: EncodedCorpus,
    src_pieces: Sequence[str],
    tgt_pieces: Sequence[str],
    config: AlignerConfig = FAST_ALIGN,
    *,
    specials: int = 4,
    wordpiece: bool = False,
    progress: bool = False,
) -> RaggedArray:
    """For each pair of `corpus`, its piece links as [s0, t0, s1, t1, ...]: positions in the encoded
    source and target sequences (BOS is position 0). src_pieces / tgt_pieces: each id's piece;
    ids below `specials` (padding, unknown, BOS, EOS) and >>xx<< language tokens are never linked."""
    sides = []
    for ragged, table in ((corpus.src, src_pieces), (corpus.tgt, tgt_pieces)):
        vocabulary, units, ids = UnitVocabulary(), [], []
        # a multilingual model's >>xx<< target-language tokens are no words either
        wordless = np.array([i < specials or (p.startswith(">>") and p.endswith("<<")) for i, p in enumerate(table)])
        for k in range(len(ragged)):
            seq = np.asarray(ragged[k])
            inner = np.flatnonzero(~wordless[seq])  # positions of real pieces
            pieces = [table[i] for i in seq[inner].tolist()]
            unit = alignment_units(pieces, wordpiece=wordpiece)
            units.append((inner, np.asarray(unit, dtype=np.int64)))
            ids.append(vocabulary(unit_words(pieces, wordpiece=wordpiece)))
        sides.append((units, ids))
    (src_units, src_ids), (tgt_units, tgt_ids) = sides
    bar = tqdm(total=2 * config.iterations, desc="aligning words", unit=" EM steps", disable=not progress)
    with bar:
        links = align_corpus(src_ids, tgt_ids, config, progress=bar.update)
    return RaggedArray.from_sequences(
        _pieces_of(unit_links, src_units[k], tgt_units[k]) for k, unit_links in enumerate(links)
    )


def _pieces_of(unit_links: Links, src: tuple[np.ndarray, np.ndarray], tgt: tuple[np.ndarray, np.ndarray]) -> list[int]:
    """Unit links -> the flat [s, t, ...] positions of every piece pair they link."""
    (src_pos, src_unit), (tgt_pos, tgt_unit) = src, tgt
    flat: list[int] = []
    for a, b in unit_links:
        for s in src_pos[src_unit == a].tolist():
            for t in tgt_pos[tgt_unit == b].tolist():
                flat += (s, t)
    return flat


def save_links(path: Path, links: RaggedArray) -> None:
    """Write `links` to `path` atomically: a JSON line of sizes, then the ids, starts and lengths."""

    def write(tmp: str) -> None:
        packed = links.packed()
        with open(tmp, "wb") as f:
            f.write(json.dumps({"version": VERSION, "tokens": len(packed.ids), "rows": len(packed)}).encode() + b"\n")
            np.asarray(packed.ids, dtype=np.int32).tofile(f)
            np.asarray(packed.lengths, dtype=np.int64).tofile(f)

    atomic_write(path, write)


def load_links(path: Path) -> RaggedArray:
    """Read a file of `save_links`; ValueError if it is not one of this VERSION."""
    with open(path, "rb") as f:
        head = json.loads(f.readline())
        if head.get("version") != VERSION:
            raise ValueError(f"{path}: links of version {head.get('version')}, not {VERSION}")
        ids = np.fromfile(f, dtype=np.int32, count=head["tokens"])
        lengths = np.fromfile(f, dtype=np.int64, count=head["rows"])
    if len(ids) != head["tokens"] or len(lengths) != head["rows"] or lengths.sum() != len(ids):
        raise ValueError(f"{path}: cut short")
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return RaggedArray(ids, starts, lengths)


def cached_links(cache_dir: Path, key: str, make: Callable[[], RaggedArray], *, keep: int = 8) -> RaggedArray:
    """The links cached as ``<cache_dir>/<key>.links``, else ``make()``'s, saved there first. After a
    save only the `keep` most recently used links files stay."""
    path = cache_dir / f"{key}{SUFFIX}"
    try:
        links = load_links(path)
        try:
            os.utime(path)  # recently used: pruning spares it
        except FileNotFoundError:
            pass  # pruned meanwhile by another run; the links are read already
        log.info("word alignments: read from %s", path)
        return links
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError) as err:
        log.warning("word-alignment cache %s is unusable (%s); aligning again", path, err)
    links = make()
    cache_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_files(cache_dir)
    save_links(path, links)
    for stale in sorted(cache_dir.glob(f"*{SUFFIX}"), key=_last_used, reverse=True)[keep:]:
        stale.unlink(missing_ok=True)
    return links


def _last_used(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:  # pruned meanwhile by another run
        return float("inf")
