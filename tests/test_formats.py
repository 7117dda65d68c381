"""Documents: the text a reader sees translated, formatting and everything else kept, bad files refused.

The "translation" here upper-cases each sentence, aligned word for word, so that what moved and what
stayed can be seen exactly; one test runs a real (tiny) model through `nmt translate`."""

import io
import logging
import subprocess
import sys
import zipfile

import docx
import openpyxl
import pptx
import pytest
from lxml import etree
from odf import teletype
from odf.opendocument import OpenDocumentSpreadsheet, OpenDocumentText, load
from odf.style import Style, TextProperties
from odf.table import Table, TableCell, TableRow
from odf.text import P, Span
from pptx.enum.lang import MSO_LANGUAGE_ID

from nmt.formats import DocumentError, document_format, read_document, translate_document
from nmt.formats.language_tags import LanguageTag
from nmt.formats.packages import MAX_RATIO, Package
from nmt.formats.subtitles import wrapped


def upper(sentences):
    return [(s.upper(), [(i, i) for i in range(len(s.split()))]) for s in sentences]


def saved(document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_a_word_document_keeps_its_bold_word_table_and_header():
    d = docx.Document()
    p = d.add_paragraph("A man rides ")
    p.add_run("a red").bold = True
    p.add_run(" bike. He is tired!")
    d.add_table(rows=1, cols=2).cell(0, 0).text = "cell one"
    d.sections[0].header.paragraphs[0].text = "The header"
    before = saved(d)
    out = docx.Document(io.BytesIO(translate_document(before, "a.docx", upper, lang="en")))
    assert [(r.text, r.bold) for r in out.paragraphs[0].runs] == [
        ("A MAN RIDES ", None),
        ("A RED", True),
        (" BIKE. HE IS TIRED!", None),
    ]
    assert out.tables[0].cell(0, 0).text == "CELL ONE"
    assert out.sections[0].header.paragraphs[0].text == "THE HEADER"
    old, new = (
        zipfile.ZipFile(io.BytesIO(before)),
        zipfile.ZipFile(io.BytesIO(translate_document(before, "a.docx", upper, lang="en"))),
    )
    assert old.namelist() == new.namelist()
    untouched = [n for n in old.namelist() if n not in ("word/document.xml",) and not n.startswith("word/header")]
    assert all(old.read(n) == new.read(n) for n in untouched)  # styles, numbering, settings: byte for byte


def test_a_presentation_keeps_its_bold_run_and_notes():
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Hello world"
    frame = slide.placeholders[1].text_frame
    frame.text = "First point."
    run = frame.paragraphs[0].add_run()
    run.text, run.font.bold = " Bold end", True
    slide.notes_slide.notes_text_frame.text = "Speaker notes here."
    out = pptx.Presentation(io.BytesIO(translate_document(saved(deck), "a.pptx", upper, lang="en"))).slides[0]
    assert out.shapes.title.text == "HELLO WORLD"
    assert [(r.text, r.font.bold) for r in out.placeholders[1].text_frame.paragraphs[0].runs] == [
        ("FIRST POINT.", None),
        (" BOLD END", True),
    ]
    assert out.notes_slide.notes_text_frame.text == "SPEAKER NOTES HERE."


def test_a_workbook_translates_text_cells_and_keeps_numbers_and_formulas():
    book = openpyxl.Workbook()
    sheet = book.active
    sheet["A1"], sheet["B1"], sheet["C1"], sheet["A2"] = "Good morning", 42, "=B1*2", "2024-01-01"
    out = openpyxl.load_workbook(io.BytesIO(translate_document(saved(book), "a.xlsx", upper, lang="en"))).active
    assert (out["A1"].value, out["B1"].value, out["C1"].value, out["A2"].value) == (
        "GOOD MORNING",
        42,
        "=B1*2",
        "2024-01-01",
    )


def odt_with_bold_span(before: str, bold_text: str, after: str) -> OpenDocumentText:
    """An OpenDocument text of one paragraph: `before`, `bold_text` in a bold span, `after`."""
    text = OpenDocumentText()
    bold = Style(name="B", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    text.automaticstyles.addElement(bold)
    p = P(text=before)
    p.addElement(Span(stylename=bold, text=bold_text))
    p.addText(after)
    text.text.addElement(p)
    return text


def test_an_opendocument_text_keeps_its_span_and_a_spreadsheet_its_numbers():
    text = odt_with_bold_span("A man rides ", "a red", " bike.")
    out = load(io.BytesIO(translate_document(saved(text), "a.odt", upper, lang="en")))
    assert [teletype.extractText(x) for x in out.getElementsByType(P)] == ["A MAN RIDES A RED BIKE."]
    assert [teletype.extractText(x) for x in out.getElementsByType(Span)] == ["A RED"]
    assert zipfile.ZipFile(io.BytesIO(saved(text))).namelist()[0] == "mimetype"

    sheet = OpenDocumentSpreadsheet()
    table, row = Table(name="S"), TableRow()
    for value in ("Hello there", 7):
        cell = TableCell(valuetype="string") if isinstance(value, str) else TableCell(valuetype="float", value=value)
        cell.addElement(P(text=str(value)))
        row.addElement(cell)
    table.addElement(row)
    sheet.spreadsheet.addElement(table)
    document = read_document(saved(sheet), "a.ods", "en")
    assert document.sentences == ["Hello there"]  # the number's text is the cell's value: kept
    written = zipfile.ZipFile(io.BytesIO(document.rebuilt(upper(document.sentences))))
    assert written.infolist()[0].filename == "mimetype" and written.infolist()[0].compress_type == zipfile.ZIP_STORED


def make_epub() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as epub:
        epub.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        epub.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0"/>')
        epub.writestr("OEBPS/content.opf", '<?xml version="1.0"?><package><title>Title stays</title></package>')
        epub.writestr(
            "OEBPS/ch1.xhtml",
            '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml">'
            "<head><title>Chapter</title></head><body><p>The <em>big</em> dog sleeps.<br/>Next.</p>"
            '<img src="a.png" alt="x"/></body></html>',
        )
        epub.writestr(
            "OEBPS/toc.ncx",
            '<?xml version="1.0"?>\n<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/"><navMap><navPoint>'
            "<navLabel><text>Chapter one</text></navLabel></navPoint></navMap></ncx>",
        )
    return out.getvalue()


def test_an_ebook_translates_chapters_and_contents_and_keeps_metadata():
    out = zipfile.ZipFile(io.BytesIO(translate_document(make_epub(), "b.epub", upper, lang="en")))
    assert out.read("OEBPS/ch1.xhtml").decode() == (
        '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml">'
        "<head><title>CHAPTER</title></head><body><p>THE <em>BIG</em> DOG SLEEPS.<br/>NEXT.</p>"
        '<img src="a.png" alt="x"/></body></html>'
    )
    assert out.read("OEBPS/toc.ncx").decode().startswith('<?xml version="1.0"?>\n<ncx')
    assert b"<text>CHAPTER ONE</text>" in out.read("OEBPS/toc.ncx")
    assert out.read("OEBPS/content.opf") == b'<?xml version="1.0"?><package><title>Title stays</title></package>'


def test_subtitles_keep_numbers_timings_line_endings_and_italics():
    srt = (
        "1\r\n00:00:01,000 --> 00:00:04,000\r\nHello there, my friend.\r\nHow are <i>you</i>?\r\n\r\n"
        "2\r\n00:00:05,000 --> 00:00:06,000\r\nGood.\r\n"
    )
    out = translate_document(srt.encode(), "a.srt", upper, lang="en").decode()
    assert out == (
        "1\r\n00:00:01,000 --> 00:00:04,000\r\nHELLO THERE, MY\r\nFRIEND. HOW ARE <i>YOU</i>?\r\n\r\n"
        "2\r\n00:00:05,000 --> 00:00:06,000\r\nGOOD.\r\n"
    )
    vtt = "WEBVTT\n\nNOTE not a cue\n\nc1\n00:01.000 --> 00:02.000 line:0\n<v Roger Bingham>We are in New York\n"
    assert translate_document(vtt.encode(), "a.vtt", upper, lang="en").decode() == vtt.replace(
        "We are in New York", "WE ARE IN NEW YORK"
    )
    assert wrapped("one two three four", 2) == ["one two", "three four"]


def test_a_subtitle_block_without_a_timing_is_kept_and_the_log_names_its_line(caplog):
    srt = (  # cue 2's timing mistyped: "->"
        "1\n00:00:01,000 --> 00:00:02,000\nOne.\n\n2\n00:00:04,000 -> 00:00:05,000\nTwo.\n\n"
        "3\n00:00:06,000 --> 00:00:07,000\nThree.\n"
    )
    with caplog.at_level(logging.WARNING):
        out = translate_document(srt.encode(), "a.srt", upper, lang="en").decode()
    assert out == srt.replace("One.", "ONE.").replace("Three.", "THREE.")  # "Two." as it was, not lost
    assert "a.srt: 1 block(s) without a cue timing kept untranslated (from line 5)" in caplog.text
    vtt = "WEBVTT\n\nNOTE a note\n\nSTYLE\n::cue { color: red }\n\n00:01.000 --> 00:02.000\nOne.\n"
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        translate_document(vtt.encode(), "a.vtt", upper, lang="en")
    assert "without a cue timing" not in caplog.text  # WebVTT's own blocks are no cues


def test_markdown_keeps_code_link_targets_emphasis_and_front_matter():
    md = (
        '---\ntitle: Keep me\n---\n# Hello *world*\n\n> A quote that\n> runs on. [a link](http://a.b "t") '
        "and `code` here.\n\n```\ncode block stays\n```\n\n| a | b |\n|---|---|\n| one | two |\n\nFish &amp; chips.\n"
    )
    out = translate_document(md.encode(), "a.md", upper, lang="en").decode()
    assert out == (
        '---\ntitle: Keep me\n---\n# HELLO *WORLD*\n\n> A QUOTE THAT RUNS ON. [A LINK](http://a.b "t") '
        "AND `code` HERE.\n\n```\ncode block stays\n```\n\n| A | B |\n|---|---|\n| ONE | TWO |\n\nFish &amp; chips.\n"
    )  # the paragraph with an entity is kept (and counted in the log), not guessed at


def test_markdown_leaves_a_paragraph_cell_or_item_without_a_letter_as_it_is():
    """As in the other formats: a model given "42" would make up a sentence (docs/real-text.md)."""
    md = "| year | n |\n|---|---|\n| 2024 | 42 |\n\n1. 2024\n2. Two dogs.\n\n12,5 %\n"
    asked = []

    def translate(sentences):
        asked.extend(sentences)
        return upper(sentences)

    out = translate_document(md.encode(), "a.md", translate, lang="en").decode()
    assert asked == ["year", "n", "Two dogs."]
    assert out == md.replace("year", "YEAR").replace("| n |", "| N |").replace("Two dogs.", "TWO DOGS.")


@pytest.mark.parametrize(
    ("md", "expected"),
    [
        # the target kept whole (the full stop goes with its word, as on web pages)
        ("See [the site](http://a.org/x.y).\n", "SEE [THE SITE](http://a.org/x.y).\n"),  # the stop stays out
        ("Run `foo bar` bar.\n", "RUN `foo bar` BAR.\n"),  # " bar" not found inside the code span
        ("An ![a dog](dog.png) dog.\n", "AN ![a dog](dog.png) DOG.\n"),  # nor in an image's source
        ("One line\n**two** lines\n", "ONE LINE **TWO** LINES\n"),  # the marks after a line break stay
        ("> Quoted\n> `x` here\n", "> QUOTED `x` HERE\n"),
        ("A <span>b</span> c [d][ref]\n\n[ref]: http://e.f\n", "A <span>B</span> C [D][ref]\n\n[ref]: http://e.f\n"),
    ],
)
def test_markdown_finds_each_text_after_the_markup_before_it(md, expected):
    assert translate_document(md.encode(), "a.md", upper, lang="en").decode() == expected


def test_markdown_whose_lines_end_in_a_lone_carriage_return_is_read():
    """Found by fuzzing (fuzz/fuzz_document.py md): markdown-it ends a line at a lone CR, as CommonMark
    does, and nmt counted lines at LF only, so a token's line was past the end of its list (IndexError)."""
    assert translate_document(b"\rp>*", "a.md", upper, lang="en") == b"\rP>*"
    assert translate_document(b"# Kopf\r\rText hier.\r", "a.md", upper, lang="en") == b"# KOPF\r\rTEXT HIER.\r"


def zip_of(members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


def test_a_web_page_is_a_document_like_the_others():
    """Read through nmt.formats as every other format: markup kept on the translated words, the
    byte-order mark dropped, a page that is not UTF-8 one error naming the file, line and byte."""
    page = "\ufeff<!DOCTYPE html>\n<p>Ein <b>Mann</b> läuft.</p>\n<script>var x = 1;</script>"
    for name in ("a.html", "b.HTM"):
        out = translate_document(page.encode(), name, upper, lang="de").decode()
        assert out == "<!DOCTYPE html>\n<p>EIN <b>MANN</b> LÄUFT.</p>\n<script>var x = 1;</script>"
    with pytest.raises(DocumentError, match=r"^a\.html:2: not valid UTF-8 \(byte 11 of the file\)$"):
        read_document(b"<p>Ja</p>\n\xff", "a.html", "de")


def test_a_text_file_is_a_document_like_the_others():
    """Plain text through nmt.formats: each line a paragraph of sentences with its spacing, blank
    lines and placeholders kept, its byte-order mark dropped, its line breaks written as "\\n" and the
    last line ended; a file that is not UTF-8 is one error naming the file, line and byte."""
    text = "\ufeffEin Mann läuft. Er ist müde!\r\n\r\n  Hallo {name}.\rEnde"
    document = read_document(text.encode(), "a.TXT", "de")
    assert document.sentences == ["Ein Mann läuft.", "Er ist müde!", "Hallo .", "Ende"]
    assert document.codes == ["{name}"]
    results = [(s.upper(), [(i, i) for i in range(len(s.split()))]) for s in document.sentences]
    assert document.rebuilt(results).decode() == "EIN MANN LÄUFT. ER IST MÜDE!\n\n  HALLO {name}.\nENDE\n"
    assert translate_document(b"", "empty.txt", upper, lang="de") == b"\n"
    with pytest.raises(DocumentError, match=r"^a\.txt:2: not valid UTF-8 \(byte 5 of the file\)$"):
        read_document(b"Ja.\n\xff", "a.txt", "de")


W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def part_xml(content: bytes, part: str) -> etree._Element:
    return etree.fromstring(zipfile.ZipFile(io.BytesIO(content)).read(part))


def word_languages(content: bytes, part: str) -> list[dict[str, str]]:
    """Each <w:lang> of a .docx part, its attributes without the namespace (python-docx reads none)."""
    return [{k.removeprefix(W): v for k, v in el.attrib.items()} for el in part_xml(content, part).iter(W + "lang")]


def german_word_document() -> bytes:
    d = docx.Document()  # python-docx's template: styles' defaults say val=en-US, eastAsia=en-US, bidi=ar-SA
    run = d.add_paragraph().add_run("Ein Mann fährt Rad.")
    run._r.get_or_add_rPr().append(etree.fromstring(f'<w:lang xmlns:w="{W[1:-1]}" w:val="de-DE"/>'))
    d.sections[0].header.paragraphs[0].text = "Kopfzeile"
    return saved(d)


@pytest.mark.parametrize(
    ("target", "run", "defaults"),
    [
        ("en", {"val": "en"}, {"val": "en", "eastAsia": "en-US", "bidi": "ar-SA"}),
        ("pt-br", {"val": "pt-BR"}, {"val": "pt-BR", "eastAsia": "en-US", "bidi": "ar-SA"}),  # as the API sends it
        ("ja", {"val": "de-DE", "eastAsia": "ja"}, {"val": "en-US", "eastAsia": "ja", "bidi": "ar-SA"}),
        ("ar", {"val": "de-DE", "bidi": "ar"}, {"val": "en-US", "eastAsia": "en-US", "bidi": "ar"}),
    ],
)
def test_a_word_document_names_the_target_language_for_its_kind_of_script(target, run, defaults):
    before = german_word_document()
    after = translate_document(before, "a.docx", upper, lang="de", target=target)
    assert word_languages(after, "word/document.xml") == [run]
    assert word_languages(after, "word/styles.xml") == [defaults]  # the docDefaults' (the styles name none)
    assert docx.Document(io.BytesIO(after)).paragraphs[0].text == "EIN MANN FÄHRT RAD."
    old, new = zipfile.ZipFile(io.BytesIO(before)), zipfile.ZipFile(io.BytesIO(after))
    changed = {n for n in old.namelist() if old.read(n) != new.read(n)}
    assert changed == {"word/document.xml", "word/header1.xml", "word/styles.xml", "word/stylesWithEffects.xml"}


def test_a_word_document_without_a_target_keeps_its_languages_and_its_styles_bytes():
    before = german_word_document()
    after = translate_document(before, "a.docx", upper, lang="de", target=None)
    assert word_languages(after, "word/document.xml") == [{"val": "de-DE"}]
    old, new = zipfile.ZipFile(io.BytesIO(before)), zipfile.ZipFile(io.BytesIO(after))
    assert {n for n in old.namelist() if old.read(n) != new.read(n)} == {"word/document.xml", "word/header1.xml"}


def test_a_presentation_names_the_target_language_on_its_runs():
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Guten Tag"
    slide.shapes.title.text_frame.paragraphs[0].runs[0].font.language_id = MSO_LANGUAGE_ID.GERMAN
    slide.notes_slide.notes_text_frame.text = "Notizen."
    slide.notes_slide.notes_text_frame.paragraphs[0].runs[0].font.language_id = MSO_LANGUAGE_ID.GERMAN
    before = saved(deck)

    def languages(content: bytes, part: str) -> list[str]:
        return [el.get("lang") for el in part_xml(content, part).iter() if el.get("lang") is not None]

    after = translate_document(before, "a.pptx", upper, lang="de", target="en")
    assert languages(after, "ppt/slides/slide1.xml") == ["en"]
    assert languages(after, "ppt/notesSlides/notesSlide1.xml") == ["en"]
    assert set(languages(after, "ppt/presentation.xml")) == {"en"}  # the default text style: en-US before
    out = pptx.Presentation(io.BytesIO(after)).slides[0]
    assert out.shapes.title.text == "GUTEN TAG" and out.notes_slide.notes_text_frame.text == "NOTIZEN."

    unnamed = translate_document(before, "a.pptx", upper, lang="de")
    assert languages(unnamed, "ppt/slides/slide1.xml") == ["de-DE"]
    assert zipfile.ZipFile(io.BytesIO(unnamed)).read("ppt/presentation.xml") == zipfile.ZipFile(
        io.BytesIO(before)
    ).read("ppt/presentation.xml")


def german_opendocument_text() -> OpenDocumentText:
    text = OpenDocumentText()
    standard = Style(name="Standard", family="paragraph")  # in styles.xml
    standard.addElement(TextProperties(language="de", country="DE", languageasian="ja", countryasian="JP"))
    text.styles.addElement(standard)
    emphasis = Style(name="E", family="text")  # an automatic style, in content.xml
    emphasis.addElement(TextProperties(fontweight="bold", language="de", country="AT"))
    text.automaticstyles.addElement(emphasis)
    bold = Style(name="B", family="text")  # names no language: it inherits one
    bold.addElement(TextProperties(fontweight="bold"))
    text.automaticstyles.addElement(bold)
    p = P(stylename=standard, text="Ein Mann fährt ")
    p.addElement(Span(stylename=emphasis, text="Rad"))
    p.addText(" und ")
    p.addElement(Span(stylename=bold, text="lacht"))
    p.addText(".")
    text.text.addElement(p)
    return text


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("en", {"Standard": ("en", "none", "ja", "JP"), "E": ("en", "none", "", ""), "B": ("", "", "", "")}),
        ("pt_BR", {"Standard": ("pt", "BR", "ja", "JP"), "E": ("pt", "BR", "", ""), "B": ("", "", "", "")}),
        ("zh", {"Standard": ("de", "DE", "zh", "none"), "E": ("de", "AT", "", ""), "B": ("", "", "", "")}),
        (None, {"Standard": ("de", "DE", "ja", "JP"), "E": ("de", "AT", "", ""), "B": ("", "", "", "")}),
    ],
)
def test_an_opendocument_text_names_the_target_language_in_its_styles(target, expected):
    out = load(
        io.BytesIO(translate_document(saved(german_opendocument_text()), "a.odt", upper, lang="de", target=target))
    )
    assert teletype.extractText(out.getElementsByType(P)[0]) == "EIN MANN FÄHRT RAD UND LACHT."
    found = {}
    for style in out.getElementsByType(Style):
        for properties in style.getElementsByType(TextProperties):
            found[style.getAttribute("name")] = tuple(
                properties.getAttribute(a) or "" for a in ("language", "country", "languageasian", "countryasian")
            )
    assert found == expected  # LibreOffice writes fo:country="none" for a language without one


def test_an_ebook_names_the_target_language_in_its_package_chapters_and_contents():
    chapter = (
        '<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml" lang="de" xml:lang="de">'
        '<body><p>Er sagte <i lang="fr">bon appétit</i> zu mir.</p></body></html>'
    )
    cover = '<html xmlns="http://www.w3.org/1999/xhtml" lang="de"><body><img src="c.png" alt=""/></body></html>'
    opf = (
        '<package xmlns="http://www.idpf.org/2007/opf" xml:lang="de"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        "<dc:title>Titel</dc:title><dc:language>de</dc:language></metadata></package>"
    )
    ncx = (
        '<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" xml:lang="de"><navMap><navPoint>'
        "<navLabel><text>Kapitel</text></navLabel></navPoint></navMap></ncx>"
    )
    before = zip_of(
        {
            "mimetype": b"application/epub+zip",
            "META-INF/container.xml": b'<?xml version="1.0"?><container version="1.0"/>',
            "OEBPS/content.opf": opf.encode(),
            "OEBPS/cover.xhtml": cover.encode(),
            "OEBPS/ch1.xhtml": chapter.encode(),
            "OEBPS/toc.ncx": ncx.encode(),
        }
    )
    out = zipfile.ZipFile(io.BytesIO(translate_document(before, "b.epub", upper, lang="de", target="en")))
    package = etree.fromstring(out.read("OEBPS/content.opf"))
    assert [el.text for el in package.iter("{http://purl.org/dc/elements/1.1/}language")] == ["en"]
    assert package.get("{http://www.w3.org/XML/1998/namespace}lang") == "de"  # the metadata's own, untranslated
    assert out.read("OEBPS/ch1.xhtml").decode() == chapter.replace(
        'lang="de" xml:lang="de"', 'lang="en" xml:lang="en"'
    ).replace("Er sagte", "ER SAGTE").replace(
        "bon appétit</i> zu mir", "BON APPÉTIT</i> ZU MIR"
    )  # the quoted French keeps its lang
    assert out.read("OEBPS/cover.xhtml").decode() == cover.replace('lang="de"', 'lang="en"')  # no text, but named
    assert out.read("OEBPS/toc.ncx").decode() == ncx.replace('xml:lang="de"', 'xml:lang="en"').replace(
        "Kapitel", "KAPITEL"
    )

    kept = zipfile.ZipFile(io.BytesIO(translate_document(before, "b.epub", upper, lang="de")))
    assert kept.read("OEBPS/content.opf") == opf.encode() and kept.read("OEBPS/cover.xhtml") == cover.encode()
    assert 'lang="de" xml:lang="de"' in kept.read("OEBPS/ch1.xhtml").decode()


def test_a_web_page_names_the_target_language_on_its_root_only():
    page = '<!DOCTYPE html>\n<html lang="de-AT" xml:lang="de-AT"><p>Er sagte <q lang="fr">merci</q>.</p></html>'
    out = translate_document(page.encode(), "a.html", upper, lang="de", target="en").decode()
    assert out == '<!DOCTYPE html>\n<html lang="en" xml:lang="en"><p>ER SAGTE <q lang="fr">MERCI</q>.</p></html>'
    kept = translate_document(page.encode(), "a.html", upper, lang="de").decode()
    assert kept == page.replace("Er sagte", "ER SAGTE").replace("merci", "MERCI")
    bare = "<p>Ohne Wurzel.</p>"  # a page that names no language is given none
    assert translate_document(bare.encode(), "a.html", upper, lang="de", target="en") == b"<p>OHNE WURZEL.</p>"


@pytest.mark.parametrize(
    ("given", "written", "kind"),
    [
        ("en", "en", "latin"),
        ("pt_br", "pt-BR", "latin"),
        ("zh-hans-cn", "zh-Hans-CN", "asian"),
        ("he", "he", "complex"),
    ],
)
def test_a_target_is_written_in_bcp47s_case(given, written, kind):
    tag = LanguageTag.parse(given)
    assert (str(tag), tag.kind) == (written, kind)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("a.docx", b"PK\x03\x04 not really", "a.docx: not a zip package"),
        ("a.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(100), "a.docx: an encrypted or pre-2007 Office file"),
        ("a.docx", zip_of({"x.xml": b"<a/>"}), "a.docx: not a Word document"),
        ("a.docm", b"", "macro-enabled"),
        ("a.pdf", b"%PDF", "PDF cannot be written back"),
        ("a.xyz", b"", "unknown document format '.xyz'"),
        ("a.docx", zip_of({"word/document.xml": b"<w:document"}), "word/document.xml: not well-formed XML"),
        ("a.srt", b"no timings here\n", "a.srt: no cue timings"),
        ("a.md", b"\xff\xfe", "a.md:1: not valid UTF-8"),
    ],
)
def test_a_bad_document_is_one_error_naming_the_file(name, content, message):
    with pytest.raises(DocumentError, match=message.replace("(", r"\(").replace(".", r"\.")):
        read_document(content, name, "en")


