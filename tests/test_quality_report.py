"""A document's quality report: each sentence once, the doubtful and least sure first, as CSV or HTML."""

import csv
import shutil
from dataclasses import dataclass

import pytest

from nmt.cli import main
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


def test_a_web_page_s_report_lists_every_sentence_once_with_the_scores_qe_gives(tiny_model_dir, tmp_path):
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
    assert main([*command, "--output", str(tmp_path / "out.html"), "--qe-report", str(report)]) == 0
    with open(report, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
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
