"""Tests for nmt.data.ted_hrlr: the TED corpus from one archive, served by a local fake upstream.

The archive is a small one of the real layout, built in tmp_path; the
registered entry is swapped for one with its size and sha256 and two
addresses, the first of them dead. A mirror holding pt -> en's own files
instead of the archive is built beside it, with their checksums pinned in
the registered entry's place. Nothing here touches the network.
"""

import dataclasses
import functools
import gzip
import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.config import DataConfig, load_config
from nmt.data import registry
from nmt.data.corpus import ReadStats, read_parallel
from nmt.data.mirror import LooseFile, copy_verified
from nmt.data.registry import CORPORA, CorpusDownloadError, parallel_files
from nmt.data.ted_hrlr import TED_ARCHIVE, TED_FILES, TED_HRLR, TED_PAIRS, ted_build, ted_member
from nmt.training.datasets import split_files

from archives import entry, make_archive, write_loose
from fake_upstream import FakeUpstream, race, serving

REPO = Path(__file__).resolve().parents[1]
NAME = "qi18naacl-dataset.tar.gz"

MEMBERS = {
    # train: the third pair has an empty Portuguese side
    "datasets/pt_to_en/pt.train": "olá , mundo .\nnão\n\nsim !\n",
    "datasets/pt_to_en/en.train": "hello , world .\nno\nan orphan\nyes !\n",
    # dev: the second pair's English side is only spaces
    "datasets/pt_to_en/pt.dev": "bom dia .\nboa noite .\n",
    "datasets/pt_to_en/en.dev": "good morning .\n   \n",
    # test: no final newline; nothing to drop
    "datasets/pt_to_en/pt.test": "obrigado .\ntchau",
    "datasets/pt_to_en/en.test": "thank you .\nbye",
    # a multi-source pair: train from az-tr.*, dev and test from az.* (az.train is a decoy)
    "datasets/az_tr_to_en/az-tr.train": "salam .\nmerhaba .\n",
    "datasets/az_tr_to_en/az.train": "WRONG\nWRONG\n",
    "datasets/az_tr_to_en/en.train": "hello .\nhello .\n",
    "datasets/az_tr_to_en/az.dev": "sağ ol .\n",
    "datasets/az_tr_to_en/en.dev": "thanks .\n",
    "datasets/az_tr_to_en/az.test": "bəli .\n",
    "datasets/az_tr_to_en/en.test": "yes .\n",
    "datasets/ru_to_en/ru.train": "не нужно\n",
}
# pt -> en's files as a mirror that repacks the archive's datasets/pt_to_en/ holds them, and their pins.
PT_EN_FILES = {
    name.removeprefix("datasets/"): text for name, text in MEMBERS.items() if name.startswith("datasets/pt_to_en/")
}
PINNED = {relpath: hashlib.sha256(text.encode()).hexdigest() for relpath, text in PT_EN_FILES.items()}
PT_EN = {
    "train": (["olá , mundo .", "não", "sim !"], ["hello , world .", "no", "yes !"]),
    "dev": (["bom dia ."], ["good morning ."]),
    "test": (["obrigado .", "tchau"], ["thank you .", "bye"]),
}


def closed_port() -> int:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def archive_bytes(tmp_path) -> bytes:
    return make_archive(tmp_path / "built.tar.gz", MEMBERS)


@pytest.fixture
def upstream(archive_bytes, monkeypatch):
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    monkeypatch.setattr(registry, "BACKOFF_S", 0.0)
    monkeypatch.delenv("NMT_MIRROR", raising=False)
    files = {NAME: archive_bytes, f"corrupt/{NAME}": archive_bytes[::-1]}
    with serving(FakeUpstream(files)) as fake:
        yield fake


def register(
    monkeypatch, archive_bytes: bytes, *urls: str, sha256: str | None = None, files: dict[str, str] | None = None
) -> None:
    """Swap the registered TED entry for one of the test archive, served at ``urls``; ``files``: other pins."""
    archive = entry(NAME, archive_bytes, *urls)
    if sha256 is not None:
        archive = dataclasses.replace(archive, sha256=sha256)
    build = functools.partial(ted_build, archive=archive, **({"files": files} if files is not None else {}))
    corpus = dataclasses.replace(TED_HRLR, archives=(archive,), build=build)
    monkeypatch.setitem(CORPORA, "ted_hrlr", corpus)


