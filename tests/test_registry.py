"""Tests for nmt.data.registry: mirrors, cache, and downloads from a local fake upstream.

The fake upstream (fake_upstream.py) is an http.server on 127.0.0.1 that can
be told to fail: answer 500, close the connection half-way, ignore Range
requests, send more than the file, or stall half-way until the test lets it
go on.
"""

import hashlib
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.data import registry
from nmt.data.registry import (
    CORPORA,
    CorpusDownloadError,
    CorpusFile,
    NamedCorpus,
    corpus_path,
    parallel_files,
    sha256_of,
)

from fake_upstream import FakeUpstream, race, serving

# Big enough to arrive in several 64 KiB chunks, so "half" is a real interruption.
FILES = {
    "data/train.en.gz": bytes(range(256)) * 800,
    "data/train.de.gz": bytes(reversed(range(256))) * 600,
}


@pytest.fixture
def upstream(monkeypatch):
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    with serving(FakeUpstream(FILES)) as fake:
        yield fake


def make_corpus(base_url: str, sha256: dict | None = None, *, known_size: bool = True) -> NamedCorpus:
    sha256 = sha256 or {path: hashlib.sha256(body).hexdigest() for path, body in FILES.items()}

    def file(lang: str) -> CorpusFile:
        relpath = f"data/train.{lang}.gz"
        return CorpusFile(relpath, sha256[relpath], len(FILES[relpath]) if known_size else None)

    return NamedCorpus(
        name="fake",
        base_url=base_url,
        languages=("en", "de"),
        splits=("train",),
        files={("train", lang): file(lang) for lang in ("en", "de")},
        citation="none",
    )


@pytest.fixture
def fake(upstream, monkeypatch):
    """Register a fake corpus served by `upstream`; no mirror, no backoff."""
    monkeypatch.setitem(CORPORA, "fake", make_corpus(f"{upstream.url}/up/"))
    monkeypatch.setattr(registry, "BACKOFF_S", 0.0)
    monkeypatch.delenv("NMT_MIRROR", raising=False)
    return upstream


def test_download_verifies_and_then_reuses_the_cache(fake, tmp_path):
    path = corpus_path("fake", "train", "en", cache_dir=tmp_path)
    assert path == tmp_path / "fake" / "data/train.en.gz"
    assert path.read_bytes() == FILES["data/train.en.gz"]
    assert not path.with_name(path.name + ".part").exists()
    assert corpus_path("fake", "train", "en", cache_dir=tmp_path) == path
    assert fake.requests == [("/up/data/train.en.gz", None)]  # second call: no request


def test_data_home_from_environment(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("NMT_DATA_HOME", str(tmp_path / "home"))
    assert registry.data_home() == tmp_path / "home"
    path = corpus_path("fake", "train", "de")
    assert path == tmp_path / "home" / "fake" / "data/train.de.gz"


def test_interrupted_download_resumes_with_range(fake, tmp_path):
    fake.truncate_first = 1
    path = corpus_path("fake", "train", "en", cache_dir=tmp_path)
    assert path.read_bytes() == FILES["data/train.en.gz"]
    half = len(FILES["data/train.en.gz"]) // 2
    assert [header for _, header in fake.requests] == [None, f"bytes={half}-"]


def test_a_resumed_download_that_fails_its_checksum_is_fetched_again_whole(fake, tmp_path):
    good = FILES["data/train.en.gz"]
    fake.files = {**FILES, "data/train.en.gz": bytes(reversed(good))}  # the file as it was at first
    fake.truncate_first = 1
    handle = fake.handle

    def handle_then_update(request):
        handle(request)
        fake.files = FILES  # upstream replaced the file between our requests: the splice is corrupt

    fake.handle = handle_then_update
    assert corpus_path("fake", "train", "en", cache_dir=tmp_path).read_bytes() == good
    assert [header for _, header in fake.requests] == [None, f"bytes={len(good) // 2}-", None]


def test_server_ignoring_range_starts_over(fake, tmp_path):
    fake.truncate_first, fake.honour_range = 1, False
    path = corpus_path("fake", "train", "en", cache_dir=tmp_path)
    assert path.read_bytes() == FILES["data/train.en.gz"]
    assert len(fake.requests) == 2


def test_wrong_checksum_leaves_no_file(fake, tmp_path, monkeypatch):
    wrong = {path: "0" * 64 for path in FILES}
    monkeypatch.setitem(CORPORA, "fake", make_corpus(f"{fake.url}/up/", wrong))
    with pytest.raises(CorpusDownloadError) as info:
        corpus_path("fake", "train", "en", cache_dir=tmp_path)
    message = str(info.value)
    assert "corrupt" in message and "0" * 64 in message
    assert hashlib.sha256(FILES["data/train.en.gz"]).hexdigest() in message
    assert f"{fake.url}/up/data/train.en.gz" in message
    assert list((tmp_path / "fake" / "data").iterdir()) == []


def test_corrupt_cached_file_is_downloaded_again(fake, tmp_path):
    dest = tmp_path / "fake" / "data/train.en.gz"
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"garbage")
    assert corpus_path("fake", "train", "en", cache_dir=tmp_path).read_bytes() == FILES["data/train.en.gz"]


