"""From the data and tokenizer config to encoded training and validation sets.

Glue between the corpus readers, the registry, the tokenizer and the encoded-corpus
cache: which files, which tokenizer (trained once, then reused from the model
directory), which pairs survive the length filters (and a report of those that do not).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..config import DataConfig
from ..data.annotations import AnnotationStats, frequent_asides, without_annotations
from ..data.batching import LengthFilterReport, filter_by_length
from ..data.corpus import CorpusError, ReadStats, count_lines, read_jsonl, read_parallel, read_tsv
from ..data.corpus_alignment import MAX_ALIGNED_CELLS, alignment_cells, cached_links, piece_links
from ..data.corpus_alignment import VERSION as LINKS_VERSION
from ..data.encoded import (
    EncodedCorpus,
    RaggedArray,
    cache_key,
    cached_encode,
    encode_chunks,
    encode_corpus,
    file_fingerprint,
)
from ..data.registry import data_home, is_pretokenized, parallel_files
from ..memory_files import tmx_pairs
from ..tokenizer import SubwordTokenizer, TokenizerConfig, load_or_train_tokenizers

log = logging.getLogger(__name__)


@dataclass
class CorpusFiles:
    """Where one split's pairs come from: two aligned files, or one TSV / JSONL file."""

    src: Path
    tgt: Path | None = None
    strip_annotations: bool = False  # transcript annotations out (nmt.data.annotations), counted in the log
    source_prefix: str = ""  # before each source sentence: a multilingual model's ">>xx<< " target token
    languages: tuple[str, str] | None = None  # which two of a TMX file's languages (source, target)

    @property
    def is_tmx(self) -> bool:
        return self.tgt is None and self.src.name.lower().endswith((".tmx", ".tmx.gz"))

    def pairs(self, stats: ReadStats | None = None) -> Iterator[tuple[str, str]]:
        pairs = self.annotations_stripped(stats) if self.strip_annotations else self.read(stats)
        if not self.source_prefix:
            return pairs
        return ((self.source_prefix + src, tgt) for src, tgt in pairs)

    @functools.cached_property
    def asides(self) -> tuple[frozenset[str], frozenset[str]]:
        """Each side's transcript annotations (nmt.data.annotations), found by a first pass over it."""
        return frequent_asides(src for src, _ in self.read()), frequent_asides(tgt for _, tgt in self.read())

    def annotations_stripped(self, stats: ReadStats | None) -> Iterator[tuple[str, str]]:
        """The pairs without their transcript annotations."""
        found = AnnotationStats()
        yield from without_annotations(self.read(stats), *self.asides, found)
        log.info("%s: %s", self.src, found.report())

    def read(self, stats: ReadStats | None = None) -> Iterator[tuple[str, str]]:
        """The pairs as the files hold them."""
        if self.tgt is not None:
            return read_parallel(self.src, self.tgt, stats)
        if self.src.name.endswith((".tsv", ".tsv.gz")):
            return read_tsv(self.src, stats)
        if self.src.name.endswith((".jsonl", ".jsonl.gz")):
            return read_jsonl(self.src, stats=stats)
        if self.is_tmx:
            return self._tmx(stats if stats is not None else ReadStats())
        raise ValueError(f"{self.src}: give a target file, or a .tsv / .jsonl / .tmx file holding both sides")

    def _tmx(self, stats: ReadStats) -> Iterator[tuple[str, str]]:
        """A TMX memory's pairs of the two languages (nmt.memory_files), empty ones counted as skipped."""
        source, target = self.languages or (None, None)
        try:
            for src, tgt in tmx_pairs(self.src, source, target):
                src, tgt = src.strip(), tgt.strip()
                if src and tgt:
                    stats.pairs += 1
                    yield src, tgt
                else:
                    stats.empty += 1
        except ValueError as err:
            raise CorpusError(str(err)) from None  # its message names the file (and the line)

    def fingerprint(self) -> str:
        files = "|".join(file_fingerprint(p) for p in (self.src, self.tgt) if p is not None)
        languages = f"|{'-'.join(self.languages)}" if self.languages and self.is_tmx else ""  # a TMX's two
        return (
            files + ("|annotations stripped" if self.strip_annotations else "") + f"|{self.source_prefix}" + languages
        )

    def count(self) -> int:
        """Lines of the source file: the pairs before empty ones are skipped (fast: no decoding); a
        TMX file's pairs, read (its lines are XML, not pairs)."""
        if self.is_tmx:
            return sum(1 for _ in self.read())
        return count_lines(self.src)


