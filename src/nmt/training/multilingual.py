"""Several directions in one model (data.pairs): their data, joined for one training run.

    data.pairs: [multi30k:de-en, multi30k:fr-en, "multi30k:cs-en:3000"]   # many-to-one
    data.pairs: [multi30k:en-de, multi30k:en-fr, multi30k:en-cs]          # one-to-many
    data.pairs: [corpora/:gl-en, corpora/:pt-en]   # one's own files: corpora/train.gl-en.gl, ...

Each direction is read from the registry or from a directory of the user's (train.gl-en.gl and
train.gl-en.en, or train.gl and train.en where a language takes part in one direction; valid.* or
dev.* for validation; .gz too), cut to its cap (a seeded random subset, the same in
every run), encoded and cached as any corpus, and filtered by length; the directions are then
joined into one training set that keeps each pair's direction, so that batches draw directions
by temperature (data.temperature, nmt.data.pair_sampling) rather than as the corpora are sized.

One subword model covers every language (tokenizer.joint, the default). It is trained on each
language's distinct lines, each language cut to its share by the same temperature as the batches,
so that English on the target side of three directions does not take three times the vocabulary of
a language on one source side, and a small language is not drowned by large ones. With
tokenizer.joint=false there is one per side instead, each over the languages of its side sampled
alike: a many-to-one model's output layer then holds only its target language's pieces, and the
source side may be sized apart (tokenizer.src_vocab_size) for the several languages it reads.

A model with several target languages reads which one to write from a ">>xx<<" token before each
source sentence (Marian's convention: OPUS-MT's multi-target models, which `nmt import` reads and
`--target-lang` drives); its vocabulary holds one such token per target language. A many-to-one
model has none: the source speaks for itself.

Validation keeps one set per direction, so that BLEU is reported for each (nmt.training.validation).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..config import ConfigError, DataConfig, PairSpec
from ..data.corpus_alignment import MAX_ALIGNED_CELLS, alignment_cells
from ..data.encoded import EncodedCorpus, RaggedArray, cache_key, encode_corpus
from ..data.pair_sampling import direction_shares
from ..data.registry import is_pretokenized, parallel_files
from ..tokenizer import (
    SubwordTokenizer,
    TokenizerConfig,
    has_tokenizers,
    load_tokenizers,
    save_tokenizers,
    train_tokenizers,
)
from .datasets import (
    CorpusFiles,
    TrainingData,
    ValidationSet,
    bpe_dropout_tokenizers,
    corpus_links,
    encode_split,
    length_filtered,
    sample_pairs,
    split_key,
)

log = logging.getLogger(__name__)

CAP_SEED = 0  # the draw of a capped direction's pairs: fixed, so that every run trains on the same ones


# A directory's file names for each split: fairseq's (train.gl-en.gl) or the plain form (train.gl).
DIRECTORY_SPLITS = {"train": ("train",), "valid": ("valid", "dev")}


def directory_files(direction: PairSpec, split: str) -> tuple[Path, Path]:
    """One direction's two files for `split` in the user's directory `direction.corpus`."""
    directory, tried = Path(direction.corpus), []
    for stem in DIRECTORY_SPLITS[split]:
        for middle in (f".{direction.name}", ""):
            for gz in ("", ".gz"):
                paths = [directory / f"{stem}{middle}.{lang}{gz}" for lang in (direction.src_lang, direction.tgt_lang)]
                if all(path.is_file() for path in paths):
                    return paths[0], paths[1]
                tried.append(" + ".join(path.name for path in paths))
    raise FileNotFoundError(
        f"data.pairs: {direction.corpus}:{direction.name}: no {split} files in {directory}; "
        f"looked for {', '.join(tried[::2])} (each also .gz)"
    )


def direction_files(data: DataConfig, direction: PairSpec, split: str) -> CorpusFiles:
    """One direction's files for `split` ("train" or "valid"), its sources led by the target token
    where the model has several targets."""
    if direction.is_directory:
        src, tgt = directory_files(direction, split)
    elif direction.corpus is None or is_pretokenized(direction.corpus):
        raise ConfigError(
            f"data.pairs: {direction.corpus}:{direction.name}: a registered corpus of running text is needed"
        )
    else:
        name = data.train_split if split == "train" else data.valid_split
        src, tgt = parallel_files(direction.corpus, name, direction.src_lang, direction.tgt_lang)
    prefix = f">>{direction.tgt_lang}<< " if data.target_languages else ""
    return CorpusFiles(src, tgt, strip_annotations=data.strip_annotations and split == "train", source_prefix=prefix)


def validation_files(data: DataConfig) -> list[CorpusFiles]:
    """Each direction's validation files, as the model reads them."""
    return [direction_files(data, direction, "valid") for direction in data.directions]


