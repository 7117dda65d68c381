"""Android string resources (strings.xml): each string, plural and array item translated.

    <string name="files">Delete %1$d files?</string>  ->  <string name="files">%1$d Dateien löschen?</string>

- `<string>`, `<plurals>`'s items and `<string-array>`'s items are translated; one marked
  translatable="false" stays as it is (a name, a URL), as do a reference to another resource
  (@string/app_name), comments and every attribute. A string in CDATA (HTML for Html.fromHtml) has
  its tags kept as placeholders and is written back in CDATA.
- Android's escapes are read as text (\\' and \\" as the quotes they stand for, so the model reads
  "don't"); a quote in the translation is escaped again, as aapt requires. \\n, \\t, \\@, \\? and
  \\uXXXX are placeholders (nmt.placeholders), kept like %1$s and {name}.
- Formatting markup (<b>, <i>, <u>, <a>, <font>, <annotation>, ...) is placed by alignment; an
  element of another namespace (<xliff:g id="count">%d</xliff:g>: code and names that must not be
  translated) is kept whole, where alignment puts it.
- A `<plurals>` gets the quantities the target language has (CLDR's, through Babel): "one" from the
  source's "one", every other quantity from its "other".

Parsed with lxml safely (formats.xml_text: no entities, no DTD, no network).
"""

from __future__ import annotations

import copy
import re
from html import escape

from lxml import etree

from ..placeholders import MaskedText
from .errors import DocumentError
from .text_files import Results, check_results
from .xml_text import parse_xml, written_xml

FORMATTING = {"b", "i", "u", "a", "font", "annotation", "span", "big", "small", "sup", "sub", "strike", "tt", "em"}
CLDR_ORDER = ("zero", "one", "two", "few", "many", "other")
_KEPT = re.compile(r"<nmt-kept-(\d+)/>")
_TAG = re.compile(r"(<[^<>]*>)")
_REFERENCE = re.compile(r"[@?][\w.:]*/?[\w.]+")  # @string/app_name, ?attr/colorPrimary: another resource


def xml_escape(text: str) -> str:
    """The model's words as XML text (its "&" and "<" escaped; quotes are Android's to escape)."""
    return escape(text, quote=False)


def target_quantities(target: str | None) -> tuple[str, ...] | None:
    """The plural quantities `target` has, in CLDR's order; None for a language Babel does not know."""
    if not target:
        return None
    from babel.core import Locale, UnknownLocaleError  # noqa: PLC0415 (Babel's data loads only when needed)

    try:
        tags = Locale.parse(target.replace("-", "_")).plural_form.tags
    except (UnknownLocaleError, ValueError):
        return None
    return tuple(q for q in CLDR_ORDER if q in tags or q == "other")


class AndroidString:
    """One string element's content read for translation: `text` (a MaskedText), then `write(new)`."""

    def __init__(self, element: etree._Element, lang: str):
        self.element = element
        self.kept: list[etree._Element] = []  # whole elements kept as they are, by number
        # A string in CDATA holds HTML for Html.fromHtml: its tags are the string's own codes, and it
        # is written back as CDATA.
        self.cdata = len(element) == 0 and b"<![CDATA[" in etree.tostring(element)
        inner = element.text or "" if self.cdata else self._inner(element)
        self.quoted = len(inner) >= 2 and inner.startswith('"') and inner.endswith('"')
        if self.quoted:  # a string in double quotes keeps its spaces and needs no \' inside
            inner = inner[1:-1]
        self.text = MaskedText(inner.replace("\\'", "'").replace('\\"', '"'), lang)

    def _inner(self, element: etree._Element) -> str:
        """The element's content as a string: text escaped, formatting tags as written, other elements
        as <nmt-kept-N/> codes."""
        out = [xml_escape(element.text or "")]
        for child in element:
            if isinstance(child.tag, str) and etree.QName(child).namespace is None and child.tag in FORMATTING:
                attributes = "".join(f' {k}="{escape(v)}"' for k, v in child.attrib.items())
                out.append(f"<{child.tag}{attributes}>{self._inner(child)}</{child.tag}>")
            else:  # another namespace's element, a comment: code, kept whole
                self.kept.append(child)
                out.append(f"<nmt-kept-{len(self.kept) - 1}/>")
            out.append(xml_escape(child.tail or ""))
        return "".join(out)

    def write(self, translated: str, into: etree._Element | None = None) -> None:
        """Put `translated` (the MaskedText rebuilt) into the element (or into `into`, a new item)."""
        target = self.element if into is None else into
        if self.cdata:
            text = translated.replace("]]>", "]] >")  # the one thing CDATA cannot hold
            target.text = etree.CDATA(f'"{text}"' if self.quoted else text)
            return
        parts = _TAG.split(translated)  # quotes escaped in the text, never inside a tag
        text = "".join(p if k % 2 else p.replace("'", "\\'").replace('"', '\\"') for k, p in enumerate(parts))
        if self.quoted:
            text = f'"{text}"'
        elif text[:1] in ("@", "?"):  # a string that starts so would be read as a reference
            text = "\\" + text
        holder = etree.fromstring(f"<holder>{text}</holder>".encode(), etree.XMLParser(resolve_entities=False))
        for code in holder.iter():
            if (found := _KEPT.fullmatch(f"<{code.tag}/>")) is not None:
                original = self.kept[int(found.group(1))]
                kept = copy.deepcopy(original)  # a comment or instruction too: as a string it is no document
                kept.tail = code.tail
                code.getparent().replace(code, kept)
        for child in list(target):
            target.remove(child)
        target.text = holder.text
        target.extend(list(holder))


