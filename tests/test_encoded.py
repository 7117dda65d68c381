"""Encoded-corpus packing, saving and caching."""

import os
import subprocess
import sys

import numpy as np
import pytest

from nmt.data.corpus import CorpusError
from nmt.data.encoded import (
    EncodedCorpus,
    RaggedArray,
    cache_key,
    cached_encode,
    encode_chunks,
    encode_corpus,
    file_fingerprint,
)

BOS, EOS = 2, 3


def fake_encode(sentences: list[str]) -> list[list[int]]:
    """A stand-in batch encoder: one id per word (its length + 4), wrapped in BOS ... EOS."""
    return [[BOS, *(len(w) + 4 for w in s.split()), EOS] for s in sentences]


PAIRS = [("a bb ccc", "dddd"), ("", "e f"), ("gg", "hhh iiii jjjjj kk")] * 5


def test_ragged_array_round_trip_and_concatenate():
    seqs = [[1, 2, 3], [], [4], [5, 6]]
    ragged = RaggedArray.concatenate([RaggedArray.from_sequences(seqs[:2]), RaggedArray.from_sequences(seqs[2:])])
    assert len(ragged) == 4
    assert [ragged[i].tolist() for i in range(4)] == seqs
    assert ragged.lengths.tolist() == [3, 0, 1, 2]


def test_take_selects_without_copying_ids_and_packs_back():
    ragged = RaggedArray.from_sequences([[1, 2, 3], [], [4], [5, 6]])
    view = ragged.take([3, 0, 3])
    assert [view[i].tolist() for i in range(3)] == [[5, 6], [1, 2, 3], [5, 6]]
    assert view.ids is ragged.ids  # the tokens are shared
    packed = view.packed()
    assert packed.ids.tolist() == [5, 6, 1, 2, 3, 5, 6] and packed.starts.tolist() == [0, 2, 5]
    assert ragged.packed() is ragged  # already packed: nothing to do
    joined = RaggedArray.concatenate([view, ragged.take([2])])
    assert [joined[i].tolist() for i in range(4)] == [[5, 6], [1, 2, 3], [5, 6], [4]]


def test_encode_corpus_in_chunks_equals_one_chunk():
    chunked = encode_corpus(PAIRS, fake_encode, fake_encode, chunk_size=4)
    whole = encode_corpus(iter(PAIRS), fake_encode, fake_encode, chunk_size=1000)
    assert len(chunked) == len(PAIRS)
    for i, (s, t) in enumerate(PAIRS):
        assert chunked.src[i].tolist() == whole.src[i].tolist() == fake_encode([s])[0]
        assert chunked.tgt[i].tolist() == fake_encode([t])[0]
    assert chunked.src_lengths().tolist() == [len(fake_encode([s])[0]) for s, _ in PAIRS]


def test_encode_corpus_rejects_a_lossy_encoder():
    with pytest.raises(ValueError, match="different number"):
        encode_corpus(PAIRS, lambda xs: fake_encode(xs)[:-1], fake_encode)


def as_lists(corpus: EncodedCorpus) -> list[tuple[list[int], list[int]]]:
    return [(corpus.src[i].tolist(), corpus.tgt[i].tolist()) for i in range(len(corpus))]


def test_save_load_round_trip_maps_the_file(tmp_path):
    corpus = encode_corpus(PAIRS, fake_encode, fake_encode)
    corpus.save(tmp_path / "c.enc")
    loaded = EncodedCorpus.load(tmp_path / "c.enc")
    assert as_lists(loaded) == as_lists(corpus)
    assert isinstance(loaded.src.ids, np.memmap) and loaded.src.ids is loaded.tgt.ids  # mapped, not read
    assert [p.name for p in tmp_path.iterdir()] == ["c.enc"]  # no temporary left behind
    selection = corpus.take([4, 1])  # a selection is saved as the pairs it holds
    selection.save(tmp_path / "s.enc")
    assert as_lists(EncodedCorpus.load(tmp_path / "s.enc")) == [as_lists(corpus)[4], as_lists(corpus)[1]]
    EncodedCorpus(RaggedArray.from_sequences([]), RaggedArray.from_sequences([])).save(tmp_path / "e.enc")
    assert len(EncodedCorpus.load(tmp_path / "e.enc")) == 0