@pytest.fixture
def ted(upstream, archive_bytes, monkeypatch):
    """The test archive registered with a dead first address and the fake upstream second."""
    register(monkeypatch, archive_bytes, f"http://127.0.0.1:{closed_port()}/{NAME}", f"{upstream.url}/up/{NAME}")
    return upstream


@pytest.fixture
def loose(ted, archive_bytes, tmp_path, monkeypatch) -> Path:
    """NMT_MIRROR: a directory whose ted_hrlr/ folder holds pt -> en's six files gzip-compressed, pinned.

    The archive stays registered (at the fake upstream) for a mirror that lacks a file.
    """
    mirror = tmp_path / "mirror"
    assert write_loose(mirror / "ted_hrlr", PT_EN_FILES) == PINNED
    register(monkeypatch, archive_bytes, f"{ted.url}/up/{NAME}", files=PINNED)
    monkeypatch.setenv("NMT_MIRROR", str(mirror))
    return mirror


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_first_address_dead_second_answers(ted, tmp_path):
    src, tgt = parallel_files("ted_hrlr", "train", "pt", "en", cache_dir=tmp_path)
    folder = tmp_path / "ted_hrlr" / "pt_to_en"
    assert (src, tgt) == (folder / "train.pt", folder / "train.en")
    for split, (pt, en) in PT_EN.items():
        assert lines(folder / f"{split}.pt") == pt and lines(folder / f"{split}.en") == en
    assert ted.requests == [(f"/up/{NAME}", None)]
    # The archive and the one pair's folder: no lock, no .part, no temporary folder, no other pair.
    assert sorted(os.listdir(tmp_path / "ted_hrlr")) == sorted([NAME, "pt_to_en"])
    assert sorted(os.listdir(folder)) == [
        "dev.en",
        "dev.pt",
        "manifest.json",
        "test.en",
        "test.pt",
        "train.en",
        "train.pt",
    ]
    # Later calls, and the other splits, reuse the folder: no request, no extraction.
    assert parallel_files("ted_hrlr", "test", "pt", "en", cache_dir=tmp_path) == (
        folder / "test.pt",
        folder / "test.en",
    )
    assert len(ted.requests) == 1


def test_pairs_with_an_empty_side_are_dropped_counted_and_logged(ted, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="nmt.data")
    src, tgt = parallel_files("ted_hrlr", "dev", "pt", "en", cache_dir=tmp_path)
    manifest = json.loads((src.parent / "manifest.json").read_text())
    assert manifest["splits"] == {
        "train": {"pairs": 3, "dropped_empty": 1},
        "dev": {"pairs": 1, "dropped_empty": 1},
        "test": {"pairs": 2, "dropped_empty": 0},
    }
    assert manifest["sources"][ted_member(("pt", "en"), "dev", "pt")] == f"{NAME}:datasets/pt_to_en/pt.dev"
    logged = [r.getMessage() for r in caplog.records]
    assert any(m.endswith("train: 3 pairs; dropped 1 pairs with an empty side") for m in logged), logged
    assert any(m.endswith("test: 2 pairs; dropped 0 pairs with an empty side") for m in logged), logged
    # What the training reader gets: the same pairs, nothing left for it to skip.
    stats = ReadStats()
    assert list(read_parallel(src, tgt, stats)) == [("bom dia .", "good morning .")]
    assert stats.empty == 0


def test_a_final_line_without_newline_is_kept_and_a_final_newline_adds_no_pair(ted, tmp_path):
    src, tgt = parallel_files("ted_hrlr", "test", "pt", "en", cache_dir=tmp_path)
    assert src.read_text() == "obrigado .\ntchau\n" and tgt.read_text() == "thank you .\nbye\n"


