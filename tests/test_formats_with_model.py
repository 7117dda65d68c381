"""Each document format through a real (tiny, random) model, made and read back by the format's own library.

Every file holds several paragraphs, formatted runs, a table or its format's equivalent, an image or
another kept part; after translation the same library reopens it and finds the same structure, each
formatted run still formatted, every kept part identical and the text changed. Where LibreOffice is
installed (.ci/run installs it), it opens every translated Office and OpenDocument file."""

import io
import shutil
import subprocess
import zipfile

import docx
import openpyxl
import pptx
import pytest
import srt
import torch
import webvtt
from docx.shared import Inches
from markdown_it import MarkdownIt
from odf import teletype
from odf.draw import Frame, Image, Page, TextBox
from odf.opendocument import OpenDocumentPresentation, OpenDocumentSpreadsheet, OpenDocumentText, load
from odf.style import MasterPage, PageLayout, Style, TextProperties
from odf.table import Table, TableCell, TableRow
from odf.text import A, H, P, Span
from PIL import Image as PillowImage

from nmt.formats import OFFICE_FORMATS, translate_document
from nmt.translation_io import aligned_translations
from nmt.translator import Translator

SENTENCES = [
    "Ein Mann fährt mit dem Fahrrad die Straße hinunter.",
    "Zwei Hunde spielen im Schnee.",
    "Eine Frau liest ein Buch im Park.",
    "Kinder laufen am Strand entlang.",
]


