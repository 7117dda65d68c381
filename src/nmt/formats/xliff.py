"""XLIFF 1.2 and 2.x (.xlf, .xliff): each unit's source translated into its target, inline codes kept.

    <trans-unit id="1">                                  <trans-unit id="1">
      <source>Click <g id="1">Save</g>.</source>   ->      <source>Click <g id="1">Save</g>.</source>
    </trans-unit>                                          <target state="needs-review-translation"
                                                               state-qualifier="mt-suggestion">Klicken Sie
                                                               auf <g id="1">Speichern</g>.</target>

- XLIFF 1.2 (urn:oasis:names:tc:xliff:document:1.2): each <trans-unit>'s <source> into its <target>,
  created after the source where there is none. A unit whose <seg-source> is cut into
  <mrk mtype="seg" mid="..."> segments gets a target of the same segments, each translated on its own.
  The target is marked state="needs-review-translation" (1.2's value for a translation that a
  translator has to look at) with state-qualifier="mt-suggestion"; each <file> gets the
  target-language.
- XLIFF 2.0 and 2.1 (urn:oasis:names:tc:xliff:document:2.0): each <segment>'s <source> into its
  <target>; <ignorable> is left as it is; the root's trgLang is set to the target.
- Units (or groups, files) marked translate="no" are left alone, and so is a target that already has
  text, unless `retranslate`.
- Inline codes (1.2's <g>, <x/>, <bx/>, <ex/>, <ph>, <bpt>, <ept>, <it>, <mrk>; 2.0's <pc>, <ph/>,
  <sc/>, <ec/>, <mrk>, <sm/>, <em/>, <cp/>) come out in the target exactly once each, in the source's
  order, with their ids and attributes: the model reads only the text, and its words go back into
  <g>/<pc>/<mrk> by word alignment, as a web page's text goes back around its tags
  (nmt.placeholders). The content of <ph>, <bpt>, <ept> and <it> is the original format's native
  code, not text, and is kept whole, as is a <mrk> that must not change (1.2's mtype="protected",
  2.0's translate="no"). Placeholders and markup written into the text itself (%s, {0}, an escaped
  <b>) are kept the same way.

The XML is parsed safely (formats.xml_text: no entity expansion, no DTD, no network), and everything
but the targets, their states and the target language is written as it was.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from itertools import chain

from lxml import etree

from ..placeholders import MaskedText
from .errors import DocumentError
from .text_files import Results, check_results
from .xml_text import XML_SPACE, parse_xml, written_xml

XLIFF_12 = "urn:oasis:names:tc:xliff:document:1.2"
XLIFF_2 = "urn:oasis:names:tc:xliff:document:2.0"  # XLIFF 2.1 keeps 2.0's namespace (only `version` says 2.1)
# A unit's source is a user interface string or a paragraph; one larger than this is no string but an
# attack or a mistake (sentence splitting alone would take minutes).
MAX_SOURCE_CHARS = 100_000
# Inline elements whose content is text to translate; every other inline element (and a comment or
# processing instruction) is code, kept whole.
TEXT_CONTAINERS = {XLIFF_12: ("g", "mrk"), XLIFF_2: ("pc", "mrk")}


class XliffDocument:
    """An XLIFF 1.2 or 2.x file read for translation: `sentences`, then `rebuilt(results)` (bytes in
    the file's encoding)."""

    def __init__(self, content: bytes, name: str, lang: str, *, target: str | None = None, retranslate: bool = False):
        self.name, self.content, self.target = name, content, target
        self.tree = parse_xml(content, name)
        root = self.tree.getroot()
        self.ns = _namespace(root, name)
        self.plans: list[_Plan] = []
        units = self._units_12(root, retranslate) if self.ns == XLIFF_12 else self._units_2(root, retranslate)
        for sources, write in units:
            self.plans.append(_Plan([_Source(s, lang, self.ns, name) for s in sources], write))
        self.sentences = [s for plan in self.plans for source in plan.sources for s in source.masked.sentences]

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the file has it, its placeholders in it (one per sentence): what a
        reviewer is shown (nmt.quality_report)."""
        return [w for plan in self.plans for source in plan.sources for w in source.masked.sentences_as_written]

    def rebuilt(self, results: Results) -> bytes:
        """The file with each unit's target written (translations placed around the inline codes),
        its state set, and the target language named."""
        check_results(results, self.sentences)
        answers = iter(results)
        for plan in self.plans:
            texts = [s.masked.rebuilt([next(answers) for _ in s.masked.sentences]) for s in plan.sources]
            plan.write([partial(source.fill, text=text) for source, text in zip(plan.sources, texts, strict=True)])
        if self.target:
            root = self.tree.getroot()
            if self.ns == XLIFF_12:
                for file in root.iter(f"{{{XLIFF_12}}}file"):
                    file.set("target-language", _more_specific(file.get("target-language"), self.target))
            else:
                root.set("trgLang", _more_specific(root.get("trgLang"), self.target))
        return written_xml(self.tree, self.content)

    def _units_12(self, root: etree._Element, retranslate: bool) -> Iterator[tuple[list, Callable]]:
        """Each 1.2 unit to translate: the elements whose content is translated (the source, or the
        segments of its seg-source), and how its target is written."""
        q = partial(_qualified, XLIFF_12)
        for unit in root.iter(q("trans-unit")):
            source, target = unit.find(q("source")), unit.find(q("target"))
            if not _translatable(unit) or source is None or not _has_content(source):
                continue
            if target is not None and _translated(target) and not retranslate:
                continue
            seg_source = unit.find(q("seg-source"))
            segments = _segments(seg_source) if seg_source is not None else []
            if segments:
                yield segments, partial(_write_segmented_12, unit, source, seg_source, target)
            else:
                yield [source], partial(_write_12, unit, source, seg_source, target)

    def _units_2(self, root: etree._Element, retranslate: bool) -> Iterator[tuple[list, Callable]]:
        """Each 2.x segment to translate: its source, and how its target is written."""
        q = partial(_qualified, XLIFF_2)
        for unit in root.iter(q("unit")):
            if not _translatable(unit):
                continue
            for segment in unit.iterchildren(q("segment")):
                source, target = segment.find(q("source")), segment.find(q("target"))
                if source is None or not _has_content(source):
                    continue
                if target is not None and _translated(target, segment.get("state")) and not retranslate:
                    continue
                yield [source], partial(_write_2, segment, source, target)


@dataclass
class _Plan:
    """One unit's (or 2.x segment's) texts to translate and what writes its target: `write` takes one
    filler per source, each filling an element with that source's translation."""

    sources: list[_Source]
    write: Callable[[list[Callable[[etree._Element], None]]], None]