def test_server_errors_are_retried(fake, tmp_path):
    fake.fail_first = 2
    path = corpus_path("fake", "train", "en", cache_dir=tmp_path, retries=2)
    assert sha256_of(path) == hashlib.sha256(FILES["data/train.en.gz"]).hexdigest()
    assert len(fake.requests) == 3


def test_persistent_server_error_gives_up_after_retries(fake, tmp_path):
    fake.fail_first = 10**6
    with pytest.raises(CorpusDownloadError, match=r"HTTP 500.*gave up after 3 attempts.*NMT_MIRROR"):
        corpus_path("fake", "train", "en", cache_dir=tmp_path, retries=2)
    assert len(fake.requests) == 3


def test_not_found_is_not_retried(fake, tmp_path, monkeypatch):
    monkeypatch.setitem(CORPORA, "fake", make_corpus(f"{fake.url}/nowhere/x/"))
    with pytest.raises(CorpusDownloadError, match="HTTP 404"):
        corpus_path("fake", "train", "en", cache_dir=tmp_path, retries=3)
    assert len(fake.requests) == 1


def test_no_network_and_no_mirror_says_what_to_set(fake, tmp_path, monkeypatch):
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    monkeypatch.setitem(CORPORA, "fake", make_corpus(f"http://127.0.0.1:{closed_port}/"))
    with pytest.raises(CorpusDownloadError) as info:
        corpus_path("fake", "train", "en", cache_dir=tmp_path, retries=1)
    message = str(info.value)
    assert f"could not download http://127.0.0.1:{closed_port}/data/train.en.gz" in message
    assert "NMT_MIRROR=" in message and str(tmp_path / "fake") in message


def test_http_mirror_is_downloaded_into_the_cache(fake, tmp_path):
    path = corpus_path("fake", "train", "de", cache_dir=tmp_path, mirror=f"{fake.url}/mirror")
    assert path == tmp_path / "fake" / "data/train.de.gz"
    assert fake.requests == [("/mirror/data/train.de.gz", None)]


def test_local_mirror_is_verified_and_used_in_place(fake, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    for relpath, body in FILES.items():
        (mirror / relpath).parent.mkdir(parents=True, exist_ok=True)
        (mirror / relpath).write_bytes(body)
    monkeypatch.setenv("NMT_MIRROR", str(mirror))
    src, tgt = parallel_files("fake", "train", "de", "en", cache_dir=tmp_path / "cache")
    assert (src, tgt) == (mirror / "data/train.de.gz", mirror / "data/train.en.gz")
    assert fake.requests == []

    # A copy is kept in the cache: a later command without the mirror needs no network.
    monkeypatch.delenv("NMT_MIRROR")
    cached = parallel_files("fake", "train", "de", "en", cache_dir=tmp_path / "cache")
    assert cached == (tmp_path / "cache/fake/data/train.de.gz", tmp_path / "cache/fake/data/train.en.gz")
    assert [p.read_bytes() for p in cached] == [FILES["data/train.de.gz"], FILES["data/train.en.gz"]]
    assert fake.requests == []  # upstream was never asked
    monkeypatch.setenv("NMT_MIRROR", str(mirror))

    (mirror / "data/train.en.gz").write_bytes(b"bit rot")
    with pytest.raises(CorpusDownloadError, match=r"train\.en\.gz in the mirror .* is corrupt"):
        corpus_path("fake", "train", "en", cache_dir=tmp_path / "cache")


def test_a_local_mirror_may_hold_a_folder_per_corpus(fake, tmp_path, monkeypatch):
    mirror = tmp_path / "data"  # as ../shared/data: multi30k/, ted_hrlr/, ...
    for relpath, body in FILES.items():
        (mirror / "fake" / relpath).parent.mkdir(parents=True, exist_ok=True)
        (mirror / "fake" / relpath).write_bytes(body)
    (mirror / "other").mkdir()
    monkeypatch.setenv("NMT_MIRROR", str(mirror))
    src, tgt = parallel_files("fake", "train", "de", "en", cache_dir=tmp_path / "cache")
    assert (src, tgt) == (mirror / "fake/data/train.de.gz", mirror / "fake/data/train.en.gz")
    assert fake.requests == []

    (mirror / "fake/data/train.en.gz").write_bytes(b"bit rot")
    with pytest.raises(CorpusDownloadError, match=r"fake/data/train\.en\.gz in the mirror .* is corrupt"):
        corpus_path("fake", "train", "en")
    (mirror / "fake/data/train.en.gz").unlink()
    with pytest.raises(CorpusDownloadError) as info:
        corpus_path("fake", "train", "en")
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"data/train.en.gz not found in the mirror {mirror}: ")
    assert f"there is no {mirror / 'data/train.en.gz'} nor {mirror / 'fake/data/train.en.gz'}" in message
    assert fake.requests == []


