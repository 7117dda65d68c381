"""Tests for nmt.data.corpus: streaming readers that name the file and line at fault."""

import gzip
from pathlib import Path

import pytest

from nmt.data.corpus import (
    CorpusError,
    ReadStats,
    count_lines,
    open_text,
    read_jsonl,
    read_lines,
    read_parallel,
    read_tsv,
)


def write(path: Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path``, gzip-compressed when the name ends in .gz."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)
    return path


@pytest.mark.parametrize("name", ["a.txt", "a.txt.gz"])
@pytest.mark.parametrize(("text", "lines"), [("", 0), ("x\n", 1), ("x\ny", 2), ("x\r\n\ny\n", 3)])
def test_count_lines_agrees_with_read_lines(tmp_path, name, text, lines):
    path = write(tmp_path / name, text)
    assert count_lines(path) == lines == len(list(read_lines(path)))


# --- aligned files -------------------------------------------------------------


def test_read_parallel_plain_and_gz(tmp_path):
    src = write(tmp_path / "train.de", "Ein Hund .\r\n  Zwei Katzen \nÄpfel\n")
    tgt = write(tmp_path / "train.en.gz", "A dog .\nTwo cats\t\nApples")  # no final newline
    stats = ReadStats()
    pairs = list(read_parallel(src, tgt, stats))
    assert pairs == [("Ein Hund .", "A dog ."), ("Zwei Katzen", "Two cats"), ("Äpfel", "Apples")]
    assert (stats.pairs, stats.empty) == (3, 0)


def test_lines_split_on_newline_only(tmp_path):
    # A lone "\r" or U+2028 inside a sentence must not shift the alignment.
    src = write(tmp_path / "s.txt", "a\rb\nc\u2028d\n")
    tgt = write(tmp_path / "t.txt", "x\ny\n")
    assert list(read_parallel(src, tgt)) == [("a\rb", "x"), ("c\u2028d", "y")]


@pytest.mark.parametrize("src_lines, tgt_lines", [(3, 5), (5, 3)])
def test_length_mismatch_names_both_files_and_counts(tmp_path, src_lines, tgt_lines):
    src = write(tmp_path / "a.txt", "s\n" * src_lines)
    tgt = write(tmp_path / "b.txt.gz", "t\n" * tgt_lines)
    with pytest.raises(CorpusError) as info:
        list(read_parallel(src, tgt))
    message = str(info.value)
    assert f"{src} has {src_lines} lines" in message
    assert f"{tgt} has {tgt_lines} lines" in message


@pytest.mark.parametrize("name", ["bad.txt", "bad.txt.gz"])
def test_invalid_utf8_names_file_and_line(tmp_path, name):
    src = write(tmp_path / name, b"one\ntwo\nthr\xffee\nfour\n")
    tgt = write(tmp_path / "ok.txt", "1\n2\n3\n4\n")
    with pytest.raises(CorpusError) as info:
        list(read_parallel(src, tgt))
    assert f"{src}:3:" in str(info.value)
    assert "UTF-8" in str(info.value)
    assert (info.value.path, info.value.line) == (str(src), 3)


def test_empty_pairs_are_skipped_and_counted(tmp_path):
    src = write(tmp_path / "s.txt", "a\n\nb\nc\n   \n")
    tgt = write(tmp_path / "t.txt", "x\ny\n \t\nz\n\n")
    stats = ReadStats()
    assert list(read_parallel(src, tgt, stats)) == [("a", "x"), ("c", "z")]
    assert (stats.pairs, stats.empty) == (2, 3)
    assert stats.report() == "read 2 pairs; skipped 3 empty pairs"


def test_byte_order_mark_is_dropped(tmp_path):
    src = write(tmp_path / "s.txt", "\ufeffHallo\n")
    tgt = write(tmp_path / "t.txt", "Hello\n")
    assert list(read_parallel(src, tgt)) == [("Hallo", "Hello")]


def test_truncated_gzip_is_a_corpus_error(tmp_path):
    whole = gzip.compress(("ein Satz\n" * 2000).encode())
    broken = tmp_path / "cut.txt.gz"
    broken.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(CorpusError, match="the gzip stream is cut short") as info:
        list(read_lines(broken))
    assert info.value.path == str(broken)


@pytest.mark.parametrize(
    "content, reason",
    [
        (lambda whole: whole[: len(whole) // 2], "the gzip stream is cut short"),
        (lambda whole: whole[:10] + bytes(range(256)) * 4, "corrupt gzip data"),
        (lambda whole: b"ein Satz\nnoch einer\n", "not a gzip file, though its name ends in .gz"),
    ],
)
def test_every_reader_names_a_damaged_gzip_file_and_what_is_wrong(tmp_path, content, reason):
    broken = tmp_path / "train.de.gz"
    broken.write_bytes(content(gzip.compress(("ein Satz\n" * 2000).encode())))
    good = write(tmp_path / "train.en", "a sentence\n" * 2000)
    for read in (
        lambda: list(read_lines(broken)),
        lambda: count_lines(broken),
        lambda: list(read_parallel(broken, good)),
    ):
        with pytest.raises(CorpusError, match=reason) as info:
            read()
        assert info.value.path == str(broken) and str(info.value).startswith(f"{broken}")
        assert "\n" not in str(info.value)


def test_gzip_without_gz_suffix_gets_a_hint(tmp_path):
    path = tmp_path / "train.de"
    path.write_bytes(gzip.compress(b"Hallo\n"))
    with pytest.raises(CorpusError, match=r":1: .*gzip"):
        list(read_lines(path))


def test_read_lines_and_open_text_agree(tmp_path):
    path = write(tmp_path / "x.txt.gz", " a \r\nb\rc\n")
    assert list(read_lines(path)) == [" a ", "b\rc"]
    with open_text(path) as file:
        assert list(file) == [" a \r\n", "b\rc\n"]


def test_corpus_error_format():
    assert str(CorpusError("bad", "f.txt", 7)) == "f.txt:7: bad"
    assert str(CorpusError("bad", "f.txt")) == "f.txt: bad"
    assert str(CorpusError("bad")) == "bad"
    assert isinstance(CorpusError("bad"), ValueError)


# --- TSV -----------------------------------------------------------------------


def test_read_tsv(tmp_path):
    path = write(tmp_path / "c.tsv.gz", " Hallo \t Hello \nsrc only\t\nDanke\tThanks\r\n")
    stats = ReadStats()
    assert list(read_tsv(path, stats)) == [("Hallo", "Hello"), ("Danke", "Thanks")]
    assert (stats.pairs, stats.empty) == (2, 1)


@pytest.mark.parametrize("bad_line, found", [("no tab here", "no tab"), ("a\tb\tc", "2 tabs")])
def test_tsv_line_without_exactly_one_tab(tmp_path, bad_line, found):
    path = write(tmp_path / "c.tsv", f"a\tb\n{bad_line}\n")
    with pytest.raises(CorpusError, match=found) as info:
        list(read_tsv(path))
    assert str(info.value).startswith(f"{path}:2:")


# --- JSONL ---------------------------------------------------------------------


def test_read_jsonl(tmp_path):
    lines = [
        '{"src": " Hallo ", "tgt": "Hello", "id": 1}',
        "",
        '{"src": "", "tgt": "nothing"}',
        '{"src": "Danke", "tgt": "Thanks"}',
        "",
    ]
    path = write(tmp_path / "c.jsonl", "\n".join(lines))
    stats = ReadStats()
    assert list(read_jsonl(path, stats=stats)) == [("Hallo", "Hello"), ("Danke", "Thanks")]
    assert (stats.pairs, stats.empty) == (2, 1)


def test_jsonl_custom_keys(tmp_path):
    path = write(tmp_path / "c.jsonl.gz", '{"de": "Ja", "en": "Yes"}\n')
    assert list(read_jsonl(path, src_key="de", tgt_key="en")) == [("Ja", "Yes")]


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ('["Hallo", "Hello"]', "expected a JSON object, found list"),
        ('{"src": "Hallo"}', "missing key 'tgt'"),
        ('{"src": "Hallo", "tgt": 3}', "'tgt' must be a string, found int"),
        ('{"src": "Hallo", "tgt": "Hel', "invalid JSON"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path, bad_line, message):
    path = write(tmp_path / "c.jsonl", '{"src": "a", "tgt": "b"}\n\n' + bad_line + "\n")
    with pytest.raises(CorpusError, match=message) as info:
        list(read_jsonl(path))
    assert str(info.value).startswith(f"{path}:3:")


# --- the real thing --------------------------------------------------------------


def test_multi30k_train_has_29000_pairs(multi30k_dir):
    raw = multi30k_dir / "data/task1/raw"
    stats = ReadStats()
    count = sum(1 for _ in read_parallel(raw / "train.de.gz", raw / "train.en.gz", stats))
    assert count == stats.pairs == 29000
    assert stats.empty == 0