class AndroidStrings:
    """A strings.xml read for translation: `sentences`, then `rebuilt(results)` (bytes, its encoding kept)."""

    def __init__(self, content: bytes, name: str, lang: str, *, target: str | None = None):
        self.content, self.name = content, name
        self.tree = parse_xml(content, name)
        root = self.tree.getroot()
        if root.tag != "resources":
            raise DocumentError(f"{name}: an .xml file nmt translates is an Android resource file (<resources>)")
        self.quantities = target_quantities(target)
        self.strings: list[AndroidString] = []
        self.plurals: list[tuple[etree._Element, dict[str, AndroidString]]] = []
        for element in root:
            if not isinstance(element.tag, str) or element.get("translatable") == "false":
                continue
            if element.tag == "string" and not _REFERENCE.fullmatch((element.text or "").strip()):
                self.strings.append(AndroidString(element, lang))
            elif element.tag == "string-array":
                self.strings += [AndroidString(item, lang) for item in element if item.tag == "item"]
            elif element.tag == "plurals":
                items = {item.get("quantity"): AndroidString(item, lang) for item in element if item.tag == "item"}
                self.plurals.append((element, items))
        self.texts = [s.text for s in self.strings] + [s.text for _, items in self.plurals for s in items.values()]
        self.sentences = [s for text in self.texts for s in text.sentences]

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the file has it, its placeholders in it (one per sentence): what a
        reviewer is shown (nmt.quality_report)."""
        return [w for text in self.texts for w in text.sentences_as_written]

    def rebuilt(self, results: Results) -> bytes:
        check_results(results, self.sentences)
        answers = iter(results)
        for string in self.strings:
            escape = None if string.cdata else xml_escape
            string.write(string.text.rebuilt([next(answers) for _ in string.text.sentences], escape=escape))
        for element, items in self.plurals:
            new = {
                q: s.text.rebuilt([next(answers) for _ in s.text.sentences], escape=xml_escape)
                for q, s in items.items()
            }
            self._write_plurals(element, items, new)
        return written_xml(self.tree, self.content)

    def _write_plurals(self, element: etree._Element, items: dict[str, AndroidString], new: dict[str, str]) -> None:
        """The target language's quantities, each from the source's same quantity, else from its
        "other"; without a known target, the source's quantities."""
        if self.quantities is None or not items:
            for quantity, string in items.items():
                string.write(new[quantity])
            return
        fallback = "other" if "other" in items else next(iter(items))
        between = element.text  # the whitespace before each item
        last_tail = element[-1].tail
        for item in [c for c in element if c.tag == "item"]:
            element.remove(item)
        for k, quantity in enumerate(self.quantities):
            source = quantity if quantity in items else fallback
            item = etree.SubElement(element, "item", quantity=quantity)
            item.tail = between if k < len(self.quantities) - 1 else last_tail
            items[source].write(new[source], into=item)
