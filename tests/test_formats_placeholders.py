"""Placeholders, URLs and e-mail addresses in documents' text (Office, OpenDocument, EPUB, subtitles,
Markdown) come out exactly once and as written, none invented (nmt.placeholders.MaskedNodes).

The scripted translations upper-case every word they see, or reverse the words: had the model read
a code, it would come back as %S, {NAME} or HTTPS://..., or in another place."""

import io
import zipfile

import docx
import openpyxl
import pptx
import pytest
from odf import teletype
from odf.opendocument import load
from odf.text import P, Span
from scripted import reversed_words, upper
from test_formats import odt_with_bold_span

from nmt.formats import read_document, translate_document
from nmt.placeholders import CODE, MaskedNodes, codes_of

URL = "https://example.com/Hilfe?x=1"


def saved(document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def translated(content: bytes, name: str, translate=upper) -> bytes:
    """The document translated by `translate`, checking that no sentence the model read holds a code."""
    document = read_document(content, name, "en")
    assert not [s for s in document.sentences if CODE.search(s)], document.sentences
    return document.rebuilt(translate(document.sentences))


def test_a_code_split_over_pieces_is_found_and_written_back_in_its_pieces():
    text = MaskedNodes(["Delete %d files from {fol", "der}? See ", URL, "."], "en")
    assert text.codes == ["%d", "{folder}", URL]
    assert [s.split() for s in text.sentences] == [["Delete", "files", "from", "?"], ["See", "."]]
    assert text.rebuilt(upper(text.sentences)) == ["DELETE %d FILES FROM {fol", "der}? SEE ", URL, "."]
    reversed_out = text.rebuilt(reversed_words(text.sentences))
    assert codes_of("".join(reversed_out)) == ["%d", "{folder}", URL]  # in the source's order: pieces keep theirs
    assert reversed_out[2] == URL


def test_pieces_without_a_letter_outside_their_codes_are_not_translated():
    for nodes in (["%s – %s"], [URL], ["{count}", ": ", "42"]):
        text = MaskedNodes(nodes, "en")
        assert text.sentences == [] and text.rebuilt([]) == nodes


def test_a_code_the_model_writes_is_removed_and_words_next_to_codes_make_none():
    text = MaskedNodes(["Save ", "%s", " now"], "en")
    assert "".join(text.rebuilt([("Speichern {0} jetzt", [(0, 0), (1, 1)])])) == "Speichern %s jetzt"
    glued = MaskedNodes(["% of{count}"], "en")  # "% of" reversed before {count} would read as %{count}
    assert codes_of("".join(glued.rebuilt(reversed_words(glued.sentences)))) == ["{count}"]


def test_a_paragraph_of_many_runs_and_codes_is_read_in_linear_time():
    """Each piece is cut at the codes inside it by bisection, not by a look at every code."""
    import time

    nodes = ["Wort ", "{x}", " und %s "] * 20_000
    start = time.perf_counter()
    text = MaskedNodes(nodes, "de")
    assert "".join(text.rebuilt([(s, None) for s in text.sentences])) == "".join(nodes)
    assert time.perf_counter() - start < 30  # about 2 s here; a look at every code per piece: minutes


@pytest.mark.parametrize("translate", [upper, reversed_words])
def test_a_word_document_keeps_placeholders_even_split_over_runs(translate):
    d = docx.Document()
    p = d.add_paragraph("Click ")
    p.add_run("{button}").bold = True
    p.add_run(" to save %s to {fol")  # Word splits a field over runs (a spelling mark, an edit)
    p.add_run("der}, see " + URL + " or mail help@example.com.")
    d.add_paragraph(URL)  # nothing but a URL: left as it is
    out = docx.Document(io.BytesIO(translated(saved(d), "a.docx", translate)))
    text = out.paragraphs[0].text
    # each once, in the source's order: the words move around the codes, never the codes
    assert codes_of(text) == ["{button}", "%s", "{folder}", URL, "help@example.com"], text
    assert out.paragraphs[0].runs[1].text.strip() == "{button}" and out.paragraphs[0].runs[1].bold
    assert out.paragraphs[1].text == URL
    if translate is upper:
        assert text == f"CLICK {{button}} TO SAVE %s TO {{folder}}, SEE {URL} OR MAIL help@example.com."


def test_a_presentation_and_a_workbook_keep_their_placeholders():
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Hello {name}"
    slide.placeholders[1].text_frame.text = "You have %1$d new messages at " + URL
    out = pptx.Presentation(io.BytesIO(translated(saved(deck), "a.pptx"))).slides[0]
    assert out.shapes.title.text == "HELLO {name}"
    assert out.placeholders[1].text_frame.text == "YOU HAVE %1$d NEW MESSAGES AT " + URL

    book = openpyxl.Workbook()
    book.active["A1"], book.active["A2"] = "Saved ${count} files to {folder}", "mail@example.com"
    sheet = openpyxl.load_workbook(io.BytesIO(translated(saved(book), "a.xlsx"))).active
    assert (sheet["A1"].value, sheet["A2"].value) == ("SAVED ${count} FILES TO {folder}", "mail@example.com")


def test_an_opendocument_text_keeps_a_placeholder_in_its_span():
    text = odt_with_bold_span("Welcome ", "{user}", ", open %s now.")
    out = load(io.BytesIO(translated(saved(text), "a.odt", reversed_words)))
    written = teletype.extractText(out.getElementsByType(P)[0])
    assert codes_of(written) == ["{user}", "%s"], written
    assert [teletype.extractText(x) for x in out.getElementsByType(Span)] == ["{user}"]


def test_an_ebooks_chapter_keeps_its_placeholders():
    book = io.BytesIO()
    with zipfile.ZipFile(book, "w") as epub:
        epub.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        epub.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0"/>')
        epub.writestr(
            "OEBPS/ch1.xhtml",
            '<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><body>'
            f"<p>See <em>{URL}</em> or write to help@example.com for %s.</p></body></html>",
        )
    out = zipfile.ZipFile(io.BytesIO(translated(book.getvalue(), "b.epub")))
    assert f"<p>SEE <em>{URL}</em> OR WRITE TO help@example.com FOR %s.</p>" in out.read("OEBPS/ch1.xhtml").decode()


def test_subtitles_keep_placeholders_in_plain_and_marked_up_cues():
    srt = (
        "1\n00:00:01,000 --> 00:00:02,000\nHello {name},\nsee " + URL + "\n\n"
        "2\n00:00:03,000 --> 00:00:04,000\n<i>Mail</i> help@example.com now.\n"
    )
    out = translated(srt.encode(), "a.srt").decode()
    # the cue's two lines are wrapped again at balanced lengths, the URL whole
    assert out == (
        "1\n00:00:01,000 --> 00:00:02,000\nHELLO {name}, SEE\n" + URL + "\n\n"
        "2\n00:00:03,000 --> 00:00:04,000\n<i>MAIL</i> help@example.com NOW.\n"
    )
    vtt = "WEBVTT\n\n00:01.000 --> 00:02.000\nDeleted %d of %d files\n"
    reversed_out = translated(vtt.encode(), "a.vtt", reversed_words).decode()
    assert reversed_out.count("%d") == 2 and reversed_out.startswith("WEBVTT\n\n00:01.000 --> 00:02.000\n")


def test_markdown_keeps_urls_and_placeholders_in_its_prose():
    md = f"# Hello {{name}}\n\nRun `make` with {{count}} jobs, see [docs](http://a.b) or {URL}.\n"
    out = translated(md.encode(), "a.md").decode()
    assert out == f"# HELLO {{name}}\n\nRUN `make` WITH {{count}} JOBS, SEE [DOCS](http://a.b) OR {URL}.\n"
    reversed_out = translate_document(md.encode(), "a.md", reversed_words, lang="en").decode()
    assert all(reversed_out.count(code) == 1 for code in ("{name}", "{count}", URL, "`make`")), reversed_out
