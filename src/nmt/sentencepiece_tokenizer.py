"""SentencePiece tokenizers with a vocabulary of their own: the layout of Marian / OPUS-MT models.

A Marian model segments text with one SentencePiece model per side (source.spm, target.spm) and
maps the pieces to ids through a vocabulary (vocab.json, and target_vocab.json where the two sides
have their own), not through the SentencePiece model's own ids. The special tokens are Marian's:
``</s>`` ends a sentence, ``<unk>`` stands for a piece outside the vocabulary, ``<pad>`` pads and
also starts the decoder. A source sentence is its pieces then ``</s>``; a target is ``<pad>``,
its pieces, ``</s>``. A multi-target model reads the target language from a leading ``>>xx<<``
token in the source text.

This module mirrors what transformers' MarianTokenizer does with the same files (the tests hold
it to the same ids and text), and gives nmt's tokenizer interface (encode, decode, lookup,
vocab_size) so that every command takes an imported model as it takes its own.

    sentencepiece.json   {"eos": "</s>", "unk": "<unk>", "pad": "<pad>", "start": "<pad>",
                          "separate_vocabs": false}   marks a directory that holds this layout
"""

from __future__ import annotations

import functools
import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .files import atomic_write_text

SETTINGS_FILE = "sentencepiece.json"

SOURCE_MODEL, TARGET_MODEL = "source.spm", "target.spm"
VOCAB, TARGET_VOCAB = "vocab.json", "target_vocab.json"
LANGUAGE_CODE = re.compile(r">>([^<>\s]+)<<")  # a multi-target model's target-language token
SPACE_MARK = "\u2581"  # SentencePiece's visible space


@dataclass(frozen=True)
class SpecialTokens:
    """The special pieces of a Marian vocabulary, and whether the two sides have vocabularies of their own."""

    eos: str = "</s>"
    unk: str = "<unk>"
    pad: str = "<pad>"
    start: str = "<pad>"  # the decoder's first input
    separate_vocabs: bool = False


class SentencePieceTokenizer:
    """One side (source or target) of a Marian tokenizer pair."""

    kind = "sentencepiece"

    def __init__(
        self, model_file: str | Path, vocab: dict[str, int], side: str, special: SpecialTokens = SpecialTokens()
    ) -> None:
        if side not in ("source", "target"):
            raise ValueError(f"side must be source or target, got {side!r}")
        self.model_file, self.side, self.special = Path(model_file), side, special
        self._spm = load_sentencepiece(self.model_file)
        self._vocab = vocab
        self._pieces: dict[int, str] = {i: piece for piece, i in vocab.items()}
        for name in ("eos", "unk", "pad", "start"):
            if getattr(special, name) not in vocab:
                raise ValueError(f"the vocabulary has no {name} token {getattr(special, name)!r}")
        self.eos_id, self.unk_id = vocab[special.eos], vocab[special.unk]
        self.pad_id, self.start_id = vocab[special.pad], vocab[special.start]
        self._specials = {self.eos_id, self.unk_id, self.pad_id, self.start_id}
        # A special token typed in the text is read as that token, as MarianTokenizer reads it.
        names = sorted({special.eos, special.unk, special.pad}, key=len, reverse=True)
        self._special_split = re.compile("(" + "|".join(map(re.escape, names)) + ")")

    # ----- text <-> ids ---------------------------------------------------------
    def encode(self, text: str, add_special: bool = True) -> list[int]:
        """Text -> ids: a source gets ``</s>`` after its pieces, a target ``<pad>`` before and ``</s>`` after.

        A leading ``>>xx<<`` stays one token (the target language of a multi-target model), as
        MarianTokenizer keeps it; so does ``</s>``, ``<unk>`` or ``<pad>`` typed in the text; a
        piece outside the vocabulary becomes ``<unk>``.
        """
        code = []
        if text.startswith(">>") and (end := text.find("<<")) != -1:
            code, text = [text[: end + 2]], text[end + 2 :]
        pieces = list(code)
        for i, part in enumerate(self._special_split.split(text)):  # odd parts: a special token typed as text
            pieces.extend([part] if i % 2 else self._spm.encode(part, out_type=str) if part else [])
        ids = [self._vocab.get(piece, self.unk_id) for piece in pieces]
        if not add_special:
            return ids
        return ids + [self.eos_id] if self.side == "source" else [self.start_id, *ids, self.eos_id]

    def encode_batch(self, texts: list[str], add_special: bool = True) -> list[list[int]]:
        return [self.encode(text, add_special) for text in texts]

    def decode(self, ids: Sequence[int]) -> str:
        """Ids -> text: stop at ``</s>``, drop padding and the start token, keep ``<unk>`` visible.

        Runs of ordinary pieces are joined by SentencePiece; a special piece between them is
        written as itself followed by a space (MarianTokenizer's convert_tokens_to_string).
        """
        text, run = "", []
        for i in map(int, ids):
            if i == self.eos_id:
                break
            if i in (self.pad_id, self.start_id):
                continue
            piece = self._piece(i)
            if i in self._specials:
                text += self._spm.decode_pieces(run) + piece + " "
                run = []
            else:
                run.append(piece)
        text += self._spm.decode_pieces(run)
        return text.replace(SPACE_MARK, " ").strip()

    def lookup(self, ids: Sequence[int]) -> list[str]:
        """Ids -> pieces, e.g. ``["▁Ein", "▁Mann", "</s>"]`` (for attention plots)."""
        return [self._piece(int(i)) for i in ids]

    def _piece(self, i: int) -> str:
        piece = self._pieces.get(i)
        if piece is None:
            raise ValueError(f"id {i} is outside the vocabulary (size {self.vocab_size})")
        return piece

    def normalize(self, text: str) -> str:
        """What ``decode(encode(text))`` gives where every piece is in the vocabulary."""
        return self._spm.decode(self._spm.encode(text)).strip()

    def with_bpe_dropout(self, p: float) -> SentencePieceTokenizer:
        raise ValueError("BPE-dropout needs nmt's own bpe tokenizer, not a SentencePiece model")

    @property
    def vocab_size(self) -> int:
        """Rows of the embedding this side needs: one past the largest id of the vocabulary."""
        return max(self._pieces) + 1

    @functools.cached_property
    def target_languages(self) -> list[str]:
        """The ``xx`` of every ``>>xx<<`` token: the target languages a multi-target model takes.

        Cached: the Translator asks for every sentence, and OPUS-MT vocabularies hold 58k pieces."""
        if self.special.separate_vocabs:  # the codes are source-side pieces; MarianTokenizer lists none
            return []
        return sorted(m.group(1) for piece in self._vocab if (m := LANGUAGE_CODE.fullmatch(piece)))