def test_chunks_are_written_as_they_come_and_a_failure_leaves_no_file(tmp_path):
    """cached_encode with a generator: the file equals the whole corpus; an error mid-way leaves nothing."""
    whole = encode_corpus(PAIRS, fake_encode, fake_encode)
    streamed = cached_encode(tmp_path, "k", lambda: encode_chunks(PAIRS, fake_encode, fake_encode, chunk_size=4))
    assert as_lists(streamed) == as_lists(whole)

    def failing():
        yield from encode_chunks(PAIRS[:8], fake_encode, fake_encode, chunk_size=4)
        raise CorpusError("invalid UTF-8 at byte 3 of the line", "train.de", 9)

    with pytest.raises(CorpusError, match="train.de:9: invalid UTF-8"):  # the corpus's error, as it is
        cached_encode(tmp_path, "broken", failing)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.enc"]


def test_cached_encode_builds_once_then_loads(tmp_path):
    calls = []

    def make() -> EncodedCorpus:
        calls.append(1)
        return encode_corpus(PAIRS, fake_encode, fake_encode)

    first = cached_encode(tmp_path / "cache", "k1", make)
    second = cached_encode(tmp_path / "cache", "k1", make)
    assert len(calls) == 1
    assert as_lists(first) == as_lists(second)
    assert (tmp_path / "cache" / "k1.enc").exists()


def test_cached_encode_keeps_only_the_most_recently_used_files(tmp_path):
    def make() -> EncodedCorpus:
        return encode_corpus(PAIRS, fake_encode, fake_encode)

    cache = tmp_path / "cache"
    for i, key in enumerate(["a", "b", "c"]):
        cached_encode(cache, key, make, keep=3)
        os.utime(cache / f"{key}.enc", (1000 + i, 1000 + i))  # a before b before c, whatever the clock
    cached_encode(cache, "a", make, keep=3)  # a load is a use: "a" is now the newest
    cached_encode(cache, "d", make, keep=3)  # a fourth file: the least recently used one ("b") goes
    assert sorted(p.name for p in cache.iterdir()) == ["a.enc", "c.enc", "d.enc"]


def test_cache_key_separates_parts_and_sees_file_changes(tmp_path):
    assert cache_key("ab", "c") != cache_key("a", "bc")
    assert cache_key("x", b"y") == cache_key("x", "y")
    assert len(cache_key("x")) == 16
    f = tmp_path / "train.de"
    f.write_text("hallo\n")
    before = cache_key(file_fingerprint(f))
    f.write_text("hallo welt\n")
    assert cache_key(file_fingerprint(f)) != before


def test_unusable_cache_file_is_encoded_again(tmp_path, caplog):
    """A damaged or cut-short file, or one of an older format, is a miss with a warning, not a failed run."""
    cache = tmp_path / "cache"
    cache.mkdir()
    calls = []

    def make() -> EncodedCorpus:
        calls.append(1)
        return encode_corpus(PAIRS, fake_encode, fake_encode)

    (cache / "broken.enc").write_bytes(b"PK\x03\x04 not ours")
    encode_corpus(PAIRS, fake_encode, fake_encode).save(cache / "cut.enc")
    with open(cache / "cut.enc", "rb+") as f:
        f.truncate(4096 + 40)  # the header and a few ids survive; the sections are gone
    with open(cache / "old.enc", "wb") as f:  # format version 1 was an .npz
        np.savez(f, format_version=np.array(1))
    np.savez(cache / "legacy.npz", format_version=np.array(1))
    for key in ("broken", "cut", "old"):
        assert len(cached_encode(cache, key, make)) == len(PAIRS)
        assert len(EncodedCorpus.load(cache / f"{key}.enc")) == len(PAIRS)  # replaced by a good one
    assert len(calls) == 3
    assert all(f"{key}.enc is unusable" in caplog.text for key in ("broken", "cut", "old"))
    assert not (cache / "legacy.npz").exists()  # files of the old format are swept at the next save


def test_save_sweeps_temp_files_of_dead_writers(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    # A writer that died mid-save: a child process makes a temporary file and exits without renaming it.
    code = f"from nmt.files import temp_path_for; print(temp_path_for({str(cache / 'k.enc')!r}))"
    dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert os.path.exists(dead)
    cached_encode(cache, "k", lambda: encode_corpus(PAIRS, fake_encode, fake_encode))
    assert os.listdir(cache) == ["k.enc"]
