"""Harness: HTML placement, nmt.markup.translate_html (HtmlPage).

Contract: for any page (the input as UTF-8, bytes that are not replaced), translate_html with a
scripted translation never raises, and its output parses (Beautiful Soup's html.parser, as nmt reads
pages) to the same tags, each once, in the same order, with the same attributes, as the page written
back untranslated: only text changed. That untranslated output has the input's tags too, as the
same parser reads both. A page of any markup is read; the one refusal is a string holding a lone
surrogate (no text: JSON can carry one), a ValueError that names it ("lone surrogate").
"""

from __future__ import annotations

import atheris

from contract import LANG, Broken, as_text, fuzz, instrumented, translation_for

with atheris.instrument_imports(include=instrumented("nmt", "bs4")):
    from bs4 import Tag

    from nmt.markup import parsed, translate_html


def tags(html: str) -> list[tuple[str, tuple[tuple[str, str], ...], int]]:
    """The page's tags in document order, each with its attributes and how many tags it holds (which
    fixes the tree), without any text; walked without recursion (a page may nest thousands deep)."""
    soup = parsed(html)  # as nmt reads pages, so a page html.parser alone rejects is read too
    return [
        (
            tag.name,
            tuple((k, " ".join(v) if isinstance(v, list) else str(v)) for k, v in tag.attrs.items()),
            sum(isinstance(child, Tag) for child in tag.children),
        )
        for tag in soup.find_all(True)
    ]


def same(sentences: list[str]) -> list[tuple[str, None]]:
    """No translation: each sentence as it is, placed without an alignment."""
    return [(s, None) for s in sentences]


def check(data: bytes) -> bool:
    html = as_text(data)
    try:
        untranslated = translate_html(html, same, lang=LANG)
    except ValueError as err:
        if "lone surrogate" not in str(err) or not any(0xD800 <= ord(c) < 0xE000 for c in html):
            raise
        return True
    translated = translate_html(html, translation_for(data), lang=LANG)
    before, kept, after = tags(html), tags(untranslated), tags(translated)
    if kept != before:
        raise Broken(f"written back untranslated, the page's tags changed: {html!r} -> {untranslated!r}")
    if after != kept:
        raise Broken(f"translating changed the page's tags, not only its text: {html!r} -> {translated!r}")
    return False


if __name__ == "__main__":
    fuzz(check)
