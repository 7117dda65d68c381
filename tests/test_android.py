"""Android string resources translated (nmt.formats.android): strings, plurals, arrays, escapes, codes."""

from __future__ import annotations

import re

import pytest
from lxml import etree
from scripted import reversed_words, upper

from nmt.formats import DocumentError, read_document, translate_document
from nmt.placeholders import codes_of

STRINGS = b"""<?xml version="1.0" encoding="utf-8"?>
<resources xmlns:xliff="urn:oasis:names:tc:xliff:document:1.2">
    <!-- shown on the start screen -->
    <string name="app_name" translatable="false">My App</string>
    <string name="welcome">Welcome to <b>%1$s</b>, don\\'t wait!</string>
    <string name="count">You have <xliff:g id="count" example="3">%d</xliff:g> new messages &amp; more</string>
    <plurals name="files">
        <item quantity="one">%d file</item>
        <item quantity="other">%d files</item>
    </plurals>
    <string-array name="planets">
        <item>Mercury</item>
        <item>Venus</item>
    </string-array>
</resources>
"""


def with_quotes(sentences):
    """A translation that writes quotes, an ampersand and a made-up tag, as a model might."""
    return [(f"{s.upper()} & 'x' <y>", [(i, i) for i in range(len(s.split()))]) for s in sentences]


def strings_of(content: bytes) -> dict[str, etree._Element]:
    root = etree.fromstring(content)
    return {e.get("name"): e for e in root if isinstance(e.tag, str)}


def aapt_would_accept(element: etree._Element) -> bool:
    """aapt's rule: outside double quotes, an apostrophe or quote is escaped with a backslash."""
    text = "".join(element.itertext())
    if len(text) >= 2 and text.startswith('"') and text.endswith('"'):
        return True
    return re.search(r"(?<!\\)['\"]", text) is None


@pytest.mark.parametrize("translate", [upper, reversed_words, with_quotes])
def test_strings_plurals_and_arrays_keep_their_codes_and_escapes(translate):
    out = translate_document(STRINGS, "strings.xml", translate, lang="en", target="de")
    strings = strings_of(out)
    source = strings_of(STRINGS)
    assert list(strings) == list(source)
    assert etree.tostring(strings["app_name"]) == etree.tostring(source["app_name"])  # translatable="false"
    for name in ("welcome", "count"):
        inner = etree.tostring(strings[name], encoding=str)
        assert codes_of(inner.replace("\\'", "'")).count("%1$s" if name == "welcome" else "%d") == 1
    g = strings["count"].find("{urn:oasis:names:tc:xliff:document:1.2}g")
    assert (g.get("id"), g.get("example"), g.text) == ("count", "3", "%d")  # kept whole
    assert strings["welcome"].find("b").text == "%1$s"
    for element in strings["welcome"], strings["count"], *strings["planets"], *strings["files"]:
        assert aapt_would_accept(element), etree.tostring(element)
    assert "<!-- shown on the start screen -->" in out.decode()

    if translate is upper:
        assert "".join(strings["welcome"].itertext()) == "WELCOME TO %1$s, DON\\'T WAIT!"
        assert [i.text for i in strings["planets"]] == ["MERCURY", "VENUS"]


def test_html_in_cdata_keeps_its_tags_and_its_cdata_and_a_reference_is_no_text():
    source = b'<resources><string name="link"><![CDATA[Klicken Sie <a href="https://x.org">hier</a>.]]></string>'
    source += b'<string name="ref">@string/app_name</string></resources>'
    out = translate_document(source, "strings.xml", upper, lang="de")
    assert b'<![CDATA[KLICKEN SIE <a href="https://x.org">HIER</a>.]]>' in out
    assert b'<string name="ref">@string/app_name</string>' in out


def test_the_files_byte_order_mark_prolog_and_line_breaks_are_kept():
    source = b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?>\n<!-- App -->\n<resources>\n'
    source += b'  <string name="a">Hello</string>\n</resources>\n<!-- end -->\n'
    out = translate_document(source, "strings.xml", upper, lang="en")
    assert out == source.replace(b">Hello<", b">HELLO<")


@pytest.mark.parametrize(
    ("target", "quantities"),
    [("cs", ["one", "few", "many", "other"]), ("ja", ["other"]), ("de", ["one", "other"]), (None, ["one", "other"])],
)
def test_plurals_get_the_quantities_of_the_target_language(target, quantities):
    files = strings_of(translate_document(STRINGS, "strings.xml", upper, lang="en", target=target))["files"]
    assert [i.get("quantity") for i in files] == quantities
    assert {i.get("quantity"): i.text for i in files}.get("one", "%d FILE") == "%d FILE"
    assert all(i.text == "%d FILES" for i in files if i.get("quantity") != "one")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"<html><body>x</body></html>", r"strings\.xml: an \.xml file nmt translates is an Android resource file"),
        (b"<resources><string>a</resources>", r"strings\.xml: not well-formed XML"),
        (
            b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
            b"<resources><string name='x'>&b;</string></resources>",
            r"strings\.xml: declares a DTD of its own",
        ),
        (
            b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
            b"<resources><string name='x'>&e;</string></resources>",
            r"strings\.xml: declares a DTD of its own",
        ),
        # found by fuzzing (fuzz/fuzz_document.py xml): libxml2's message broke the line
        (b"<resources>\x00</resources>", r"^strings\.xml: not well-formed XML \(Invalid character: Char 0x0 out of"),
    ],
)
def test_a_bad_or_hostile_file_is_one_error_naming_it(content, message):
    with pytest.raises(DocumentError, match=message) as raised:
        read_document(content, "strings.xml", "en")
    assert "\n" not in str(raised.value)


def test_a_comment_or_instruction_inside_a_string_is_kept_where_it_was():
    """Found by fuzzing (fuzz/fuzz_document.py xml): a comment kept whole was copied through a string,
    and a bare comment is no XML document (XMLSyntaxError while writing the translation)."""
    for code in ("<!-- c -->", "<?pi x?>"):
        content = f'<resources><string name="a">Hallo {code} Welt</string></resources>'.encode()
        assert translate_document(content, "strings.xml", upper, lang="de") == content.replace(
            b"Hallo", b"HALLO"
        ).replace(b"Welt", b"WELT")