def test_entities_are_never_expanded():
    bomb = (
        b'<?xml version="1.0"?><!DOCTYPE w [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
        b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">&b;</w:document>'
    )
    with pytest.raises(DocumentError, match="declares a DTD"):
        read_document(zip_of({"word/document.xml": bomb}), "a.docx", "en")
    external = b'<?xml version="1.0"?><!DOCTYPE w [<!ENTITY x SYSTEM "file:///etc/passwd">]><w>&x;</w>'
    with pytest.raises(DocumentError, match="declares a DTD"):
        read_document(zip_of({"word/document.xml": external}), "a.docx", "en")


def test_a_zip_bomb_is_refused_before_it_is_inflated():
    bomb = zip_of({"word/document.xml": bytes(64 << 20)})  # 64 MiB of zeros in about 64 KiB
    assert len(bomb) * MAX_RATIO < (64 << 20)
    with pytest.raises(DocumentError, match="possible zip bomb") as refused:
        Package.read(bomb, "a.docx")
    assert refused.value.too_large


def test_a_zip_whose_directory_points_before_its_start_is_one_error_naming_the_file():
    """Found by fuzzing (fuzz/fuzz_document.py docx): zipfile's "negative seek value" escaped as a bare
    ValueError. Here the end record places the directory one byte later than it is."""
    package = bytearray(zip_of({"word/document.xml": b"<w/>"}))
    end = package.rfind(b"PK\x05\x06")
    package[end + 16 : end + 20] = (int.from_bytes(package[end + 16 : end + 20], "little") + 1).to_bytes(4, "little")
    with pytest.raises(DocumentError, match=r"^a\.docx: a corrupt zip member \(negative seek value -1\)$"):
        read_document(bytes(package), "a.docx", "en")


