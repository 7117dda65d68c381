"""Harness: the text-form path, nmt.text_form.TextForm (a model of a tokenised, lower-cased corpus:
what a user types put into the corpus's form, and the model's output read back as running text).

The input, as UTF-8 (lone surrogates included), is what a user typed, then a NUL byte and the model's
output in the corpus's form (without one, the output is the typed text's corpus form, as a model
that copies would write it). The input chooses the languages (pt, en, fr, de), whether the form is
tokenised and lower-cased, whether the source lends its capitals, and the word alignment (in order
or crosswise) that carries them.

Contract: neither `to_corpus_form` nor `output_text` raises, both give a str (there is no refusal),
and what each does to the characters is only what the module documents:
- the corpus's form: lower case where the form lower-cases; tokens parted by single spaces where it
  tokenises; and the typed text's characters all kept, in order, none added, but for white space,
  case, quotes (straight, curly and the Treebank's `` and '') and, tokenising, the control
  characters U+0000-U+001F that the Moses tokenizer drops;
- words alone (letters of the Latin, Greek and Cyrillic scripts and digits, between white space) come
  through both ways exactly: the corpus's form is the words parted by one space (lower-cased where
  the form lower-cases), and a cased form reads that back as the same words;
- the running text invents no character: its characters, but for white space, case and quotes, are
  found in order among the output's, the Treebank's escaped brackets (-lrb- ...) read as brackets
  (annotations and doubled quotes dropped, and the source's spellings of the words it shares, change
  nothing else).
Placeholders and URLs never reach the text form: nmt.placeholders masks them first (fuzz_masked_text,
fuzz_masked_nodes).
"""

from __future__ import annotations

import hashlib
import re

import atheris

from contract import Broken, as_text, fuzz, instrumented

with atheris.instrument_imports(include=instrumented("nmt.text_form", "nmt.truecaser", "nmt.glossary", "sacremoses")):
    from nmt.text_form import TextForm

LANGUAGES = ("pt", "en", "fr", "de")
QUOTES = "`'\"“”‘’"
TREEBANK_BRACKETS = {"-lrb-": "(", "-rrb-": ")", "-lsb-": "[", "-rsb-": "]", "-lcb-": "{", "-rcb-": "}"}
CONTROL = re.compile(r"[\x00-\x1f]")


def key(text: str) -> str:
    """`text`'s characters as compared: white space and quotes left out, case folded (through upper
    case, so that a capital a sentence start gives, "ı" -> "I", compares as its letter)."""
    return "".join(c for c in text.upper().casefold() if not c.isspace() and c not in QUOTES)


def in_order_among(found: str, pool: str) -> bool:
    """Whether `found`'s characters are all in `pool`, in order (a subsequence)."""
    left = iter(pool)
    return all(c in left for c in found)


def words_alone(text: str) -> bool:
    """Letters of the Latin, Greek and Cyrillic scripts and digits between white space (the Moses
    tokenizer's classes know these; a newer script's letters it may part)."""
    return all(c.isspace() or (c.isalpha() or c.isdecimal()) and ord(c) < 0x530 for c in text)


def form_for(data: bytes) -> tuple[TextForm, bool]:
    """The form the input chooses, and whether its alignment is crosswise."""
    digest = hashlib.sha1(data).digest()
    flags = digest[3]
    form = TextForm(
        LANGUAGES[digest[1] % 4],
        LANGUAGES[digest[2] % 4],
        tokenized=bool(flags & 1),
        lowercased=bool(flags & 2),
        case_from_source=not flags & 4,
        src_annotations=("(risos)",) if flags & 8 else (),
        tgt_annotations=("(laughter)", "(applause)") if flags & 8 else (),
    )
    return form, bool(flags & 16)


def check_corpus_form(form: TextForm, typed: str) -> str:
    corpus = form.to_corpus_form(typed)
    if not isinstance(corpus, str):
        raise Broken(f"to_corpus_form gave {type(corpus).__name__}")
    if form.lowercased and corpus.lower() != corpus:
        raise Broken(f"{typed!r} -> {corpus!r}: not lower case")
    if form.tokenized and corpus != " ".join(corpus.split()):
        raise Broken(f"{typed!r} -> {corpus!r}: tokens not parted by single spaces")
    kept = CONTROL.sub("", typed) if form.tokenized else typed
    if key(corpus) != key(kept):
        raise Broken(f"{typed!r} -> {corpus!r}: characters changed beyond space, case and quotes")
    if words_alone(typed):
        words = " ".join(typed.split()) if form.tokenized else typed
        if corpus != (words.lower() if form.lowercased else words):
            raise Broken(f"words alone, {typed!r} -> {corpus!r}")
        if not form.lowercased and (back := form.to_running_text(corpus)) != words:
            raise Broken(f"words alone, {typed!r} -> {corpus!r} read back as {back!r}")
    return corpus


def check(data: bytes) -> bool:
    typed, nul, output = as_text(data).partition("\0")
    form, crosswise = form_for(data)
    corpus = check_corpus_form(form, typed)
    output = output if nul else corpus
    n, m = len(form.source_words(typed)), len(output.split())
    alignment = [(i, m - 1 - i if crosswise else i) for i in range(min(n, m))]
    running = form.output_text(output, typed, alignment)
    if not isinstance(running, str):
        raise Broken(f"output_text gave {type(running).__name__}")
    pool = output
    if form.tokenized:
        for escaped, bracket in TREEBANK_BRACKETS.items():
            pool = re.sub(f"(?i){escaped}", bracket, pool)
    if not in_order_among(key(running), key(pool)):
        raise Broken(f"output {output!r} (source {typed!r}) read back as {running!r}: characters invented")
    return False


if __name__ == "__main__":
    fuzz(check)
