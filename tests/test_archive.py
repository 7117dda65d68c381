"""Tests for nmt.data.archive, nmt.data.archive_corpus and nmt.data.mirror: reading members, the drop rule,
the writer, where a mirror's files may lie, copying them verified, errors."""

import dataclasses
import gzip
import hashlib
import json
import logging

import pytest

from nmt.data.archive import extract_members, fetch_archive, record_path
from nmt.data.archive_corpus import Build, PairWriter, aligned, build_folder, is_blank_pair, loose_in_mirror
from nmt.data.download import CorpusDownloadError, DownloadPolicy
from nmt.data.mirror import LooseFile, copy_verified, find_loose

from archives import entry, make_archive

POLICY = DownloadPolicy(retries=0, backoff_s=0.0)


def test_only_the_members_asked_for_are_written_where_the_caller_says(tmp_path):
    archive = tmp_path / "a.tar.gz"
    make_archive(archive, {"./d/x.txt": "x\n", "d/y.txt": "y\n", "../outside.txt": "z\n"})
    out = tmp_path / "out"
    out.mkdir()
    extract_members(archive, {"d/x.txt": out / "1", "../outside.txt": out / "2"})  # "./" is ignored
    assert (out / "1").read_text() == "x\n" and (out / "2").read_text() == "z\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tar.gz", "out"]  # nothing written by member name
    assert sorted(p.name for p in out.iterdir()) == ["1", "2"]


