"""Documents, measured: each format against the same sentences as plain text, memory, and pictures.

For each format a realistic document is made from the corpus's source sentences (a 20-page report
with headings, bold and italic runs, tables, header and footer; a 30-slide deck with notes; a
500-row workbook with numbers and formulas; the same three as OpenDocument; a 10-chapter e-book;
1,000 subtitle cues; a 20-page Markdown file with links and code). Then, side by side, medians of
--repeats: the whole file translated (`nmt.formats.translate_document`: read, translate with word
alignments, place the words, write) against the same sentences translated as plain text in one
call (`Translator.translate`). Also the peak of Python memory the document's own handling takes
(read and rebuild, tracemalloc; the model's tensors are the same for both) and the process's peak
resident memory at the end.

With --pictures DIR, LibreOffice (`soffice`) renders the first page of each Office and ODF file
before and after translation, side by side, to DIR/<format>.png.

    python benchmarks/documents.py --model runs/de_en --pictures docs/images/documents
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
import tracemalloc
import zipfile
from pathlib import Path

import docx
import openpyxl
import pptx
from docx.shared import Pt
from odf.draw import Frame, Page, TextBox
from odf.opendocument import OpenDocumentPresentation, OpenDocumentSpreadsheet, OpenDocumentText
from odf.style import MasterPage, PageLayout, Style, TextProperties
from odf.table import Table, TableCell, TableRow
from odf.text import H, P, Span


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="model directory")
    parser.add_argument(
        "--text",
        default="multi30k:val:de-en,multi30k:test_2016_flickr:de-en",
        help="corpus:split:src-tgt (comma-separated) whose source side fills the documents",
    )
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--formats", default=".docx,.pptx,.xlsx,.odt,.odp,.ods,.epub,.srt,.md")
    parser.add_argument("--pictures", type=Path, help="write before/after renders of Office/ODF files here")
    return parser.parse_args()


def source_sentences(specs: str) -> list[str]:
    from nmt.data.corpus import read_parallel
    from nmt.data.registry import parallel_files

    out = []
    for spec in specs.split(","):
        corpus, split, pair = spec.split(":")
        out += [s for s, _ in read_parallel(*parallel_files(corpus, split, *pair.split("-")))]
    return out


class Sentences:
    """The corpus's sentences handed out in turn (from the start again when used up)."""

    def __init__(self, sentences: list[str]):
        self.sentences, self.at = sentences, 0

    def take(self, n: int = 1) -> list[str]:
        out = [self.sentences[(self.at + i) % len(self.sentences)] for i in range(n)]
        self.at += n
        return out

    def paragraph(self, n: int = 5) -> str:
        return " ".join(self.take(n))

    def title(self) -> str:
        return " ".join(self.take()[0].rstrip(".").split()[:4])


def saved(document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def word_report(text: Sentences, pages: int = 20) -> bytes:
    d = docx.Document()
    d.sections[0].header.paragraphs[0].text = text.title()
    d.sections[0].footer.paragraphs[0].text = text.title()
    for page in range(pages):
        d.add_heading(text.title(), level=1)
        for _ in range(4):
            p = d.add_paragraph(text.paragraph(2) + " ")
            p.add_run(text.title()).bold = True
            p.add_run(" " + text.paragraph(2) + " ")
            p.add_run(text.title()).italic = True
            p.add_run(". " + text.paragraph(1))
        if page % 5 == 4:
            table = d.add_table(rows=3, cols=2, style="Table Grid")
            for cell in table._cells:
                cell.text = text.take()[0]
        for paragraph in d.paragraphs[-4:]:
            paragraph.paragraph_format.space_after = Pt(6)
        d.add_page_break()
    return saved(d)


def slide_deck(text: Sentences, slides: int = 30) -> bytes:
    d = pptx.Presentation()
    for _ in range(slides):
        slide = d.slides.add_slide(d.slide_layouts[1])
        slide.shapes.title.text = text.title()
        frame = slide.placeholders[1].text_frame
        frame.text = text.take()[0]
        for sentence in text.take(3):
            frame.add_paragraph().text = sentence
        run = frame.paragraphs[0].add_run()
        run.text, run.font.bold = " " + text.title(), True
        slide.notes_slide.notes_text_frame.text = text.paragraph(2)
    return saved(d)


def workbook(text: Sentences, rows: int = 500) -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["Description", "Quantity", "Price", "Total"])
    for row in range(2, rows + 2):
        sheet.append([text.take()[0], row % 7 + 1, 1.25 * (row % 11), f"=B{row}*C{row}"])
    sheet.column_dimensions["A"].width = 80
    return saved(book)