# ----- files ----------------------------------------------------------------------------------


def load_sentencepiece(path: Path) -> Any:
    """A sentencepiece.SentencePieceProcessor (imported here: only imported models need the library)."""
    import sentencepiece  # noqa: PLC0415

    if not path.is_file():
        raise FileNotFoundError(f"SentencePiece model not found: {path}")
    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.Load(str(path))
    except (OSError, RuntimeError) as err:
        raise ValueError(f"{path}: not a SentencePiece model ({' '.join(str(err).split())})") from None
    return processor


def read_vocab(path: Path) -> dict[str, int]:
    """A Marian vocab.json: piece -> id, every id a distinct non-negative int."""
    if not path.is_file():
        raise FileNotFoundError(f"vocabulary not found: {path}")
    try:
        vocab = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a JSON vocabulary ({err})") from None
    if not isinstance(vocab, dict) or not vocab:
        raise ValueError(f"{path}: a vocabulary must be a non-empty mapping of piece -> id")
    for piece, i in vocab.items():
        if type(i) is not int or i < 0:
            raise ValueError(f"{path}: piece {piece!r} has id {i!r}, not a non-negative int")
    if len(set(vocab.values())) != len(vocab):
        raise ValueError(f"{path}: two pieces share an id")
    return vocab


def has_sentencepiece_tokenizers(directory: str | Path) -> bool:
    return (Path(directory) / SETTINGS_FILE).is_file()


def load_sentencepiece_tokenizers(directory: str | Path) -> tuple[SentencePieceTokenizer, SentencePieceTokenizer]:
    """The (source, target) pair a directory holds; every problem names its file."""
    directory = Path(directory)
    settings_path = directory / SETTINGS_FILE
    try:
        settings = json.loads(settings_path.read_text(encoding="utf-8"))
        special = SpecialTokens(**settings)
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError) as err:
        raise ValueError(f"{settings_path}: not tokenizer settings ({err})") from None
    source_vocab = read_vocab(directory / VOCAB)
    target_vocab = read_vocab(directory / TARGET_VOCAB) if special.separate_vocabs else source_vocab
    try:
        return (
            SentencePieceTokenizer(directory / SOURCE_MODEL, source_vocab, "source", special),
            SentencePieceTokenizer(directory / TARGET_MODEL, target_vocab, "target", special),
        )
    except ValueError as err:
        raise ValueError(f"{directory / VOCAB}: {err}") from None


def save_sentencepiece_tokenizers(
    src: SentencePieceTokenizer, tgt: SentencePieceTokenizer, directory: str | Path
) -> None:
    """Write both SentencePiece models, the vocabulary (or two) and the settings into `directory`."""
    directory = Path(directory)
    for tokenizer, name in ((src, SOURCE_MODEL), (tgt, TARGET_MODEL)):
        if tokenizer.model_file.resolve() != (directory / name).resolve():
            shutil.copyfile(tokenizer.model_file, directory / name)
    atomic_write_text(directory / VOCAB, json.dumps(src._vocab, ensure_ascii=False, indent=1) + "\n")
    if src.special.separate_vocabs:
        atomic_write_text(directory / TARGET_VOCAB, json.dumps(tgt._vocab, ensure_ascii=False, indent=1) + "\n")
    atomic_write_text(directory / SETTINGS_FILE, json.dumps(asdict(src.special), indent=2) + "\n")