def test_multi_source_pair_trains_on_the_joined_file_and_tests_on_the_first_language(ted, tmp_path):
    folder = tmp_path / "ted_hrlr" / "az_tr_to_en"
    assert parallel_files("ted_hrlr", "train", "az_tr", "en", cache_dir=tmp_path) == (
        folder / "train.az_tr",
        folder / "train.en",
    )
    assert lines(folder / "train.az_tr") == ["salam .", "merhaba ."]  # az-tr.train, not az.train
    assert lines(folder / "dev.az_tr") == ["sağ ol ."] and lines(folder / "test.az_tr") == ["bəli ."]
    assert not (tmp_path / "ted_hrlr" / "pt_to_en").exists()  # only the pair asked for is extracted


def test_a_config_naming_the_corpus_works_with_the_training_data_code(ted, tmp_path, monkeypatch):
    monkeypatch.setenv("NMT_DATA_HOME", str(tmp_path))
    data = DataConfig(corpus="ted_hrlr", src_lang="pt", tgt_lang="en", train_split="train", valid_split="dev")
    assert list(split_files(data, "valid").pairs()) == [("bom dia .", "good morning .")]
    assert list(split_files(data, "train").pairs()) == list(zip(*PT_EN["train"], strict=True))


def test_member_names_of_every_registered_pair():
    assert ted_member(("az_tr", "en"), "train", "az_tr") == "datasets/az_tr_to_en/az-tr.train"
    assert ted_member(("az_tr", "en"), "dev", "az_tr") == "datasets/az_tr_to_en/az.dev"
    assert ted_member(("az_tr", "en"), "test", "en") == "datasets/az_tr_to_en/en.test"
    assert ted_member(("es", "pt"), "train", "pt") == "datasets/es_to_pt/pt.train"
    for src, tgt in TED_PAIRS:
        first = src.split("_")[0]
        assert ted_member((src, tgt), "train", src).endswith(f"/{src.replace('_', '-')}.train")
        assert ted_member((src, tgt), "dev", src) == f"datasets/{src}_to_{tgt}/{first}.dev"


def test_a_pair_asked_the_other_way_round_uses_the_same_folder(ted, tmp_path):
    folder = tmp_path / "ted_hrlr" / "pt_to_en"
    assert parallel_files("ted_hrlr", "dev", "en", "pt", cache_dir=tmp_path) == (folder / "dev.en", folder / "dev.pt")


def test_unknown_split_or_pair_lists_the_valid_ones_before_any_download(ted, tmp_path):
    with pytest.raises(ValueError, match="splits: train, dev, test"):
        parallel_files("ted_hrlr", "valid", "pt", "en", cache_dir=tmp_path)
    with pytest.raises(ValueError, match=r"no pair de-en; pairs \(either direction\): az-en, az_tr-en, .* ru-pt"):
        parallel_files("ted_hrlr", "train", "de", "en", cache_dir=tmp_path)
    assert ted.requests == [] and not (tmp_path / "ted_hrlr").exists()


def test_wrong_checksum_at_every_address_is_one_line_naming_each(upstream, archive_bytes, tmp_path, monkeypatch):
    urls = (f"{upstream.url}/a/{NAME}", f"{upstream.url}/b/{NAME}")
    register(monkeypatch, archive_bytes, *urls, sha256="0" * 64)
    with pytest.raises(CorpusDownloadError) as info:
        parallel_files("ted_hrlr", "train", "pt", "en", cache_dir=tmp_path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"could not get {NAME} from any of its 2 sources")
    for url in urls:
        assert f"downloaded {url} is corrupt: sha256 expected {'0' * 64}" in message
    assert "NMT_MIRROR" in message
    assert os.listdir(tmp_path / "ted_hrlr") == []  # no archive, .part, lock or folder


