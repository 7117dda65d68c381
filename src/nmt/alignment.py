"""Word alignments from cross-attention: which source word each output word was translated from.

A Transformer has no alignment of its own, but its cross-attention, averaged over the heads of one
layer, points at the source piece a target piece was translated from (Garg et al. 2019; Chen et al.
2020 found the row of the step *after* the piece, when it is the decoder's input, sharper: "shift").
Each target piece is aligned to the source piece it attends to most; pieces are grouped into words
(a piece starting with "▁" starts a word; WordPiece's "##" continues one), and the word pairs are
written as fast_align/Pharaoh does: "0-0 1-2 2-1", source index first, 0-based.

The same grouping labels attention pictures for people (`word_groups`, `word_attention`): a word in
place of its pieces, the start and end tokens said plainly, "(start)" and "(end)".

A model trained with guided alignment (nmt.training.guided_alignment) has a head taught to align:
head 0 of one layer, which its model.json names (alignment_layer, alignment_heads = 1), and its
alignments read that head alone. For other models (imported ones, runs without it) the layer and the
shift were chosen by alignment error rate on a gold standard (`benchmarks/alignment_error.py`;
docs/benchmarks-log.md, "Real text"): the top layer, heads averaged, unshifted, was best of the six on the one model
measured.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

METASPACE = "▁"
BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # a byte-fallback piece, as tokenizer.BYTE_PIECES spells it
BYTE_RUN = re.compile(r"(?:<0x[0-9A-Fa-f]{2}>)+")


@dataclass(frozen=True)
class AlignmentMethod:
    """Which attention gives the alignment: `layer` (negative counts from the top), averaged over its
    first `heads` heads (0: all of them); with `shift`, target piece j uses the row of step j + 1
    (where piece j is the input)."""

    layer: int = -1
    heads: int = 0
    shift: bool = False

    def describe(self) -> str:
        """In words, for `nmt info`: "head 0 of decoder layer -2 (trained to align)"."""
        late = ", read at the step after each word" if self.shift else ""
        if self.heads == 1:
            return f"head 0 of decoder layer {self.layer} (trained to align: guided alignment{late})"
        which = "every head" if self.heads == 0 else f"heads 0-{self.heads - 1}"
        return f"{which} of decoder layer {self.layer}, averaged (no head trained to align{late})"


DEFAULT_METHOD = AlignmentMethod()


def model_alignment(layer: int, heads: int, shift: bool = False) -> AlignmentMethod:
    """The method a model's config names (ModelConfig.alignment_layer, alignment_heads, alignment_shift)."""
    return AlignmentMethod(layer=layer, heads=heads, shift=shift)


def word_index(pieces: Sequence[str], specials: set[str], *, wordpiece: bool = False) -> list[int | None]:
    """The word each piece belongs to (None for special pieces): ["▁Ein", "▁Ma", "nn"] -> [0, 1, 1].

    wordpiece: the pieces are WordPiece's, where "##" marks a piece that continues a word; else a
    piece starting with "▁" starts one (BPE, Unigram, SentencePiece)."""
    words, index = [], -1
    for piece in pieces:
        if piece in specials:
            words.append(None)
            continue
        starts = piece.startswith(METASPACE) if not wordpiece else not piece.startswith("##")
        if starts or index < 0:
            index += 1
        words.append(index)
    return words


@dataclass(frozen=True)
class Words:
    """Pieces shown as words: labels[k] names group k (a word as it is written, or a special token
    said plainly, such as "(start)"); group[i] is the group of piece i."""

    labels: list[str]
    group: list[int]


