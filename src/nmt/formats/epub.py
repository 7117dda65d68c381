"""E-books (.epub): each XHTML chapter translated as a web page, the table of contents with them.

An EPUB is a zip of XHTML chapters, a package file (content.opf: metadata, manifest, reading order)
and a navigation document. Chapters and the EPUB 3 navigation page go through the HTML path
(nmt.markup: markup, attributes, images and links kept; placeholders and URLs in the text kept as
written, nmt.placeholders); an EPUB 2 table of contents (toc.ncx) has its entries' labels
translated. The metadata, the manifest, styles, fonts and images are copied as they were, but for
the language where the target is known: the package's <dc:language>, each chapter's <html lang>
and xml:lang, and the table of contents' xml:lang name the target. (The package's own xml:lang, the
language of the metadata's title and the like, is kept with them.)
"""

from __future__ import annotations

from collections.abc import Sequence

from ..markup import HtmlPage
from ..placeholders import CODE
from .errors import DocumentError
from .language_tags import target_tag
from .packages import Package
from .text_files import check_results
from .xml_text import Slot, XmlBlocks, parse_xml, written_xml

NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
DC_LANGUAGE = "{http://purl.org/dc/elements/1.1/}language"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
PAGE_SUFFIXES = (".xhtml", ".html", ".htm")


class EpubDocument:
    """An .epub read for translation: `sentences`, then `rebuilt(results)`."""

    def __init__(self, content: bytes, name: str, lang: str, *, target: str | None = None):
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
                self.pages[part] = HtmlPage(text, lang, codes=CODE)
        self.tocs = {
            part: parse_xml(self.package.data[part], f"{name}: {part}")
            for part in self.package.names()
            if part.lower().endswith(".ncx")
        }
        labels = [[Slot(t)] for tree in self.tocs.values() for t in tree.iter(NCX + "text")]
        self.toc_text = XmlBlocks(labels, lang)
        self.sentences = [s for page in self.pages.values() for s in page.sentences] + self.toc_text.sentences
        tag = target_tag(target)
        self.target = str(tag) if tag else None
        self.packages = {  # the package files (content.opf), read only to name the target
            part: parse_xml(self.package.data[part], f"{name}: {part}")
            for part in (self.package.names(suffix=".opf") if self.target else ())
        }

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the file has it, its placeholders in it (one per sentence): what a
        reviewer is shown (nmt.quality_report)."""
        return [
            w for page in self.pages.values() for w in page.sentences_as_written
        ] + self.toc_text.sentences_as_written

    def rebuilt(self, results: Sequence[tuple[str, list[tuple[int, int]] | None]]) -> bytes:
        """The e-book with its chapters and contents translated, all else as it was."""
        check_results(results, self.sentences)
        at = 0
        for part, page in self.pages.items():
            mine = results[at : at + len(page.sentences)]
            at += len(page.sentences)
            named = page.name_language(self.target) if self.target else False
            if mine or named:
                self.package.data[part] = page.rebuilt(mine).encode("utf-8")
        self.toc_text.put_back(results[at:])
        for part, tree in self.tocs.items():
            if self.target and tree.getroot().get(XML_LANG) is not None:
                tree.getroot().set(XML_LANG, self.target)
            self.package.data[part] = written_xml(tree, self.package.data[part])
        for part, tree in self.packages.items():
            # the whole book is now in the target: every <dc:language> names it (a bilingual
            # original's two come out the same)
            languages = [el for el in tree.iter(DC_LANGUAGE) if el.text != self.target]
            for language in languages:
                language.text = self.target
            if languages:
                self.package.data[part] = written_xml(tree, self.package.data[part])
        return self.package.written()
