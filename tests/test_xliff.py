"""XLIFF 1.2 and 2.x translated as CAT tools expect (nmt.formats.xliff), checked by the OASIS schemas."""

from __future__ import annotations

from pathlib import Path

import pytest
from lxml import etree
from scripted import reversed_words, upper

from nmt.formats import DocumentError
from nmt.formats.xliff import XLIFF_2, XLIFF_12, XliffDocument

SCHEMAS = Path(__file__).parent / "data" / "xliff"

# The inputs are valid XLIFF (test_the_inputs_are_valid_xliff) with one unit of each kind.
XLIFF_12_FILE = (SCHEMAS / "demo-1.2.xlf").read_text(encoding="utf-8")
XLIFF_2_FILE = (SCHEMAS / "demo-2.0.xlf").read_text(encoding="utf-8")
CODES_12 = {f"{{{XLIFF_12}}}{tag}" for tag in ("x", "bx", "ex", "ph", "bpt", "ept", "it")}
CODES_2 = {f"{{{XLIFF_2}}}{tag}" for tag in ("ph", "sc", "ec", "cp", "sm", "em")}


def translated(text: str | bytes, translate=upper, target: str | None = "de", **options) -> bytes:
    content = text.encode() if isinstance(text, str) else text
    document = XliffDocument(content, "demo.xlf", "en", target=target, **options)
    return document.rebuilt(translate(document.sentences) if document.sentences else [])


class LocalSchemas(etree.Resolver):
    """xml.xsd from tests/data/xliff, wherever an XLIFF schema says it is: never the network."""

    def resolve(self, url, pubid, context):
        if url.endswith("/xml.xsd"):
            return self.resolve_filename(str(SCHEMAS / "xml.xsd"), context)
        return None


def schema(name: str) -> etree.XMLSchema:
    parser = etree.XMLParser(no_network=True)
    parser.resolvers.add(LocalSchemas())
    return etree.XMLSchema(etree.parse(str(SCHEMAS / name), parser))


def assert_valid(content: bytes, ns: str) -> None:
    checker = schema("xliff-core-1.2-strict.xsd" if ns == XLIFF_12 else "xliff_core_2.0.xsd")
    tree = etree.fromstring(content, etree.XMLParser(resolve_entities=False, no_network=True))
    assert checker.validate(tree), checker.error_log


def units(content: bytes) -> dict[str, etree._Element]:
    """Each unit (1.2's trans-unit, 2.x's unit) by id."""
    root = etree.fromstring(content)
    found = root.iter(f"{{{XLIFF_12}}}trans-unit", f"{{{XLIFF_2}}}unit")
    return {unit.get("id"): unit for unit in found}


def child(element: etree._Element, ns: str, *path: str) -> etree._Element | None:
    return element.find("/".join(f"{{{ns}}}{local}" for local in path))


def inline(element: etree._Element, codes: set[str]) -> list[tuple]:
    """The inline elements of a source or target, in order: each one's tag and attributes, and a
    code's whole content (its native code is never translated)."""
    return [
        (e.tag, dict(e.attrib), etree.tostring(e, with_tail=False) if e.tag in codes else None)
        for e in element.iterdescendants()
    ]


def inner(element: etree._Element) -> str:
    """An element's content as written, without its own tag."""
    text = etree.tostring(element, encoding="unicode", with_tail=False)
    return text[text.index(">") + 1 : text.rindex("</")] if "</" in text else ""


@pytest.mark.parametrize(("text", "ns"), [(XLIFF_12_FILE, XLIFF_12), (XLIFF_2_FILE, XLIFF_2)])
def test_the_inputs_are_valid_xliff(text, ns):
    assert_valid(text.encode(), ns)


def test_xliff_12_each_source_goes_into_its_target_with_its_codes_and_state():
    out = translated(XLIFF_12_FILE)
    save = child(units(out)["save"], XLIFF_12, "target")
    assert inner(save) == 'CLICK <g id="1" ctype="bold">SAVE NOW</g> TO KEEP <x id="2" ctype="lb"/>YOUR %s WORK.'
    assert save.get("state") == "needs-review-translation" and save.get("state-qualifier") == "mt-suggestion"
    # the new target comes right after the source, before the note, indented as its siblings are
    assert b'</source>\n        <target state="needs-review-translation"' in out
    assert b'WORK.</target>\n        <note from="dev">Shown after editing.</note>' in out
    enter = units(out)["enter"]
    target = child(enter, XLIFF_12, "target")
    assert inner(target) == (
        'PRESS <bpt id="1">&lt;b&gt;</bpt>ENTER<ept id="1">&lt;/b&gt;</ept> AND '
        '<ph id="2">&lt;img src="a.png"/&gt;</ph> THEN WAIT {0} SECONDS.'
    )
    assert target.get("{http://www.w3.org/XML/1998/namespace}space") == "preserve"
    assert enter.get("approved") == "no"  # the approval was for another target
    # the prolog as the file wrote it: its comment and the line breaks around it (xml_text.written_xml)
    assert out.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n<!-- Exported by a demo tool. -->\n<xliff ')
    assert out.endswith(b"</xliff>\n")