def training_pairs(data: DataConfig) -> list[tuple[str, str]]:
    """Every direction's training pairs as the model reads them (a multi-target model's sources led
    by their >>xx<< token), a capped direction's kept ones only: e.g. for a lexical shortlist."""
    pairs = []
    for direction in data.directions:
        files = direction_files(data, direction, "train")
        read = list(files.pairs())
        pairs += [read[i] for i in kept_rows(len(read), capped_rows(files.count(), direction.max_pairs))]
    return pairs


def capped_rows(size: int, cap: int | None) -> np.ndarray | None:
    """The rows a direction capped at `cap` pairs keeps (sorted), or None for all of them."""
    if cap is None or cap >= size:
        return None
    return np.sort(np.random.default_rng(CAP_SEED).choice(size, size=cap, replace=False))


def kept_rows(count: int, rows: Sequence[int] | np.ndarray | None) -> np.ndarray:
    """Which of a direction's `count` pairs, numbered as the reader gives them, training takes: all of
    them, or a capped direction's `rows` (capped_rows, counted on the files' lines). A row past the
    end is a line pair the reader skipped as empty, so it is left out."""
    if rows is None:
        return np.arange(count)
    rows = np.asarray(rows, dtype=np.int64)
    return rows[rows < count]


def language_sample(
    data: DataConfig,
    train: dict[str, CorpusFiles],
    rows: dict[str, np.ndarray | None],
    budget: int | None,
    sides: tuple[str, ...] = ("src", "tgt"),
) -> list[str]:
    """Text to train the subword model on: each language's distinct lines from every direction it
    takes part in on `sides` (a capped direction lends only its kept pairs), then each language cut
    to its share by data.temperature, as the batches draw directions, within `budget` lines in all
    (None: every line)."""
    text: dict[str, dict[str, None]] = {}  # distinct lines: a multi-way corpus repeats its English
    for direction in data.directions:
        files = train[direction.name]
        files = CorpusFiles(files.src, files.tgt, files.strip_annotations)  # the text without target tokens
        if rows[direction.name] is not None:
            every = list(files.pairs())
            pairs = [every[i] for i in kept_rows(len(every), rows[direction.name])]
        else:
            pairs = sample_pairs(files, budget)
        if "src" in sides:
            text.setdefault(direction.src_lang, {}).update(dict.fromkeys(s for s, _ in pairs))
        if "tgt" in sides:
            text.setdefault(direction.tgt_lang, {}).update(dict.fromkeys(t for _, t in pairs))
    languages = sorted(text)
    sizes = [len(text[lang]) for lang in languages]
    total = sum(sizes) if budget is None else min(budget, sum(sizes))
    shares = direction_shares(sizes, data.temperature)
    rng = np.random.default_rng(CAP_SEED)
    lines = []
    for lang, size, share in zip(languages, sizes, shares, strict=True):
        count = min(size, round(share * total))
        picked = list(text[lang])
        if count < size:
            picked = [picked[i] for i in np.sort(rng.choice(size, size=count, replace=False))]
        log.info("subword model sample: %d of %d distinct %s lines", len(picked), size, lang)
        lines += picked
    return lines


def pair_tokenizers(
    data: DataConfig,
    config: TokenizerConfig,
    model_dir: Path,
    train: dict[str, CorpusFiles],
    rows: dict[str, np.ndarray | None],
) -> tuple[SubwordTokenizer, SubwordTokenizer]:
    """The model directory's (source, target) tokenizers, or ones trained on the languages of
    data.pairs: one over all of them (joint, the same object twice) or one per side; the source
    side holds the target tokens."""
    targets = data.target_languages
    if has_tokenizers(model_dir):
        src, tgt = load_tokenizers(model_dir)
        if src.target_languages != targets:
            raise ValueError(
                f"{model_dir}: its tokenizer's target tokens are {src.target_languages or 'none'}, "
                f"data.pairs needs {targets or 'none'}: train into a new directory"
            )
        if (src is tgt) != config.joint:
            log.warning(
                "%s: its tokenizers are %s, as they were trained: tokenizer.joint does not apply",
                model_dir,
                "joint" if src is tgt else "separate",
            )
        return src, tgt
    if config.joint:
        both_sides = None if config.sample_pairs is None else 2 * config.sample_pairs
        src, _ = train_tokenizers(language_sample(data, train, rows, both_sides), [], config)
        tgt = src
    else:
        src, tgt = train_tokenizers(
            language_sample(data, train, rows, config.sample_pairs, sides=("src",)),
            language_sample(data, train, rows, config.sample_pairs, sides=("tgt",)),
            config,
        )
    if targets:
        src = src.with_language_tokens(targets)
        tgt = src if config.joint else tgt
    save_tokenizers(src, tgt, model_dir)
    return src, tgt