def sample_pairs(
    files: CorpusFiles, limit: int | None, seed: int = 0, *, progress: bool = False
) -> list[tuple[str, str]]:
    """At most `limit` pairs of `files`, drawn uniformly without replacement (seeded), in file order.

    A corpus of at most `limit` lines is returned whole. Lines are counted first (fast), then
    the chosen line numbers are taken in one pass: memory holds the sample, not the corpus.
    `progress`: a progress bar over that pass.
    """
    if limit is None:
        return list(files.pairs())
    total = files.count()
    if total <= limit:
        return list(files.pairs())
    chosen = np.sort(np.random.default_rng(seed).choice(total, size=limit, replace=False))
    picked, position = [], 0
    bar = dict(desc="tokenizer sample", unit=" pairs", unit_scale=True, disable=not progress)
    with tqdm(files.pairs(), total=total, **bar) as pairs:  # closed even when the loop stops early
        # Numbered by pairs read: a skipped empty pair shifts the numbers, which keeps the draw uniform.
        for index, pair in enumerate(pairs):
            if index == chosen[position]:
                picked.append(pair)
                position += 1
                if position == len(chosen):
                    break
    return picked


def check_input_files(data: DataConfig) -> None:
    """Every corpus file the config names exists and is readable: checked in a millisecond, before
    minutes of reading and encoding (a named corpus's files are the registry's to fetch and verify)."""
    for key in ("train_src", "train_tgt", "valid_src", "valid_tgt"):
        if getattr(data, key) is None:
            continue
        path = Path(getattr(data, key))
        if not path.exists():
            raise FileNotFoundError(f"data.{key}: {path} does not exist")
        if not path.is_file():
            raise FileNotFoundError(f"data.{key}: {path} is not a file")
        if not os.access(path, os.R_OK):
            raise PermissionError(f"data.{key}: {path} is not readable")


def validation_is_pretokenized(data: DataConfig) -> bool:
    """Whether the validation text is a tokenised corpus's own (scored with tokenize=none)."""
    return data.corpus is not None and data.valid_src is None and is_pretokenized(data.corpus)


def split_files(data: DataConfig, split: str) -> CorpusFiles:
    """The files of `split` ("train" or "valid"): explicit paths win over the named corpus."""
    src, tgt = getattr(data, f"{split}_src"), getattr(data, f"{split}_tgt")
    if data.pairs is not None:
        raise ValueError("this reads one pair's files: several directions (data.pairs) are not supported here yet")
    # The validation set stays as published, so that its scores compare with other toolkits'.
    strip = data.strip_annotations and split == "train"
    if src is not None:
        languages = (data.src_lang, data.tgt_lang)  # a TMX file's two, of the several it may hold
        return CorpusFiles(Path(src), Path(tgt) if tgt is not None else None, strip, languages=languages)
    if data.corpus is None:
        raise ValueError(f"set data.corpus or data.{split}_src (and data.{split}_tgt)")
    name = data.train_split if split == "train" else data.valid_split
    src_path, tgt_path = parallel_files(data.corpus, name, data.src_lang, data.tgt_lang)
    return CorpusFiles(src_path, tgt_path, strip_annotations=strip)


@dataclass
class ValidationSet:
    """One direction's validation text, as the model reads it (a multilingual model's with its
    >>xx<< token first) and its references."""

    direction: str  # "de-en"
    sources: list[str]
    references: list[str]