def test_xliff_12_segments_are_translated_each_into_its_own_mrk():
    steps = units(translated(XLIFF_12_FILE))["steps"]
    target = child(steps, XLIFF_12, "target")
    assert inner(target) == (
        '<mrk mtype="seg" mid="1">OPEN THE FILE.</mrk> <mrk mtype="seg" mid="2">SAVE IT WITH <bx id="3"/>CARE'
        '<ex id="3"/>.</mrk> <mrk mtype="seg" mid="3">CLOSE <mrk mtype="protected">Demo</mrk> NOW.</mrk>'
    )
    assert [e.tag.split("}")[1] for e in steps] == ["source", "seg-source", "target", "note"]


def test_xliff_12_untranslatable_units_and_existing_targets_are_left_as_they_were():
    before, after = units(XLIFF_12_FILE.encode()), units(translated(XLIFF_12_FILE))
    for unit in ("name", "done", "licence"):
        assert etree.tostring(after[unit]) == etree.tostring(before[unit])
    assert etree.fromstring(translated(XLIFF_12_FILE)).find(f".//{{{XLIFF_12}}}file").get("target-language") == "de"
    kept = etree.fromstring(translated(XLIFF_12_FILE, target=None)).find(f".//{{{XLIFF_12}}}file")
    assert kept.get("target-language") == "fr"  # no target named: the file's own is kept


def test_retranslate_replaces_existing_targets_but_not_untranslatable_units():
    for text, ns in ((XLIFF_12_FILE, XLIFF_12), (XLIFF_2_FILE, XLIFF_2)):
        after = units(translated(text, retranslate=True))
        done = child(after["done"], ns, "target") if ns == XLIFF_12 else child(after["done"], ns, "segment", "target")
        assert done.text == "ALREADY DONE"
        assert child(after["name"], ns, "target") is None and child(after["name"], ns, "segment", "target") is None


def test_xliff_2_each_segment_goes_into_its_target_with_its_codes_and_state():
    out = translated(XLIFF_2_FILE)
    save = units(out)["save"]
    first, second = save.findall(f"{{{XLIFF_2}}}segment")
    assert inner(child(first, XLIFF_2, "target")) == (
        'CLICK <pc id="1" dataRefStart="d1" dataRefEnd="d2">SAVE NOW</pc> TO KEEP<ph id="2" dataRef="d3"/> '
        "YOUR {count} FILES."
    )
    assert inner(child(second, XLIFF_2, "target")) == (
        'THEN <sc id="3"/>CLOSE<ec startRef="3"/> THE <mrk id="m1" translate="no">Demo</mrk> '
        'WINDOW<cp hex="001B"/> NOW.'
    )
    assert child(second, XLIFF_2, "target").get("{http://www.w3.org/XML/1998/namespace}space") == "preserve"
    assert (first.get("state"), first.get("subState")) == ("translated", "nmt:machine")
    assert child(save, XLIFF_2, "ignorable", "target") is None  # whitespace between segments, never translated
    term = child(units(out)["term"], XLIFF_2, "segment", "target")  # an empty target is filled where it is
    assert inner(term) == 'THE <mrk id="m2" type="term">QUICK START</mrk> GUIDE.'
    assert etree.fromstring(out).get("trgLang") == "de"
    version_21 = translated(XLIFF_2_FILE.replace('version="2.0"', 'version="2.1"'))  # 2.1 keeps 2.0's namespace
    assert etree.fromstring(version_21).get("trgLang") == "de" and b"CLICK" in version_21
    before = units(XLIFF_2_FILE.encode())
    for unit in ("name", "done"):
        assert etree.tostring(units(out)[unit]) == etree.tostring(before[unit])


@pytest.mark.parametrize("translate", [upper, reversed_words])
@pytest.mark.parametrize(
    ("text", "ns", "codes"), [(XLIFF_12_FILE, XLIFF_12, CODES_12), (XLIFF_2_FILE, XLIFF_2, CODES_2)]
)
def test_every_target_keeps_its_sources_codes_in_order_and_the_file_stays_valid(text, ns, codes, translate):
    out = translated(text, translate)
    assert_valid(out, ns)
    pairs = []  # (what was translated, its new target)
    for unit in etree.fromstring(out).iter(f"{{{XLIFF_12}}}trans-unit"):
        target = child(unit, ns, "target")
        if target is not None and target.get("state") == "needs-review-translation":
            segmented = child(unit, ns, "seg-source")
            pairs.append((child(unit, ns, "source") if segmented is None else segmented, target))
    for segment in etree.fromstring(out).iter(f"{{{XLIFF_2}}}segment"):
        if segment.get("subState") == "nmt:machine":
            pairs.append((child(segment, ns, "source"), child(segment, ns, "target")))
    assert len(pairs) == (4 if ns == XLIFF_12 else 3)
    for source, target in pairs:
        assert inline(target, codes) == inline(source, codes), etree.tostring(source.getparent())


