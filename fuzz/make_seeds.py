"""Write the seed corpora, fuzz/seeds/<harness>/, from the files the tests build.

    PYTHONPATH=src python fuzz/make_seeds.py

Each harness starts from good files of its format (so that the fuzzer begins deep inside the reader
rather than at its first check) and from the bad ones the tests refuse. Where a test module keeps a
file or a builder at module level it is imported from there (tests/ on the path), so a seed follows
the test; office documents are made as the tests make them, with python-docx, python-pptx, openpyxl
and odfpy (the test extras). Packages are written again with fixed timestamps, so that running this
twice writes the same bytes. A seed is named by the SHA-1 of its content, as libFuzzer names them.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import shutil
import sys
import zipfile
from pathlib import Path

from harnesses import HARNESSES, seeds

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import docx  # noqa: E402
import openpyxl  # noqa: E402
import pptx  # noqa: E402
import test_android  # noqa: E402
import test_formats  # noqa: E402
import test_formats_placeholders  # noqa: E402
import test_gettext  # noqa: E402
import test_markup  # noqa: E402
import test_memory  # noqa: E402
import test_placeholders  # noqa: E402
import test_resource_files  # noqa: E402
import test_text_form  # noqa: E402
import test_tokenizer  # noqa: E402
import test_xliff  # noqa: E402
from odf.draw import Frame, Page, TextBox  # noqa: E402
from odf.opendocument import OpenDocumentPresentation, OpenDocumentSpreadsheet, OpenDocumentText  # noqa: E402
from odf.style import MasterPage, PageLayout, Style, TextProperties  # noqa: E402
from odf.table import Table, TableCell, TableRow  # noqa: E402
from odf.text import P, Span  # noqa: E402


def parametrized(test) -> list[tuple]:
    """The argument tuples of a test's @pytest.mark.parametrize."""
    return [tuple(case) for mark in test.pytestmark if mark.name == "parametrize" for case in mark.args[1]]


def saved(document) -> bytes:
    """A document of python-docx, python-pptx, openpyxl or odfpy as its file's bytes, timestamps fixed."""
    out = io.BytesIO()
    document.save(out)
    return fixed_times(out.getvalue())


