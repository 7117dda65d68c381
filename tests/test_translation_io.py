import io
import logging

import pytest

from nmt.translation_io import InputError, translate_sentences, translate_stream
from nmt.translator import Translator

SENTENCES = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Ein Kind.", "Eine Frau mit einem Hut."]


@pytest.fixture(scope="module")
def translator(tiny_model_dir):
    return Translator.load(tiny_model_dir, device="cpu")


def test_sentences_in_memory_and_streamed_give_the_same_lines(translator):
    streamed = io.StringIO()
    written = translate_stream(
        translator, io.BytesIO("\n".join(SENTENCES).encode()), streamed, translator.request(beam=2), chunk_lines=3
    )  # chunks of 3 and 1: the batching must not change a line
    assert written == len(SENTENCES)
    assert streamed.getvalue().splitlines() == translate_sentences(translator, SENTENCES, translator.request(beam=2))


def test_truncated_sources_are_counted_with_their_lines(translator, caplog):
    short = Translator(
        translator.model,
        translator.src_tokenizer,
        translator.tgt_tokenizer,
        decode=translator.decode,
        max_source_tokens=6,
    )
    texts = ["Ein Kind.", " ".join(["Mann"] * 40), "Ein Hund.", " ".join(["Frau"] * 40)]
    with caplog.at_level(logging.WARNING, logger="nmt.translation_io"):
        out = translate_sentences(short, texts, short.request(beam=1), name="test.de")
    assert len(out) == 4
    (record,) = caplog.records
    assert record.getMessage().startswith("2 source sentences are longer than 6 tokens")
    assert "test.de:2, test.de:4" in record.getMessage()


def test_bad_utf8_names_the_file_and_line(translator):
    with pytest.raises(InputError, match=r"in.txt:2: not valid UTF-8 \(byte 3 of the line\)"):
        translate_stream(translator, io.BytesIO(b"Ein Kind.\nab\xffc\n"), io.StringIO(), name="in.txt")


def test_a_byte_order_mark_is_no_text_to_translate():
    from nmt.translation_io import decode_lines

    lines = list(decode_lines(io.BytesIO("\ufeffEin Kind.\n\ufeffzwei\n".encode()), "in.txt"))
    assert lines == [(1, "Ein Kind."), (2, "\ufeffzwei")]  # the file's mark only: inside, it is text


def test_n_best_lists_each_line_s_translations_best_first_in_moses_form(translator):
    lines = ["Ein Hund rennt.", "Zwei Männer spielen Fußball."]
    out = io.StringIO()
    translate_stream(translator, io.BytesIO("\n".join(lines).encode()), out, translator.request(beam=3, n_best=3))
    rows = [line.split(" ||| ") for line in out.getvalue().splitlines()]
    assert [int(r[0]) for r in rows] == [0, 0, 0, 1, 1, 1]
    found = translator.translate_detailed(lines, beam=3, n_best=3)
    assert [r[1] for r in rows] == [t.text for sentence in found for t in sentence]
    assert [r[1] for r in rows[::3]] == translator.translate(lines, beam=3)  # the first is the translation
    for sentence in (rows[:3], rows[3:]):
        scores = [float(r[2]) for r in sentence]
        assert scores == sorted(scores, reverse=True)


def test_running_text_keeps_a_lines_placeholders_exactly(translator):
    from nmt.placeholders import codes_of

    lines = [
        "Ein Mann fährt Rad.  Ein Hund läuft.",
        "Lösche %d Dateien aus {ordner}?",
        "",
        "Hallo <b>Welt</b> &amp; %(name)s!",
    ]
    out = io.StringIO()
    translate_stream(translator, io.BytesIO("\n".join(lines).encode() + b"\n"), out, split_sentences=True)
    written = out.getvalue().split("\n")[:-1]
    assert len(written) == len(lines) and written[2] == ""
    for source, translated in zip(lines, written, strict=True):
        assert codes_of(translated) == codes_of(source)
    plain = io.StringIO()  # a line without placeholders is translated as it was before
    translate_stream(translator, io.BytesIO(lines[0].encode() + b"\n"), plain, split_sentences=True)
    assert plain.getvalue().split("\n")[0] == written[0]


def test_running_text_keeps_a_paragraph_without_letters_as_it_is(translator):
    lines = ["1045", "Ein Mann fährt Rad.", "2026-12-02 — 10:45", "–––"]
    out = io.StringIO()
    translate_stream(translator, io.BytesIO("\n".join(lines).encode() + b"\n"), out, split_sentences=True)
    written = out.getvalue().split("\n")[:-1]
    assert [written[0], written[2], written[3]] == [lines[0], lines[2], lines[3]]  # nothing to translate
    alone = io.StringIO()  # the paragraph with words is translated as it is alone
    translate_stream(translator, io.BytesIO(lines[1].encode() + b"\n"), alone, split_sentences=True)
    assert written[1] == alone.getvalue().split("\n")[0] != lines[1]