def test_oversized_body_is_refused_naming_the_limit(fake, tmp_path):
    url, size = f"{fake.url}/up/data/train.en.gz", len(FILES["data/train.en.gz"])
    for oversize in ("announced", "endless"):
        fake.oversize, fake.requests = oversize, []
        with pytest.raises(CorpusDownloadError) as info:
            corpus_path("fake", "train", "en", cache_dir=tmp_path, retries=2)
        message = str(info.value)
        assert url in message and f"more than {size} bytes (its registered size)" in message
        assert "\n" not in message
        assert len(fake.requests) == 1  # not retried: the server would do it again
        assert list((tmp_path / "fake" / "data").iterdir()) == []  # no .part, no .lock


def test_file_of_unknown_size_is_capped(fake, tmp_path, monkeypatch):
    monkeypatch.setitem(CORPORA, "fake", make_corpus(f"{fake.url}/up/", known_size=False))
    size = len(FILES["data/train.en.gz"])
    monkeypatch.setattr(registry, "UNKNOWN_SIZE_CAP_BYTES", size - 1)
    with pytest.raises(CorpusDownloadError, match=f"more than {size - 1} bytes .the cap for a file of unknown size"):
        corpus_path("fake", "train", "en", cache_dir=tmp_path)
    monkeypatch.setattr(registry, "UNKNOWN_SIZE_CAP_BYTES", size)
    assert corpus_path("fake", "train", "en", cache_dir=tmp_path).read_bytes() == FILES["data/train.en.gz"]


def test_part_no_shorter_than_the_file_is_not_resumed(fake, tmp_path):
    body = FILES["data/train.en.gz"]
    part = tmp_path / "fake" / "data" / "train.en.gz.part"
    part.parent.mkdir(parents=True)
    for leftover in (body, body + b"junk"):  # no valid prefix: the file would be complete already
        part.write_bytes(leftover)
        (tmp_path / "fake" / "data" / "train.en.gz").unlink(missing_ok=True)
        fake.requests = []
        assert corpus_path("fake", "train", "en", cache_dir=tmp_path).read_bytes() == body
        assert fake.requests == [("/up/data/train.en.gz", None)]  # from the start, no Range


def test_local_disk_errors_are_one_line_naming_the_url(fake, tmp_path):
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("a file where the cache folder should be")
    with pytest.raises(CorpusDownloadError) as info:
        corpus_path("fake", "train", "en", cache_dir=not_a_folder)
    message = str(info.value)
    assert message.startswith(f"could not download {fake.url}/up/data/train.en.gz into {not_a_folder}")
    assert "\n" not in message


# --- processes sharing one cache ----------------------------------------------------

# One process that fetches train.en.gz of the fake corpus at argv[1] into the cache at argv[2].
CHILD = f"""
import logging, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_registry import make_corpus
from nmt.data.registry import CORPORA, corpus_path
logging.basicConfig(level=logging.INFO, format="%(message)s")
CORPORA["fake"] = make_corpus(sys.argv[1])
print(corpus_path("fake", "train", "en", cache_dir=sys.argv[2]))
"""


def test_two_processes_fetching_one_file_take_turns(fake, tmp_path):
    """The second waits on the first's lock, says so, then finds the verified file: one download in all."""
    cache = tmp_path / "cache"  # does not exist yet: both processes create it
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, f"{fake.url}/up/", str(cache)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    stderr = race(fake, procs)
    paths = [p.stdout.read().strip() for p in procs]
    for p in procs:
        p.stdout.close()

    assert [p.returncode for p in procs] == [0, 0], stderr
    dest = cache / "fake" / "data" / "train.en.gz"
    assert paths == [str(dest)] * 2
    assert dest.read_bytes() == FILES["data/train.en.gz"]
    assert fake.requests == [("/up/data/train.en.gz", None)]
    assert os.listdir(dest.parent) == ["train.en.gz"]  # no .part, no .lock left
    assert corpus_path("fake", "train", "en", cache_dir=cache) == dest and len(fake.requests) == 1


