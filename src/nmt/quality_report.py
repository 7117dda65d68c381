"""A document's quality report: each of its sentences once, with its translation, score and flag,
the doubtful and least sure first, so that a reviewer reads those before the rest.

    pairs = reviewed_pairs(document, results, lang)  # nmt.formats: each sentence, translation as written
    rows = report_rows([s for s, _ in pairs], [t for _, t in pairs], pieces_of, read=document.sentences)
    write_report("review.csv", rows)      # CSV; .html or .htm: a table a browser opens

Each sentence is shown as its document has it, its placeholders, URLs and inline tags included
(nmt.placeholders: the model never reads them), and its translation with them placed again as the
translated document has them, so that a reviewer sees that none was lost.

A sentence that comes more than once (a heading, a table cell) is one row, with how often it comes
and where first (its place among the document's sentences, from 1: sort by it for the document's
order). A sentence the translation memory answered has no score: it comes last, its origin "memory".

A CSV cell of text that starts with "=", "+", "-", "@", a tab or a carriage return gets a single
quote before it (as OWASP's advice on CSV injection has it): a spreadsheet would run such a cell,
"=HYPERLINK(...)" taken from a document, as a formula. An HTML report's text is escaped instead.
"""

from __future__ import annotations

import csv
import html
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from .files import atomic_write_text
from .quality import Scored, combined_quality

HTML_SUFFIXES = (".html", ".htm")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads a formula from (OWASP)
_NUMBER = re.compile(r"-?\d+\.\d{4}")  # a score as _cells writes it


@dataclass(frozen=True)
class ReportRow:
    """One distinct sentence of a document, as the report lists it."""

    doubtful: bool | None  # by the model's calibration (nmt calibrate); None without one, or unscored
    score: float | None  # the quality score (nmt.quality): 0 is certain; None where the memory answered
    first: int  # its first place among the document's sentences, from 1
    occurrences: int
    origin: str  # "model" or "memory"
    source: str
    translation: str


def report_rows(
    sentences: Sequence[str],
    translations: Sequence[str],
    scored: Mapping[str, Sequence[Scored]],
    *,
    read: Sequence[str] | None = None,
) -> list[ReportRow]:
    """One row per distinct sentence of `sentences` (as its document has it; each translated as
    `translations` says), scored from `scored[r]`, where r is what the model read of it (`read`, one
    per sentence; the sentence itself where None): the Translations of its pieces
    (nmt.quality.combined_quality); a sentence whose r is not in `scored` was answered by the memory.
    Doubtful first, then the least sure."""
    read = sentences if read is None else read
    first: dict[str, int] = {}
    count: dict[str, int] = {}
    translated: dict[str, str] = {}
    model_read: dict[str, str] = {}
    for place, (sentence, translation, r) in enumerate(zip(sentences, translations, read, strict=True), start=1):
        first.setdefault(sentence, place)
        count[sentence] = count.get(sentence, 0) + 1
        translated.setdefault(sentence, translation)
        model_read.setdefault(sentence, r)
    rows = []
    for sentence, place in first.items():
        r = model_read[sentence]
        score, doubtful = combined_quality(scored[r]) if r in scored else (None, None)
        origin = "model" if r in scored else "memory"
        rows.append(ReportRow(doubtful, score, place, count[sentence], origin, sentence, translated[sentence]))
    # doubtful, then unflagged by score (least sure first), then the unscored, each in document order
    return sorted(rows, key=lambda r: (not r.doubtful, r.score is None, r.score or 0.0, r.first))


def write_report(path: str | Path, rows: Sequence[ReportRow], *, title: str = "") -> Path:
    """`rows` as CSV, or as an HTML table where `path` ends in .html or .htm; written whole or not at all."""
    path = Path(path)
    names = [f.name for f in fields(ReportRow)]
    if path.suffix.lower() in HTML_SUFFIXES:
        atomic_write_text(path, _html(names, rows, title))
        return path
    out = io.StringIO()
    # RFC 4180's line ends: a cell holding a lone "\r" is then quoted (with "\n" as the end it is not,
    # and the row would break in two)
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(names)
    writer.writerows([_inert(cell) for cell in _cells(row)] for row in rows)
    atomic_write_text(path, out.getvalue())
    return path


def _cells(row: ReportRow) -> list[str]:
    """A row's values as text: scores to 4 places, None as an empty cell."""
    return ["" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v) for v in astuple(row)]


def _inert(cell: str) -> str:
    """A CSV cell a spreadsheet shows as text: a quote before one it would read as a formula. A score
    ("-1.2345") is the report's own number, never a formula, and stays a number to sort by."""
    if cell[:1] in FORMULA_STARTS and not _NUMBER.fullmatch(cell):
        return "'" + cell
    return cell


def _html(names: list[str], rows: Sequence[ReportRow], title: str) -> str:
    """A page holding the rows' table, doubtful rows tinted; every text escaped."""
    head = "".join(f"<th>{html.escape(name)}</th>" for name in names)
    body = []
    for row in rows:
        cells = _cells(row)
        tint = ' class="doubtful"' if row.doubtful else ""
        body.append(f"<tr{tint}>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{html.escape(title or 'quality report')}</title>"
        "<style>td,th{border:1px solid #ccc;padding:0.2rem 0.4rem;text-align:left}"
        "table{border-collapse:collapse}tr.doubtful{background:#fde8d8}</style></head><body>\n"
        f"<h1>{html.escape(title or 'quality report')}</h1>\n"
        "<p>Each sentence once, those the model is least sure of first: doubtful ones (tinted) first, "
        "then by score (0 is certain). Each sentence and its translation as the documents have them, "
        "placeholders and inline tags included.</p>\n"
        f"<table><tr>{head}</tr>\n" + "\n".join(body) + "\n</table></body></html>\n"
    )
