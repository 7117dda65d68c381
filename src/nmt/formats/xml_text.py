"""The paragraphs of an XML document as text nodes, translated with their inline markup kept.

Office and OpenDocument files keep a paragraph's text in pieces: the runs of a .docx (`<w:r>`, each
with its own bold, italic or link), of a slide (`<a:r>`), the spans of an .odt. A paragraph is read
as one text (the pieces joined), translated in context, and the output words are put back into the
pieces by word alignment (nmt.markup.placed_texts, the placement the HTML path uses), so a bold word
stays bold. Placeholders in the text ({name}, %s, a URL, an e-mail address; nmt.placeholders.MaskedNodes)
are never read by the model and come back as written, even one that a word processor split over
two runs. Only text changes: elements, attributes and every other part stay as they were.

A Slot is one piece: an element's text, or the tail after one (OpenDocument mixes text and
elements). A tab, a line break or a run of spaces written as an element is a fixed slot: it reads
as whitespace and is written back as it was.

XML is parsed with entities left unexpanded, no DTD loaded and no network, and a document that
declares a DTD of its own is refused: no entity expansion (the "billion laughs") and no external
entity can reach a file or a host.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from lxml import etree

from ..placeholders import MaskedNodes
from .errors import DocumentError
from .text_files import UTF8_BOM, check_results

XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"


def parse_xml(content: bytes, name: str) -> etree._ElementTree:
    """A part's XML tree, parsed safely; DocumentError naming the file for bad or unsafe XML."""
    parser = etree.XMLParser(  # CDATA kept as CDATA: markup in it is the file's own (Android's HTML strings)
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        strip_cdata=False,
    )
    try:
        tree = etree.ElementTree(etree.fromstring(content, parser))
    except etree.XMLSyntaxError as err:
        raise DocumentError(f"{name}: not well-formed XML ({syntax_error(err)})") from None
    if declares_own_dtd(tree.docinfo):
        raise DocumentError(f"{name}: declares a DTD of its own (entities): refused")
    return tree


def syntax_error(err: etree.XMLSyntaxError) -> str:
    """lxml's message about bad XML on one line: libxml2 ends some of its messages with a line break
    ("Char 0x0 out of allowed range\\n, line 1, column 4"), and a refusal is one line."""
    return " ".join(str(err).split()).replace(" ,", ",")


def declares_own_dtd(docinfo: etree.DocInfo) -> bool:
    """Whether a document declares entities or elements in a DTD of its own (an internal subset):
    the way to the billion laughs and to external entities. A doctype that only names an outside
    DTD (a TMX file's `<!DOCTYPE tmx SYSTEM "tmx14.dtd">`) declares nothing: it is never loaded."""
    dtd = docinfo.internalDTD
    if dtd is None:
        return False
    names_only_outside = docinfo.system_url is not None or docinfo.public_id is not None
    return not names_only_outside or any(True for _ in dtd.iterentities()) or any(True for _ in dtd.iterelements())


_PROLOG_ITEM = re.compile(rb"\s*(?:<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^>]*>)", re.DOTALL)


def written_xml(tree: etree._ElementTree, original: bytes) -> bytes:
    """The tree as bytes, with everything before the root element (a byte-order mark, the XML
    declaration, comments, a doctype, the line breaks between them) and the whitespace at the end
    as the part had them: lxml writes neither the breaks nor the mark."""
    encoding = (tree.docinfo.encoding or "UTF-8").upper()
    if encoding not in ("UTF-8", "UTF8"):  # rare in these formats: let lxml write its own declaration
        written = etree.tostring(tree, encoding=encoding, xml_declaration=True)
        try:  # an encoding that writes markup as other bytes (UTF-7's "+ADw-" for "<") makes no XML: UTF-8
            etree.fromstring(written, etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False))
        except etree.XMLSyntaxError:
            return etree.tostring(tree, encoding="UTF-8", xml_declaration=True)
        return written
    root = tree.getroot()
    prolog_end = len(UTF8_BOM) if original.startswith(UTF8_BOM) else 0
    while item := _PROLOG_ITEM.match(original, prolog_end):
        prolog_end = item.end()
    rest = original[prolog_end:]
    prolog = original[:prolog_end] + rest[: len(rest) - len(rest.lstrip())]
    after = b"".join(b"\n" + etree.tostring(node) for node in root.itersiblings())  # comments after the root
    end = original[len(original.rstrip()) :]
    return prolog + etree.tostring(root, encoding="UTF-8", xml_declaration=False) + after + end


@dataclass
class Slot:
    """One piece of a paragraph's text: `element`'s text (where "text") or its tail (where "tail");
    a fixed slot (`fixed` set) reads as that whitespace and is never written."""

    element: etree._Element
    where: str = "text"
    fixed: str | None = None
    keep_space: bool = False  # OOXML's <w:t>/<a:t>: mark xml:space="preserve" where the text has outer spaces

    def get(self) -> str:
        if self.fixed is not None:
            return self.fixed
        return (self.element.text if self.where == "text" else self.element.tail) or ""

    def set(self, text: str) -> None:
        if self.fixed is not None:
            return
        if self.where == "text":
            self.element.text = text
        else:
            self.element.tail = text
        if self.keep_space and text != text.strip():
            self.element.set(XML_SPACE, "preserve")


class XmlBlocks:
    """The paragraphs of some XML parts, ready to translate: `sentences`, then `put_back(results)`.
    Placeholders in their text (a URL, {name}, %s: nmt.placeholders) are kept as written."""

    def __init__(self, blocks: Sequence[list[Slot]], lang: str):
        read = [(block, MaskedNodes([s.get() for s in block], lang)) for block in blocks]
        # a block without a letter outside its codes (a number, a date, a URL) is no text to
        # translate: a model would guess
        self.blocks = [(block, text) for block, text in read if text.sentences]
        self.sentences = [s for _, text in self.blocks for s in text.sentences]

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the file has it, its placeholders in it (one per sentence): what a
        reviewer is shown (nmt.quality_report)."""
        return [w for _, text in self.blocks for w in text.sentences_as_written]

    def put_back(self, results: Sequence[tuple[str, list[tuple[int, int]] | None]]) -> None:
        """Each sentence replaced by its translation ((text, word alignment or None) per sentence)."""
        check_results(results, self.sentences)
        answers = iter(results)
        for block, text in self.blocks:
            mine = [next(answers) for _ in text.sentences]
            for slot, new, old in zip(block, text.rebuilt(mine), text.nodes, strict=True):
                if new != old:
                    slot.set(new)
