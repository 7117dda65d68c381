"""Encoded-corpus packing, saving and caching."""

import os
import subprocess
import sys

import numpy as np
import pytest

from nmt.data.encoded import EncodedCorpus, RaggedArray, cache_key, cached_encode, encode_corpus, file_fingerprint

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
    assert ragged.lengths().tolist() == [3, 0, 1, 2]


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


def test_save_load_round_trip(tmp_path):
    corpus = encode_corpus(PAIRS, fake_encode, fake_encode)
    corpus.save(tmp_path / "c.npz")
    loaded = EncodedCorpus.load(tmp_path / "c.npz")
    for a, b in [(corpus.src, loaded.src), (corpus.tgt, loaded.tgt)]:
        assert np.array_equal(a.ids, b.ids) and np.array_equal(a.offsets, b.offsets)
    assert [p.name for p in tmp_path.iterdir()] == ["c.npz"]  # no temporary left behind


def test_cached_encode_builds_once_then_loads(tmp_path):
    calls = []

    def make() -> EncodedCorpus:
        calls.append(1)
        return encode_corpus(PAIRS, fake_encode, fake_encode)

    first = cached_encode(tmp_path / "cache", "k1", make)
    second = cached_encode(tmp_path / "cache", "k1", make)
    assert len(calls) == 1
    assert np.array_equal(first.tgt.ids, second.tgt.ids)
    assert (tmp_path / "cache" / "k1.npz").exists()


def test_cached_encode_keeps_only_the_most_recently_used_files(tmp_path):
    def make() -> EncodedCorpus:
        return encode_corpus(PAIRS, fake_encode, fake_encode)

    cache = tmp_path / "cache"
    for i, key in enumerate(["a", "b", "c"]):
        cached_encode(cache, key, make, keep=3)
        os.utime(cache / f"{key}.npz", (1000 + i, 1000 + i))  # a before b before c, whatever the clock
    cached_encode(cache, "a", make, keep=3)  # a load is a use: "a" is now the newest
    cached_encode(cache, "d", make, keep=3)  # a fourth file: the least recently used one ("b") goes
    assert sorted(p.name for p in cache.iterdir()) == ["a.npz", "c.npz", "d.npz"]


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
    """A damaged file, or one of an older format, is a miss with a warning, not a failed run."""
    cache = tmp_path / "cache"
    cache.mkdir()
    calls = []

    def make() -> EncodedCorpus:
        calls.append(1)
        return encode_corpus(PAIRS, fake_encode, fake_encode)

    (cache / "broken.npz").write_bytes(b"PK\x03\x04 cut short")
    np.savez(cache / "old.npz", format_version=np.array(0))
    for key in ("broken", "old"):
        assert len(cached_encode(cache, key, make)) == len(PAIRS)
        assert len(EncodedCorpus.load(cache / f"{key}.npz")) == len(PAIRS)  # replaced by a good one
    assert len(calls) == 2
    assert "broken.npz is unusable" in caplog.text and "old.npz is unusable" in caplog.text


def test_save_sweeps_temp_files_of_dead_writers(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    # A writer that died mid-save: a child process makes a temporary file and exits without renaming it.
    code = f"from nmt.files import temp_path_for; print(temp_path_for({str(cache / 'k.npz')!r}))"
    dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert os.path.exists(dead)
    cached_encode(cache, "k", lambda: encode_corpus(PAIRS, fake_encode, fake_encode))
    assert os.listdir(cache) == ["k.npz"]
