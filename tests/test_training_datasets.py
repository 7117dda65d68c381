"""From the data config to encoded splits (training/datasets.py): length filters, BPE-dropout."""

from pathlib import Path

import pytest

from nmt.config import ConfigError, load_config
from nmt.tokenizer import BYTE_PIECES, SPECIAL_TOKENS, load_tokenizers, normalize_text
from nmt.training.datasets import CorpusFiles, load_training_data, sample_pairs


def sequences(corpus):
    return [list(corpus.src[i]) for i in range(len(corpus))], [list(corpus.tgt[i]) for i in range(len(corpus))]


def test_bpe_dropout_resamples_training_pairs_only(overrides, tmp_path):
    config = load_config(None, overrides + ["data.bpe_dropout=0.2", "data.max_src_len=20"])
    data = load_training_data(config.data, config.tokenizer, tmp_path)
    plain = load_training_data(load_config(None, overrides + ["data.max_src_len=20"]).data, config.tokenizer, tmp_path)
    assert data.resample_train is not None and plain.resample_train is None
    assert sequences(data.valid) == sequences(plain.valid)  # validation keeps the deterministic segmentation
    assert plain.train_for_epoch() is plain.train

    epoch_1, epoch_2 = data.train_for_epoch(), data.train_for_epoch()
    assert len(epoch_1) == len(epoch_2) == len(data.train) < 300  # the same pairs the length filter kept
    assert sequences(epoch_1) != sequences(epoch_2) != sequences(data.train)  # a new segmentation each epoch
    tok = data.tgt_tokenizer
    decoded = [tok.decode(ids) for ids in sequences(epoch_1)[1]]
    assert decoded == [tok.decode(ids) for ids in sequences(data.train)[1]]  # of the same sentences, in order

    saved, _ = load_tokenizers(tmp_path)  # what translation uses: no dropout
    assert saved.encode_batch(["Ein Mann fährt Fahrrad."] * 20) == [saved.encode("Ein Mann fährt Fahrrad.")] * 20


def test_bpe_dropout_is_refused_for_a_tokenizer_without_merges():
    with pytest.raises(ConfigError, match="data.bpe_dropout needs tokenizer.kind=bpe"):
        load_config(None, ["data.bpe_dropout=0.1", "tokenizer.kind=unigram"])


def test_bpe_dropout_checks_the_tokenizer_files_not_only_the_config(overrides, tmp_path):
    unigram = load_config(None, overrides + ["tokenizer.kind=unigram", "tokenizer.vocab_size=600"])
    load_training_data(unigram.data, unigram.tokenizer, tmp_path)  # leaves a unigram tokenizer in tmp_path
    config = load_config(None, overrides + ["data.bpe_dropout=0.1"])  # tokenizer.kind: bpe, but the files win
    with pytest.raises(ValueError, match=f"data.bpe_dropout needs bpe tokenizers, but those in {tmp_path} are unigram"):
        load_training_data(config.data, config.tokenizer, tmp_path)


def write_pairs(tmp_path, n: int) -> CorpusFiles:
    src, tgt = tmp_path / "train.de", tmp_path / "train.en"
    src.write_text("".join(f"satz {i}\n" for i in range(n)))
    tgt.write_text("".join(f"sentence {i}\n" for i in range(n)))
    return CorpusFiles(src, tgt)


def test_tokenizer_sample_is_uniform_seeded_and_in_file_order(tmp_path):
    files = write_pairs(tmp_path, 1000)
    sample = sample_pairs(files, 100, seed=3)
    numbers = [int(s.split()[1]) for s, _ in sample]
    assert len(sample) == 100 and len(set(numbers)) == 100 and numbers == sorted(numbers)
    assert all(t == f"sentence {n}" for (_, t), n in zip(sample, numbers, strict=True))  # pairs stay pairs
    assert sample == sample_pairs(files, 100, seed=3) != sample_pairs(files, 100, seed=4)
    assert max(numbers) > 800 and min(numbers) < 200  # drawn from the whole file, not its head
    assert sample_pairs(files, 1000) == sample_pairs(files, None) == list(files.pairs())  # small: all, in order


def test_tokenizer_trains_on_the_sample_only(overrides, tmp_path):
    """With tokenizer.sample_pairs=1, every learned piece comes from the one sampled pair."""
    config = load_config(None, overrides + ["tokenizer.sample_pairs=1"])
    data = load_training_data(config.data, config.tokenizer, tmp_path)
    [(src, tgt)] = sample_pairs(CorpusFiles(Path(config.data.train_src), Path(config.data.train_tgt)), 1)
    text = " " + normalize_text(src) + " " + normalize_text(tgt)
    learned = set(data.src_tokenizer._tokenizer.get_vocab()) - set(SPECIAL_TOKENS) - set(BYTE_PIECES)
    pieces = sorted(learned)
    assert len(pieces) > 20 and all(p.replace("\u2581", " ") in text for p in pieces)


