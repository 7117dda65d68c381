"""Tests for nmt.data.catalog: the rows and table of `nmt data list`, and fetching ahead with `nmt data get`."""

import dataclasses
import functools

import pytest

from nmt.data import registry
from nmt.data.catalog import fetch_corpus, format_corpus_table, human_bytes, list_corpora, parse_pair
from nmt.data.registry import CORPORA, MULTI30K
from nmt.data.ted_hrlr import TED_HRLR, ted_build
from nmt.data.wmt14 import WMT14_ARCHIVES

from archives import entry, make_archive, write_loose
from fake_upstream import FakeUpstream, serving

NAME = "qi18naacl-dataset.tar.gz"
PT_EN_FILES = [f"pt_to_en/{lang}.{split}" for lang in ("pt", "en") for split in ("train", "dev", "test")]


@pytest.fixture
def ted(tmp_path, monkeypatch):
    """A two-pair TED archive served locally and registered in place of the real one."""
    members = {
        f"datasets/{pair}/{lang}.{split}": f"{lang} {split} .\n"
        for pair in ("pt_to_en", "es_to_pt")
        for lang in pair.split("_to_")
        for split in ("train", "dev", "test")
    }
    body = make_archive(tmp_path / "built.tar.gz", members)
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    monkeypatch.delenv("NMT_MIRROR", raising=False)
    with serving(FakeUpstream({NAME: body})) as fake:
        archive = entry(NAME, body, f"{fake.url}/up/{NAME}")
        corpus = dataclasses.replace(TED_HRLR, archives=(archive,), build=functools.partial(ted_build, archive=archive))
        monkeypatch.setitem(CORPORA, "ted_hrlr", corpus)
        fake.size = len(body)
        yield fake


def test_rows_of_an_empty_cache(tmp_path, multi30k_dir):
    rows = {row.name: row for row in list_corpora(cache_dir=tmp_path, mirror=str(multi30k_dir))}
    assert list(rows) == ["multi30k", "ted_hrlr", "iwslt14", "wmt14"]
    assert rows["ted_hrlr"].download_bytes == 131_005_909 and rows["ted_hrlr"].pretokenized
    assert rows["wmt14"].download_bytes == sum(a.size for a in WMT14_ARCHIVES)
    assert rows["iwslt14"].download_bytes is None  # unpublished, not recorded yet
    assert rows["multi30k"].download_bytes == sum(f.size for f in MULTI30K.files.values())
    assert not any(row.cached or row.cached_bytes or row.extracted for row in rows.values())
    assert rows["multi30k"].in_mirror and not rows["ted_hrlr"].in_mirror
    assert "pt-en" in rows["ted_hrlr"].pairs and "az_tr-en" in rows["ted_hrlr"].pairs
    assert rows["wmt14"].splits == ("train", "newstest2013", "newstest2014")


def test_table_shows_sizes_cache_state_and_pairs(tmp_path, multi30k_dir):
    table = format_corpus_table(list_corpora(cache_dir=tmp_path, mirror=str(multi30k_dir)))
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["NAME", "DOWNLOAD", "CACHED", "SPLITS"]
    assert lines[1].split()[:4] == ["multi30k", "2.6", "MB", "mirror"]
    assert "131.0 MB" in table and "1.7 GB" in table and "unknown" in table
    assert all(len(line) <= 100 for line in lines[:-4])  # the pairs wrap; the notes may run on
    assert "ted_hrlr: TED talks, tokenised and lower-cased (BLEU with tokenize=none)" in table


def test_fetch_one_pair_then_the_row_says_cached_and_extracted(ted, tmp_path):
    got = fetch_corpus("ted_hrlr", "pt-en", cache_dir=tmp_path)
    folder = tmp_path / "ted_hrlr" / "pt_to_en"
    assert got == {"pt-en": {s: (folder / f"{s}.pt", folder / f"{s}.en") for s in ("train", "dev", "test")}}
    row = next(r for r in list_corpora(cache_dir=tmp_path) if r.name == "ted_hrlr")
    assert row.cached and row.cached_bytes == ted.size and row.extracted == ("pt_to_en",)
    assert "yes (pt_to_en extracted)" in format_corpus_table([row])


def test_fetch_every_pair_and_only_some_splits(ted, tmp_path, monkeypatch):
    corpus = dataclasses.replace(CORPORA["ted_hrlr"], pairs=(("pt", "en"), ("es", "pt")))
    monkeypatch.setitem(CORPORA, "ted_hrlr", corpus)
    got = fetch_corpus("ted_hrlr", splits=("dev",), cache_dir=tmp_path)
    assert list(got) == ["pt-en", "es-pt"] and all(list(v) == ["dev"] for v in got.values())
    assert len(ted.requests) == 1  # one archive for both pairs