@dataclass
class TrainingData:
    src_tokenizer: SubwordTokenizer
    tgt_tokenizer: SubwordTokenizer
    train: EncodedCorpus
    valid: EncodedCorpus
    valid_src_text: list[str]  # raw validation sentences, for BLEU
    valid_ref_text: list[str]
    # With BPE-dropout: the training pairs of `train`, in its order, segmented afresh at each call.
    resample_train: Callable[[], EncodedCorpus] | None = None
    pretokenized: bool = False  # the corpus is tokenised text: validation BLEU with tokenize=none
    # Several directions (nmt.training.multilingual): each training pair's direction, 0 .. k-1, and
    # a validation set per direction; None for one pair.
    train_groups: np.ndarray | None = None
    valid_sets: list[ValidationSet] | None = None
    # Guided alignment: each training pair's piece links, in `train`'s order (`with_word_alignments`).
    train_links: RaggedArray | None = None

    def validation_sets(self) -> list[ValidationSet]:
        """The sets validation translates: one per direction ("" names the one of a bilingual model)."""
        return self.valid_sets or [ValidationSet("", self.valid_src_text, self.valid_ref_text)]

    def train_for_epoch(self) -> EncodedCorpus:
        """The training pairs as one epoch sees them: `train`, or a new sampled segmentation of it."""
        if self.resample_train is None:
            return self.train
        sampled = self.resample_train()
        if len(sampled) != len(self.train):  # the batches' indices would point at other pairs
            raise ValueError(
                f"the training files now hold {len(sampled)} pairs where the run started with {len(self.train)}: "
                "they changed during the run"
            )
        return sampled


def bpe_dropout_tokenizers(
    src_tok: SubwordTokenizer, tgt_tok: SubwordTokenizer, p: float, where: Path
) -> tuple[SubwordTokenizer, SubwordTokenizer]:
    """Copies of the tokenizers that drop merges; the tokenizer files in `where` must be BPE."""
    if src_tok.kind != "bpe" or tgt_tok.kind != "bpe":  # the files win over tokenizer.kind
        raise ValueError(f"data.bpe_dropout needs bpe tokenizers, but those in {where} are {src_tok.kind}")
    src_drop = src_tok.with_bpe_dropout(p)
    return src_drop, src_drop if tgt_tok is src_tok else tgt_tok.with_bpe_dropout(p)


def bpe_dropout_resampler(
    files: CorpusFiles, keep: np.ndarray | None, src_drop: SubwordTokenizer, tgt_drop: SubwordTokenizer
) -> Callable[[], EncodedCorpus]:
    """A function encoding the training pairs (those in `keep`, in order) with dropping tokenizers.

    Only training pairs are sampled: validation and test text, and the tokenizer saved with the
    model, keep the deterministic segmentation that translation uses.
    """

    def resample() -> EncodedCorpus:
        corpus = encode_corpus(files.pairs(), src_drop.encode_batch, tgt_drop.encode_batch)
        return corpus.take(keep) if keep is not None else corpus

    return resample


def length_filtered(corpus: EncodedCorpus, data: DataConfig) -> tuple[np.ndarray, LengthFilterReport]:
    """The rows of `corpus` within data's length limits, and why the others are not."""
    return filter_by_length(
        corpus.src_lengths(),
        corpus.tgt_lengths(),
        max_src_len=data.max_src_len,
        max_tgt_len=data.max_tgt_len,
        max_ratio=data.max_ratio,
    )


def split_key(files: CorpusFiles, tokenizer_dir: Path) -> str:
    """The cache key of a split encoded with the tokenizer files in `tokenizer_dir`."""
    tokenizer_files = sorted(p.read_bytes() for p in tokenizer_dir.glob("tokenizer*.json"))
    return cache_key(files.fingerprint(), *tokenizer_files)


def encode_split(
    files: CorpusFiles,
    src_tok: SubwordTokenizer,
    tgt_tok: SubwordTokenizer,
    tokenizer_dir: Path,
    *,
    rows: np.ndarray | None = None,
    progress: bool = False,
) -> EncodedCorpus:
    """Encode once, chunk by chunk straight to the cache; every run maps the cached ids
    (keyed by the files and the tokenizer files). `progress`: a progress bar while encoding.

    rows: sorted pair numbers, as the reader numbers the pairs (a capped direction's, see
    nmt.training.multilingual.capped_rows): only those pairs are encoded and kept, so a direction
    capped at 300 of 29,000 pairs encodes 300; the same ids as encoding all and taking those rows
    (those past the last pair are none)."""
    key = split_key(files, tokenizer_dir)
    if rows is not None:
        key = cache_key(key, np.asarray(rows, dtype=np.int64).tobytes())

    def make() -> Iterator[EncodedCorpus]:
        stats = ReadStats()
        pairs = files.pairs(stats)
        total = None
        if rows is not None:
            wanted = set(np.asarray(rows).tolist())
            pairs = (pair for number, pair in enumerate(pairs) if number in wanted)
            total = len(wanted)
        if progress:
            total = files.count() if total is None else total
            pairs = tqdm(pairs, total=total, desc=f"encoding {files.src.name}", unit=" pairs", unit_scale=True)
        yield from encode_chunks(pairs, src_tok.encode_batch, tgt_tok.encode_batch)
        log.info("%s: %s", files.src, stats.report())

    return cached_encode(data_home() / "encoded", key, make)