def test_a_tmx_file_is_training_data_for_its_two_languages_named(tmp_path):
    import gzip

    from nmt.config import DataConfig
    from nmt.data.corpus import CorpusError, ReadStats
    from nmt.training.datasets import split_files

    units = [("Ein Hund.", "A dog.", "Un chien."), ("Zwei Katzen.", "Two cats.", "Deux chats."), ("Leer", " ", "Vide")]
    body = "".join(
        f'<tu><tuv xml:lang="de-DE"><seg>{de}</seg></tuv><tuv xml:lang="en-GB"><seg>{en}</seg></tuv>'
        f'<tuv xml:lang="fr"><seg>{fr}</seg></tuv></tu>'
        for de, en, fr in units
    )
    head = '<?xml version="1.0"?><!DOCTYPE tmx SYSTEM "tmx14.dtd"><tmx version="1.4"><header srclang="de"/>'
    tmx = f"{head}<body>{body}</body></tmx>"
    (tmp_path / "memory.tmx.gz").write_bytes(gzip.compress(tmx.encode()))
    tmx_file = str(tmp_path / "memory.tmx.gz")
    data = DataConfig(corpus=None, train_src=tmx_file, valid_src=tmx_file, src_lang="de", tgt_lang="fr")
    files = split_files(data, "train")
    stats = ReadStats()
    assert list(files.pairs(stats)) == [("Ein Hund.", "Un chien."), ("Zwei Katzen.", "Deux chats."), ("Leer", "Vide")]
    english = split_files(DataConfig(corpus=None, train_src=tmx_file, valid_src=tmx_file, tgt_lang="en"), "train")
    assert list(english.pairs(stats))[:2] == [("Ein Hund.", "A dog."), ("Zwei Katzen.", "Two cats.")]
    assert stats.empty == 1 and files.count() == 3
    assert files.fingerprint() != english.fingerprint()  # each pair of languages is its own encoded corpus
    (tmp_path / "bad.tmx").write_text('<!DOCTYPE tmx [<!ENTITY a "x">]><tmx><body>&a;</body></tmx>')
    bad_file = str(tmp_path / "bad.tmx")
    bad = split_files(DataConfig(corpus=None, train_src=bad_file, valid_src=bad_file), "train")
    with pytest.raises(CorpusError, match=r"bad\.tmx: declares a DTD of its own"):
        list(bad.pairs())


def test_a_capped_direction_encodes_only_its_rows_and_gets_the_ids_of_encoding_all(tmp_path, monkeypatch):
    """encode_split(rows=...) reads every pair but encodes only the rows asked for (a direction
    capped at 300 of 29,000 pairs encoded all 29,000 before), and its ids are those rows of the
    whole split's; a row past the last pair is none, and rows are their own cache entry."""
    import numpy as np

    from nmt.tokenizer import TokenizerConfig, save_tokenizers, train_tokenizers
    from nmt.training.datasets import encode_split

    monkeypatch.setenv("NMT_DATA_HOME", str(tmp_path / "home"))
    src, tgt = tmp_path / "train.de", tmp_path / "train.en"
    src.write_text("".join(f"ein Hund {i} läuft\n" for i in range(50)), encoding="utf-8")
    tgt.write_text("".join(f"a dog {i} runs\n" for i in range(50)), encoding="utf-8")
    src_tok, tgt_tok = train_tokenizers(
        src.read_text().split("\n"), tgt.read_text().split("\n"), TokenizerConfig(vocab_size=400)
    )
    save_tokenizers(src_tok, tgt_tok, tmp_path)
    files = CorpusFiles(src, tgt)
    encoded = []
    for tok in {id(t): t for t in (src_tok, tgt_tok)}.values():  # count what is encoded (joint: one tokenizer)
        monkeypatch.setattr(
            tok, "encode_batch", lambda texts, _real=tok.encode_batch: encoded.append(len(texts)) or _real(texts)
        )
    rows = np.array([3, 7, 8, 41, 60])  # 60: past the last pair
    some = encode_split(files, src_tok, tgt_tok, tmp_path, rows=rows)
    assert sum(encoded) == 2 * 4  # 4 pairs, each side once
    whole = encode_split(files, src_tok, tgt_tok, tmp_path)
    assert len(some) == 4 and sequences(some) == sequences(whole.take(np.array([3, 7, 8, 41])))
    again = encode_split(files, src_tok, tgt_tok, tmp_path, rows=rows[:2])
    assert sequences(again) == sequences(whole.take(rows[:2]))  # not the 4 rows' cache entry
