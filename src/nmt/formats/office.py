"""Which parts of an Office Open XML or OpenDocument file hold the text a reader sees, and its pieces.

    .docx  word/document.xml, headers, footers, footnotes, endnotes: paragraphs <w:p>, pieces <w:t>
    .pptx  slides and their notes: paragraphs <a:p>, pieces <a:t> (a slide-number field is kept)
    .xlsx  the shared strings (the text cells) and inline strings: <si>/<is>, pieces <t> (phonetic
           guides kept); numbers and formulas live in the sheets and are not touched
    .odt .odp .ods  content.xml and styles.xml (headers, footers): paragraphs and headings, pieces the
           text around <text:span>, <text:a> and friends; a spreadsheet cell that holds a number, a
           date or a formula is kept as it is

A paragraph inside another (a .docx text box, an .odt footnote) is a paragraph of its own.

Where the target language is known, the places that name the text's language name it instead, so
that a spelling checker treats the translation as what it is (formats.language_tags): a .docx's
<w:lang> in those parts and in word/styles.xml (its defaults and styles), a slide's lang="..." on
run properties and the presentation's default text style's, an OpenDocument's fo:language and
fo:country on text properties (in both parts).
An .xlsx names no language for its text: nothing to write.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from lxml import etree

from .errors import DocumentError
from .language_tags import LanguageTag, target_tag
from .packages import Package
from .xml_text import Slot, XmlBlocks, parse_xml, written_xml

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
FO = "{urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0}"


def _walk(root: etree._Element, stop: Callable[[etree._Element], bool]) -> Iterator[etree._Element]:
    """root's descendants in document order, not entering those for which `stop` is true (they are
    yielded, their insides not); iterative, so deep nesting cannot exhaust Python's stack."""
    stack = [iter(root)]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
            continue
        if not isinstance(child.tag, str):  # comments, processing instructions
            continue
        yield child
        if not stop(child):
            stack.append(iter(child))


# --- Office Open XML ----------------------------------------------------------------------------
def _run_pieces(paragraph: etree._Element, ns: str, nested: str, skipped: set[str]) -> list[Slot]:
    """The <t> pieces of an OOXML paragraph, with tabs and breaks as fixed whitespace."""
    slots = []
    for el in _walk(paragraph, lambda e: e.tag == nested or e.tag in skipped):
        if el.tag == ns + "t" and el.getparent().tag == ns + "r":
            slots.append(Slot(el, keep_space=True))
        elif el.tag in (ns + "tab", ns + "br", ns + "cr") and el.getparent().tag == ns + "r":
            slots.append(Slot(el, fixed=" "))
    return slots


def word_blocks(tree: etree._ElementTree) -> list[list[Slot]]:
    return [_run_pieces(p, W, W + "p", set()) for p in tree.iter(W + "p")]


def slide_blocks(tree: etree._ElementTree) -> list[list[Slot]]:
    # a:fld is a field (the slide number, a date) that PowerPoint fills in: not text to translate
    return [_run_pieces(p, A, A + "p", {A + "fld"}) for p in tree.iter(A + "p")]


def sheet_string_blocks(tree: etree._ElementTree) -> list[list[Slot]]:
    blocks = []
    for item in tree.iter(S + "si", S + "is"):
        pieces = [el for el in _walk(item, lambda e: e.tag == S + "rPh") if el.tag == S + "t"]
        blocks.append(
            [Slot(el, keep_space=True) for el in pieces if el.getparent().tag in (S + "si", S + "is", S + "r")]
        )
    return blocks


# --- OpenDocument -------------------------------------------------------------------------------
ODF_INLINE = {TEXT + n for n in ("span", "a", "bookmark", "bookmark-start", "bookmark-end", "soft-page-break", "meta")}
ODF_SPACE = {TEXT + "s", TEXT + "tab", TEXT + "line-break"}