def test_the_model_reads_text_never_codes():
    document = XliffDocument(XLIFF_12_FILE.encode(), "demo.xlf", "en")
    assert document.sentences[0] == "Click Save now to keep your  work."
    assert not any(c in s for s in document.sentences for c in "<>%{")


def test_a_file_in_another_encoding_is_written_in_it():
    latin = XLIFF_12_FILE.replace('encoding="UTF-8"', 'encoding="ISO-8859-1"').encode("latin-1")
    out = translated(latin)
    assert out.startswith(b"<?xml version='1.0' encoding='ISO-8859-1'?>")
    assert "Déjà fait".encode("latin-1") in out
    assert_valid(out, XLIFF_12)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;">'
            b'<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;">]><xliff xmlns="' + XLIFF_12.encode() + b'" version="1.2">'
            b'<file original="a" source-language="en" datatype="plaintext"><body><trans-unit id="1">'
            b"<source>&lol3;</source></trans-unit></body></file></xliff>",
            r"evil\.xlf: declares a DTD of its own",
        ),
        (
            b'<?xml version="1.0"?><!DOCTYPE xliff [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
            b'<xliff xmlns="' + XLIFF_2.encode() + b'" version="2.0" srcLang="en"><file id="f"><unit id="u">'
            b"<segment><source>&xxe;</source></segment></unit></file></xliff>",
            r"evil\.xlf: declares a DTD of its own",
        ),
        (b"<xliff version='1.2'", r"evil\.xlf: not well-formed XML"),
        # found by fuzzing (fuzz/fuzz_document.py xlf): libxml2's message broke the line
        (
            b"<xliff>\x00</xliff>",
            r"^evil\.xlf: not well-formed XML \(Invalid character: Char 0x0 out of allowed range, ",
        ),
        (
            b'<xliff xmlns="urn:oasis:names:tc:xliff:document:1.1" version="1.1"/>',
            r"evil\.xlf: <xliff> in namespace urn:oasis:names:tc:xliff:document:1\.1, version 1\.1: nmt reads "
            r"XLIFF 1\.2",
        ),
        (b'<xliff version="1.2"/>', r"evil\.xlf: <xliff> in no namespace, version 1\.2"),
        (b'<xliff xmlns="' + XLIFF_2.encode() + b'" version="3.0"/>', r"namespace .*2\.0, version 3\.0"),
        (b"<html><body>Hello</body></html>", r"evil\.xlf: <html> in no namespace, version \(none\)"),
    ],
)
def test_a_hostile_or_foreign_file_is_one_error_naming_it(content, message):
    with pytest.raises(DocumentError, match=message) as raised:
        XliffDocument(content, "evil.xlf", "en", target="de")
    assert "\n" not in str(raised.value)


def test_a_huge_source_is_refused_for_its_size():
    huge = XLIFF_2_FILE.replace("quick start", "word " * 25_000).encode()
    with pytest.raises(DocumentError, match=r"demo\.xlf:\d+: a source of 125,\d{3} characters") as raised:
        XliffDocument(huge, "demo.xlf", "en")
    assert raised.value.too_large


def test_targets_a_tool_seeded_empty_or_new_are_filled_and_the_files_regional_tag_kept():
    seeded = b"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file original="a.html" source-language="de-DE" target-language="en-US" datatype="html"><body>
    <trans-unit id="1">
      <source>Zwei Hunde. Ein Kind.</source>
      <seg-source><mrk mid="0" mtype="seg">Zwei Hunde.</mrk> <mrk mid="1" mtype="seg">Ein Kind.</mrk></seg-source>
      <target xml:lang="en-US"><mrk mid="0" mtype="seg"></mrk> <mrk mid="1" mtype="seg"></mrk></target>
    </trans-unit>
    <trans-unit id="2"><source>Ein Buch.</source><target state="new">Ein Buch.</target></trans-unit>
    <trans-unit id="3"><source>Ein Hut.</source><target state="translated">A hat.</target></trans-unit>
  </body></file>
</xliff>"""
    out = etree.fromstring(translated(seeded, target="en"))
    ns = {"x": "urn:oasis:names:tc:xliff:document:1.2"}
    assert [m.text for m in out.findall(".//x:trans-unit[@id='1']/x:target/x:mrk", ns)] == ["ZWEI HUNDE.", "EIN KIND."]
    assert out.find(".//x:trans-unit[@id='2']/x:target", ns).text == "EIN BUCH."
    assert out.find(".//x:trans-unit[@id='3']/x:target", ns).text == "A hat."  # a translation: kept
    assert out.find("x:file", ns).get("target-language") == "en-US"