def kept_pairs_resampler(
    files: CorpusFiles, taken: np.ndarray, keep: np.ndarray, src_drop: SubwordTokenizer, tgt_drop: SubwordTokenizer
) -> Callable[[], EncodedCorpus]:
    """A function encoding one direction's training pairs with a BPE-dropout tokenizer: the rows
    `taken` of its files (a capped direction's few), then of those the rows `keep` (the length
    filters'), in order. Only the taken pairs are encoded, not the whole file each epoch."""

    def resample() -> EncodedCorpus:
        pairs = list(files.pairs())
        taken_pairs = [pairs[i] for i in taken]
        return encode_corpus(taken_pairs, src_drop.encode_batch, tgt_drop.encode_batch).take(keep)

    return resample


def load_multilingual_data(
    data: DataConfig,
    tokenizer_config: TokenizerConfig,
    model_dir: Path,
    *,
    progress: bool = False,
    aligned: bool = False,
) -> TrainingData:
    """The tokenizer and the encoded training and validation sets of every direction in data.pairs;
    `aligned`: with each direction's word alignments (aligned apart: a word's translations differ by
    language), for guided alignment."""
    directions = data.directions
    train = {d.name: direction_files(data, d, "train") for d in directions}
    valid = {d.name: direction_files(data, d, "valid") for d in directions}
    rows = {d.name: capped_rows(train[d.name].count(), d.max_pairs) for d in directions}
    src_tok, tgt_tok = pair_tokenizers(data, tokenizer_config, Path(model_dir), train, rows)
    parts, groups, valid_parts, valid_sets, resamplers, links = [], [], [], [], [], []
    for index, direction in enumerate(directions):
        capped = rows[direction.name]
        taken_corpus = encode_split(train[direction.name], src_tok, tgt_tok, model_dir, rows=capped, progress=progress)
        # the pairs' numbers: a capped direction's rows short of the reader's last pair (sorted, so the first ones)
        taken = np.arange(len(taken_corpus)) if capped is None else np.asarray(capped[: len(taken_corpus)])
        keep, report = length_filtered(taken_corpus, data)
        corpus = taken_corpus.take(keep)  # a capped direction's pairs alone are aligned (taken_corpus)
        if aligned and alignment_cells(taken_corpus) > MAX_ALIGNED_CELLS:
            too_many = f"more word pairs than the aligner's {MAX_ALIGNED_CELLS:,}"
            log.info("guided alignment off: %s holds %s", direction.name, too_many)
            aligned = False
        if aligned:
            key = cache_key(split_key(train[direction.name], Path(model_dir)), np.asarray(taken).tobytes())
            links.append(corpus_links(taken_corpus, src_tok, tgt_tok, key, progress=progress).take(keep))
        if len(corpus) == 0:
            raise ValueError(f"data.pairs: {direction.name} has no training pairs left: {report.report()}")
        log.info("%s training pairs: %s", direction.name, report.report())
        if data.bpe_dropout:  # the same pairs, segmented afresh each epoch; the >>xx<< token is never cut
            dropping = bpe_dropout_tokenizers(src_tok, tgt_tok, data.bpe_dropout, Path(model_dir))
            resamplers.append(kept_pairs_resampler(train[direction.name], taken, keep, *dropping))
        parts.append(corpus)
        groups.append(np.full(len(corpus), index, dtype=np.int64))
        valid_parts.append(encode_split(valid[direction.name], src_tok, tgt_tok, model_dir))
        pairs = list(valid[direction.name].pairs())
        valid_sets.append(ValidationSet(direction.name, [s for s, _ in pairs], [t for _, t in pairs]))
    return TrainingData(
        src_tok,
        tgt_tok,
        EncodedCorpus.concatenate(parts),
        EncodedCorpus.concatenate(valid_parts),
        [s for v in valid_sets for s in v.sources],
        [r for v in valid_sets for r in v.references],
        resample_train=(lambda: EncodedCorpus.concatenate([r() for r in resamplers])) if resamplers else None,
        train_groups=np.concatenate(groups),
        valid_sets=valid_sets,
        train_links=RaggedArray.concatenate(links) if aligned else None,
    )
