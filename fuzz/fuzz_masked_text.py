"""Harness: nmt.placeholders.MaskedText, a software string read with its placeholders kept.

Contract: for any string (the input as UTF-8; lone surrogates included), MaskedText reads it and
`rebuilt` with a scripted translation never raises, and the rebuilt string read again has exactly the
source's placeholders (`codes`): each once, as written, in the source's order, and no other, whatever
the text between them holds (words moved next to a code are set apart from it: nmt.placeholders).
There is no refusal.
"""

from __future__ import annotations

import atheris

with atheris.instrument_imports(include=["nmt"]):
    from nmt.placeholders import MaskedText, codes_of

from contract import LANG, Broken, as_text, fuzz, translation_for  # noqa: E402


def check(data: bytes) -> bool:
    text = as_text(data)
    masked = MaskedText(text, LANG)
    out = masked.rebuilt(translation_for(data)(masked.sentences))
    found = codes_of(out)
    if found != masked.codes:
        raise Broken(f"placeholders {masked.codes!r} came back as {found!r}: {text!r} -> {out!r}")
    return False


if __name__ == "__main__":
    fuzz(check)