def odf_report(text: Sentences, pages: int = 20) -> bytes:
    d = OpenDocumentText()
    bold = Style(name="Strong", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    d.automaticstyles.addElement(bold)
    for page in range(pages):
        d.text.addElement(H(outlinelevel=1, text=text.title()))
        for _ in range(4):
            p = P(text=text.paragraph(2) + " ")
            p.addElement(Span(stylename=bold, text=text.title()))
            p.addText(" " + text.paragraph(3))
            d.text.addElement(p)
        if page % 5 == 4:
            table = Table(name=f"Table{page}")
            for _ in range(3):
                row = TableRow()
                for sentence in text.take(2):
                    cell = TableCell(valuetype="string")
                    cell.addElement(P(text=sentence))
                    row.addElement(cell)
                table.addElement(row)
            d.text.addElement(table)
    return saved(d)


def odf_slides(text: Sentences, slides: int = 30) -> bytes:
    d = OpenDocumentPresentation()
    layout = PageLayout(name="Layout")
    d.automaticstyles.addElement(layout)
    master = MasterPage(name="Master", pagelayoutname=layout)
    d.masterstyles.addElement(master)
    for _ in range(slides):
        page = Page(masterpagename=master)
        for y, lines in (("1cm", [text.title()]), ("4cm", text.take(4))):
            frame = Frame(width="24cm", height="3cm", x="1cm", y=y)
            box = TextBox()
            for line in lines:
                box.addElement(P(text=line))
            frame.addElement(box)
            page.addElement(frame)
        d.presentation.addElement(page)
    return saved(d)


def odf_sheet(text: Sentences, rows: int = 500) -> bytes:
    d = OpenDocumentSpreadsheet()
    table = Table(name="Data")
    for row_number in range(1, rows + 1):
        row = TableRow()
        cell = TableCell(valuetype="string")
        cell.addElement(P(text=text.take()[0]))
        row.addElement(cell)
        value = float(row_number % 7 + 1)
        number = TableCell(valuetype="float", value=value)
        number.addElement(P(text=str(value)))
        row.addElement(number)
        formula = TableCell(valuetype="float", value=2 * value, formula=f"of:=[.B{row_number}]*2")
        formula.addElement(P(text=str(2 * value)))
        row.addElement(formula)
        table.addElement(row)
    d.spreadsheet.addElement(table)
    return saved(d)


def ebook(text: Sentences, chapters: int = 10) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as epub:
        epub.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        epub.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0"/>')
        epub.writestr("OEBPS/content.opf", '<?xml version="1.0"?><package><title>Book</title></package>')
        labels = []
        for n in range(chapters):
            title = text.title()
            labels.append(f"<navPoint><navLabel><text>{title}</text></navLabel></navPoint>")
            body = "".join(f"<p>{text.paragraph(5)} <em>{text.title()}</em>.</p>" for _ in range(12))
            epub.writestr(
                f"OEBPS/ch{n}.xhtml",
                '<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><head>'
                f"<title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>",
            )
        epub.writestr(
            "OEBPS/toc.ncx",
            '<?xml version="1.0"?>\n<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/"><navMap>'
            + "".join(labels)
            + "</navMap></ncx>",
        )
    return out.getvalue()


def subtitles(text: Sentences, cues: int = 1000) -> bytes:
    from nmt.formats.subtitles import wrapped

    out = []
    for n in range(cues):
        start, end = 3 * n, 3 * n + 2.5
        stamp = [
            f"{int(t // 3600):02}:{int(t % 3600 // 60):02}:{int(t % 60):02},{int(t * 1000 % 1000):03}"
            for t in (start, end)
        ]
        lines = wrapped(text.take()[0], 2)
        out.append(f"{n + 1}\n{stamp[0]} --> {stamp[1]}\n" + "\n".join(lines) + "\n")
    return "\n".join(out).encode()


def markdown(text: Sentences, pages: int = 20) -> bytes:
    out = ["---\ntitle: Report\n---\n"]
    for page in range(pages):
        out.append(f"## {text.title()}\n")
        for _ in range(4):
            link = f"[{text.title()}](https://example.org/{page})"
            out.append(f"{text.paragraph(2)} **{text.title()}** {link}. {text.paragraph(2)}\n")
        out.append(f"- {text.take()[0]}\n- {text.take()[0]}\n")
        out.append("```python\nprint('kept as it is')\n```\n")
    return "\n".join(out).encode()


MAKERS = {
    ".docx": word_report,
    ".pptx": slide_deck,
    ".xlsx": workbook,
    ".odt": odf_report,
    ".odp": odf_slides,
    ".ods": odf_sheet,
    ".epub": ebook,
    ".srt": subtitles,
    ".md": markdown,
}


def measure(translator, extension: str, content: bytes, beam: int, repeats: int) -> tuple[dict, bytes]:
    from nmt.formats import read_document, translate_document
    from nmt.translation_io import aligned_translations

    name = f"document{extension}"
    sentences = read_document(content, name, translator.source_lang or "de").sentences

    def whole_file() -> bytes:
        return translate_document(content, name, translate, lang=translator.source_lang or "de")

    def translate(batch: list[str]):
        return aligned_translations(translator, batch, translator.request(beam=beam))

    document_s, plain_s, translated = [], [], b""
    for _ in range(repeats):  # alternated, so that both see the same machine
        start = time.perf_counter()
        translated = whole_file()
        document_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        translator.translate(sentences, beam=beam)
        plain_s.append(time.perf_counter() - start)
    found = aligned_translations(translator, sentences, translator.request(beam=beam))
    tracemalloc.start()
    read_document(content, name, translator.source_lang or "de").rebuilt(found)
    handling_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    document, plain = statistics.median(document_s), statistics.median(plain_s)
    return {
        "format": extension,
        "bytes": len(content),
        "sentences": len(sentences),
        "document_s": round(document, 2),
        "document_range_s": [round(min(document_s), 2), round(max(document_s), 2)],
        "plain_text_s": round(plain, 2),
        "plain_range_s": [round(min(plain_s), 2), round(max(plain_s), 2)],
        "ratio": round(document / plain, 3),
        "handling_peak_mib": round(handling_peak / 2**20, 1),
    }, translated


def render(extension: str, before: bytes, after: bytes, folder: Path) -> Path:
    """The first page of each, rendered by LibreOffice, side by side in one PNG."""
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        for label, content in (("before", before), ("after", after)):
            (tmp_path / f"{label}{extension}").write_bytes(content)
        subprocess.run(
            ["soffice", f"-env:UserInstallation=file://{tmp_path}/profile", "--headless", "--convert-to", "png"]
            + ["--outdir", str(tmp_path), str(tmp_path / f"before{extension}"), str(tmp_path / f"after{extension}")],
            check=True,
            capture_output=True,
            timeout=300,
        )
        pages = [Image.open(tmp_path / f"{label}.png").convert("RGB") for label in ("before", "after")]
        height = max(p.height for p in pages)
        side = Image.new("RGB", (sum(p.width for p in pages) + 20, height), "white")
        side.paste(pages[0], (0, 0))
        side.paste(pages[1], (pages[0].width + 20, 0))
        side.thumbnail((1000, 1000))
        folder.mkdir(parents=True, exist_ok=True)
        out = folder / f"{extension.lstrip('.')}.png"
        side.quantize(colors=32).save(out, optimize=True)  # text and rules: 32 colours keep it sharp and small
        return out


def main() -> None:
    args = parse_args()
    from nmt.formats import OFFICE_FORMATS
    from nmt.translator import Translator

    translator = Translator.load(args.model)
    pool = source_sentences(args.text)
    if args.pictures and shutil.which("soffice") is None:
        raise SystemExit("--pictures needs LibreOffice's soffice on PATH")
    for extension in args.formats.split(","):
        content = MAKERS[extension](Sentences(pool))
        row, translated = measure(translator, extension, content, args.beam, args.repeats)
        if args.pictures and extension in OFFICE_FORMATS:
            row["picture"] = str(render(extension, content, translated, args.pictures))
        print(json.dumps(row), flush=True)
    print(json.dumps({"peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))


if __name__ == "__main__":
    main()
