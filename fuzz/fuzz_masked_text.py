"""Harness: nmt.placeholders.MaskedText, a software string read with its placeholders kept.

Contract: for any string (the input as UTF-8; lone surrogates included), MaskedText reads it and
`rebuilt` with a scripted translation never raises, and every placeholder (`codes`) is in the rebuilt
string as written, in the source's order. Where the text between the placeholders holds none of the
characters placeholders are made of, the rebuilt string read again has exactly the source's
placeholders, the same list in order: none invented (nmt.placeholders' promise). There is no refusal.

Not held (a known gap, not a crash here): text that holds such characters ("%", "{", "}", "$", "<",
"&", "\\", "[", "#") can meet a placeholder when the words move, and read as another one:
"% of{count}" translated with its words reversed ends "...%{count}", a Rails placeholder.
"""

from __future__ import annotations

import atheris

with atheris.instrument_imports(include=["nmt"]):
    from nmt.placeholders import MaskedText, codes_of

from contract import LANG, Broken, as_text, fuzz, translation_for  # noqa: E402

CODE_CHARACTERS = set("%{}$<>&\\[]#")


def in_order(codes: list[str], text: str) -> bool:
    """Whether each code is found in `text` after the one before it, as written."""
    at = 0
    for code in codes:
        found = text.find(code, at)
        if found < 0:
            return False
        at = found + len(code)
    return True


def plain_text_between(text: str, codes: list[str]) -> bool:
    """Whether the text around the codes holds no character that codes are made of."""
    for code in codes:
        text = text.replace(code, " ", 1)
    return not CODE_CHARACTERS & set(text)


def check(data: bytes) -> bool:
    text = as_text(data)
    masked = MaskedText(text, LANG)
    out = masked.rebuilt(translation_for(data)(masked.sentences))
    if not in_order(masked.codes, out):
        raise Broken(f"placeholders {masked.codes!r} not kept in order: {text!r} -> {out!r}")
    if plain_text_between(text, masked.codes) and codes_of(out) != masked.codes:
        raise Broken(f"placeholders {masked.codes!r} came back as {codes_of(out)!r}: {text!r} -> {out!r}")
    return False


if __name__ == "__main__":
    fuzz(check)
