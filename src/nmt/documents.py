"""Documents: paragraphs split into sentences, translated together, and put back as they were.

A paragraph is a line of text holding one or more sentences. Its layout keeps every character that
is not a sentence (indentation, the spaces between sentences, trailing blanks), so the translation
has the paragraph breaks and spacing of the original:

    "  Ein Mann läuft. Er ist müde!"  ->  gaps ["  ", " ", ""], sentences ["Ein Mann läuft.", "Er ist müde!"]
                                      ->  "  A man is running. He is tired!"

All sentences of a document go to the Translator in one call, so they are batched by length
across paragraphs. A sentence longer than the model takes is cut at a safe point (after a comma,
semicolon, colon or dash near its middle; else at the space nearest its middle) until each piece
fits, and the translations of the pieces are joined: nothing is truncated, and the count of cut
sentences is logged.
"""

from __future__ import annotations

import logging
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import sentencex

log = logging.getLogger(__name__)

# After these a sentence can be cut with least harm: clause punctuation followed by a space.
# Clause punctuation a cut may follow: Latin marks before a space; the full-width marks of Chinese
# and Japanese (、。，；：！？), whose text has no spaces, anywhere.
_CLAUSE_END = re.compile(r"[,;:\u2013\u2014)\]](?=\s)|[\u3001\u3002\uff0c\uff1b\uff1a\uff01\uff1f]")
_SPACE = re.compile(r"\s+")


_SURROGATE = re.compile("[\ud800-\udfff]")


def split_sentences(text: str, lang: str) -> list[str]:
    """The sentences of `text` (one paragraph), as they are written in it (no spacing changed)."""
    if not text.strip():
        return []
    # sentencex takes UTF-8 alone, and a lone surrogate ("\\ud800" from a JSON string) is none: it
    # reads U+FFFD in its place, one character for one, and the sentences are cut from `text` there.
    readable = _SURROGATE.sub("\ufffd", text)
    segments, at = [], 0
    for segment in sentencex.segment(lang, readable):
        start = readable.find(segment, at)
        segments.append(segment if start < 0 or readable is text else text[start : start + len(segment)])
        at = at if start < 0 else start + len(segment)
    return [s for s in (segment.strip() for segment in segments) if s]


@dataclass
class Paragraph:
    """One line of a document: its sentences and the text around them (gaps[i] precedes sentences[i];
    the last gap follows the last sentence)."""

    sentences: list[str]
    gaps: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, line: str, lang: str) -> Paragraph:
        """Split `line` into sentences, keeping the exact text between them."""
        sentences, gaps, at = [], [], 0
        for sentence in split_sentences(line, lang):
            start = line.find(sentence, at)
            if start < 0:  # the splitter changed the text: keep the rest whole rather than lose any
                break
            gaps.append(line[at:start])
            sentences.append(sentence)
            at = start + len(sentence)
        rest = line[at:]
        if rest.strip():  # text the splitter did not give back as a sentence is a sentence
            lead = len(rest) - len(rest.lstrip())
            gaps.append(rest[:lead])
            sentences.append(rest.strip())
            rest = rest[len(rest.rstrip()) :]
        gaps.append(rest)
        return cls(sentences, gaps)

    def rebuilt(self, translations: Sequence[str]) -> str:
        """The paragraph with each sentence replaced by its translation, the gaps as they were."""
        out = [self.gaps[0]]
        for translation, gap in zip(translations, self.gaps[1:], strict=True):
            out += [translation, gap]
        return "".join(out)

    def as_written(self, text: str, codes: Sequence[tuple[int, int]]) -> list[str]:
        """Each sentence as `text` has it, its codes in it, where this paragraph reads `text` with the
        spans `codes` (start, end; in order) cut out: a placeholder the model never saw is still shown
        to a reviewer (nmt.quality_report). A code goes with the sentence it sits in or ends, one
        before the first sentence with the first, one between two sentences with the next (it opens
        it: "{count} files."). Bisection: a paragraph of 30,000 codes takes no square time."""
        if not self.sentences:
            return []
        read_at, cut = [], [0]  # each code's place in the text read; the length cut out before code k
        for start, end in codes:
            read_at.append(start - cut[-1])
            cut.append(cut[-1] + end - start)
        starts, ends, at = [], [], len(self.gaps[0])
        for sentence, gap in zip(self.sentences, self.gaps[1:], strict=True):
            starts.append(at)
            ends.append(at + len(sentence))
            at += len(sentence) + len(gap)
        last = len(self.sentences) - 1
        owners = [min(bisect_left(ends, place), last) for place in read_at]  # in order, as the codes
        written = []
        for k, (start, end) in enumerate(zip(starts, ends, strict=True)):
            # the sentence's own text: after any code at its start, before any code at its end
            first = start + cut[bisect_right(read_at, start)]
            past = end + cut[bisect_left(read_at, end)]
            lo, hi = bisect_left(owners, k), bisect_right(owners, k)
            if lo < hi:
                first, past = min(first, codes[lo][0]), max(past, codes[hi - 1][1])
            written.append(text[first:past])
        return written