def test_reading_stops_once_every_member_is_found(tmp_path):
    archive = tmp_path / "a.tar.gz"
    body = make_archive(archive, {"first": "wanted\n", "second": bytes(range(256)) * 4000})
    archive.write_bytes(body[: len(body) * 2 // 3])  # the end of the stream is lost
    extract_members(archive, {"first": tmp_path / "first"})
    assert (tmp_path / "first").read_text() == "wanted\n"
    with pytest.raises(CorpusDownloadError, match=f"cannot read the archive {archive} .*delete it"):
        extract_members(archive, {"second": tmp_path / "second"})


def test_a_missing_member_or_a_folder_member_is_named(tmp_path):
    archive = tmp_path / "a.tar.gz"
    make_archive(archive, {"d/x.txt": "x\n"})
    with pytest.raises(CorpusDownloadError, match=r"a\.tar\.gz has no member d/nope\.txt: not the layout"):
        extract_members(archive, {"d/x.txt": tmp_path / "1", "d/nope.txt": tmp_path / "2"})
    (tmp_path / "not_an_archive.tgz").write_bytes(b"plain text, not gzip")
    with pytest.raises(CorpusDownloadError, match="cannot read the archive"):
        extract_members(tmp_path / "not_an_archive.tgz", {"x": tmp_path / "3"})


def test_blank_pair_rule():
    assert is_blank_pair("", "x") and is_blank_pair("x", " \t ") and is_blank_pair("", "")
    assert not is_blank_pair("x", "y") and not is_blank_pair(" x", "y ")


def test_writer_counts_and_writes_empty_files_for_a_split_left_empty(tmp_path):
    writer = PairWriter(tmp_path, ("pt", "en"), ("train", "dev", "test"))
    assert writer.add("train", "a", "b") and not writer.add("train", "", "b") and not writer.add("dev", "c", " ")
    writer.drop("train")
    counts = writer.close()
    assert {s: vars(c) for s, c in counts.items()} == {
        "train": {"pairs": 1, "dropped_empty": 2},
        "dev": {"pairs": 0, "dropped_empty": 1},
        "test": {"pairs": 0, "dropped_empty": 0},
    }
    assert (tmp_path / "train.pt").read_text() == "a\n" and (tmp_path / "dev.en").read_text() == ""
    assert (tmp_path / "test.pt").read_text() == "" and (tmp_path / "test.en").exists()


def test_undecodable_bytes_pass_through_unchanged(tmp_path):
    writer = PairWriter(tmp_path, ("x", "y"), ("train",))
    line = b"caf\xe9 au lait".decode("utf-8", errors="surrogateescape")
    writer.add("train", line, "coffee")
    writer.close()
    assert (tmp_path / "train.x").read_bytes() == b"caf\xe9 au lait\n"


def test_aligned_names_both_sides_and_their_lengths():
    assert list(aligned(iter("ab"), iter("cd"), "s", "t")) == [("a", "c"), ("b", "d")]
    with pytest.raises(CorpusDownloadError, match="s has 3 lines but t has 2"):
        list(aligned(iter("abc"), iter("de"), "s", "t"))
    with pytest.raises(CorpusDownloadError, match="s has 1 lines but t has 4"):
        list(aligned(iter("a"), iter("defg"), "s", "t"))


def test_an_unpublished_archive_put_in_the_cache_by_hand_is_recorded(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="nmt.data")
    body = b"an archive nobody published a checksum for"
    (tmp_path / "x.tgz").write_bytes(body)
    archive = entry("x.tgz", body, "http://127.0.0.1:9/x.tgz", checksum=False)
    assert fetch_archive(archive, tmp_path, mirror=None, policy=POLICY) == tmp_path / "x.tgz"
    record = json.loads(record_path(tmp_path / "x.tgz").read_text())
    assert record["size"] == len(body) and record["source"] == str(tmp_path / "x.tgz")
    assert any("no published checksum: recorded size" in r.getMessage() for r in caplog.records)


def test_a_mirror_that_is_not_a_directory_is_an_error(tmp_path):
    archive = entry("x.tgz", b"x", "http://127.0.0.1:9/x.tgz")
    with pytest.raises(CorpusDownloadError, match="is not a directory"):
        fetch_archive(archive, tmp_path, mirror=str(tmp_path / "nowhere"), policy=POLICY)


def test_a_disk_error_while_extracting_is_one_line_naming_the_folder(tmp_path):
    not_a_folder = tmp_path / "corpus"
    not_a_folder.write_text("a file where the corpus folder should be")
    build = Build("pt_to_en", ("pt", "en"), ("train",), (), lambda members, out: None)
    with pytest.raises(CorpusDownloadError) as info:
        build_folder(not_a_folder, build, mirror=None, policy=POLICY)
    assert str(info.value).startswith(f"could not extract pt_to_en into {not_a_folder}: ")
    assert "\n" not in str(info.value)


def test_a_mirror_may_hold_the_archive_in_a_folder_named_after_the_corpus(tmp_path):
    body = b"an archive"
    archive = entry("x.tgz", body, "http://127.0.0.1:9/x.tgz")
    (tmp_path / "mirror" / "corpus").mkdir(parents=True)
    (tmp_path / "mirror" / "corpus" / "x.tgz").write_bytes(body)
    got = fetch_archive(archive, tmp_path / "cache" / "corpus", mirror=str(tmp_path / "mirror"), policy=POLICY)
    assert got == tmp_path / "mirror" / "corpus" / "x.tgz" and not (tmp_path / "cache").exists()


def test_a_file_of_its_own_is_found_compressed_or_plain_in_either_place(tmp_path):
    file = LooseFile("pair/a.train", "0" * 64)
    assert find_loose(tmp_path, "corpus", file) is None
    (tmp_path / "corpus" / "pair").mkdir(parents=True)
    (tmp_path / "corpus" / "pair" / "a.train").write_text("plain\n")
    assert find_loose(tmp_path, "corpus", file) == tmp_path / "corpus" / "pair" / "a.train"
    (tmp_path / "pair").mkdir()
    (tmp_path / "pair" / "a.train.gz").write_bytes(gzip.compress(b"x\n"))
    assert find_loose(tmp_path, "corpus", file) == tmp_path / "pair" / "a.train.gz"  # the mirror's top first


def test_copy_verified_decompresses_and_checks_the_text(tmp_path):
    text = "olá .\n".encode() * 1000
    sha = hashlib.sha256(text).hexdigest()
    (tmp_path / "a.gz").write_bytes(gzip.compress(text))
    (tmp_path / "a").write_bytes(text)
    for name in ("a.gz", "a"):
        copy_verified(tmp_path / name, tmp_path / "out", sha, root=tmp_path)
        assert (tmp_path / "out").read_bytes() == text
    (tmp_path / "b.gz").write_bytes(text)  # not compressed, though named so
    with pytest.raises(CorpusDownloadError) as info:
        copy_verified(tmp_path / "b.gz", tmp_path / "out", sha, root=tmp_path)
    assert str(info.value).startswith(f"{tmp_path / 'b.gz'} in the mirror {tmp_path} is corrupt (Not a gzipped file")
    assert f"expected {sha}, got {hashlib.sha256(b'').hexdigest()}" in str(info.value)
    with pytest.raises(CorpusDownloadError, match=f"cannot read {tmp_path / 'none'} in the mirror"):
        copy_verified(tmp_path / "none", tmp_path / "out", sha, root=tmp_path)


def test_a_build_uses_a_mirror_only_for_members_it_pins_every_one_of(tmp_path):
    archive = entry("x.tgz", b"x", "http://127.0.0.1:9/x.tgz")
    (tmp_path / "c" / "p").mkdir(parents=True)
    (tmp_path / "c" / "p" / "a").write_text("a\n")
    loose = {"d/p/a": LooseFile("p/a", "0" * 64)}
    build = Build("p", ("a", "b"), ("train",), ((archive, ("d/p/a", "d/p/b")),), lambda m, o: None, loose)
    assert loose_in_mirror(build, "c", tmp_path) == ({}, ["d/p/b"])  # no pin for d/p/b: the archive's
    assert loose_in_mirror(build, "c", None) == ({}, [])
    pinned = {**loose, "d/p/b": LooseFile("p/b", "0" * 64)}
    (tmp_path / "c" / "p" / "b.gz").write_bytes(gzip.compress(b"b\n"))
    found, missing = loose_in_mirror(dataclasses.replace(build, loose=pinned), "c", tmp_path)
    assert found == {"d/p/a": tmp_path / "c" / "p" / "a", "d/p/b": tmp_path / "c" / "p" / "b.gz"} and missing == []