@pytest.fixture(scope="module")
def word_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny random model, its output limited to a few whole English words (a random model's
    output is otherwise one run of byte pieces, with no spaces for words to be placed by)."""
    from nmt.checkpoint import load_model_dir, save_model_dir
    from nmt.tokenizer import load_tokenizers, save_tokenizers

    folder = tmp_path_factory.mktemp("word_model")
    src_tok, tgt_tok = load_tokenizers(tiny_model_dir)
    save_tokenizers(src_tok, tgt_tok, folder)
    shutil.copy(tiny_model_dir / "config.yaml", folder / "config.yaml")
    model = load_model_dir(tiny_model_dir)
    words = tgt_tok.encode("a man the dog plays in park with red ball", add_special=False)
    last_norm = model.decoder_norm if model.config.norm_position == "pre" else model.decoder_layers[-1].ff_residual.norm
    torch.manual_seed(0)
    lift = torch.randn(model.config.d_model)
    lift *= 2 / lift.norm()
    with torch.no_grad():
        weight = model.output.weight.clone()
        model.output.weight.zero_()
        model.output.weight[words] = weight[words] + 2 * lift  # every state scores these ~8 over the rest
        last_norm.bias.copy_(lift)
    save_model_dir(model, folder)
    return folder


@pytest.fixture(scope="module")
def translate(word_model_dir):
    translator = Translator.load(word_model_dir)

    def translated(sentences):
        return aligned_translations(translator, sentences, translator.request(beam=1))

    return translated


@pytest.fixture(scope="module")
def translated_files(translate, tmp_path_factory):
    """Each Office/ODF kind made, translated and written out, for LibreOffice to open."""
    folder = tmp_path_factory.mktemp("documents")
    makers = {".docx": word, ".pptx": deck, ".xlsx": workbook, ".odt": odf_text, ".odp": odf_slides, ".ods": odf_sheet}
    paths = []
    for extension, make in makers.items():
        path = folder / f"translated_{extension[1:]}{extension}"
        path.write_bytes(translate_document(make(), path.name, translate, lang="de"))
        paths.append(path)
    return paths


def png() -> bytes:
    out = io.BytesIO()
    PillowImage.new("RGB", (8, 8), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


def saved(document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def members(content: bytes) -> dict[str, bytes]:
    package = zipfile.ZipFile(io.BytesIO(content))
    return {name: package.read(name) for name in package.namelist()}


def formats_of(paragraph) -> list[tuple]:
    """The (bold, italic) of each non-empty run, in order."""
    return [(bool(r.bold), bool(r.italic)) for r in paragraph.runs if r.text.strip()]


def word() -> bytes:
    d = docx.Document()
    d.sections[0].header.paragraphs[0].text = "Jahresbericht des Vereins"
    d.add_heading("Ein Tag im Park", level=1)
    for sentence in SENTENCES[:2]:
        d.add_paragraph(sentence)
    mixed = d.add_paragraph("Ein Mann ")
    mixed.add_run("fährt schnell").bold = True
    mixed.add_run(" mit dem ")
    mixed.add_run("roten Fahrrad").italic = True
    mixed.add_run(" nach Hause.")
    table = d.add_table(rows=2, cols=2)
    for i, cell in enumerate(table._cells):
        cell.text = SENTENCES[i]
    d.add_picture(io.BytesIO(png()), width=Inches(1))
    d.add_paragraph(SENTENCES[3])
    return saved(d)


def test_a_word_document(translate):
    before = word()
    after = translate_document(before, "a.docx", translate, lang="de")
    old, new = docx.Document(io.BytesIO(before)), docx.Document(io.BytesIO(after))
    assert len(new.paragraphs) == len(old.paragraphs) and len(new.tables[0]._cells) == 4
    formatted = [(True, False), (False, True)]  # the bold and the italic run, each still holding words
    assert [f for f in formats_of(new.paragraphs[3]) if any(f)] == [f for f in formats_of(old.paragraphs[3]) if any(f)]
    assert [f for f in formats_of(old.paragraphs[3]) if any(f)] == formatted
    assert new.paragraphs[0].style.name == "Heading 1" and len(new.inline_shapes) == 1
    texts = [p.text for p in old.paragraphs if p.text] + [c.text for c in old.tables[0]._cells]
    assert all(t != o for t, o in zip([p.text for p in new.paragraphs if p.text], texts, strict=False))
    assert [c.text for c in new.tables[0]._cells] != [c.text for c in old.tables[0]._cells]
    assert new.sections[0].header.paragraphs[0].text != "Jahresbericht des Vereins"
    old_parts, new_parts = members(before), members(after)
    assert list(old_parts) == list(new_parts)
    edited = {"word/document.xml", "word/header1.xml"}
    assert {n for n in old_parts if old_parts[n] != new_parts[n]} <= edited  # the image, styles: byte for byte


def deck() -> bytes:
    d = pptx.Presentation()
    for i, sentence in enumerate(SENTENCES[:3]):
        slide = d.slides.add_slide(d.slide_layouts[1])
        slide.shapes.title.text = f"Folie {i + 1}: Der Park"
        frame = slide.placeholders[1].text_frame
        frame.text = sentence
        bold = frame.paragraphs[0].add_run()
        bold.text, bold.font.bold = " Das ist wichtig.", True
        slide.notes_slide.notes_text_frame.text = "Hier spricht der Redner langsam."
    table = d.slides[0].shapes.add_table(2, 2, 0, 0, 3_000_000, 1_000_000).table
    table.cell(0, 0).text, table.cell(1, 1).text = "Ein roter Ball", "Drei Katzen"
    d.slides[1].shapes.add_picture(io.BytesIO(png()), 0, 0)
    return saved(d)


def test_a_presentation(translate):
    before = deck()
    after = translate_document(before, "a.pptx", translate, lang="de")
    old, new = pptx.Presentation(io.BytesIO(before)), pptx.Presentation(io.BytesIO(after))
    assert len(new.slides) == len(old.slides) == 3
    for o, n in zip(old.slides, new.slides, strict=True):
        assert [s.shape_type for s in n.shapes] == [s.shape_type for s in o.shapes]
        assert n.shapes.title.text != o.shapes.title.text
        assert n.notes_slide.notes_text_frame.text != o.notes_slide.notes_text_frame.text
        runs = [r for r in n.placeholders[1].text_frame.paragraphs[0].runs if r.text.strip()]
        assert [bool(r.font.bold) for r in runs] == [False, True]
    cells = new.slides[0].shapes[-1].table
    assert cells.cell(0, 0).text != "Ein roter Ball" and cells.cell(0, 1).text == ""
    assert new.slides[1].shapes[-1].image.blob == png()


def workbook() -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Daten"
    sheet.append(["Name", "Menge", "Preis", "Summe"])
    sheet.append(["Rote Äpfel aus dem Garten", 3, 1.5, "=B2*C2"])
    sheet.append(["Frisches Brot", 1, 2.25, "=B3*C3"])
    sheet["A2"].font = openpyxl.styles.Font(bold=True)
    notes = book.create_sheet("Notizen")
    notes["A1"] = SENTENCES[0]
    return saved(book)


def test_a_workbook(translate):
    before = workbook()
    old = openpyxl.load_workbook(io.BytesIO(before))
    new = openpyxl.load_workbook(io.BytesIO(translate_document(before, "a.xlsx", translate, lang="de")))
    assert new.sheetnames == old.sheetnames
    for name in old.sheetnames:
        o, n = list(old[name].iter_rows(values_only=True)), list(new[name].iter_rows(values_only=True))
        assert len(n) == len(o) and all(len(a) == len(b) for a, b in zip(n, o, strict=True))
        for row_old, row_new in zip(o, n, strict=True):
            for a, b in zip(row_old, row_new, strict=True):
                kept = not isinstance(a, str) or a.startswith("=")
                assert (b == a) if kept else (isinstance(b, str) and b != a)
    assert new["Daten"]["A2"].font.bold and new["Daten"]["D3"].value == "=B3*C3"


def odf_text() -> bytes:
    d = OpenDocumentText()
    bold = Style(name="Fett", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    d.automaticstyles.addElement(bold)
    d.text.addElement(H(outlinelevel=1, text="Ein Tag im Park"))
    for sentence in SENTENCES[:2]:
        d.text.addElement(P(text=sentence))
    p = P(text="Ein Mann ")
    p.addElement(Span(stylename=bold, text="fährt schnell"))
    p.addText(" zur ")
    p.addElement(A(href="https://example.org/", text="Bibliothek"))
    p.addText(" in der Stadt.")
    d.text.addElement(p)
    table, row = Table(name="T"), TableRow()
    for sentence in SENTENCES[2:]:
        cell = TableCell(valuetype="string")
        cell.addElement(P(text=sentence))
        row.addElement(cell)
    table.addElement(row)
    d.text.addElement(table)
    picture = d.addPicture("Pictures/red.png", "image/png", png())
    frame = Frame(width="1cm", height="1cm", anchortype="paragraph")
    frame.addElement(Image(href=picture))
    holder = P()
    holder.addElement(frame)
    d.text.addElement(holder)
    return saved(d)


def test_an_opendocument_text(translate):
    before = odf_text()
    after = translate_document(before, "a.odt", translate, lang="de")
    old, new = load(io.BytesIO(before)), load(io.BytesIO(after))
    for kind in (H, P, Span, A, TableCell, Image):
        assert len(new.getElementsByType(kind)) == len(old.getElementsByType(kind))
    texts = [teletype.extractText(p) for p in old.getElementsByType(P) if teletype.extractText(p)]
    new_texts = [teletype.extractText(p) for p in new.getElementsByType(P) if teletype.extractText(p)]
    assert len(new_texts) == len(texts) and all(a != b for a, b in zip(new_texts, texts, strict=True))
    assert new.getElementsByType(Span)[0].getAttribute("stylename") == "Fett"
    assert new.getElementsByType(A)[0].getAttribute("href") == "https://example.org/"
    assert members(after)["Pictures/red.png"] == png()


def odf_slides() -> bytes:
    d = OpenDocumentPresentation()
    layout = PageLayout(name="L")
    d.automaticstyles.addElement(layout)
    master = MasterPage(name="M", pagelayoutname=layout)
    d.masterstyles.addElement(master)
    for sentence in SENTENCES[:2]:
        page = Page(masterpagename=master)
        frame = Frame(width="20cm", height="3cm", x="1cm", y="1cm")
        box = TextBox()
        box.addElement(P(text=sentence))
        box.addElement(P(text="Danke für Ihre Aufmerksamkeit."))
        frame.addElement(box)
        page.addElement(frame)
        d.presentation.addElement(page)
    return saved(d)


def test_an_opendocument_presentation(translate):
    before = odf_slides()
    old, new = load(io.BytesIO(before)), load(io.BytesIO(translate_document(before, "a.odp", translate, lang="de")))
    assert len(new.getElementsByType(Page)) == len(old.getElementsByType(Page)) == 2
    texts = [teletype.extractText(p) for p in old.getElementsByType(P)]
    new_texts = [teletype.extractText(p) for p in new.getElementsByType(P)]
    assert len(new_texts) == len(texts) == 4 and all(a != b and a for a, b in zip(new_texts, texts, strict=True))


def odf_sheet() -> bytes:
    d = OpenDocumentSpreadsheet()
    table = Table(name="Daten")
    for values in (("Rote Äpfel", 3.0, "of:=[.B1]*2"), ("Frisches Brot", 1.5, "of:=[.B2]*2")):
        row = TableRow()
        text = TableCell(valuetype="string")
        text.addElement(P(text=values[0]))
        number = TableCell(valuetype="float", value=values[1])
        number.addElement(P(text=str(values[1])))
        formula = TableCell(valuetype="float", value=values[1] * 2, formula=values[2])
        formula.addElement(P(text=str(values[1] * 2)))
        for cell in (text, number, formula):
            row.addElement(cell)
        table.addElement(row)
    d.spreadsheet.addElement(table)
    return saved(d)


def test_an_opendocument_spreadsheet(translate):
    before = odf_sheet()
    old, new = load(io.BytesIO(before)), load(io.BytesIO(translate_document(before, "a.ods", translate, lang="de")))
    old_cells, new_cells = old.getElementsByType(TableCell), new.getElementsByType(TableCell)
    assert len(new_cells) == len(old_cells) == 6
    for o, n in zip(old_cells, new_cells, strict=True):
        assert (n.getAttribute("formula"), n.getAttribute("value")) == (
            o.getAttribute("formula"),
            o.getAttribute("value"),
        )
        changed = teletype.extractText(n) != teletype.extractText(o)
        assert changed == (o.getAttribute("valuetype") == "string")


def ebook() -> bytes:
    out = io.BytesIO()
    chapter = (
        '<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Kapitel</title>'
        "</head><body><h1>Der Park</h1><p>{0} <em>Ein Mann</em> liest.</p><p>{1}</p>"
        '<img src="red.png" alt=""/><p><a href="ch2.xhtml">Weiter lesen</a></p></body></html>'
    )
    with zipfile.ZipFile(out, "w") as epub:
        epub.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        epub.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0"/>')
        epub.writestr("OEBPS/content.opf", '<?xml version="1.0"?><package><title>Bleibt</title></package>')
        epub.writestr("OEBPS/ch1.xhtml", chapter.format(*SENTENCES[:2]))
        epub.writestr("OEBPS/ch2.xhtml", chapter.format(*SENTENCES[2:]))
        epub.writestr("OEBPS/red.png", png())
        epub.writestr(
            "OEBPS/toc.ncx",
            '<?xml version="1.0"?>\n<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/"><navMap>'
            '<navPoint><navLabel><text>Erstes Kapitel</text></navLabel><content src="ch1.xhtml"/></navPoint>'
            '<navPoint><navLabel><text>Zweites Kapitel</text></navLabel><content src="ch2.xhtml"/></navPoint>'
            "</navMap></ncx>",
        )
    return out.getvalue()


def test_an_ebook(translate):
    from lxml import etree

    before = ebook()
    old, new = members(before), members(translate_document(before, "a.epub", translate, lang="de"))
    assert list(new) == list(old)
    for name in ("mimetype", "OEBPS/content.opf", "OEBPS/red.png"):
        assert new[name] == old[name]
    for name in ("OEBPS/ch1.xhtml", "OEBPS/ch2.xhtml", "OEBPS/toc.ncx"):
        a, b = etree.fromstring(old[name]), etree.fromstring(new[name])
        assert [e.tag for e in a.iter()] == [e.tag for e in b.iter()]  # the same elements, in order
        assert [e.attrib for e in a.iter()] == [e.attrib for e in b.iter()]  # link targets, images kept
        assert [e.text for e in a.iter() if e.text] != [e.text for e in b.iter() if e.text]


def test_subtitles(translate):
    cues = [
        srt.Subtitle(i + 1, srt.timedelta(seconds=2 * i), srt.timedelta(seconds=2 * i + 1.5), text)
        for i, text in enumerate([SENTENCES[0], f"{SENTENCES[1]}\n<i>{SENTENCES[2]}</i>", SENTENCES[3]])
    ]
    before = srt.compose(cues).encode()
    after = list(srt.parse(translate_document(before, "a.srt", translate, lang="de").decode()))
    assert [(c.index, c.start, c.end) for c in after] == [(c.index, c.start, c.end) for c in cues]
    assert all(a.content != c.content for a, c in zip(after, cues, strict=True))
    assert after[1].content.count("\n") == 1 and "<i>" in after[1].content and after[1].content.endswith("</i>")

    vtt = "WEBVTT\n\n00:00:01.000 --> 00:00:03.000\n{}\n\n00:00:04.000 --> 00:00:05.500\n{}\n".format(*SENTENCES[:2])
    out = translate_document(vtt.encode(), "a.vtt", translate, lang="de").decode()
    old, new = webvtt.from_string(vtt), webvtt.from_string(out)
    assert [(c.start, c.end) for c in new] == [(c.start, c.end) for c in old]
    assert all(a.text != b.text and a.text for a, b in zip(new, old, strict=True))


def test_markdown(translate):
    md = (
        f"# Der Park\n\n{SENTENCES[0]} Er fährt **sehr schnell** zur [Bibliothek](https://example.org/ 'Titel').\n\n"
        f"- {SENTENCES[1]}\n- {SENTENCES[2]}\n\n```python\nprint('Code bleibt')\n```\n\n"
        f"| Spalte | Wert |\n|---|---|\n| Äpfel | `3` |\n\n![Bild](red.png)\n"
    )
    out = translate_document(md.encode(), "a.md", translate, lang="de").decode()
    parser = MarkdownIt("commonmark").enable("table")
    old, new = parser.parse(md), parser.parse(out)
    assert [t.type for t in new] == [t.type for t in old]  # the same blocks in the same order

    def inline(tokens):
        return [c for t in tokens for c in t.children or []]

    assert [c.type for c in inline(new) if c.type != "text"] == [c.type for c in inline(old) if c.type != "text"]
    assert [c.attrs for c in inline(new) if c.attrs] == [c.attrs for c in inline(old) if c.attrs]
    assert [t.content for t in new if t.type == "fence"] == ["print('Code bleibt')\n"]
    assert [c.content for c in inline(new) if c.type == "code_inline"] == ["3"]
    assert [t.content for t in new if t.type == "inline"] != [t.content for t in old if t.type == "inline"]


@pytest.mark.skipif(shutil.which("soffice") is None, reason="LibreOffice is not installed (.ci/run installs it)")
def test_libreoffice_opens_every_translated_office_file(translated_files, tmp_path):
    assert {p.suffix for p in translated_files} == set(OFFICE_FORMATS)
    run = subprocess.run(
        ["soffice", f"-env:UserInstallation=file://{tmp_path}/profile", "--headless", "--convert-to", "pdf"]
        + ["--outdir", str(tmp_path)]
        + [str(p) for p in translated_files],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr
    for path in translated_files:
        pdf = tmp_path / f"{path.stem}.pdf"
        assert pdf.exists() and pdf.read_bytes().startswith(b"%PDF"), (path.name, run.stdout, run.stderr)
