"""Tests for nmt.data.wmt14: three training archives concatenated, test sets through sacreBLEU (faked here)."""

import dataclasses
import functools

import pytest
import sacrebleu.utils

from nmt.data import registry, wmt14
from nmt.data.registry import CORPORA, CorpusDownloadError, parallel_files
from nmt.data.wmt14 import SACREBLEU_TEST_SETS, WMT14, WMT14_ARCHIVES, WMT14_TRAIN, wmt14_build

from archives import entry, make_archive
from fake_upstream import FakeUpstream, serving

PUBLISHED = {  # the figures: file name -> (size, sha256)
    "training-parallel-europarl-v7.tgz": (
        657_632_379,
        "0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7",
    ),
    "training-parallel-commoncrawl.tgz": (
        918_311_367,
        "c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5",
    ),
    "training-parallel-nc-v9.tgz": (80_418_416, "cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485"),
}


@pytest.fixture
def served(tmp_path, monkeypatch):
    """The three archives, each with its de-en files (and a decoy fr-en pair), served locally and registered."""
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    monkeypatch.setattr(registry, "BACKOFF_S", 0.0)
    monkeypatch.delenv("NMT_MIRROR", raising=False)
    bodies = {}
    for i, (archive, stem) in enumerate(WMT14_TRAIN):
        members = {
            f"{stem}.en": f"en {i} a\nen {i} b\n\n",
            f"{stem}.de": f"de {i} a\nde {i} b\nde {i} c\n",
            f"{stem.replace('de-en', 'fr-en')}.en": "decoy\n",
        }
        bodies[archive.filename] = make_archive(tmp_path / archive.filename, members)
    with serving(FakeUpstream(bodies)) as fake:
        train = tuple(
            (entry(archive.filename, bodies[archive.filename], f"{fake.url}/up/{archive.filename}"), stem)
            for archive, stem in WMT14_TRAIN
        )
        corpus = dataclasses.replace(
            WMT14, archives=tuple(a for a, _ in train), build=functools.partial(wmt14_build, train=train)
        )
        monkeypatch.setitem(CORPORA, "wmt14", corpus)
        yield fake


def test_train_is_the_three_corpora_in_order_without_blank_pairs(served, tmp_path):
    src, tgt = parallel_files("wmt14", "train", "de", "en", cache_dir=tmp_path)
    folder = tmp_path / "wmt14" / "en-de.train"
    assert (src, tgt) == (folder / "train.de", folder / "train.en")
    assert src.read_text().splitlines() == [f"de {i} {x}" for i in range(3) for x in "ab"]
    assert tgt.read_text().splitlines() == [f"en {i} {x}" for i in range(3) for x in "ab"]
    assert sorted(path for path, _ in served.requests) == sorted(f"/up/{a.filename}" for a in WMT14_ARCHIVES)


def test_test_sets_come_from_sacrebleu(served, tmp_path, monkeypatch):
    asked = []

    def fake_files(test_set, src, tgt):
        asked.append((test_set, src, tgt))
        return tmp_path / f"{test_set}.{src}", tmp_path / f"{test_set}.{tgt}"

    monkeypatch.setattr(wmt14, "sacrebleu_test_files", fake_files)
    assert parallel_files("wmt14", "newstest2014", "en", "de", cache_dir=tmp_path) == (
        tmp_path / "wmt14/full.en",
        tmp_path / "wmt14/full.de",
    )
    parallel_files("wmt14", "newstest2013", "de", "en", cache_dir=tmp_path)
    assert asked == [("wmt14/full", "en", "de"), ("wmt13", "de", "en")]
    assert served.requests == []  # no training archive for a test set


def test_sacrebleu_failures_are_one_line_download_errors(monkeypatch):
    def fails(test_set, langpair):
        raise Exception(f"No such language pair {test_set}/{langpair}\nsee above")

    monkeypatch.setattr(sacrebleu.utils, "get_source_file", fails)
    with pytest.raises(CorpusDownloadError) as info:
        wmt14.sacrebleu_test_files("wmt14/full", "en", "de")
    message = str(info.value)
    assert (
        "\n" not in message
        and "wmt14/full (en-de)" in message
        and "https://statmt.org/wmt14/test-full.tgz" in message
        and "No such language pair wmt14/full/en-de see above" in message
    )

    def exits(test_set, langpair):
        raise SystemExit(1)  # what sacreBLEU does on a bad md5

    monkeypatch.setattr(sacrebleu.utils, "get_source_file", exits)
    with pytest.raises(CorpusDownloadError, match="sacreBLEU could not fetch the test set wmt13 .de-en."):
        wmt14.sacrebleu_test_files("wmt13", "de", "en")


def test_registered_archives_are_the_published_ones():
    assert {a.filename: (a.size, a.sha256) for a in WMT14_ARCHIVES} == PUBLISHED
    urls = {a.filename: a.urls for a in WMT14_ARCHIVES}
    assert urls["training-parallel-europarl-v7.tgz"] == (
        "https://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz",
    )
    assert urls["training-parallel-nc-v9.tgz"] == ("https://www.statmt.org/wmt14/training-parallel-nc-v9.tgz",)
    assert SACREBLEU_TEST_SETS == {"newstest2013": "wmt13", "newstest2014": "wmt14/full"}
    for test_set in SACREBLEU_TEST_SETS.values():  # sacreBLEU knows them, both ways
        assert {"en-de", "de-en"} <= set(sacrebleu.utils.get_langpairs_for_testset(test_set))
    with pytest.raises(ValueError, match="splits: train, newstest2013, newstest2014"):
        parallel_files("wmt14", "test", "en", "de")
