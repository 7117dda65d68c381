"""Short segments as translators expect them: a translation ends and begins as its source does.

A model trained on sentences ends everything with a full stop and starts it with a capital. A
heading, a table cell, a caption label or a program's button is no sentence: "Strand" should come
back "Beach", not "Beach.", and a lower-case menu item "öffnen" as "open". So, for each segment:

- a source that ends without a sentence mark (. ! ? … and their full-width forms) gets a translation
  without the full stop the model added (a question or exclamation mark it wrote is kept: it says
  something);
- the translation's first letter follows the source's case: upper where the source's is, lower
  where the source's is, except into a language that capitalises nouns (German, Luxembourgish),
  where a lower-case first letter cannot be known to be right, and except where the translation
  starts with a word in capitals (an acronym) or "I".

The word alignment is kept in step: a full stop that was a word of its own is dropped with its links.
"""

from __future__ import annotations

SENTENCE_END = ".!?…。！？"
CAPITALISED_NOUNS = {"de", "lb"}  # languages whose nouns start with a capital anywhere in a sentence

Alignment = list[tuple[int, int]] | None


def like_source(
    source: str, translation: str, alignment: Alignment, target: str | None = None
) -> tuple[str, Alignment]:
    """`translation` (and its word alignment) ending and beginning as `source` does (see the module)."""
    source, text = source.strip(), translation
    if not source or not text.strip():
        return translation, alignment
    if source[-1] not in SENTENCE_END and text.rstrip().endswith(".") and not text.rstrip().endswith(".."):
        stripped = text.rstrip()
        words = stripped.split()
        if words[-1] == ".":  # a full stop written as a word: its links go with it
            last = len(words) - 1
            alignment = None if alignment is None else [(i, j) for i, j in alignment if j != last]
        text = stripped[:-1].rstrip() + text[len(stripped) :]
    return _first_letter_like(source, text, target), alignment


def _first_letter_like(source: str, text: str, target: str | None) -> str:
    first_source = next((c for c in source if c.isalpha()), "")
    at = next((k for k, c in enumerate(text) if c.isalpha()), None)
    if not first_source or at is None:
        return text
    first_word = text[at:].split()[0]
    if first_source.isupper() and text[at].islower():
        return text[:at] + text[at].upper() + text[at + 1 :]
    language = (target or "").lower().replace("_", "-").split("-")[0]
    keeps_capital = language in CAPITALISED_NOUNS or first_word == "I" or (len(first_word) > 1 and first_word.isupper())
    if first_source.islower() and text[at].isupper() and not keeps_capital:
        return text[:at] + text[at].lower() + text[at + 1 :]
    return text