def cut_to_fit(sentence: str, fits: Callable[[str], bool]) -> list[str]:
    """`sentence` in pieces that each fit (by `fits`), cut after clause punctuation near the middle,
    else at the space nearest the middle, else (one huge word) in the middle; [sentence] if it fits."""
    if fits(sentence) or len(sentence) < 2:
        return [sentence]
    middle = len(sentence) / 2
    cuts = [m.end() for m in _CLAUSE_END.finditer(sentence)]
    # Clause punctuation is preferred while it leaves each side at least a quarter of the sentence.
    cuts = [c for c in cuts if len(sentence) / 4 <= c <= 3 * len(sentence) / 4]
    if not cuts:
        cuts = [m.start() for m in _SPACE.finditer(sentence) if 0 < m.start() < len(sentence)]
    cut = min(cuts, key=lambda c: abs(c - middle)) if cuts else len(sentence) // 2
    left, right = sentence[:cut].strip(), sentence[cut:].strip()
    if not left or not right:
        left, right = sentence[: len(sentence) // 2], sentence[len(sentence) // 2 :]
    return cut_to_fit(left, fits) + cut_to_fit(right, fits)


@dataclass
class DocumentStats:
    """What translating a document did: paragraphs, sentences, and sentences cut to fit the model."""

    paragraphs: int = 0
    sentences: int = 0
    cut: int = 0


def translate_paragraphs(
    lines: Sequence[str],
    translate: Callable[[list[str]], list[str]],
    *,
    lang: str,
    fits: Callable[[str], bool],
    stats: DocumentStats | None = None,
) -> list[str]:
    """Each line of `lines` translated sentence by sentence, with its layout kept; blank lines stay blank.

    translate: texts -> their translations, in order (one call for the whole document);
    fits: whether a sentence is short enough for the model (else it is cut, see `cut_to_fit`).
    """
    stats = stats if stats is not None else DocumentStats()
    paragraphs = [Paragraph.parse(line, lang) for line in lines]
    pieces: list[str] = []
    shape: list[list[int]] = []  # per paragraph, per sentence: how many pieces
    for paragraph in paragraphs:
        counts = []
        for sentence in paragraph.sentences:
            parts = cut_to_fit(sentence, fits)
            stats.cut += len(parts) > 1
            pieces += parts
            counts.append(len(parts))
        shape.append(counts)
        stats.paragraphs += bool(paragraph.sentences)  # a blank line separates paragraphs, it is none
        stats.sentences += len(paragraph.sentences)
    translated = iter(translate(pieces)) if pieces else iter(())
    out = []
    for paragraph, counts in zip(paragraphs, shape, strict=True):
        sentences = [" ".join(next(translated) for _ in range(n)) for n in counts]
        out.append(paragraph.rebuilt(sentences))
    return out
