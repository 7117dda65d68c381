"""E-books (.epub): each XHTML chapter translated as a web page, the table of contents with them.

An EPUB is a zip of XHTML chapters, a package file (content.opf: metadata, manifest, reading order)
and a navigation document. Chapters and the EPUB 3 navigation page go through the HTML path
(nmt.markup: markup, attributes, images and links kept); an EPUB 2 table of contents (toc.ncx) has
its entries' labels translated. The metadata, the manifest, styles, fonts and images are copied as
they were.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..markup import HtmlPage
from .errors import DocumentError
from .packages import Package
from .text_files import check_results
from .xml_text import Slot, XmlBlocks, parse_xml, written_xml

NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
PAGE_SUFFIXES = (".xhtml", ".html", ".htm")


class EpubDocument:
    """An .epub read for translation: `sentences`, then `rebuilt(results)`."""

    def __init__(self, content: bytes, name: str, lang: str):
        self.package = Package.read(content, name)
        if "META-INF/container.xml" not in self.package.data:
            raise DocumentError(f"{name}: not an EPUB (no META-INF/container.xml in the package)")
        self.pages: dict[str, HtmlPage] = {}
        for part in self.package.names():
            if part.lower().endswith(PAGE_SUFFIXES):
                try:
                    text = self.package.data[part].decode("utf-8-sig")
                except UnicodeDecodeError:
                    raise DocumentError(f"{name}: {part} is not UTF-8") from None
                self.pages[part] = HtmlPage(text, lang)
        self.tocs = {
            part: parse_xml(self.package.data[part], f"{name}: {part}")
            for part in self.package.names()
            if part.lower().endswith(".ncx")
        }
        labels = [[Slot(t)] for tree in self.tocs.values() for t in tree.iter(NCX + "text")]
        self.toc_text = XmlBlocks(labels, lang)
        self.sentences = [s for page in self.pages.values() for s in page.sentences] + self.toc_text.sentences

    def rebuilt(self, results: Sequence[tuple[str, list[tuple[int, int]] | None]]) -> bytes:
        """The e-book with its chapters and contents translated, all else as it was."""
        check_results(results, self.sentences)
        at = 0
        for part, page in self.pages.items():
            mine = results[at : at + len(page.sentences)]
            at += len(page.sentences)
            if mine:
                self.package.data[part] = page.rebuilt(mine).encode("utf-8")
        self.toc_text.put_back(results[at:])
        for part, tree in self.tocs.items():
            self.package.data[part] = written_xml(tree, self.package.data[part])
        return self.package.written()
