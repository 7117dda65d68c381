"""Word alignments of an encoded corpus as piece links, and their cache (nmt.data.corpus_alignment)."""

import numpy as np
import pytest

from nmt.data import corpus_alignment
from nmt.data.corpus_alignment import alignment_units, cached_links, load_links, piece_links, save_links, unit_words
from nmt.data.encoded import EncodedCorpus, RaggedArray


def test_units_split_words_at_punctuation():
    assert alignment_units(["▁Ein", "▁Hund", "."]) == [0, 1, 2]
    assert alignment_units(["▁Hun", "de", "n", "."]) == [0, 0, 0, 1]
    assert alignment_units(["▁(", "a", ")", "▁b"]) == [0, 1, 2, 3]
    assert alignment_units(["▁", "«", "Hund"]) == [0, 0, 1]  # a bare "▁" belongs to what follows it
    assert alignment_units(["Ein", "##e", "."], wordpiece=True) == [0, 0, 1]
    assert unit_words(["▁Hunde", "n", "."]) == ["hund", "."]  # lower-cased, counted by 4 letters


def test_each_unit_link_links_every_piece_of_both_units(monkeypatch):
    # pieces: 0-3 specials, 4 "▁Ein", 5 "▁Hun", 6 "d", 7 "▁A", 8 "▁dog", 9 "."
    table = ["<pad>", "<unk>", "<s>", "</s>", "▁Ein", "▁Hun", "d", "▁A", "▁dog", "."]
    corpus = EncodedCorpus(
        RaggedArray.from_sequences([[2, 4, 5, 6, 9, 3]]), RaggedArray.from_sequences([[2, 7, 8, 9, 3]])
    )
    # units: source [Ein] [Hund] [.], target [A] [dog] [.]; the aligner links 0-0, 1-1, 2-2
    monkeypatch.setattr(corpus_alignment, "align_corpus", lambda s, t, c, progress: [[(0, 0), (1, 1), (2, 2)]])
    links = piece_links(corpus, table, table)
    assert links[0].reshape(-1, 2).tolist() == [[1, 1], [2, 2], [3, 2], [4, 3]]  # (source, target) positions


def test_links_are_saved_and_read_back_and_a_damaged_file_is_made_again(tmp_path):
    links = RaggedArray.from_sequences([[1, 1, 2, 3], [], [5, 6]])
    calls = []

    def make():
        calls.append(1)
        return links

    first = cached_links(tmp_path, "k", make)
    again = cached_links(tmp_path, "k", make)
    assert len(calls) == 1 and [again[i].tolist() for i in range(3)] == [[1, 1, 2, 3], [], [5, 6]]
    assert [first[i].tolist() for i in range(3)] == [again[i].tolist() for i in range(3)]
    (tmp_path / "k.links").write_bytes((tmp_path / "k.links").read_bytes()[:-8])  # cut short
    cached_links(tmp_path, "k", make)
    assert len(calls) == 2
    with pytest.raises(ValueError, match="version"):
        (tmp_path / "old.links").write_bytes(b'{"version": 0, "tokens": 0, "rows": 0}\n')
        load_links(tmp_path / "old.links")


def test_old_links_files_are_pruned(tmp_path):
    for k in range(5):
        cached_links(tmp_path, f"k{k}", lambda: RaggedArray.from_sequences([[1, 1]]), keep=3)
    assert len(list(tmp_path.glob("*.links"))) == 3


def test_save_links_round_trip(tmp_path):
    ragged = RaggedArray.from_sequences([[7, 8], [1, 2, 3, 4]]).take([1, 0])  # not packed
    save_links(tmp_path / "x.links", ragged)
    back = load_links(tmp_path / "x.links")
    assert [back[i].tolist() for i in range(2)] == [[1, 2, 3, 4], [7, 8]]
    assert isinstance(back.ids, np.ndarray)
