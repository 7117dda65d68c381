"""A document's quality report: each sentence once, the doubtful and least sure first, as CSV or HTML."""

import csv
import io
import logging
import shutil
from dataclasses import dataclass

import docx
import pytest

from nmt.cli import main
from nmt.formats import read_document
from nmt.placeholders import MaskedText, with_codes
from nmt.quality import fit_calibration, sentence_score
from nmt.quality_report import report_rows, write_report


@dataclass
class Scored:
    word_scores: list[float] | None
    doubtful: bool | None


def test_each_sentence_is_one_row_doubtful_first_then_the_least_sure_then_the_memory_s():
    sentences = ["Titel", "Ein Hund.", "Titel", "Hallo Welt", "Zwei <b>Katzen</b>."]
    translations = ["Title", "A dog.", "Title", "Hello world", "Two <b>cats</b>."]
    scored = {
        "Titel": [Scored([-0.1], False)],
        "Ein Hund.": [Scored([-0.5, -0.3], False)],
        "Zwei <b>Katzen</b>.": [Scored([-0.2], False), Scored([-3.0], True)],  # a long sentence's two pieces
    }  # "Hallo Welt": the memory's
    rows = report_rows(sentences, translations, scored)
    assert [r.source for r in rows] == ["Zwei <b>Katzen</b>.", "Ein Hund.", "Titel", "Hallo Welt"]
    katzen, hund, titel, hallo = rows
    assert (katzen.doubtful, katzen.score, katzen.first) == (True, -3.0, 5)  # its least sure piece's
    assert (hund.score, titel.occurrences, titel.first) == (pytest.approx(-0.4), 2, 1)
    assert (hallo.origin, hallo.score, hallo.doubtful) == ("memory", None, None)


def test_the_report_is_csv_or_an_html_table_by_its_name(tmp_path):
    rows = report_rows(
        ["Ein <i>Hund</i>.", "Katze"], ["A <i>dog</i>.", "Cat"], {"Ein <i>Hund</i>.": [Scored([-1.0], True)]}
    )
    with open(write_report(tmp_path / "r.csv", rows), encoding="utf-8") as f:
        read = list(csv.DictReader(f))
    assert [(r["source"], r["score"], r["doubtful"], r["origin"]) for r in read] == [
        ("Ein <i>Hund</i>.", "-1.0000", "True", "model"),
        ("Katze", "", "", "memory"),
    ]
    page = write_report(tmp_path / "r.html", rows, title="doc.html").read_text(encoding="utf-8")
    assert "<td>Ein &lt;i&gt;Hund&lt;/i&gt;.</td>" in page and "<i>" not in page  # the text, never markup
    assert page.count('<tr class="doubtful">') == 1 and page.count("<tr>") == 2  # the header and Katze