def test_bad_names_are_refused_before_anything_is_fetched(ted, tmp_path):
    with pytest.raises(ValueError, match="known corpora: multi30k, ted_hrlr, iwslt14, wmt14"):
        fetch_corpus("wmt99", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="no pair de-en"):
        fetch_corpus("ted_hrlr", "de-en", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="splits: train, dev, test"):
        fetch_corpus("ted_hrlr", "pt-en", splits=("train", "valid"), cache_dir=tmp_path)
    with pytest.raises(ValueError, match="looks like pt-en"):
        fetch_corpus("ted_hrlr", "pt_en", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="languages: en, de, fr, cs"):
        fetch_corpus("multi30k", "de-xx", cache_dir=tmp_path)
    assert ted.requests == [] and not (tmp_path / "ted_hrlr").exists()


def test_fetch_a_multi30k_pair_from_a_local_mirror(multi30k_dir, tmp_path):
    got = fetch_corpus("multi30k", "de-en", splits=("val",), mirror=str(multi30k_dir), cache_dir=tmp_path)
    raw = multi30k_dir / "data/task1/raw"
    assert got == {"de-en": {"val": (raw / "val.de.gz", raw / "val.en.gz")}}


def test_a_mirror_of_per_corpus_folders_shows_what_it_holds(tmp_path, multi30k_dir):
    mirror = tmp_path / "data"  # as ../shared/data: multi30k/ and ted_hrlr/pt_to_en/*.gz
    mirror.mkdir()
    (mirror / "multi30k").symlink_to(multi30k_dir.resolve(), target_is_directory=True)
    write_loose(
        mirror / "ted_hrlr", {f"pt_to_en/{lang}.{s}": "x\n" for lang in ("pt", "en") for s in ("train", "dev", "test")}
    )
    rows = {row.name: row for row in list_corpora(cache_dir=tmp_path / "cache", mirror=str(mirror))}
    assert rows["multi30k"].in_mirror and rows["multi30k"].mirror_pairs == rows["multi30k"].pairs
    assert not rows["ted_hrlr"].in_mirror and rows["ted_hrlr"].mirror_pairs == ("pt-en",)  # by name: nothing hashed
    assert not rows["iwslt14"].mirror_pairs and not rows["wmt14"].mirror_pairs
    table = format_corpus_table(list(rows.values()))
    assert table.splitlines()[1].split()[:4] == ["multi30k", "2.6", "MB", "mirror"]
    assert table.splitlines()[3].split()[:6] == ["ted_hrlr", "131.0", "MB", "pt-en", "in", "mirror"]

    (mirror / "ted_hrlr" / NAME).write_bytes(b"the archive, by name")  # every pair, through the archive
    row = next(r for r in list_corpora(cache_dir=tmp_path / "cache", mirror=str(mirror)) if r.name == "ted_hrlr")
    assert row.in_mirror and row.mirror_pairs == row.pairs


def test_fetch_a_pair_from_its_own_files_in_a_mirror(ted, tmp_path, monkeypatch):
    pinned = write_loose(tmp_path / "mirror" / "ted_hrlr", {name: f"{name} .\n" for name in PT_EN_FILES})
    corpus = CORPORA["ted_hrlr"]
    build = functools.partial(ted_build, archive=corpus.archives[0], files=pinned)
    monkeypatch.setitem(CORPORA, "ted_hrlr", dataclasses.replace(corpus, build=build))
    monkeypatch.setenv("NMT_MIRROR", str(tmp_path / "mirror"))
    got = fetch_corpus("ted_hrlr", "en-pt", cache_dir=tmp_path / "cache")
    folder = tmp_path / "cache" / "ted_hrlr" / "pt_to_en"
    assert got == {"en-pt": {s: (folder / f"{s}.en", folder / f"{s}.pt") for s in ("train", "dev", "test")}}
    assert (folder / "dev.pt").read_text() == "pt_to_en/pt.dev .\n" and ted.requests == []
    row = next(r for r in list_corpora(cache_dir=tmp_path / "cache") if r.name == "ted_hrlr")
    assert row.extracted == ("pt_to_en",) and row.mirror_pairs == ("pt-en",) and not row.cached
    assert "pt-en in mirror (pt_to_en extracted)" in format_corpus_table([row])


def test_small_helpers():
    assert parse_pair("az_tr-en") == ("az_tr", "en")
    assert [human_bytes(n) for n in (None, 999, 1_310_059, 131_005_909, 1_656_362_162)] == [
        "unknown",
        "999 B",
        "1.3 MB",
        "131.0 MB",
        "1.7 GB",
    ]
    assert registry.is_pretokenized("ted_hrlr") and not registry.is_pretokenized("wmt14")