class _Source:
    """The content of a source (or segment) as one string for MaskedText: its text as it is, each
    inline element a tag of its own (`<nmt-0>`...`</nmt-0>` around text to translate, `<nmt-1/>` for
    code), so the codes are masked, placed by alignment and come back once each, in order."""

    def __init__(self, element: etree._Element, lang: str, ns: str, name: str):
        self.containers = {_qualified(ns, local) for local in TEXT_CONTAINERS[ns]}
        # The tags' name is one that the text itself does not hold, so no text is read as a tag.
        everything = "".join(element.itertext()).lower()
        self.prefix = "nmt-"
        while self.prefix in everything:
            self.prefix = "x" + self.prefix
        self.elements: list[etree._Element] = []
        text = self._flat(element)
        if len(text) > MAX_SOURCE_CHARS:
            raise DocumentError(
                f"{name}:{element.sourceline}: a source of {len(text):,} characters; nmt translates "
                f"sources of up to {MAX_SOURCE_CHARS:,}",
                too_large=True,
            )
        self.masked = MaskedText(text, lang)
        self.token = re.compile(rf"<(/?){re.escape(self.prefix)}(\d+)(/?)>")

    def _flat(self, element: etree._Element) -> str:
        out = [element.text or ""]
        for child in element:
            k = len(self.elements)
            self.elements.append(child)
            if self._is_text(child):
                out += [f"<{self.prefix}{k}>", self._flat(child), f"</{self.prefix}{k}>"]
            else:
                out.append(f"<{self.prefix}{k}/>")
            out.append(child.tail or "")
        return "".join(out)

    def _is_text(self, element: etree._Element) -> bool:
        if element.tag not in self.containers:
            return False
        return element.get("mtype") != "protected" and element.get("translate") != "no"

    def fill(self, destination: etree._Element, text: str) -> None:
        """`destination`'s content replaced by `text` (this source's rebuilt string): its text, and a
        copy of each inline element where its tag is."""
        destination.text = None
        for child in list(destination):
            destination.remove(child)
        open_elements, at = [destination], 0
        for m in self.token.finditer(text):
            _append_text(open_elements[-1], text[at : m.start()])
            at = m.end()
            closing, original, empty = m.group(1), self.elements[int(m.group(2))], m.group(3)
            if closing:
                open_elements.pop()
            elif empty:
                code = copy.deepcopy(original)
                code.tail = None
                open_elements[-1].append(code)
            else:  # the element alone: its content is the translation that follows
                open_elements.append(etree.SubElement(open_elements[-1], original.tag, dict(original.attrib)))
        _append_text(open_elements[-1], text[at:])


