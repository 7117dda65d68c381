"""Word alignments from cross-attention (nmt.alignment)."""

from __future__ import annotations

import torch

from nmt.alignment import (
    AlignmentMethod,
    align_pieces,
    align_words,
    pharaoh,
    word_attention,
    word_groups,
    word_index,
)

SPECIALS = {"[START]", "[END]"}


def test_pieces_are_grouped_into_the_words_of_the_text():
    assert word_index(["[START]", "▁Ein", "▁Ma", "nn", "▁.", "[END]"], SPECIALS) == [None, 0, 1, 1, 2, None]
    assert word_index(["ein", "ma", "##nn", "."], set(), wordpiece=True) == [0, 1, 1, 2]  # "##" continues
    assert word_index(["nn", "▁x"], set()) == [0, 1]  # a first piece starts a word whatever it looks like
    assert word_index(["3", "3", "▁3"], set()) == [0, 0, 1]  # BPE without "▁": the same word


READER = {"[START]": "(start)", "[END]": "(end)"}


def test_a_reader_sees_words_and_plain_start_and_end_labels():
    words = word_groups(["[START]", "▁Sch", "nee", "▁fällt", "▁.", "[END]"], READER)
    assert words.labels == ["(start)", "Schnee", "fällt", ".", "(end)"]
    assert words.group == [0, 1, 1, 2, 3, 4]
    assert word_groups(["sch", "##nee", "fällt"], {}, wordpiece=True).labels == ["schnee", "fällt"]
    # byte-fallback pieces are read as the UTF-8 they spell: "▁f", 0xC3 0xA4, "llt" -> "fällt"
    assert word_groups(["▁f", "<0xC3>", "<0xA4>", "llt"], {}).labels == ["fällt"]


def test_word_attention_sums_over_a_words_pieces_to_it_and_averages_them_from_it():
    keys = word_groups(["[START]", "▁Sch", "nee", "[END]"], READER)  # (start) Schnee (end)
    queries = word_groups(["▁Snow", "▁fal", "ls"], {})  # Snow falls
    weights = torch.tensor(
        [
            [0.1, 0.2, 0.3, 0.4],  # ▁Snow
            [0.0, 0.5, 0.5, 0.0],  # ▁fal
            [0.2, 0.2, 0.2, 0.4],  # ls
        ]
    ).expand(3, 2, 3, 4)  # (layers, heads, query pieces, key pieces)
    words = word_attention(weights, queries, keys)
    assert words.shape == (3, 2, 2, 3)
    expected = torch.tensor([[0.1, 0.5, 0.4], [0.1, 0.7, 0.2]])  # "falls": the mean of its two rows
    torch.testing.assert_close(words[1, 1], expected)
    torch.testing.assert_close(words.sum(-1), torch.ones(3, 2, 2))  # each word's row is still a distribution


def one_hot_attention(rows: list[int], src_len: int, layers: int = 3, heads: int = 2) -> torch.Tensor:
    """(layers, heads, steps, src_len) attention with all weight on source position rows[step]."""
    weights = torch.zeros(layers, heads, len(rows), src_len)
    for step, position in enumerate(rows):
        weights[:, :, step, position] = 1.0
    return weights


def test_each_target_piece_is_aligned_to_the_source_word_it_attends_to_most():
    # source: [START] ▁ein ▁ma nn [END] -> words 0, 1;  target: ▁a ▁m an [END] -> words 0, 1
    src_words = [None, 0, 1, 1, None]
    tgt_words = [0, 1, 1, None]
    attention = one_hot_attention([1, 3, 2, 4], src_len=5)
    assert align_words(attention, src_words, tgt_words) == [(0, 0), (1, 1)]
    assert pharaoh(align_words(attention, src_words, tgt_words)) == "0-0 1-1"


def test_special_source_pieces_are_never_aligned_to():
    attention = one_hot_attention([0, 4], src_len=5)  # all weight on [START] and [END]
    attention[..., 2] = 0.1  # a little on a real word
    assert align_words(attention, [None, 0, 1, 1, None], [0, 1]) == [(1, 0), (1, 1)]


def test_the_method_chooses_the_layer_and_the_shift():
    attention = torch.zeros(2, 1, 3, 3)
    attention[0, 0] = torch.eye(3)  # bottom layer: the diagonal
    attention[1, 0] = torch.eye(3).flip(1)  # top layer: the anti-diagonal
    words = [0, 1, 2]
    assert align_words(attention, words, words, AlignmentMethod(layer=0)) == [(0, 0), (1, 1), (2, 2)]
    assert align_words(attention, words, words, AlignmentMethod(layer=-1)) == [(0, 2), (1, 1), (2, 0)]
    shifted = align_pieces(attention, AlignmentMethod(layer=0, shift=True))
    assert shifted.argmax(dim=1).tolist() == [1, 2, 2]  # row j is step j + 1's (the last repeated)


def test_a_trained_alignment_head_is_read_alone_and_other_models_average_every_head():
    attention = torch.zeros(1, 2, 3, 3)
    attention[0, 0] = torch.eye(3)  # head 0: the diagonal, sharply
    attention[0, 1] = torch.eye(3).flip(1) * 1.5  # head 1: the anti-diagonal, more sharply still
    words = [0, 1, 2]
    assert align_words(attention, words, words, AlignmentMethod(heads=1)) == [(0, 0), (1, 1), (2, 2)]
    # averaged (a model without a head, read as before), head 1 outweighs head 0
    assert align_words(attention, words, words, AlignmentMethod()) == [(0, 2), (1, 1), (2, 0)]
    assert AlignmentMethod(layer=-2, heads=1).describe().startswith("head 0 of decoder layer -2 (trained")
    assert "every head" in AlignmentMethod().describe()