def test_a_web_page_s_report_lists_every_sentence_once_with_the_scores_qe_gives(tiny_model_dir, tmp_path, caplog):
    from nmt.formats import read_document
    from nmt.translator import Translator

    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    fit_calibration([-float(i) for i in range(10)], [float(i) for i in range(10)], fitted_on="x").save(model_dir)
    page = tmp_path / "page.html"
    page.write_text(
        "<html><body><h1>Ein Hund</h1><p>Ein Mann fährt Fahrrad. Zwei Frauen lachen.</p>"
        "<h1>Ein Hund</h1><p>Ein Kind spielt im Park.</p></body></html>",
        encoding="utf-8",
    )
    report = tmp_path / "report.csv"
    command = ["translate", "--model", str(model_dir), "--engine", "torch", "--beam", "1", "--input", str(page)]
    with caplog.at_level(logging.INFO, logger="nmt"):
        assert main([*command, "--output", str(tmp_path / "out.html"), "--qe-report", str(report)]) == 0
    with open(report, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    doubtful = sum(r["doubtful"] == "True" for r in rows)
    assert f"4 sentences, {doubtful} doubtful: {report}" in caplog.text  # calibrated: the count is a finding
    sentences = read_document(page.read_bytes(), str(page), "de", ".html", target="en").sentences
    assert sorted(r["source"] for r in rows) == sorted(set(sentences)) and len(sentences) == len(rows) + 1
    assert next(r for r in rows if r["source"] == "Ein Hund")["occurrences"] == "2"
    translator = Translator.load(model_dir)
    found = translator.translate_detailed([r["source"] for r in rows], beam=1, scores=True)
    for row, best in zip(rows, found, strict=True):
        assert float(row["score"]) == pytest.approx(sentence_score(best[0].word_scores), abs=1e-3)
        assert row["doubtful"] == str(best[0].doubtful)
    flags = [r["doubtful"] == "True" for r in rows]
    assert flags == sorted(flags, reverse=True)  # the doubtful first


def word_document(*runs: str) -> bytes:
    """A .docx of one paragraph written in `runs` (Word splits a paragraph's text into runs)."""
    document = docx.Document()
    paragraph = document.add_paragraph()
    for run in runs:
        paragraph.add_run(run)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


CATALOG = b'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\nmsgid "%s"\nmsgstr ""\n'


@pytest.mark.parametrize(
    ("extension", "content", "written"),
    [
        (
            ".docx",
            word_document("Hallo {na", "me}, Sie haben ", "%d neue Nachrichten."),
            "Hallo {name}, Sie haben %d neue Nachrichten.",
        ),
        (
            ".po",
            CATALOG % b"Hallo %s, <b>Sie</b> haben %d neue Nachrichten.",
            "Hallo %s, <b>Sie</b> haben %d neue Nachrichten.",
        ),
        (
            ".html",
            b"<p>Schreiben Sie an info@example.org oder https://example.org/hilfe heute.</p>",
            "Schreiben Sie an info@example.org oder https://example.org/hilfe heute.",
        ),
        (".md", b"Hallo **{name}**, Sie haben %d neue Nachrichten.\n", "Hallo {name}, Sie haben %d neue Nachrichten."),
    ],
)
def test_a_document_gives_its_sentences_as_written_codes_included(extension, content, written):
    document = read_document(content, f"doc{extension}", "de")
    assert document.sentences_as_written == [written]
    assert "%" not in document.sentences[0] and "{" not in document.sentences[0] and "@" not in document.sentences[0]


def test_sentences_as_written_keep_codes_with_their_sentence_and_an_icu_message_whole():
    text = MaskedText("{count} Dateien. Hallo {name}!\n{n, plural, one {# Datei} other {# Dateien}} gelöscht.", "de")
    assert len(text.sentences) == 5 and "{" not in text.sentences[0]
    assert text.sentences_as_written == [
        "{count} Dateien.",  # a code before a sentence opens it
        "Hallo {name}!",
        "{n, plural, one {# Datei} other {# Dateien}} gelöscht.",  # the construct shown whole
        "# Datei",
        "# Dateien",
    ]


def test_a_translation_gets_its_sentence_s_codes_back_where_its_alignment_puts_them():
    written, read = "Hallo {name}, Sie haben %d neue Nachrichten.", "Hallo , Sie haben  neue Nachrichten."
    alignment = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]
    shown = with_codes(written, read, ("Hello , you have  new messages.", alignment), "de")
    assert shown == "Hello {name}, you have %d new messages."
    assert with_codes("# Datei", "Datei", ("file", None), "de") is None  # a plural's "#": its place unknown


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("doc.docx", word_document("Ein Mann {name} fährt ", "%d Fahrräder.")),
        ("doc.po", CATALOG % b"Ein Mann {name} f\xc3\xa4hrt %d Fahrr\xc3\xa4der."),
    ],
)
def test_the_report_shows_each_sentence_and_translation_with_their_codes(
    tiny_model_dir, tmp_path, caplog, name, content
):
    document = tmp_path / name
    document.write_bytes(content)
    report = tmp_path / "report.csv"
    command = [
        "translate",
        "--model",
        str(tiny_model_dir),
        "--engine",
        "torch",
        "--beam",
        "1",
        "--input",
        str(document),
    ]
    with caplog.at_level(logging.INFO, logger="nmt"):
        assert main([*command, "--output", str(tmp_path / f"out{document.suffix}"), "--qe-report", str(report)]) == 0
    with open(report, encoding="utf-8") as f:
        (row,) = list(csv.DictReader(f))
    assert row["source"] == "Ein Mann {name} fährt %d Fahrräder."  # not "Ein Mann  fährt  Fahrräder."
    assert "{name}" in row["translation"] and "%d" in row["translation"]
    assert "  " not in row["source"]
    # the model has no calibration: no flag, and one sentence
    assert f"1 sentence, not calibrated: no flag: {report}" in caplog.text and row["doubtful"] == ""


def test_a_csv_cell_a_spreadsheet_would_run_as_a_formula_is_quoted_and_a_score_stays_a_number(tmp_path):
    attacks = ['=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1)", "\tTab", "\rReturn"]
    rows = report_rows(attacks, ["ok"] * len(attacks), {a: [Scored([-1.5], None)] for a in attacks})
    with open(write_report(tmp_path / "r.csv", rows), encoding="utf-8", newline="") as f:
        read = list(csv.DictReader(f))
    assert [r["source"] for r in read] == ["'" + a for a in attacks]
    assert {r["score"] for r in read} == {"-1.5000"}
    page = write_report(tmp_path / "r.html", rows).read_text(encoding="utf-8")
    assert "<td>=HYPERLINK(&quot;http://x&quot;,&quot;y&quot;)</td>" in page  # escaped, not quoted, in HTML