def _odf_pieces(paragraph: etree._Element) -> list[Slot]:
    """The text of an ODF paragraph around its inline elements: each element's text and tail. A
    footnote, a frame or a field inside is not entered (a footnote's paragraphs are their own)."""
    slots = [Slot(paragraph, "text")]
    stack: list[Iterator] = [iter(paragraph)]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
        elif isinstance(child, _Tail):
            slots.append(Slot(child.element, "tail"))
        elif isinstance(child.tag, str) and child.tag in ODF_INLINE:
            slots.append(Slot(child, "text"))
            stack.append(_then_tail(child))
        else:
            if child.tag in ODF_SPACE:  # <text:s text:c="3"/> is three spaces
                given = child.get(TEXT + "c", "1") if child.tag == TEXT + "s" else "1"
                count = int(given) if given.isdigit() else 1
                slots.append(Slot(child, fixed=" " * max(1, min(count, 100))))
            slots.append(Slot(child, "tail"))  # after a footnote, a frame, a field or a comment
    return slots


class _Tail:
    """A marker, met after an inline element's children: its tail comes next."""

    def __init__(self, element: etree._Element):
        self.element = element


def _then_tail(element: etree._Element) -> Iterator:
    yield from element
    yield _Tail(element)


def _counted_cell(paragraph: etree._Element) -> bool:
    """Whether the paragraph is in a spreadsheet cell that holds a number, date, formula or the like."""
    for ancestor in paragraph.iterancestors(TABLE + "table-cell"):
        kind = ancestor.get(OFFICE + "value-type")
        return ancestor.get(TABLE + "formula") is not None or (kind is not None and kind != "string")
    return False


def odf_blocks(tree: etree._ElementTree) -> list[list[Slot]]:
    return [_odf_pieces(p) for p in tree.iter(TEXT + "p", TEXT + "h") if not _counted_cell(p)]


# --- The target language, where a part names its text's language -------------------------------
def word_languages(tree: etree._ElementTree, tag: LanguageTag) -> bool:
    """Every <w:lang> names the target for its kind of script (w:val for Latin script, w:eastAsia,
    w:bidi; added where the element lacks it); the other two are left as they were. Whether
    anything changed."""
    attribute = W + {"latin": "val", "asian": "eastAsia", "complex": "bidi"}[tag.kind]
    changed = False
    for lang in tree.iter(W + "lang"):
        if lang.get(attribute) != str(tag):
            lang.set(attribute, str(tag))
            changed = True
    return changed


def slide_languages(tree: etree._ElementTree, tag: LanguageTag) -> bool:
    """Every lang="..." on a run's, a paragraph end's or a default's properties names the target
    (PowerPoint has one language per run, whatever its script; altLang is left)."""
    changed = False
    for properties in tree.iter(A + "rPr", A + "endParaRPr", A + "defRPr"):
        if properties.get("lang") not in (None, str(tag)):
            properties.set("lang", str(tag))
            changed = True
    return changed


# ODF's attributes for each kind of script: the language, the country, the script, and the BCP 47
# tag that LibreOffice adds where those cannot say it (and reads first).
ODF_LANGUAGE = {
    "latin": (FO + "language", FO + "country", FO + "script", STYLE + "rfc-language-tag"),
    **{
        kind: tuple(STYLE + f"{name}-{kind}" for name in ("language", "country", "script", "rfc-language-tag"))
        for kind in ("asian", "complex")
    },
}


def odf_languages(tree: etree._ElementTree, tag: LanguageTag) -> bool:
    """Every text style that names a language for the target's kind of script names the target: its
    country the target's region, else "none" (as LibreOffice writes a language without one), its
    script the target's where it names one (else none is written: the source's would be wrong)."""
    language, country, script, rfc_tag = ODF_LANGUAGE[tag.kind]
    changed = False
    for properties in tree.iter(STYLE + "text-properties"):
        if properties.get(language) is None and properties.get(rfc_tag) is None:
            continue  # it inherits its language: the style it inherits from is written
        wanted = {language: tag.language, country: tag.region or "none", script: tag.script}
        if properties.get(rfc_tag) is not None:
            wanted[rfc_tag] = str(tag)
        for attribute, value in wanted.items():
            if properties.get(attribute) == value:
                continue
            if value is None:
                del properties.attrib[attribute]
            else:
                properties.set(attribute, value)
            changed = True
    return changed


def word_parts(name: str) -> bool:
    return (
        name == "word/document.xml"
        or re.fullmatch(r"word/(header|footer)\d*\.xml|word/(foot|end)notes\.xml", name) is not None
    )