def test_a_corrupt_copy_at_the_first_address_is_passed_over(upstream, archive_bytes, tmp_path, monkeypatch, caplog):
    register(monkeypatch, archive_bytes, f"{upstream.url}/up/corrupt/{NAME}", f"{upstream.url}/up/{NAME}")
    src, _ = parallel_files("ted_hrlr", "train", "pt", "en", cache_dir=tmp_path)
    assert lines(src) == PT_EN["train"][0]
    assert [path for path, _ in upstream.requests] == [f"/up/corrupt/{NAME}", f"/up/{NAME}"]
    assert any("corrupt" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_truncated_download_resumes_with_range(ted, archive_bytes, tmp_path):
    ted.truncate_first = 1
    src, _ = parallel_files("ted_hrlr", "train", "pt", "en", cache_dir=tmp_path)
    assert lines(src) == PT_EN["train"][0]
    assert [header for _, header in ted.requests] == [None, f"bytes={len(archive_bytes) // 2}-"]
    assert (tmp_path / "ted_hrlr" / NAME).read_bytes() == archive_bytes


def test_part_left_by_a_killed_download_is_resumed(ted, archive_bytes, tmp_path):
    corpus_dir = tmp_path / "ted_hrlr"
    corpus_dir.mkdir()
    (corpus_dir / f"{NAME}.part").write_bytes(archive_bytes[:100])
    parallel_files("ted_hrlr", "train", "pt", "en", cache_dir=tmp_path)
    assert ted.requests == [(f"/up/{NAME}", "bytes=100-")]
    assert (corpus_dir / NAME).read_bytes() == archive_bytes


def test_a_local_mirror_holding_the_archive_is_used_in_place(ted, archive_bytes, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / NAME).write_bytes(archive_bytes)
    monkeypatch.setenv("NMT_MIRROR", str(mirror))
    src, _ = parallel_files("ted_hrlr", "train", "pt", "en", cache_dir=tmp_path / "cache")
    assert lines(src) == PT_EN["train"][0]
    assert ted.requests == [] and os.listdir(tmp_path / "cache" / "ted_hrlr") == ["pt_to_en"]  # no copy


def test_a_mirror_without_the_archive_is_passed_over(ted, tmp_path, monkeypatch):
    monkeypatch.setenv("NMT_MIRROR", str(tmp_path))  # a directory, but no archive in it
    parallel_files("ted_hrlr", "train", "pt", "en", cache_dir=tmp_path / "cache")
    assert ted.requests == [(f"/up/{NAME}", None)]


@pytest.mark.parametrize("compressed", [True, False], ids=["gz", "plain"])
@pytest.mark.parametrize("folder", ["ted_hrlr", "."], ids=["corpus-folder", "top"])
def test_a_mirror_holding_the_pairs_own_files_serves_it_without_the_archive(
    ted, archive_bytes, tmp_path, monkeypatch, folder, compressed
):
    mirror = tmp_path / "mirror"
    write_loose(mirror / folder, PT_EN_FILES, compressed=compressed)
    register(monkeypatch, archive_bytes, f"{ted.url}/up/{NAME}", files=PINNED)
    src, tgt = parallel_files("ted_hrlr", "train", "pt", "en", cache_dir=tmp_path / "cache", mirror=str(mirror))
    folder_made = tmp_path / "cache" / "ted_hrlr" / "pt_to_en"
    assert (src, tgt) == (folder_made / "train.pt", folder_made / "train.en")
    for split, (pt, en) in PT_EN.items():  # the empty pairs dropped as from the archive
        assert lines(folder_made / f"{split}.pt") == pt and lines(folder_made / f"{split}.en") == en
    assert ted.requests == [] and os.listdir(folder_made.parent) == ["pt_to_en"]  # no archive, no temporary
    manifest = json.loads((folder_made / "manifest.json").read_text())
    assert manifest["splits"]["train"] == {"pairs": 3, "dropped_empty": 1}
    suffix = ".gz" if compressed else ""
    assert manifest["sources"]["datasets/pt_to_en/pt.dev"] == str(mirror / folder / f"pt_to_en/pt.dev{suffix}")


def test_the_pairs_own_files_extract_what_the_archive_extracts(loose, tmp_path):
    from_mirror = parallel_files("ted_hrlr", "train", "pt", "en", cache_dir=tmp_path / "a")[0].parent
    (tmp_path / "empty").mkdir()
    from_archive = parallel_files(
        "ted_hrlr", "train", "pt", "en", cache_dir=tmp_path / "b", mirror=str(tmp_path / "empty")
    )[0].parent
    names = sorted(os.listdir(from_archive))
    assert sorted(os.listdir(from_mirror)) == names and len(names) == 7
    for name in names:
        if name != "manifest.json":
            assert (from_mirror / name).read_bytes() == (from_archive / name).read_bytes(), name
    manifests = [json.loads((f / "manifest.json").read_text()) for f in (from_mirror, from_archive)]
    assert manifests[0]["splits"] == manifests[1]["splits"]


def test_a_corrupt_file_in_the_mirror_is_one_line_naming_it_and_both_checksums(loose, ted, tmp_path):
    bad = loose / "ted_hrlr/pt_to_en/en.dev.gz"
    bad.write_bytes(gzip.compress(b"good morning .\ngood night .\n"))  # a changed line
    with pytest.raises(CorpusDownloadError) as info:
        parallel_files("ted_hrlr", "train", "pt", "en", cache_dir=tmp_path / "cache")
    message = str(info.value)
    got = hashlib.sha256(b"good morning .\ngood night .\n").hexdigest()
    assert "\n" not in message and message.startswith(f"{bad} in the mirror {loose} is corrupt: ")
    assert f"expected {PINNED['pt_to_en/en.dev']}, got {got}" in message
    assert ted.requests == []  # a corrupt copy is not papered over by the archive
    assert os.listdir(tmp_path / "cache" / "ted_hrlr") == []  # no folder, no half-made temporary, no lock


def test_a_truncated_gz_in_the_mirror_is_corrupt(loose, ted, tmp_path):
    cut = loose / "ted_hrlr/pt_to_en/pt.train.gz"
    cut.write_bytes(cut.read_bytes()[:-10])  # the end of the stream and its checksum are lost
    with pytest.raises(CorpusDownloadError) as info:
        parallel_files("ted_hrlr", "dev", "pt", "en", cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{cut} in the mirror {loose} is corrupt (")
    assert f"sha256 of its text expected {PINNED['pt_to_en/pt.train']}, got " in message
    assert ted.requests == [] and os.listdir(tmp_path / "cache" / "ted_hrlr") == []


def test_a_mirror_lacking_one_file_is_passed_over_for_the_archive(loose, ted, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="nmt.data")
    (loose / "ted_hrlr/pt_to_en/en.test.gz").unlink()
    src, _ = parallel_files("ted_hrlr", "train", "pt", "en", cache_dir=tmp_path / "cache")
    assert lines(src) == PT_EN["train"][0]
    assert ted.requests == [(f"/up/{NAME}", None)]
    manifest = json.loads((src.parent / "manifest.json").read_text())
    assert manifest["sources"]["datasets/pt_to_en/pt.dev"] == f"{NAME}:datasets/pt_to_en/pt.dev"
    assert any("has no pt_to_en/en.test" in r.getMessage() for r in caplog.records)


def test_a_mirror_lacking_one_file_when_no_address_answers_is_one_line(loose, archive_bytes, tmp_path, monkeypatch):
    register(monkeypatch, archive_bytes, f"http://127.0.0.1:{closed_port()}/{NAME}", files=PINNED)
    (loose / "ted_hrlr/pt_to_en/en.test.gz").unlink()
    with pytest.raises(CorpusDownloadError) as info:
        parallel_files("ted_hrlr", "train", "pt", "en", cache_dir=tmp_path / "cache", retries=0)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"could not get {NAME} from any of its 1 sources")
    assert f"the mirror {loose} has no pt_to_en/en.test[.gz]" in message
    assert os.listdir(tmp_path / "cache" / "ted_hrlr") == []


def test_a_pair_without_pinned_files_ignores_them_in_the_mirror(loose, ted, tmp_path):
    write_loose(loose / "ted_hrlr", {"az_tr_to_en/az-tr.train": "WRONG\nWRONG\n"})
    parallel_files("ted_hrlr", "train", "az_tr", "en", cache_dir=tmp_path / "cache")
    assert ted.requests == [(f"/up/{NAME}", None)]
    assert lines(tmp_path / "cache/ted_hrlr/az_tr_to_en/train.az_tr") == ["salam .", "merhaba ."]


def test_misaligned_members_are_refused_naming_both(upstream, tmp_path, monkeypatch):
    body = make_archive(tmp_path / "bad.tar.gz", {**MEMBERS, "datasets/pt_to_en/en.dev": "one\ntwo\nthree\n"})
    upstream.files[NAME] = body
    register(monkeypatch, body, f"{upstream.url}/up/{NAME}")
    with pytest.raises(CorpusDownloadError, match=r"pt_to_en/pt\.dev has 2 lines but .*pt_to_en/en\.dev has 3"):
        parallel_files("ted_hrlr", "train", "pt", "en", cache_dir=tmp_path)
    assert os.listdir(tmp_path / "ted_hrlr") == [NAME]  # the verified archive stays; no folder, no temporary


# One process that extracts pt->en of the test archive (argv: url, sha256, size, cache) and prints the path.
CHILD = f"""
import dataclasses, functools, logging, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from nmt.data.archive import NamedArchive
from nmt.data.registry import CORPORA, parallel_files
from nmt.data.ted_hrlr import TED_HRLR, ted_build
logging.basicConfig(level=logging.INFO, format="%(message)s")
archive = NamedArchive({NAME!r}, (sys.argv[1],), sys.argv[2], int(sys.argv[3]))
CORPORA["ted_hrlr"] = dataclasses.replace(TED_HRLR, archives=(archive,),
                                          build=functools.partial(ted_build, archive=archive))
print(parallel_files("ted_hrlr", "train", "pt", "en", cache_dir=sys.argv[4])[0])
"""


def test_two_processes_extracting_one_pair_take_turns(upstream, archive_bytes, tmp_path):
    """The second waits on the first's lock, then finds the folder made: one download, one extraction."""
    args = [
        f"{upstream.url}/up/{NAME}",
        hashlib.sha256(archive_bytes).hexdigest(),
        str(len(archive_bytes)),
        str(tmp_path / "cache"),
    ]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    stderr = race(upstream, procs)
    paths = [p.stdout.read().strip() for p in procs]
    for p in procs:
        p.stdout.close()
    assert [p.returncode for p in procs] == [0, 0], stderr
    folder = tmp_path / "cache" / "ted_hrlr" / "pt_to_en"
    assert paths == [str(folder / "train.pt")] * 2
    assert sum(err.count("extracting 6 member(s)") for err in stderr) == 1, stderr
    assert upstream.requests == [(f"/up/{NAME}", None)]
    assert sorted(os.listdir(folder.parent)) == sorted([NAME, "pt_to_en"])


def test_a_killed_extraction_leaves_nothing_that_counts(ted, tmp_path):
    corpus_dir = tmp_path / "ted_hrlr"
    leftover = corpus_dir / ".pt_to_en.tmp-dead1234"
    (leftover / "members").mkdir(parents=True)
    (leftover / "train.pt").write_text("half a file")
    src, _ = parallel_files("ted_hrlr", "train", "pt", "en", cache_dir=tmp_path)
    assert lines(src) == PT_EN["train"][0] and not leftover.exists()


def test_registered_entry_is_the_published_archive():
    assert TED_ARCHIVE.filename == NAME and TED_ARCHIVE.size == 131_005_909
    assert TED_ARCHIVE.sha256 == "216a86c3df4d4f522856fe9b920ff5be6b394d769cc88974ae8f9f5546953bbc"
    assert set(TED_ARCHIVE.urls) == {
        "http://www.phontron.com/data/qi18naacl-dataset.tar.gz",
        "https://web.archive.org/web/20240301220426if_/http://www.phontron.com/data/qi18naacl-dataset.tar.gz",
    }
    assert len(TED_PAIRS) == 14 and len(set(TED_PAIRS)) == 14
    assert {tgt for _, tgt in TED_PAIRS} == {"en", "pt"}
    assert TED_HRLR.pretokenized and registry.is_pretokenized("ted_hrlr")
    assert not registry.is_pretokenized("multi30k")


def test_pt_en_files_are_pinned_for_a_mirror_and_no_other_pair():
    assert TED_FILES == {
        "pt_to_en/pt.train": "278e1bb96a2a6e18cc5ac6294fcf4ce01e77c58c74a4c36a6b567ef601144cb2",
        "pt_to_en/en.train": "e7c74d6e1b8b7041a23df5f812c9819dafd67a200535a3ffc4c483e32b622863",
        "pt_to_en/pt.dev": "c9fedee6935999d3302008640f7f80e3afbe87c230f17b73759a78caf18d1de4",
        "pt_to_en/en.dev": "01c9b58f68cc3bb6505560dfc7f9dfe972baf659e67689724aefb9abc5137a80",
        "pt_to_en/pt.test": "f8b88eff89b575c9a5756953d0b70d9f6b79babd881983581070fcdeb1b7ffa0",
        "pt_to_en/en.test": "6a9a6818a03e676bb8e951cc166c3110bbc7d47836d091c3c514f263e4f21636",
    }
    build = TED_HRLR.build("dev", ("pt", "en"))
    assert {name: file.relpath for name, file in build.loose.items()} == {
        f"datasets/{relpath}": relpath for relpath in TED_FILES
    }
    assert all(not TED_HRLR.build("train", pair).loose for pair in TED_PAIRS if pair != ("pt", "en"))


SHARED_TED = Path(__file__).resolve().parents[2] / "shared" / "data" / "ted_hrlr"


@pytest.mark.skipif(not SHARED_TED.is_dir(), reason="no shared TED copy beside the repository")
def test_the_shared_copy_of_pt_en_matches_the_pinned_checksums(tmp_path):
    for relpath, sha256 in TED_FILES.items():
        copy_verified(SHARED_TED / f"{relpath}.gz", tmp_path / "text", sha256, root=SHARED_TED)


def test_a_gz_and_a_plain_copy_of_one_file_is_an_error_not_a_guess(loose, ted, tmp_path):
    text = gzip.decompress((loose / "ted_hrlr/pt_to_en/pt.dev.gz").read_bytes())
    (loose / "ted_hrlr/pt_to_en/pt.dev").write_bytes(text)
    with pytest.raises(CorpusDownloadError, match=r"holds both .*pt\.dev\.gz and .*pt\.dev: keep one"):
        parallel_files("ted_hrlr", "dev", "pt", "en", cache_dir=tmp_path / "cache")


def test_a_pair_is_never_mixed_from_two_folders_of_the_mirror(loose, ted, tmp_path):
    (loose / "pt_to_en").mkdir()
    (loose / "ted_hrlr/pt_to_en/en.dev.gz").rename(loose / "pt_to_en/en.dev.gz")  # one file at the top
    with pytest.raises(CorpusDownloadError, match="both at its top and in"):
        parallel_files("ted_hrlr", "dev", "pt", "en", cache_dir=tmp_path / "cache")
    assert ted.requests == []


@pytest.mark.parametrize("relpath", ["/etc/passwd", "../outside/pt.train"])
def test_a_mirror_file_stays_below_the_mirror(relpath):
    with pytest.raises(ValueError, match="must be relative and stay below the mirror"):
        LooseFile(relpath, "0" * 64)


@pytest.mark.parametrize("name", ["ted_hrlr_pt_en.yaml", "ted_hrlr_pt_en_quality.yaml"])
def test_configs_load_and_name_a_registered_split_and_pair(name):
    config = load_config(REPO / "configs" / name)
    data, tokenizer = config.data, config.tokenizer
    corpus = registry.get_corpus(data.corpus)
    assert data.corpus == "ted_hrlr" and (data.src_lang, data.tgt_lang) == ("pt", "en")
    for split in (data.train_split, data.valid_split):
        corpus.check(split, data.src_lang, data.tgt_lang)
    # Tokenised, lower-cased text: nothing may lower-case it again or split it as if it were raw.
    assert not tokenizer.lowercases and (tokenizer.kind in ("bpe", "unigram") or tokenizer.pretokenized)


def test_reference_config_has_the_reference_designs_numbers():
    config = load_config(REPO / "configs" / "ted_hrlr_pt_en.yaml")
    model = config.model.build(8192, 8192, joint_vocabulary=config.tokenizer.joint)
    sizes = ("encoder_layers", "decoder_layers", "d_model", "num_heads", "d_ff", "dropout")
    assert tuple(getattr(model, name) for name in sizes) == (4, 4, 128, 8, 512, 0.1)
    assert model.sharing == "none" and not config.tokenizer.joint and config.tokenizer.vocab_size == 8192
    assert config.tokenizer.kind == "wordpiece"  # the reference design's, splitting on spaces only here
    assert config.train.warmup == 4000 and config.train.schedule == "noam"
    assert (config.data.max_src_len, config.data.max_tgt_len) == (40, 40) and config.decode.beam == 1