@pytest.mark.parametrize(
    ("compression", "message"),
    [(zipfile.ZIP_DEFLATED, "Error -3 while decompressing data"), (zipfile.ZIP_LZMA, "Corrupt")],
)
def test_a_member_whose_compressed_data_is_corrupt_is_one_error_naming_the_file(compression, message):
    """Found by fuzzing (fuzz/fuzz_document.py docx): zlib's error escaped Package.read (LZMA's would have)."""
    package = bytearray(zip_of({"word/document.xml": b"<w>" + b"Wort " * 20 + b"</w>"}, compression))
    data = 30 + len("word/document.xml")  # past the member's local header
    package[data + (0 if compression == zipfile.ZIP_DEFLATED else 9)] ^= 0xFF
    with pytest.raises(DocumentError, match=rf"^a\.docx: a corrupt zip member \({message}"):
        read_document(bytes(package), "a.docx", "en")


def test_a_zip_directory_zipfile_cannot_read_is_one_error_naming_the_file():
    """Found by fuzzing (fuzz/fuzz_document.py ods): a member needing zip version 11.0 raised
    NotImplementedError from zipfile.ZipFile itself; a name flagged UTF-8 that is not raised
    UnicodeDecodeError there."""
    package = bytearray(zip_of({"content.xml": b"<w/>"}))
    entry = package.rfind(b"PK\x01\x02")  # the central directory's entry: the version needed at 6
    package[entry + 6 : entry + 8] = (110).to_bytes(2, "little")
    with pytest.raises(DocumentError, match=r"^a\.ods: not a zip package \(zip file version 11\.0\)"):
        read_document(bytes(package), "a.ods", "en")
    misnamed = zip_of({"content\u00ff.xml": b"<w/>"}).replace(b"content\xc3\xbf", b"content\xff\xff")
    with pytest.raises(DocumentError, match=r"^a\.ods: not a zip package \('utf-8' codec can't decode"):
        read_document(misnamed, "a.ods", "en")


