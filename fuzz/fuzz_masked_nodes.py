"""Harness: nmt.placeholders.MaskedNodes, a document's paragraph whose text lies in pieces (a .docx
paragraph's runs, the text between a Markdown paragraph's markup, a subtitle's cue) read with its
placeholders kept.

The input, as UTF-8 (lone surrogates included), is the paragraph's pieces parted by NUL bytes.

Contract: MaskedNodes reads it and `rebuilt` with a scripted translation (contract.py's, chosen by
the input) never raises, and gives one new text per piece; a paragraph with no sentence comes back
as it was; and the strict rule fuzz_masked_text.py holds MaskedText to: the joined pieces read again
have exactly the source's codes (`codes`): each once, as written, in the source's order, and no
other, whatever the words moved next to them. There is no refusal.
"""

from __future__ import annotations

import atheris

from contract import LANG, Broken, as_text, fuzz, instrumented, translation_for

with atheris.instrument_imports(include=instrumented("nmt.placeholders", "nmt.markup", "nmt.documents")):
    from nmt.placeholders import CODE, MaskedNodes


def check(data: bytes) -> bool:
    nodes = as_text(data).split("\0")
    masked = MaskedNodes(nodes, LANG)
    out = masked.rebuilt(translation_for(data)(masked.sentences))
    if len(out) != len(nodes):
        raise Broken(f"{len(nodes)} pieces came back as {len(out)}: {nodes!r} -> {out!r}")
    if not masked.sentences and out != nodes:
        raise Broken(f"a paragraph with nothing to translate changed: {nodes!r} -> {out!r}")
    found = [m.group(0) for m in CODE.finditer("".join(out))]
    if found != masked.codes:
        raise Broken(f"placeholders {masked.codes!r} came back as {found!r}: {nodes!r} -> {out!r}")
    return False


if __name__ == "__main__":
    fuzz(check)