def word_groups(pieces: Sequence[str], specials: Mapping[str, str], *, wordpiece: bool = False) -> Words:
    """The words of `pieces`, grouped as word_index groups them, each special piece a group of its own
    labelled by `specials` (piece -> label): ["[START]", "▁Ein", "▁Ma", "nn", "[END]"] with
    {"[START]": "(start)", "[END]": "(end)"} -> labels ["(start)", "Ein", "Mann", "(end)"],
    group [0, 1, 2, 2, 3]."""
    labels: list[str] = []
    group: list[int] = []
    words: dict[int, list[str]] = {}  # word index -> its pieces, spelled into its label at the end
    where: dict[int, int] = {}  # word index -> its group
    for piece, word in zip(pieces, word_index(pieces, set(specials), wordpiece=wordpiece), strict=True):
        if word is None:
            labels.append(specials[piece])
            group.append(len(labels) - 1)
            continue
        if word not in where:
            where[word] = len(labels)
            labels.append("")
            words[word] = [piece]
        else:  # WordPiece marks a continuing piece with "##"; SentencePiece's carry no mark
            words[word].append(piece.removeprefix("##") if wordpiece else piece)
        group.append(where[word])
    for word, k in where.items():
        labels[k] = _spelling(words[word])
    return Words(labels, group)


def _spelling(parts: Sequence[str]) -> str:
    """A word's pieces as the word: no "▁" (a word holds no space), byte pieces read as UTF-8."""
    text = "".join(parts).replace(METASPACE, "")
    text = BYTE_RUN.sub(lambda run: bytes.fromhex("".join(BYTE.findall(run[0]))).decode("utf-8", "replace"), text)
    return text or "(space)"  # a lone "▁" piece: a space the tokenizer kept as a piece of its own


def word_attention(weights: torch.Tensor, queries: Words, keys: Words) -> torch.Tensor:
    """(..., query pieces, key pieces) attention -> (..., query words, key words), float32.

    The attention *to* a word is the sum over its pieces (the share of the row the word received),
    the attention *from* a word the mean of its pieces' rows (a sum would exceed 1): each row stays
    a distribution, summing to 1 as the pieces' rows do."""
    to_word = torch.zeros(len(keys.group), len(keys.labels))  # (key pieces, key words)
    to_word[torch.arange(len(keys.group)), torch.tensor(keys.group, dtype=torch.long)] = 1.0
    from_word = torch.zeros(len(queries.labels), len(queries.group))  # (query words, query pieces)
    from_word[torch.tensor(queries.group, dtype=torch.long), torch.arange(len(queries.group))] = 1.0
    from_word /= from_word.sum(dim=1, keepdim=True)
    return from_word @ weights.float().cpu() @ to_word


def align_pieces(attention: torch.Tensor, method: AlignmentMethod = DEFAULT_METHOD) -> torch.Tensor:
    """(layers, heads, steps, src_len) cross-attention -> (steps, src_len) of the chosen layer,
    its chosen heads averaged, rows shifted by one step with `method.shift` (the last row repeated)."""
    layer = attention[method.layer]  # (heads, steps, src_len)
    weights = layer[: method.heads or None].float().mean(dim=0)  # (steps, src_len)
    if method.shift and weights.size(0) > 1:
        weights = torch.cat([weights[1:], weights[-1:]], dim=0)
    return weights


def align_words(
    attention: torch.Tensor,
    src_words: Sequence[int | None],
    tgt_words: Sequence[int | None],
    method: AlignmentMethod = DEFAULT_METHOD,
) -> list[tuple[int, int]]:
    """(source word, target word) pairs, sorted: each target piece aligned to the source piece (of a
    word, not a special) it attends to most.

    attention: (layers, heads, steps, src_len) for one sentence; src_words: word_index of the source
    pieces (src_len of them); tgt_words: word_index of the target pieces (one per step, the end
    token's step, if any, last).
    """
    weights = align_pieces(attention, method)
    real = torch.tensor([w is not None for w in src_words])
    if not real.any():
        return []
    weights = weights.masked_fill(~real, float("-inf"))
    pairs = set()
    for step, tgt_word in enumerate(tgt_words[: weights.size(0)]):
        if tgt_word is None:
            continue
        src_word = src_words[int(weights[step].argmax())]
        pairs.add((src_word, tgt_word))
    return sorted(pairs)


def pharaoh(pairs: Sequence[tuple[int, int]]) -> str:
    """Pairs in the fast_align / Pharaoh format: [(0, 0), (1, 2)] -> "0-0 1-2"."""
    return " ".join(f"{i}-{j}" for i, j in pairs)