def test_lock_of_a_killed_process_is_free_and_its_part_resumed(fake, tmp_path):
    body = FILES["data/train.en.gz"]
    dest = tmp_path / "fake" / "data" / "train.en.gz"
    dest.parent.mkdir(parents=True)
    dest.with_name("train.en.gz.part").write_bytes(body[:1000])  # what the killed writer had got
    hold = (
        "import fcntl, sys, time; f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX); "
        "print(1, flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(dest.with_name("train.en.gz.lock"))], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline() == "1\n"  # it holds the lock
    holder.kill()
    holder.wait()
    holder.stdout.close()

    assert corpus_path("fake", "train", "en", cache_dir=tmp_path).read_bytes() == body
    assert fake.requests == [("/up/data/train.en.gz", "bytes=1000-")]
    assert os.listdir(dest.parent) == ["train.en.gz"]


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ValueError, match="known corpora: multi30k"):
        corpus_path("wmt99", "train", "en")
    with pytest.raises(ValueError, match="splits: train, val, test_2016_flickr"):
        corpus_path("multi30k", "dev", "en")
    with pytest.raises(ValueError, match="languages: en, de, fr, cs"):
        corpus_path("multi30k", "train", "xx")
    with pytest.raises(ValueError, match=r"made from archives.*parallel_files\('ted_hrlr'"):
        corpus_path("ted_hrlr", "train", "pt")


# --- the real Multi30k -------------------------------------------------------------


def test_multi30k_local_mirror_verifies_all_files(multi30k_dir, tmp_path):
    corpus = CORPORA["multi30k"]
    assert len(corpus.files) == 12
    for (split, lang), file in corpus.files.items():
        path = corpus_path("multi30k", split, lang, mirror=str(multi30k_dir), cache_dir=tmp_path)
        assert path == multi30k_dir / file.relpath
        assert sha256_of(path) == file.sha256
        assert sha256_of(tmp_path / "multi30k" / file.relpath) == file.sha256  # kept for commands without it


def test_training_s_read_of_a_mirror_keeps_the_test_sets_too(multi30k_dir, tmp_path, monkeypatch):
    """`nmt evaluate --test multi30k:test_2016_flickr:de-en` after training with NMT_MIRROR reads
    a split training never asked for: every split of the languages read is kept."""
    parallel_files("multi30k", "train", "de", "en", mirror=str(multi30k_dir), cache_dir=tmp_path / "cache")
    for (split, lang), file in CORPORA["multi30k"].files.items():
        kept = tmp_path / "cache" / "multi30k" / file.relpath
        assert kept.is_file() == (lang in ("de", "en")), (split, lang)
    monkeypatch.delenv("NMT_MIRROR", raising=False)  # offline, no mirror: the cache alone
    monkeypatch.setattr(registry, "download", lambda *a, **k: pytest.fail("tried the network"))
    src, _ = parallel_files("multi30k", "test_2016_flickr", "de", "en", cache_dir=tmp_path / "cache")
    assert src == tmp_path / "cache/multi30k" / CORPORA["multi30k"].files[("test_2016_flickr", "de")].relpath


def test_multi30k_from_a_mirror_of_per_corpus_folders(multi30k_dir, tmp_path, monkeypatch):
    mirror = tmp_path / "data"  # NMT_MIRROR=../shared/data rather than ../shared/data/multi30k
    mirror.mkdir()
    (mirror / "multi30k").symlink_to(multi30k_dir.resolve(), target_is_directory=True)
    (mirror / "ted_hrlr").mkdir()
    monkeypatch.setenv("NMT_MIRROR", str(mirror))
    src, tgt = parallel_files("multi30k", "val", "de", "en", cache_dir=tmp_path / "cache")
    assert (src, tgt) == (mirror / "multi30k/data/task1/raw/val.de.gz", mirror / "multi30k/data/task1/raw/val.en.gz")


def test_multi30k_from_a_file_url(multi30k_dir, tmp_path):
    # file:// exercises the download path (no HTTP status, no Range) without a network.
    path = corpus_path("multi30k", "val", "en", mirror=multi30k_dir.as_uri(), cache_dir=tmp_path)
    assert path == tmp_path / "multi30k" / "data/task1/raw/val.en.gz"
    assert sha256_of(path) == CORPORA["multi30k"].files[("val", "en")].sha256


def test_multi30k_corrupt_file_in_local_mirror_is_refused(multi30k_dir, tmp_path):
    mirror = tmp_path / "mirror"
    shutil.copytree(multi30k_dir / "data", mirror / "data")
    raw = mirror / "data/task1/raw/val.de.gz"
    raw.chmod(0o644)
    raw.write_bytes(raw.read_bytes()[:-10])
    with pytest.raises(CorpusDownloadError) as info:
        corpus_path("multi30k", "val", "de", mirror=str(mirror))
    assert str(raw) in str(info.value) and "corrupt" in str(info.value)
    assert CORPORA["multi30k"].files[("val", "de")].sha256 in str(info.value)