def test_a_part_declared_in_utf7_is_written_back_as_xml():
    """Found by fuzzing (fuzz/fuzz_document.py odt): a part was written back in the encoding it
    declares, and UTF-7 writes "<" as "+ADw-", so the translated part was no XML at all."""
    part = (
        f"<?xml version='1.0' encoding='UTF-7'?><w:document xmlns:w='{W[1:-1]}'><w:body><w:p><w:r>"
        "<w:t>Hallo Welt</w:t></w:r></w:p></w:body></w:document>"
    ).encode()
    out = translate_document(zip_of({"word/document.xml": part}), "a.docx", upper, lang="de")
    assert [t.text for t in part_xml(out, "word/document.xml").iter(W + "t")] == ["HALLO WELT"]


def test_a_refusal_quoting_a_members_name_is_one_line_whatever_the_name_holds():
    """Found by fuzzing (fuzz/fuzz_document.py pptx, xlsx, odt): a member's name is the file's own
    text, and a line break in it split the refusal ("... is encrypted", "... inflates ... times")."""
    package = bytearray(zip_of({"a\nb\u2028c": b"x"}))
    entry = package.rfind(b"PK\x01\x02")  # the central directory's entry: its flags at 8
    package[entry + 8] |= 0x1  # encrypted
    with pytest.raises(DocumentError) as refused:
        read_document(bytes(package), "a.xlsx", "en")
    assert str(refused.value) == "a.xlsx: a\\nb\\u2028c is encrypted: remove the password first"
    assert len(str(refused.value).splitlines()) == 1


