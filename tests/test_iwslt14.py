"""Tests for nmt.data.iwslt14: fairseq's split of IWSLT14 de-en, and the checksum recorded on first download."""

import dataclasses
import functools
import hashlib
import json
import shutil

import pytest

from nmt.data import registry
from nmt.data.archive import record_path
from nmt.data.iwslt14 import IWSLT14, IWSLT14_ARCHIVE, TEST_SETS, iwslt14_build, segments, training_lines
from nmt.data.registry import CORPORA, CorpusDownloadError, parallel_files

from archives import entry, make_archive
from fake_upstream import FakeUpstream, serving

NAME = "de-en.tgz"


def train_tags(lang: str) -> str:
    """A train.tags file: talk metadata lines, then 48 sentences; sentence 10's German side is empty."""
    head = [
        "<url>http://www.ted.com/talks/a.html</url>",
        "<keywords>talks, science</keywords>",
        "<talkid>1</talkid>",
        f"<title>{lang} title</title>",
        f"<description>{lang} description</description>",
    ]
    body = ["" if (lang, i) == ("de", 10) else f"{lang} sentence {i}" for i in range(1, 49)]
    return "\n".join(head + body) + "\n"


def xml(name: str, lang: str) -> str:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<mteval>\n<srcset setid="{name}" srclang="{lang}">\n'
        f'<doc docid="1" genre="lectures">\n<url>http://www.ted.com/talks/b.html</url>\n'
        f"<talkid>2</talkid>\n<title>not a segment</title>\n"
        f'  <seg id="1"> {lang} first of {name} </seg>\n'
        f'<seg id="2">{lang} it\u2019s {name}</seg>\n</doc>\n</srcset>\n</mteval>\n'
    )


MEMBERS = {f"de-en/train.tags.de-en.{lang}": train_tags(lang) for lang in ("de", "en")}
MEMBERS.update({f"de-en/{name}.de-en.{lang}.xml": xml(name, lang) for name in TEST_SETS for lang in ("de", "en")})
MEMBERS["de-en/IWSLT14.TED.tst2013.de-en.de.xml"] = xml("not used", "de")


def expected() -> dict[str, tuple[list[str], list[str]]]:
    """The splits written out by hand from the rules: tags out, blank pairs out, every 23rd to valid."""
    de = ["de title", "de description"] + [f"de sentence {i}" for i in range(1, 49) if i != 10]
    en = ["en title", "en description"] + [f"en sentence {i}" for i in range(1, 49) if i != 10]
    test = {
        lang: [s for name in TEST_SETS for s in (f"{lang} first of {name}", f"{lang} it's {name}")]
        for lang in ("de", "en")
    }
    return {
        "train": ([s for i, s in enumerate(de, 1) if i % 23], [s for i, s in enumerate(en, 1) if i % 23]),
        "valid": (de[22::23], en[22::23]),
        "test": (test["de"], test["en"]),
    }


@pytest.fixture
def served(tmp_path, monkeypatch):
    body = make_archive(tmp_path / "built.tgz", MEMBERS)
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    monkeypatch.setattr(registry, "BACKOFF_S", 0.0)
    monkeypatch.delenv("NMT_MIRROR", raising=False)
    with serving(FakeUpstream({NAME: body})) as fake:
        archive = entry(NAME, body, f"{fake.url}/up/{NAME}", checksum=False)  # unpublished, like the real one
        corpus = dataclasses.replace(
            IWSLT14, archives=(archive,), build=functools.partial(iwslt14_build, archive=archive)
        )
        monkeypatch.setitem(CORPORA, "iwslt14", corpus)
        fake.body = body
        yield fake


def test_splits_are_made_as_fairseqs_prepare_script_makes_them(served, tmp_path):
    folder = tmp_path / "iwslt14" / "de-en"
    for split, (de, en) in expected().items():
        src, tgt = parallel_files("iwslt14", split, "de", "en", cache_dir=tmp_path)
        assert (src, tgt) == (folder / f"{split}.de", folder / f"{split}.en")
        assert src.read_text().splitlines() == de and tgt.read_text().splitlines() == en, split
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["splits"]["train"] == {"pairs": 47, "dropped_empty": 1}
    assert manifest["splits"]["valid"] == {"pairs": 2, "dropped_empty": 0}
    assert len(served.requests) == 1


def test_first_download_records_its_checksum_and_later_ones_must_match(served, tmp_path):
    parallel_files("iwslt14", "test", "en", "de", cache_dir=tmp_path)
    dest = tmp_path / "iwslt14" / NAME
    record = json.loads(record_path(dest).read_text())
    assert record["sha256"] == hashlib.sha256(served.body).hexdigest() and record["size"] == len(served.body)
    assert record["source"] == f"{served.url}/up/{NAME}"

    # Upstream changes its file; the cache lost the archive and the folder: the new bytes are refused.
    dest.unlink()
    shutil.rmtree(tmp_path / "iwslt14" / "de-en")
    served.files[NAME] = served.body[:20] + bytes([served.body[20] ^ 1]) + served.body[21:]
    with pytest.raises(CorpusDownloadError) as info:
        parallel_files("iwslt14", "train", "de", "en", cache_dir=tmp_path)
    message = str(info.value)
    assert f"sha256 expected {record['sha256']}" in message and "\n" not in message
    assert not dest.exists() and json.loads(record_path(dest).read_text()) == record


def test_a_mirror_copy_sets_the_record_when_there_is_none(served, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / NAME).write_bytes(served.body)
    monkeypatch.setenv("NMT_MIRROR", str(mirror))
    parallel_files("iwslt14", "valid", "de", "en", cache_dir=tmp_path / "cache")
    record = json.loads(record_path(tmp_path / "cache" / "iwslt14" / NAME).read_text())
    assert record["source"] == str(mirror / NAME) and served.requests == []

    (mirror / NAME).write_bytes(b"another file")  # a later, different copy is passed over for the address
    shutil.rmtree(tmp_path / "cache" / "iwslt14" / "de-en")
    parallel_files("iwslt14", "valid", "de", "en", cache_dir=tmp_path / "cache")
    assert len(served.requests) == 1


def test_tag_lines_and_segments():
    raw = [
        "<url>u</url>",
        "<keywords>k</keywords>",
        "<talkid>3</talkid>",
        "<title>T</title>",
        "<description>D: x</description>",
        "a <b> sentence",
    ]
    assert list(training_lines(iter(raw))) == ["T", "D: x", "a <b> sentence"]
    xml_lines = ['<seg id="12">  a \u2019b\u2019 </seg>  ', "<title>x</title>", '\t<seg id="3">c</seg>']
    assert list(segments(iter(xml_lines))) == ["a 'b'", "c"]


def test_registered_entry_has_no_published_checksum():
    assert IWSLT14_ARCHIVE.urls == ("http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz",)
    assert IWSLT14_ARCHIVE.sha256 is None and IWSLT14_ARCHIVE.size is None
    assert IWSLT14.splits == ("train", "valid", "test") and not IWSLT14.pretokenized
    assert TEST_SETS == (
        "IWSLT14.TED.dev2010",
        "IWSLT14.TEDX.dev2012",
        "IWSLT14.TED.tst2010",
        "IWSLT14.TED.tst2011",
        "IWSLT14.TED.tst2012",
    )