def slide_parts(name: str) -> bool:
    return re.fullmatch(r"ppt/(slides/slide|notesSlides/notesSlide)\d+\.xml", name) is not None


def sheet_parts(name: str) -> bool:
    return name == "xl/sharedStrings.xml" or re.fullmatch(r"xl/worksheets/sheet\d+\.xml", name) is not None


def odf_parts(name: str) -> bool:
    return name in ("content.xml", "styles.xml")


@dataclass(frozen=True)
class OfficeKind:
    """A kind of office file: the part that every such file has, the parts with text, their pieces."""

    what: str  # for messages: "a Word document"
    main_part: str
    parts: Callable[[str], bool]
    blocks: Callable[[etree._ElementTree], list[list[Slot]]]
    # names the target where a part names its text's language (None: the format has no such place);
    # applied to the parts with text and to language_parts, which are written only where it changed them
    languages: Callable[[etree._ElementTree, LanguageTag], bool] | None = None
    language_parts: tuple[str, ...] = ()


OFFICE_KINDS = {
    ".docx": OfficeKind(
        "a Word document",
        "word/document.xml",
        word_parts,
        word_blocks,
        word_languages,
        ("word/styles.xml", "word/stylesWithEffects.xml"),  # Word 2010 writes the latter for Word 2007
    ),
    ".pptx": OfficeKind(
        "a PowerPoint presentation",
        "ppt/presentation.xml",
        slide_parts,
        slide_blocks,
        slide_languages,
        ("ppt/presentation.xml",),  # its default text style: the language of runs that name none
    ),
    ".xlsx": OfficeKind("an Excel workbook", "xl/workbook.xml", sheet_parts, sheet_string_blocks),
    ".odt": OfficeKind("an OpenDocument text", "content.xml", odf_parts, odf_blocks, odf_languages),
    ".odp": OfficeKind("an OpenDocument presentation", "content.xml", odf_parts, odf_blocks, odf_languages),
    ".ods": OfficeKind("an OpenDocument spreadsheet", "content.xml", odf_parts, odf_blocks, odf_languages),
}


class OfficeDocument:
    """An Office or OpenDocument file read for translation: `sentences`, then `rebuilt(results)`.
    target: the language it is translated into, named where the file names its text's language
    (None: the languages are left as they were)."""

    def __init__(self, content: bytes, name: str, extension: str, lang: str, *, target: str | None = None):
        self.kind = OFFICE_KINDS[extension]
        self.package = Package.read(content, name)
        if self.kind.main_part not in self.package.data:
            raise DocumentError(f"{name}: not {self.kind.what} (no {self.kind.main_part} in the package)")
        self.trees = {
            part: parse_xml(self.package.data[part], f"{name}: {part}")
            for part in self.package.names()
            if self.kind.parts(part)
        }
        blocks = [block for tree in self.trees.values() for block in self.kind.blocks(tree)]
        self.text = XmlBlocks(blocks, lang)
        self.sentences = self.text.sentences
        self.target = target_tag(target) if self.kind.languages else None
        self.language_trees = {
            part: parse_xml(self.package.data[part], f"{name}: {part}")
            for part in (self.kind.language_parts if self.target else ())
            if part in self.package.data
        }

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the file has it, its placeholders in it (one per sentence): what a
        reviewer is shown (nmt.quality_report)."""
        return self.text.sentences_as_written

    def rebuilt(self, results: Sequence[tuple[str, list[tuple[int, int]] | None]]) -> bytes:
        """The file with each sentence replaced by its translation, every other byte as it was
        where the format allows (parts without text are copied, the styles that name languages too
        unless those changed; parts with text re-serialised)."""
        self.text.put_back(results)
        if self.target:
            for tree in self.trees.values():
                self.kind.languages(tree, self.target)
            for part, tree in self.language_trees.items():
                if self.kind.languages(tree, self.target):  # else its bytes stay as they were
                    self.package.data[part] = written_xml(tree, self.package.data[part])
        for part, tree in self.trees.items():
            self.package.data[part] = written_xml(tree, self.package.data[part])
        return self.package.written()
