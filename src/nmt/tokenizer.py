"""Subword tokenizers: train, save, load, encode and decode.

A thin layer over Hugging Face `tokenizers`, which does all the actual
segmentation. This module only decides the pipeline (normaliser,
pre-tokeniser, model, decoder), fixes the ids of the four special tokens,
and stores each trained tokenizer as one `tokenizer.json` file.

Three kinds of subword model are offered:

- ``"bpe"`` (default) and ``"unigram"``: SentencePiece-style. Spaces become
  the visible marker "▁" (Metaspace), so no information is thrown away, and
  characters never seen in training fall back to their UTF-8 bytes
  (``<0xE4>``...). Hence ``decode(encode(s)) == normalize_text(s)`` for any
  string ``s`` without the marker strings below: lossless up to normalisation.
- ``"wordpiece"``: BERT-style. Text is lower-cased and split on whitespace and
  punctuation before the model sees it, so decoding has to guess the spacing
  around punctuation ("a man , walking ." -> "a man, walking."): lossy.
  Words with unseen characters become ``[UNK]``.

Round-trip guarantee, precisely: ``normalize_text`` applies NFKC, maps "▁"
to a space, folds every whitespace run to one space and strips the ends
(and lower-cases where configured). It calls the very normaliser the
tokenizer uses, so the two can never disagree. A string holding a lone
surrogate is no text: ``encode`` refuses it with a ValueError that says so
(fuzz/fuzz_tokenizer.py holds bpe and unigram to all of this).

One module, though over 400 lines: the pipeline, the byte-fallback surgery and the files of a
model's tokenizer pair are one idea, and every caller needs them together.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

from tokenizers import (
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

from .config_checks import ConfigError, Rule, at_least, check_fields, one_of
from .files import atomic_write_text
from .sentencepiece_tokenizer import LANGUAGE_CODE, load_sentencepiece_tokenizers, save_sentencepiece_tokenizers
from .sentencepiece_tokenizer import SETTINGS_FILE as SENTENCEPIECE_SETTINGS

log = logging.getLogger(__name__)

PAD, UNK, BOS, EOS = "[PAD]", "[UNK]", "[START]", "[END]"
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
# These are registered as special: never split, and a literal "[END]" typed in the
# input is read as the marker itself (HF matches special tokens before segmenting).
# Trainers put special tokens first, in this order, which is what pins the ids.
SPECIAL_TOKENS = [PAD, UNK, BOS, EOS]

KINDS = ("bpe", "unigram", "wordpiece")
METASPACE = "▁"  # U+2581, SentencePiece's visible space
BYTE_PIECES = [f"<0x{b:02X}>" for b in range(256)]  # the spelling HF's ByteFallback decodes

JOINT_FILE = "tokenizer.json"
SRC_FILE, TGT_FILE = "tokenizer.src.json", "tokenizer.tgt.json"


@dataclass
class TokenizerConfig:
    """How to train the subword tokenizer(s)."""

    # "bpe" | "unigram" (both lossless: Metaspace + byte fallback) | "wordpiece" (BERT-style, lossy)
    kind: str = "bpe"
    # Upper bound on the vocabulary, special tokens and byte pieces included; a multi-target model's
    # >>xx<< tokens come on top (one each).
    vocab_size: int = 8192
    # One vocabulary for both languages (needed to share all embeddings) or one per side.
    joint: bool = True
    # Separate vocabularies only: the source side's size (null: vocab_size). A source side of several
    # languages (many-to-one data.pairs) wants more pieces than an output layer of one should pay for.
    src_vocab_size: int | None = None
    # Lower-case all text; None means the kind's default (only wordpiece lower-cases).
    lowercase: bool | None = None
    # A pair must occur this often to be merged (bpe, wordpiece; unigram ignores it).
    min_frequency: int = 2
    # The text is tokenised already (tokens split by spaces, as in TED hrlr): wordpiece then splits on
    # spaces only and decodes by joining tokens with spaces, keeping the corpus's own tokens. (bpe and
    # unigram always split on spaces only.)
    pretokenized: bool = False
    # Train on at most this many training pairs, drawn at random (seeded) from the whole corpus: the
    # vocabulary of a large corpus is as good from a sample, at a fraction of the time and memory
    # (SentencePiece samples 1M sentences by default; joint, this is 1M sentences). null: every pair.
    sample_pairs: int | None = 500_000

    RULES: ClassVar[dict[str, Rule]] = {
        "kind": one_of(*KINDS),
        "min_frequency": at_least(1),
        "sample_pairs": at_least(1),
    }

    def __post_init__(self) -> None:
        """Raise ConfigError naming the key (`tokenizer.vocab_size ...`) for a value training would choke on."""
        check_fields(self, "tokenizer")
        # Byte pieces and specials alone take 260 slots; leave room for real subwords.
        least = len(SPECIAL_TOKENS) + (len(BYTE_PIECES) if self.kind != "wordpiece" else 0) + 100
        for name in ("vocab_size", "src_vocab_size"):
            size = getattr(self, name)
            if size is not None and size < least:
                raise ConfigError(f"tokenizer.{name} {size} is too small for {self.kind!r}; need at least {least}")
        if self.joint and self.src_vocab_size is not None:
            raise ConfigError(
                "tokenizer.src_vocab_size sizes a separate source vocabulary: it needs tokenizer.joint=false"
            )

    @property
    def source_side(self) -> TokenizerConfig:
        """The settings of the source tokenizer: src_vocab_size, where set, as its vocab_size."""
        if self.src_vocab_size is None:
            return self
        return replace(self, vocab_size=self.src_vocab_size, src_vocab_size=None, joint=False)

    @property
    def lowercases(self) -> bool:
        """Whether this configuration lower-cases text."""
        return self.kind == "wordpiece" if self.lowercase is None else self.lowercase


@functools.cache
def _normalizer(lowercase: bool) -> normalizers.Normalizer:
    """NFKC, then "▁" and whitespace runs -> one space, strip; optionally lower-case."""
    steps = [
        normalizers.NFKC(),
        # A literal "▁" would come back as a space; mapping it now keeps the round trip exact.
        normalizers.Replace(METASPACE, " "),
        # Metaspace only knows " ": tabs, newlines and runs of spaces would not survive.
        normalizers.Replace(Regex(r"\s+"), " "),
        normalizers.Strip(),
    ]
    if lowercase:
        steps.append(normalizers.Lowercase())
    return normalizers.Sequence(steps)


def normalize_text(s: str, *, lowercase: bool = False) -> str:
    """Normalise text the way every tokenizer here does before segmenting it.

    For the lossless kinds, ``tok.decode(tok.encode(s)) == normalize_text(s)``.
    """
    return _normalizer(lowercase).normalize_str(s)


def refuse_lone_surrogates(texts: Sequence[str]) -> None:
    """A ValueError naming the first lone surrogate in `texts`, if any. HF's tokenizers cannot take
    one across to Rust and say only "TextInputSequence must be str" (a TypeError), which names
    neither the text nor the character; called once such an error is raised, so that text without
    one costs nothing."""
    for k, text in enumerate(texts):
        if not isinstance(text, str):
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            where = f"text {k + 1} of {len(texts)}" if len(texts) > 1 else "the text"
            raise ValueError(
                f"{where} holds a lone surrogate (U+{ord(text[err.start]):04X} at character {err.start}), "
                "which is not text"
            ) from None


class SubwordTokenizer:
    """One trained subword model for one or both languages."""

    # The special ids, the same for every tokenizer nmt trains (an imported model's have their own).
    pad_id, unk_id, start_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

    def __init__(self, tokenizer: Tokenizer) -> None:
        """Wrap a trained HF tokenizer; its special tokens must have the fixed ids."""
        for token, expected in zip(SPECIAL_TOKENS, (PAD_ID, UNK_ID, BOS_ID, EOS_ID), strict=True):
            found = tokenizer.token_to_id(token)
            if found != expected:
                raise ValueError(f"special token {token} has id {found}, expected {expected}")
        self._tokenizer = tokenizer

    @functools.cached_property
    def target_languages(self) -> list[str]:
        """The ``xx`` of each ``>>xx<<`` token (with_language_tokens): the target languages of a
        multilingual model, chosen by the token that starts each source sentence; [] for one target."""
        added = self._tokenizer.get_added_tokens_decoder().values()
        return sorted(m.group(1) for token in added if (m := LANGUAGE_CODE.fullmatch(token.content)))

    def with_language_tokens(self, languages: Iterable[str]) -> SubwordTokenizer:
        """A copy with one ``>>xx<<`` token per language after the trained vocabulary: special
        tokens, so each is one id wherever it stands in a text, never cut into pieces (Marian's
        convention for multi-target models, which OPUS-MT tooling and transformers read)."""
        copy = Tokenizer.from_str(self._tokenizer.to_str())
        copy.add_special_tokens([f">>{language}<<" for language in languages])
        return SubwordTokenizer(copy)

    def without_language_tokens(self) -> SubwordTokenizer:
        """A copy without the ``>>xx<<`` tokens (with_language_tokens' inverse), for a model of one
        target: every other piece keeps its id, since the tokens come after the trained vocabulary."""
        state = json.loads(self._tokenizer.to_str())
        kept = [t for t in state["added_tokens"] if not LANGUAGE_CODE.fullmatch(t["content"])]
        dropped = sorted(t["id"] for t in state["added_tokens"] if LANGUAGE_CODE.fullmatch(t["content"]))
        if dropped and dropped != list(range(self.vocab_size - len(dropped), self.vocab_size)):
            raise ValueError("the target-language tokens are not the last ids: they cannot be dropped")
        state["added_tokens"] = kept
        return SubwordTokenizer(Tokenizer.from_str(json.dumps(state)))

    # ----- training -------------------------------------------------------------

    @classmethod
    def train(cls, lines: Iterable[str], config: TokenizerConfig) -> SubwordTokenizer:
        """Train a tokenizer on ``lines`` (one sentence each; any iterable, read once)."""
        length = len(lines) if isinstance(lines, Sequence) else None
        # Peek so that an empty corpus fails loudly instead of giving a vocabulary of specials.
        iterator = iter(lines)
        first = next(iterator, None)
        if first is None:
            raise ValueError("cannot train a tokenizer on no lines: the training corpus is empty")
        tokenizer, trainer = _pipeline(config)
        tokenizer.train_from_iterator(itertools.chain([first], iterator), trainer, length=length)
        if config.kind != "wordpiece":
            tokenizer = _with_byte_fallback(tokenizer)
        # Attached after training so that the template's ids refer to the final vocabulary.
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{BOS} $A {EOS}", special_tokens=[(BOS, BOS_ID), (EOS, EOS_ID)]
        )
        return cls(tokenizer)

    # ----- text <-> ids ---------------------------------------------------------

    def encode(self, text: str, add_special: bool = True) -> list[int]:
        """Text -> ids, wrapped as ``[BOS, ..., EOS]`` unless ``add_special`` is False.

        A string holding a lone surrogate ("\\ud800", from JSON or surrogateescape) is no text: a
        ValueError that says so (`refuse_lone_surrogates`)."""
        try:
            return self._tokenizer.encode(text, add_special_tokens=add_special).ids
        except TypeError:
            refuse_lone_surrogates([text])
            raise

    def encode_batch(self, texts: list[str], add_special: bool = True) -> list[list[int]]:
        """Like ``encode`` for many texts at once, using all cores (HF's parallel batch encode)."""
        # encode_batch_fast (tokenizers >= 0.21) skips the character offsets we never use, which is
        # measurably faster (1.3x: docs/benchmarks-log.md, "Data pipeline").
        encode = getattr(self._tokenizer, "encode_batch_fast", self._tokenizer.encode_batch)
        try:
            return [e.ids for e in encode(texts, add_special_tokens=add_special)]
        except TypeError:
            refuse_lone_surrogates(texts)
            raise

    def with_bpe_dropout(self, p: float) -> SubwordTokenizer:
        """A copy that skips each BPE merge with probability ``p`` (Provilkov et al. 2020), for training data.

        Every call of the copy may segment a word differently, into pieces of the same vocabulary
        (down to single characters), so a model sees many segmentations of its training text. The
        tokenizers library draws these from its own generator, which cannot be seeded. Only BPE
        has merges to drop: another kind is a ValueError. This tokenizer is not changed.
        """
        if self.kind != "bpe":
            raise ValueError(f"BPE-dropout needs a bpe tokenizer, not {self.kind}")
        if not 0 < p < 1:
            raise ValueError(f"BPE-dropout must be in (0, 1), got {p}")
        copy = Tokenizer.from_str(self._tokenizer.to_str())
        copy.model.dropout = p
        return SubwordTokenizer(copy)

    def decode(self, ids: Sequence[int]) -> str:
        """Ids -> natural text: stop at the first EOS, drop PAD and BOS, keep ``[UNK]`` visible."""
        kept = []
        for i in map(int, ids):  # int() also accepts numpy / torch scalars
            if i == EOS_ID:
                break
            if i not in (PAD_ID, BOS_ID):
                kept.append(i)
        return self._tokenizer.decode(kept, skip_special_tokens=False)

    def lookup(self, ids: Sequence[int]) -> list[str]:
        """Ids -> pieces, e.g. ``["[START]", "▁Ein", "▁Mann", "[END]"]`` (for attention plots)."""
        pieces = []
        for i in map(int, ids):
            piece = self._tokenizer.id_to_token(i)
            if piece is None:
                raise ValueError(f"id {i} is outside the vocabulary (size {self.vocab_size})")
            pieces.append(piece)
        return pieces

    def normalize(self, text: str) -> str:
        """This tokenizer's own normalisation: what ``decode(encode(text))`` gives (bpe, unigram)."""
        normalizer = self._tokenizer.normalizer
        return text if normalizer is None else normalizer.normalize_str(text)

    @property
    def vocab_size(self) -> int:
        """Number of ids, special tokens included: the embedding table's size."""
        return self._tokenizer.get_vocab_size(with_added_tokens=True)

    @property
    def kind(self) -> str:
        """``"bpe"``, ``"unigram"`` or ``"wordpiece"``, read from the model itself."""
        return type(self._tokenizer.model).__name__.lower()

    # ----- files ----------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        """Write one HF ``tokenizer.json`` file, atomically (a crash never leaves half a file)."""
        atomic_write_text(path, self._tokenizer.to_str(pretty=True))

    @classmethod
    def load(cls, path: str | Path) -> SubwordTokenizer:
        """Read a file written by ``save``; errors name the path."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"tokenizer file not found: {path}")
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as err:  # HF raises a bare Exception on malformed JSON
            raise ValueError(f"{path} is not a valid tokenizer file: {err}") from err
        try:
            return cls(tokenizer)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from err


def _pipeline(config: TokenizerConfig) -> tuple[Tokenizer, trainers.Trainer]:
    """An untrained HF tokenizer for ``config.kind`` and the trainer that fills it."""
    # Byte pieces are appended after training, so the trainer gets the remaining budget.
    budget = config.vocab_size - len(BYTE_PIECES)
    if config.kind == "bpe":
        tokenizer = Tokenizer(models.BPE(unk_token=UNK, byte_fallback=True))
        trainer = trainers.BpeTrainer(
            vocab_size=budget,
            min_frequency=config.min_frequency,
            special_tokens=SPECIAL_TOKENS,
            show_progress=False,
        )
    elif config.kind == "unigram":
        tokenizer = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(
            vocab_size=budget,
            special_tokens=SPECIAL_TOKENS,
            unk_token=UNK,
            show_progress=False,
        )
    else:  # wordpiece: no byte pieces, so it gets the whole budget
        tokenizer = Tokenizer(models.WordPiece(unk_token=UNK))
        trainer = trainers.WordPieceTrainer(
            vocab_size=config.vocab_size,
            min_frequency=config.min_frequency,
            special_tokens=SPECIAL_TOKENS,
            show_progress=False,
        )
    tokenizer.normalizer = _normalizer(config.lowercases)
    if config.kind == "wordpiece" and config.pretokenized:
        tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # no guessing of spaces
    elif config.kind == "wordpiece":
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(METASPACE, prepend_scheme="always")
        # ByteFallback turns runs of <0x..> pieces back into characters, then Metaspace
        # turns "▁" into spaces. Not ByteFallback+Fuse+Metaspace: HF's Metaspace decoder
        # drops every "▁" of the first token, and after Fuse everything is the first token.
        tokenizer.decoder = decoders.Sequence(
            [decoders.ByteFallback(), decoders.Metaspace(METASPACE, prepend_scheme="always")]
        )
    return tokenizer, trainer


def _with_byte_fallback(tokenizer: Tokenizer) -> Tokenizer:
    """Add the 256 byte pieces to a trained BPE/Unigram model and switch byte fallback on.

    HF's trainers neither create byte pieces nor (for Unigram) keep the flag, so
    we edit the serialised model, exactly as SentencePiece lays it out.
    """
    state = json.loads(tokenizer.to_str())
    model = state["model"]
    if model["type"] == "BPE":  # vocab: {piece: id}
        vocab = model["vocab"]
        for piece in BYTE_PIECES:
            if piece not in vocab:
                vocab[piece] = max(vocab.values()) + 1
    else:  # Unigram vocab: [[piece, log-prob], ...]; bytes get the rarest score seen
        known = {piece for piece, _ in model["vocab"]}
        floor = min(score for _, score in model["vocab"])
        model["vocab"].extend([piece, floor] for piece in BYTE_PIECES if piece not in known)
    model["byte_fallback"] = True
    return Tokenizer.from_str(json.dumps(state))


# ----- source/target pairs ------------------------------------------------------


def train_tokenizers(
    src_lines: Iterable[str], tgt_lines: Iterable[str], config: TokenizerConfig
) -> tuple[SubwordTokenizer, SubwordTokenizer]:
    """Train the (source, target) tokenizers.

    Joint: one tokenizer on both sides, returned twice (the same object).
    Separate: one per side, of ``config.vocab_size`` pieces (the source's ``src_vocab_size`` where set).
    """
    if not config.joint:
        return SubwordTokenizer.train(src_lines, config.source_side), SubwordTokenizer.train(tgt_lines, config)
    both: Iterable[str] = itertools.chain(src_lines, tgt_lines)
    if isinstance(src_lines, Sequence) and isinstance(tgt_lines, Sequence):
        both = [*src_lines, *tgt_lines]  # a list lets HF know the length
    tokenizer = SubwordTokenizer.train(both, config)
    return tokenizer, tokenizer


def save_tokenizers(src: SubwordTokenizer, tgt: SubwordTokenizer, directory: str | Path) -> None:
    """Write ``tokenizer.json`` if joint (``src is tgt``), else ``tokenizer.{src,tgt}.json``.

    Files of the other layout are removed, so a directory always holds exactly one pair.
    """
    directory = Path(directory)
    if src.kind == "sentencepiece":  # an imported model's pair: its own files
        save_sentencepiece_tokenizers(src, tgt, directory)
        return
    if src is tgt:
        src.save(directory / JOINT_FILE)
        stale = [SRC_FILE, TGT_FILE]
    else:
        src.save(directory / SRC_FILE)
        tgt.save(directory / TGT_FILE)
        stale = [JOINT_FILE]
    for name in stale:
        (directory / name).unlink(missing_ok=True)


def has_tokenizers(directory: str | Path) -> bool:
    """Whether ``directory`` holds either layout written by ``save_tokenizers``, or an imported model's."""
    directory = Path(directory)
    return any((directory / name).is_file() for name in (JOINT_FILE, SRC_FILE, SENTENCEPIECE_SETTINGS))


def load_tokenizers(directory: str | Path) -> tuple[SubwordTokenizer, SubwordTokenizer]:
    """Inverse of ``save_tokenizers``; a joint tokenizer comes back as one object twice."""
    directory = Path(directory)
    if (directory / SENTENCEPIECE_SETTINGS).is_file():  # an imported model's (Marian) SentencePiece pair
        return load_sentencepiece_tokenizers(directory)
    joint, src, tgt = directory / JOINT_FILE, directory / SRC_FILE, directory / TGT_FILE
    if joint.is_file() and (src.is_file() or tgt.is_file()):
        raise ValueError(f"{directory} holds both joint and separate tokenizers; remove one layout")
    if joint.is_file():
        tokenizer = SubwordTokenizer.load(joint)
        return tokenizer, tokenizer
    if src.is_file() or tgt.is_file():
        return SubwordTokenizer.load(src), SubwordTokenizer.load(tgt)  # names the missing one
    raise FileNotFoundError(f"no tokenizer in {directory}: expected {JOINT_FILE} or {SRC_FILE} + {TGT_FILE}")


def load_or_train_tokenizers(
    directory: str | Path,
    src_lines_fn: Callable[[], Iterable[str]],
    tgt_lines_fn: Callable[[], Iterable[str]],
    config: TokenizerConfig,
) -> tuple[SubwordTokenizer, SubwordTokenizer]:
    """Load the tokenizers saved in ``directory``, or train, save and return new ones.

    Existing files always win, even if ``config`` has changed since: retraining
    would silently invalidate every model trained on the old ids. A mismatch is
    logged as a warning; delete the files to retrain. The line functions are
    only called when training.
    """
    directory = Path(directory)
    if has_tokenizers(directory):
        src, tgt = load_tokenizers(directory)
        log.info("loaded tokenizers from %s (vocab %d/%d)", directory, src.vocab_size, tgt.vocab_size)
        if src.kind == "sentencepiece":  # an imported model's own tokenizers: config.tokenizer describes nmt's
            log.info("the tokenizers are the imported model's SentencePiece models; tokenizer.* does not apply")
        elif (src is tgt) != config.joint or src.kind != config.kind:
            log.warning(
                "tokenizers in %s (kind=%s, joint=%s) differ from the config (kind=%s, joint=%s); "
                "using the files: delete them to retrain",
                directory,
                src.kind,
                src is tgt,
                config.kind,
                config.joint,
            )
        return src, tgt
    log.info(
        "training %s %s tokenizer(s) (vocab %s)",
        "joint" if config.joint else "separate",
        config.kind,
        config.vocab_size if config.joint else f"{config.source_side.vocab_size}/{config.vocab_size}",
    )
    src, tgt = train_tokenizers(src_lines_fn(), tgt_lines_fn(), config)
    save_tokenizers(src, tgt, directory)
    log.info("saved tokenizers to %s", directory)
    return src, tgt