def test_the_format_comes_from_the_extension_in_any_case():
    assert document_format("Report.DOCX") == ".docx"
    with pytest.raises(DocumentError, match="Report.doc: a pre-2007 Word document"):
        document_format("Report.doc")


def test_translate_a_word_document_from_the_command_line(tiny_model_dir, tmp_path):
    d = docx.Document()
    d.add_paragraph("Ein Mann fährt ").add_run("Fahrrad").bold = True
    d.styles["Normal"].element.get_or_add_rPr().append(etree.fromstring(f'<w:lang xmlns:w="{W[1:-1]}" w:val="de-DE"/>'))
    source, target = tmp_path / "in.docx", tmp_path / "out.docx"
    source.write_bytes(saved(d))
    command = [sys.executable, "-m", "nmt", "translate", "--model", str(tiny_model_dir), "--beam", "1"]
    run = subprocess.run([*command, "--input", str(source), "--output", str(target)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    out = docx.Document(str(target))
    assert (
        len(out.paragraphs) == 1
        and out.paragraphs[0].text.strip()
        and out.paragraphs[0].text != "Ein Mann fährt Fahrrad"
    )
    assert {"val": "en"} in word_languages(target.read_bytes(), "word/styles.xml")  # the model's target, de-DE before
    bad = tmp_path / "bad.docx"
    bad.write_bytes(b"not a zip")
    run = subprocess.run(
        [*command, "--input", str(bad), "--output", str(tmp_path / "x.docx")], capture_output=True, text=True
    )
    assert run.returncode == 2 and "bad.docx: not a zip package" in run.stderr
    assert not (tmp_path / "x.docx").exists()