def fixed_times(package: bytes) -> bytes:
    """The zip written again with every member dated 1980-01-01 (its order and compression kept)."""
    old, out = zipfile.ZipFile(io.BytesIO(package)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as new:
        for info in old.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            fixed.compress_type, fixed.external_attr = info.compress_type, info.external_attr
            new.writestr(fixed, old.read(info))
    return out.getvalue()


def word_document() -> bytes:
    """As test_a_word_document_keeps_its_bold_word_table_and_header builds it."""
    d = docx.Document()
    p = d.add_paragraph("Ein Mann fährt ")
    p.add_run("ein rotes").bold = True
    p.add_run(" Rad. Er ist müde!")
    d.add_table(rows=1, cols=2).cell(0, 0).text = "Zelle eins"
    d.sections[0].header.paragraphs[0].text = "Die Kopfzeile"
    return saved(d)


def presentation() -> bytes:
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Hallo Welt"
    frame = slide.placeholders[1].text_frame
    frame.text = "Erster Punkt."
    run = frame.paragraphs[0].add_run()
    run.text, run.font.bold = " Fettes Ende", True
    slide.notes_slide.notes_text_frame.text = "Notizen hier."
    return saved(deck)


def workbook() -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet["A1"], sheet["B1"], sheet["C1"], sheet["A2"] = "Guten Morgen", 42, "=B1*2", "2024-01-01"
    return saved(book)


def opendocument_text() -> bytes:
    text = OpenDocumentText()
    bold = Style(name="B", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    text.automaticstyles.addElement(bold)
    p = P(text="Ein Mann fährt ")
    p.addElement(Span(stylename=bold, text="ein rotes"))
    p.addText(" Rad.")
    text.text.addElement(p)
    return saved(text)


def opendocument_spreadsheet() -> bytes:
    sheet = OpenDocumentSpreadsheet()
    table, row = Table(name="S"), TableRow()
    for value in ("Hallo da", 7):
        cell = TableCell(valuetype="string") if isinstance(value, str) else TableCell(valuetype="float", value=value)
        cell.addElement(P(text=str(value)))
        row.addElement(cell)
    table.addElement(row)
    sheet.spreadsheet.addElement(table)
    return saved(sheet)


def opendocument_presentation() -> bytes:
    deck = OpenDocumentPresentation()
    layout = PageLayout(name="L")
    deck.automaticstyles.addElement(layout)
    master = MasterPage(name="M", pagelayoutname=layout)
    deck.masterstyles.addElement(master)
    page = Page(masterpagename=master)
    frame = Frame(width="20cm", height="3cm", x="1cm", y="1cm")
    box = TextBox()
    box.addElement(P(text="Eine Folie mit Text. Noch ein Satz."))
    frame.addElement(box)
    page.addElement(frame)
    deck.presentation.addElement(page)
    return saved(deck)


SRT = (
    "1\r\n00:00:01,000 --> 00:00:04,000\r\nHallo, mein Freund.\r\nWie geht es <i>dir</i>?\r\n\r\n"
    "2\r\n00:00:05,000 --> 00:00:06,000\r\nGut.\r\n"
)
VTT = "WEBVTT\n\nNOTE keine Zeile\n\nc1\n00:01.000 --> 00:02.000 line:0\n<v Roger Bingham>Wir sind in New York\n"
MARKDOWN = (
    '---\ntitle: Bleibt\n---\n# Hallo *Welt*\n\n> Ein Zitat, das\n> weiterläuft. [ein Link](http://a.b "t") '
    "und `code` hier.\n\n```\ncode bleibt\n```\n\n| a | b |\n|---|---|\n| eins | zwei |\n\nFisch &amp; Chips.\n"
    "\n1. 2024\n2. Zwei Hunde.\n\n[x][ref]\n\n[ref]: http://e.f\n"
)
WEB_PAGE = "\ufeff<!DOCTYPE html>\n<p>Ein <b>Mann</b> läuft.</p>\n<script>var x = 1;</script>"
CORPUS = "Ein Mann fährt Rad.\nZwei Hunde spielen.\r\n\ufeffnoch eine Zeile\n"
CONFIG_OVERRIDES = b"\0train.max_steps=200\0model.preset=base\0decode.beam_size=4"


def bad_documents(extension: str) -> list[bytes]:
    """The bad files of `extension` that test_formats, test_xliff and test_resource_files refuse."""
    cases = [
        *parametrized(test_formats.test_a_bad_document_is_one_error_naming_the_file),
        *parametrized(test_resource_files.test_a_bad_resource_file_is_one_error_naming_the_file),
    ]
    found = [content for name, content, _ in cases if name.endswith(extension) and len(content) < 10_000]
    if extension == ".xlf":
        hostile = test_xliff.test_a_hostile_or_foreign_file_is_one_error_naming_it
        found += [content for content, _ in parametrized(hostile)]
    return found


def seed_files() -> dict[str, list[bytes]]:
    """Every harness's seeds."""
    xliff = [(test_xliff.SCHEMAS / name).read_bytes() for name in ("demo-1.2.xlf", "demo-2.0.xlf")]
    corpus = CORPUS.encode()
    tsv = b"Ein Mann.\tA man.\n\tleer\nzwei\tTabs\there\n"
    jsonl = b'{"src": "Ein Mann.", "tgt": "A man."}\n\n{"src": "x", "tgt": 3}\n[1]\n'
    memory_tmx = [test_memory.TMX.encode()] + [
        content.encode()
        for name, content, _ in parametrized(test_memory.test_a_bad_memory_file_is_one_error_naming_it)
        if name.endswith(".tmx")
    ]
    return {
        "docx": [word_document(), fixed_times(test_formats.german_word_document())],
        "pptx": [presentation()],
        "xlsx": [workbook()],
        "odt": [opendocument_text(), saved(test_formats.german_opendocument_text())],
        "odp": [opendocument_presentation()],
        "ods": [opendocument_spreadsheet()],
        "epub": [fixed_times(test_formats.make_epub())],
        "srt": [SRT.encode(), *bad_documents(".srt")],
        "vtt": [VTT.encode()],
        "md": [MARKDOWN.encode(), *bad_documents(".md")],
        "html": [WEB_PAGE.encode(), test_markup.PAGE.encode()],
        "po": [test_gettext.CATALOG.encode()],
        "xlf": [*xliff, *bad_documents(".xlf")],
        "json": [test_resource_files.I18NEXT.encode(), *bad_documents(".json")],
        "arb": [test_resource_files.ARB.encode()],
        "yml": [test_resource_files.RAILS.encode(), *bad_documents(".yml"), *bad_documents(".yaml")],
        "xml": [test_android.STRINGS],
        "masked_text": [
            text.encode()
            for text, _ in parametrized(test_placeholders.test_each_kind_of_placeholder_is_found_as_written)
        ]
        + [
            b"You have {count, plural, =0 {no files} one {# file} other {# files}} in ${dir}.",
            b"{gender, select, female {She} other {They}} replied",
            b"First line %s\r\nsecond line\n",
            b"Replace %s with underscores (`_`).",
        ],
        "html_page": [test_markup.PAGE.encode(), WEB_PAGE.encode(), b'<p>Ein<br/>Hund <img src="a.png" alt="x"/>.</p>'],
        "paragraphs": [line.encode() for line in PARAGRAPHS],
        "corpus_plain": [corpus + b"\0" + corpus.upper(), corpus + b"\0short\n"],
        "corpus_gz": [gzip.compress(corpus, mtime=0), gzip.compress(tsv, mtime=0), gzip.compress(jsonl, mtime=0)],
        "corpus_tsv": [tsv, b"a\tb\n"],
        "corpus_jsonl": [jsonl, b'{"src": "a", "tgt": "b"}\n'],
        "config": [
            (ROOT / "configs" / "reference.yaml").read_bytes() + CONFIG_OVERRIDES,
            b"train:\n  max_steps: 10\n" + CONFIG_OVERRIDES,
            (ROOT / "tests" / "data" / "run_config_before_keep_best.yaml").read_bytes(),
        ],
        "memory_tmx": memory_tmx,
        "memory_tsv": [b"Guten Morgen\tGood morning\nL\xc3\xb6sche {0} Dateien?\tDelete {0} files?\n"],
        "text_form": text_form_seeds(),
        "tokenizer": [
            test_tokenizer.UNSEEN.encode(),
            "  Zwei\tMänner \n\n laufen   nach  Hause. ".encode(),
            "Ｆｕｌｌ\u00a0width ﬁ A▁B [END] x".encode(),
            b"Ein Mann \xed\xa0\x80 l\xc3\xa4uft.",  # a lone surrogate, as UTF-8 encodes it
        ],
        "masked_nodes": [
            "\0".join(nodes).encode()
            for nodes in (
                ["Delete %d files from {fol", "der}? See ", test_formats_placeholders.URL, "."],
                ["Wort ", "{x}", " und %s "] * 3,
                ["Klicke auf ", "<b>", "Speichern", "</b>", ", um ", "%(count)d", " Dateien zu sichern: a@b.de."],
                ["http://s: h", "c r", "n."],  # found by fuzz_masked_nodes.py (tests/test_placeholders.py)
                ["http:///<{}</b"],
                ["\x01http:///<", "", "e\ufffd "],
                ["/%se", "p\vt", "\x01", "", "http://%1"],
                ["http://>b <", "b"],
            )
        ],
    }


def text_form_seeds() -> list[bytes]:
    """What test_text_form types, alone (its output is its corpus form) and with a model's output after
    a NUL byte."""
    typed = [typed for typed, _ in parametrized(test_text_form.test_portuguese_input_takes_the_corpus_form)]
    outputs = [
        *(output for output, _ in parametrized(test_text_form.test_english_output_reads_as_running_text)),
        *(
            output
            for output, _ in parametrized(
                test_text_form.test_treebank_forms_a_model_writes_leave_no_tokenised_punctuation
            )
        ),
    ]
    pairs = [
        (
            "Em Wuhan, a OMS disse que o SARS-CoV-2 causa a COVID-19.",
            "in wuhan , the who said that sars-cov-2 causes covid-19 .",
        ),
        ("O vírus veio de Wuhan, diz a OMS.", "the virus came from wuhan , says the who . ( laughter )"),
        ("e a febre. Ela passou.", "and the fever . it went away ."),
        ("AT&T e a IBM", "at &#124; t and ibm"),  # found by fuzz_text_form.py (tests/test_text_form.py)
    ]
    return (
        [t.encode() for t in typed]
        + [f"{t}\0{o}".encode() for t, o in zip(typed * 3, outputs, strict=False)]
        + [f"{t}\0{o}".encode() for t, o in pairs]
    )


# lines of running text for sentence splitting: spacing around sentences, abbreviations, quotes, no spaces
PARAGRAPHS = [
    "  Ein Mann läuft. Er ist müde!  ",
    'Dr. Smith went to Washington D.C. on Jan. 5th.  He said: "Hi!" Then left...',
    "彼は走った。彼女は歩いた！ 本当？",
]


def main() -> None:
    files = seed_files()
    assert set(files) == set(HARNESSES), f"seeds for {set(HARNESSES) ^ set(files)}"
    total = 0
    for name, contents in files.items():
        folder = seeds(name)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for content in contents:
            (folder / hashlib.sha1(content).hexdigest()).write_bytes(content)
            total += len(content)
        print(f"{name:14} {len(contents):2} seeds, {sum(map(len, contents)):>7,} bytes")
    print(f"{'all':14} {sum(map(len, files.values())):2} seeds, {total:>7,} bytes")


if __name__ == "__main__":
    main()
