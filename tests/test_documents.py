"""Documents: sentence splitting with the layout kept, long sentences cut and joined back (nmt.documents)."""

from __future__ import annotations

import random
import re
import subprocess
import sys

import pytest

from nmt.documents import DocumentStats, Paragraph, cut_to_fit, split_sentences, translate_paragraphs

WORDS = "der mann die frau ein hund läuft schnell über den grünen rasen und sieht einen ball".split()


def sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    if words > 12:  # long sentences have clauses, as real ones do
        parts = text.split(" ")
        for at in range(6, len(parts) - 3, rng.randint(5, 9)):
            parts[at] += rng.choice([",", ";", ":"])
        text = " ".join(parts)
    return text[0].upper() + text[1:] + rng.choice([".", "!", "?"])


def document(rng: random.Random, paragraphs: int) -> list[str]:
    """Paragraphs of 1-6 sentences, some very long, odd spacing, and blank lines between some."""
    lines = []
    for _ in range(paragraphs):
        count = rng.randint(1, 6)
        sentences = [sentence(rng, rng.choice([3, 8, 15, 40, 150])) for _ in range(count)]
        gaps = [rng.choice(["", "  ", "\t"])] + [rng.choice([" ", "  "]) for _ in range(count - 1)]
        lines.append("".join(g + s for g, s in zip(gaps, sentences, strict=True)) + rng.choice(["", " "]))
        if rng.random() < 0.3:
            lines.append(rng.choice(["", "   "]))
    return lines


def test_sentences_are_split_as_written():
    assert split_sentences("Ein Mann läuft. Er ist müde! Wirklich?", "de") == [
        "Ein Mann läuft.",
        "Er ist müde!",
        "Wirklich?",
    ]
    assert split_sentences("Das ist z.B. gut. Am 3. Mai kam Dr. Silva.", "de") == [
        "Das ist z.B. gut.",
        "Am 3. Mai kam Dr. Silva.",
    ]
    assert split_sentences("   ", "en") == []


@pytest.mark.parametrize(
    "line", ["  Ein Mann. Er läuft!  ", "\tEins.\t Zwei.", "ohne Punkt", "", "   ", "Fragen? Ja. Nein…  "]
)
def test_a_paragraph_rebuilt_from_its_own_sentences_is_unchanged(line):
    paragraph = Paragraph.parse(line, "de")
    assert paragraph.rebuilt(paragraph.sentences) == line


def test_a_lone_surrogate_is_kept_in_its_sentence():
    # found by fuzz/fuzz_masked_nodes.py: sentencex raised UnicodeEncodeError on "\ud800" (a JSON
    # string can hold one), so every placeholder string and document paragraph holding one did too
    line = "Hallo\ud800 Welt. Noch \udc00ein Satz."
    paragraph = Paragraph.parse(line, "de")
    assert paragraph.sentences == ["Hallo\ud800 Welt.", "Noch \udc00ein Satz."]
    assert paragraph.rebuilt(paragraph.sentences) == line


def test_a_long_sentence_is_cut_after_clause_punctuation_into_pieces_that_fit():
    text = "Ein Mann, der sehr müde ist, läuft über den Rasen; eine Frau sieht ihm zu, und ein Hund bellt."
    pieces = cut_to_fit(text, lambda s: len(s.split()) <= 8)
    assert all(len(p.split()) <= 8 for p in pieces)
    assert " ".join(pieces) == text
    assert pieces[0].endswith((",", ";"))  # cut at a clause, not in the middle of one
    one_word = "x" * 50
    assert "".join(cut_to_fit(one_word, lambda s: len(s) <= 10)) == one_word
    assert cut_to_fit("kurz.", lambda s: True) == ["kurz."]
    # Chinese and Japanese have no spaces: their full-width clause marks are the cut points
    assert cut_to_fit("一二三四五，六七八九十", lambda s: len(s) <= 6) == ["一二三四五，", "六七八九十"]


def test_a_200_paragraph_document_keeps_every_sentence_its_order_and_its_layout():
    rng = random.Random(0)
    lines = document(rng, 200)
    calls = []

    def translate(pieces: list[str]) -> list[str]:
        calls.append(len(pieces))
        return [f"<{p}>" for p in pieces]  # a translation that shows where each piece went

    def fits(text: str) -> bool:
        return len(text.split()) <= 60

    stats = DocumentStats()
    out = translate_paragraphs(lines, translate, lang="de", fits=fits, stats=stats)
    assert len(calls) == 1  # one batch for the whole document
    assert len(out) == len(lines)
    assert stats.paragraphs == sum(bool(line.strip()) for line in lines)  # blank lines are no paragraphs
    assert stats.paragraphs < len(lines)  # the document has some
    assert stats.cut > 0  # the 150-word sentences did not fit
    for source, translated in zip(lines, out, strict=True):
        if not source.strip():
            assert translated == source  # blank lines stay as they were
            continue
        paragraph = Paragraph.parse(source, "de")
        assert paragraph.rebuilt(paragraph.sentences) == source  # nothing of the source lost
        cut = [cut_to_fit(original, fits) for original in paragraph.sentences]
        for pieces, original in zip(cut, paragraph.sentences, strict=True):
            assert all(fits(p) for p in pieces)  # each piece within the model's limit
            assert " ".join(pieces).split() == original.split()  # and together the whole sentence
        # Every sentence's pieces, in order, between the paragraph's own gaps.
        assert translated == paragraph.rebuilt([" ".join(f"<{p}>" for p in pieces) for pieces in cut])
    assert stats.sentences == sum(len(Paragraph.parse(line, "de").sentences) for line in lines)


def test_translate_format_text_keeps_paragraphs_and_cuts_nothing(tiny_model_dir, tmp_path):
    rng = random.Random(1)
    lines = document(rng, 12) + [sentence(rng, 400)]  # one sentence far past the 256-token limit
    source = tmp_path / "doc.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "nmt", "translate", "--model", str(tiny_model_dir), "--input", str(source)]
        + ["--format", "text", "--beam", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout.split("\n")[:-1]
    assert len(out) == len(lines)
    assert [o.strip() == "" for o in out] == [line.strip() == "" for line in lines]
    assert "translated the first" not in run.stderr  # nothing truncated
    assert re.search(r"were cut at a safe point", run.stderr) and re.search(r"\b[1-9]\d* longer than", run.stderr)