def _write_12(unit, source, seg_source, target, fillers) -> None:
    """A 1.2 unit's target: the source's translation."""
    if target is None:
        target = _new_after(seg_source if seg_source is not None else source, _qualified(XLIFF_12, "target"))
    fillers[0](target)
    _mark_12(unit, source, target)


def _write_segmented_12(unit, source, seg_source, target, fillers) -> None:
    """A segmented 1.2 unit's target: the seg-source as it is, each <mrk mtype="seg"> translated."""
    if target is None:
        target = _new_after(seg_source, _qualified(XLIFF_12, "target"))
    for child in list(target):
        target.remove(child)
    written = copy.deepcopy(seg_source)
    target.text = written.text
    target.extend(list(written))
    for fill, segment in zip(fillers, _segments(target), strict=True):
        fill(segment)
    _mark_12(unit, source, target)


def _mark_12(unit: etree._Element, source: etree._Element, target: etree._Element) -> None:
    target.set("state", "needs-review-translation")
    target.set("state-qualifier", "mt-suggestion")
    _keep_space(source, target)
    if unit.get("approved") == "yes":  # a translator approved the target that is now replaced
        unit.set("approved", "no")


def _write_2(segment, source, target, fillers) -> None:
    """A 2.x segment's target: the source's translation."""
    if target is None:
        target = _new_after(source, _qualified(XLIFF_2, "target"))
    fillers[0](target)
    _keep_space(source, target)
    # 2.0's segment states are initial, translated, reviewed and final: a machine translation is
    # "translated" (it has no needs-review value); subState, a value of the writer's own, says it
    # came from nmt and that nobody has reviewed it.
    segment.set("state", "translated")
    segment.set("subState", "nmt:machine")


def _namespace(root: etree._Element, name: str) -> str:
    """The XLIFF namespace of the file (1.2's or 2.0's); DocumentError naming what the file is otherwise."""
    qname = etree.QName(root)
    version = root.get("version")
    if qname.localname == "xliff":
        if qname.namespace == XLIFF_12:
            return XLIFF_12
        if qname.namespace == XLIFF_2 and (version or "").startswith("2."):
            return XLIFF_2
    where = f"namespace {qname.namespace}" if qname.namespace else "no namespace"
    raise DocumentError(
        f"{name}: <{qname.localname}> in {where}, version {version or '(none)'}: nmt reads XLIFF 1.2 "
        f"({XLIFF_12}) and 2.x ({XLIFF_2})"
    )


def _qualified(ns: str, local: str) -> str:
    return f"{{{ns}}}{local}"


def _translatable(unit: etree._Element) -> bool:
    """False where the unit, or the nearest group or file around it that says, has translate="no"."""
    for element in chain([unit], unit.iterancestors()):
        value = element.get("translate")
        if value is not None:
            return value != "no"
    return True


def _has_content(element: etree._Element) -> bool:
    return bool((element.text or "").strip()) or len(element) > 0


# States that say a target holds no translation yet (a tool's placeholder or a copy of the source).
UNTRANSLATED_STATES = {"new", "needs-translation", "initial"}


def _translated(target: etree._Element, state: str | None = None) -> bool:
    """Whether a target holds a translation to keep: text of its own (empty segment markers, as
    Okapi and Trados pre-seed them, are none) in a state that is not one of UNTRANSLATED_STATES."""
    if (state or target.get("state")) in UNTRANSLATED_STATES:
        return False
    return any(text.strip() for text in target.itertext())


def _more_specific(written: str | None, target: str) -> str:
    """The file's own tag where it names the target's language more closely ("en-US" for "en")."""
    if written and written.lower().startswith(target.lower() + "-"):
        return written
    return target


def _segments(seg_source: etree._Element) -> list[etree._Element]:
    return [m for m in seg_source.iter(_qualified(XLIFF_12, "mrk")) if m.get("mtype") == "seg"]


def _new_after(anchor: etree._Element, tag: str) -> etree._Element:
    """A new element right after `anchor`, indented as its siblings are."""
    element = anchor.makeelement(tag, {})
    before = anchor.getprevious()
    indent = before.tail if before is not None else anchor.getparent().text
    anchor.addnext(element)
    element.tail = anchor.tail
    # The last child's tail indents the parent's end tag; the new last child takes that one over.
    if element.getnext() is None and indent is not None and not indent.strip():
        anchor.tail = indent
    return element


def _keep_space(source: etree._Element, target: etree._Element) -> None:
    if source.get(XML_SPACE) is not None:  # whitespace a source keeps, its translation keeps too
        target.set(XML_SPACE, source.get(XML_SPACE))


def _append_text(parent: etree._Element, text: str) -> None:
    if not text:
        return
    if len(parent):
        parent[-1].tail = (parent[-1].tail or "") + text
    else:
        parent.text = (parent.text or "") + text
