"""Harness: sentence splitting and paragraph reassembly, nmt.documents.Paragraph (--format text, and
every document format's paragraphs).

Contract: for any line of text (the input as UTF-8, lone surrogates included, cut at its first line
break), Paragraph.parse never raises; its sentences are non-empty, stripped, and found in the line in
order; the text between them (its gaps) is white space alone: nothing but sentences is translated and
nothing is lost; written back untranslated it is the line exactly, and translated (each sentence
upper-cased) it is the gaps with the translations between them. The language is chosen by the input
(German, English, Japanese: sentencex's rules differ). There is no refusal.
"""

from __future__ import annotations

import atheris

from contract import Broken, as_text, fuzz, instrumented

with atheris.instrument_imports(include=instrumented("nmt.documents", "sentencex")):
    from nmt.documents import Paragraph

LANGUAGES = ("de", "en", "ja")


def check(data: bytes) -> bool:
    line = as_text(data).split("\n", 1)[0]
    lang = LANGUAGES[len(data) % len(LANGUAGES)]
    paragraph = Paragraph.parse(line, lang)
    sentences, gaps = paragraph.sentences, paragraph.gaps
    if len(gaps) != len(sentences) + 1:
        raise Broken(f"{len(gaps)} gaps for {len(sentences)} sentences: {line!r}")
    if any(not s or s != s.strip() for s in sentences) or any(g.strip() for g in gaps):
        raise Broken(f"sentences {sentences!r} and gaps {gaps!r} do not part {line!r} at white space")
    if paragraph.rebuilt(sentences) != line:
        raise Broken(f"written back untranslated, {line!r} became {paragraph.rebuilt(sentences)!r}")
    translated = [s.upper() for s in sentences]
    expected = gaps[0] + "".join(t + g for t, g in zip(translated, gaps[1:], strict=True))
    if paragraph.rebuilt(translated) != expected:
        raise Broken(f"translated, {line!r} lost its spacing: {paragraph.rebuilt(translated)!r}")
    return False


if __name__ == "__main__":
    fuzz(check)
