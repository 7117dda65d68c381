"""From the data config to encoded splits (training/datasets.py): length filters, BPE-dropout."""

import pytest

from nmt.config import ConfigError, load_config
from nmt.tokenizer import load_tokenizers
from nmt.training.datasets import load_training_data


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