def corpus_links(
    corpus: EncodedCorpus, src_tok: SubwordTokenizer, tgt_tok: SubwordTokenizer, key: str, *, progress: bool = False
) -> RaggedArray:
    """The word-alignment piece links of an encoded corpus (nmt.data.corpus_alignment), computed once
    and cached beside it under `key` (the encoded corpus's own key)."""

    def make() -> RaggedArray:
        started = time.perf_counter()
        links = piece_links(
            corpus,
            pieces_of(src_tok),
            pieces_of(tgt_tok),
            wordpiece=src_tok.kind == "wordpiece",
            progress=progress,
        )
        log.info("word alignments of %d training pairs: %.1f s", len(corpus), time.perf_counter() - started)
        return links

    return cached_links(data_home() / "encoded", cache_key(key, f"links-v{LINKS_VERSION}"), make)


def pieces_of(tokenizer: SubwordTokenizer) -> list[str]:
    """Every id's piece, in id order."""
    return tokenizer.lookup(range(tokenizer.vocab_size))


def load_training_data(
    data: DataConfig, tokenizer: TokenizerConfig, model_dir: Path, *, progress: bool = False, aligned: bool = False
) -> TrainingData:
    """Tokenizers (trained on a sample of the training pairs if the model directory has none)
    and encoded splits. `progress`: progress bars on the long steps (sampling, encoding, aligning).
    `aligned`: with the training pairs' word alignments, for guided alignment."""
    train_files, valid_files = split_files(data, "train"), split_files(data, "valid")

    @functools.cache
    def sampled() -> list[tuple[str, str]]:  # read once, and only if a tokenizer is trained
        sample = sample_pairs(train_files, tokenizer.sample_pairs, progress=progress)
        log.info("tokenizer training sample: %d pairs", len(sample))
        return sample

    src_tok, tgt_tok = load_or_train_tokenizers(
        model_dir, lambda: [s for s, _ in sampled()], lambda: [t for _, t in sampled()], tokenizer
    )
    sampled.cache_clear()  # the sample's text is not needed past here
    dropping = bpe_dropout_tokenizers(src_tok, tgt_tok, data.bpe_dropout, model_dir) if data.bpe_dropout else None
    train = encode_split(train_files, src_tok, tgt_tok, model_dir, progress=progress)
    keep, report = length_filtered(train, data)
    log.info("training pairs: %s", report.report())
    kept = keep if len(keep) < len(train) else None
    if kept is not None:
        train = train.take(kept)
    if len(train) == 0:
        raise ValueError("no training pairs left after the length filters: " + report.report())
    valid = encode_split(valid_files, src_tok, tgt_tok, model_dir)
    valid_pairs = list(valid_files.pairs())
    resample = bpe_dropout_resampler(train_files, kept, *dropping) if dropping is not None else None
    links = None
    full = encode_split(train_files, src_tok, tgt_tok, model_dir) if aligned else None  # the cache's own rows
    cells = alignment_cells(full) if full is not None else 0
    if cells > MAX_ALIGNED_CELLS:
        log.info(
            "guided alignment off: the training pairs hold %s word pairs to align, more than the aligner's %s",
            f"{cells:,}",
            f"{MAX_ALIGNED_CELLS:,}",
        )
    elif full is not None:
        links = corpus_links(full, src_tok, tgt_tok, split_key(train_files, model_dir), progress=progress)
        links = links.take(kept) if kept is not None else links
    return TrainingData(
        src_tok,
        tgt_tok,
        train,
        valid,
        [s for s, _ in valid_pairs],
        [t for _, t in valid_pairs],
        resample,
        validation_is_pretokenized(data),
        train_links=links,
    )
