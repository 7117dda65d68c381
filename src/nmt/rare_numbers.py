"""Rare numbers kept exactly: the model reads a number it knows well in their place.

A small model copies a number it saw often ("5") and garbles one its tokenizer cuts into pieces:
"Startnummer 1045" came back "starting 10005", "10 Uhr" "1 1 18". Masking the number out, as
nmt.placeholders does with code, would leave "Startnummer" without its number, so instead each
rare number is swapped for a stand-in, the sentence translated, and the original written back
where the model wrote the stand-in:

    "Startnummer 1045 um 10:45 Uhr"  ->  the model reads "Startnummer 2 um 3 Uhr"
                                     ->  "starting number 2 at 3 o'clock"
                                     ->  "starting number 1045 at 10:45 o'clock"

A number is a run of digits with its groups and decimals ("1,045", "3.14", "2026-12-02", "10:45"),
swapped and written back whole, as the source writes it (a decimal comma stays a comma). It is rare
where the source tokenizer cuts it into several pieces, or has more than MAX_DIGITS digits; the
stand-ins are the numbers from 2 to 999 that neither tokenizer cuts, none of them a number (or a
digit group of one) the sentence has, one per distinct rare number. Past the last stand-in, a
sentence's further rare numbers stay as they are.

Every sentence is translated as it is, batched as without this, so a sentence without a rare
number is translated exactly as without it: the same batches, the same rounding (a search depends
on its batch's shape by that much, nmt's int8 by more, and a weak model's near ties do flip). The
sentences with a rare number are translated again with stand-ins (a second search for those only),
in the same engine call but batched apart: it runs beside the first search rather than after it,
when one worker would do it while the others idle (16% of a greedy call on Multi30k's test set).
The stand-ins come back as the source had them or not at all: where the best output has any
stand-in a different number of times than its source (the model dropped one, wrote it as a word,
or repeated it), the sentence keeps its first translation, exactly what it gets without this
option, and so the model's own numbers, which may be garbled (counted in the log); an alternative
that lost one gives way to the first translation's next one. A sentence whose glossary terms hold
a number is not swapped: the terms must match as written. Everything
about a translation but its text (word alignment, scores, pieces) is that of the sentence the model
read: the stand-ins are one word each, like the numbers, so the alignment's word positions hold.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol, TypeVar

log = logging.getLogger(__name__)

# A number with its digit groups, decimals, date and time parts: "1,045", "3.14", "2026-12-02", "1'000".
NUMBER = re.compile(r"\d+(?:[.,:/'’-]\d+)*")
# A number as an output is searched for stand-ins: digits alone, so that "2-3" the model wrote for
# "2 bis 3" still shows both (no source digit group equals a stand-in, so none is found by mistake).
_DIGITS = re.compile(r"\d+")
# Longer numbers count as rare even where the tokenizer keeps them whole: few are seen often enough.
MAX_DIGITS = 4
_CANDIDATES = range(2, 1000)  # 0 and 1 are left out: "1" is often translated as "a" or "one"


class HasText(Protocol):
    """A translation whose text can be replaced (nmt.translation.Translation)."""

    text: str


T = TypeVar("T", bound=HasText)


@dataclass(frozen=True)
class Swap:
    """A sentence with its rare numbers swapped: `text` is what the model reads; `originals` maps each
    stand-in to the number it replaced; `counts` how often each stand-in is in `text`."""

    text: str
    originals: dict[str, str]
    counts: Counter[str]

    def restored(self, output: str) -> str | None:
        """`output` with each stand-in written back as its number; None where a stand-in is not in
        it as often as in the source (dropped, changed or repeated)."""
        if not self.originals:
            return output
        found = Counter(m.group(0) for m in _DIGITS.finditer(output) if m.group(0) in self.originals)
        if found != self.counts:
            return None
        return _DIGITS.sub(lambda m: self.originals.get(m.group(0), m.group(0)), output)


class NumberStandIns:
    """Which numbers a model's tokenizers cut (rare) and which it keeps whole (stand-ins).

    src_pieces, tgt_pieces: how many pieces the source and target tokenizers cut a text into."""

    def __init__(self, src_pieces: Callable[[str], int], tgt_pieces: Callable[[str], int]):
        self.src_pieces, self.tgt_pieces = src_pieces, tgt_pieces

    @cached_property
    def stand_ins(self) -> list[str]:
        """The numbers that neither tokenizer cuts, in the order they are used."""
        return [str(n) for n in _CANDIDATES if self.src_pieces(str(n)) == 1 and self.tgt_pieces(str(n)) == 1]

    def is_rare(self, number: str) -> bool:
        """Whether the model is likely to garble `number` (a NUMBER match): cut into pieces, or long."""
        return sum(c.isdigit() for c in number) > MAX_DIGITS or self.src_pieces(number) > 1

    def swap(self, text: str) -> Swap:
        """`text` with each distinct rare number swapped for its own stand-in (the same number twice:
        the same stand-in twice)."""
        numbers = [m.group(0) for m in NUMBER.finditer(text)]
        rare = [n for n in dict.fromkeys(numbers) if self.is_rare(n)]
        if not rare:
            return Swap(text, {}, Counter())
        taken = set(_DIGITS.findall(text))
        free = (s for s in self.stand_ins if s not in taken)
        stand_in_of = dict(zip(rare, free, strict=False))  # no stand-in left: the number stays
        swapped = NUMBER.sub(lambda m: stand_in_of.get(m.group(0), m.group(0)), text)
        counts = Counter(stand_in_of[n] for n in numbers if n in stand_in_of)
        return Swap(swapped, {s: n for n, s in stand_in_of.items()}, counts)


class Terms(Protocol):
    """A glossary (nmt.glossary.Glossary): the (source, target) terms found in a sentence."""

    def matches(self, sentence: str) -> list[tuple[str, str]]: ...


class Tokenizer(Protocol):
    """What a piece count needs of a tokenizer (nmt.tokenizer.SubwordTokenizer)."""

    def encode(self, text: str, add_special: bool = True) -> list[int]: ...

    def lookup(self, ids: Sequence[int]) -> list[str]: ...


def piece_count(tokenizer: Tokenizer) -> Callable[[str], int]:
    """How many pieces `tokenizer` cuts a word into; a lone word-start mark ("▁" before "3", where
    the tokenizer writes it apart) is no piece of the word."""

    def count(text: str) -> int:
        return sum(1 for piece in tokenizer.lookup(tokenizer.encode(text, add_special=False)) if piece.strip("▁Ġ"))

    return count


def translate_keeping_numbers(
    texts: Sequence[str],
    translate: Callable[[list[list[str]]], list[list[list[T]]]],
    stand_ins: NumberStandIns,
    glossary: Terms | None = None,
) -> list[list[T]]:
    """translate([texts])[0] (n-best lists, best first) with each sentence's rare numbers kept exactly.

    translate(groups): each group's n-best lists, every group batched as if it were translated
    alone, all in one call. Every sentence is translated as it is, as the first group, batched as
    it would be without this, so a sentence without a rare number gets exactly its translation then
    (the same batches: the same rounding). The sentences with one (but none whose `glossary` terms
    hold a number: a term must match as written, not as its stand-in) are translated again with
    stand-ins, as the second group of the same call (so that search runs beside the first, not after
    it), and the numbers written back. Where the best hypothesis carried every stand-in through, the list is the
    protected one, an alternative that lost one replaced by the first translation's next hypothesis
    (so asking for alternatives never changes the best); where the best lost one, the first
    translation stays. How many sentences kept the model's own numbers is logged: they may be garbled."""

    def numbered_terms(text: str) -> bool:
        return glossary is not None and any(NUMBER.search(source) for source, _ in glossary.matches(text))

    swaps = {i: swap for i, text in enumerate(texts) if (swap := stand_ins.swap(text)).originals}
    swaps = {i: swap for i, swap in swaps.items() if not numbered_terms(texts[i])}
    if not swaps:
        return translate([list(texts)])[0]
    found, protected = translate([list(texts), [swap.text for swap in swaps.values()]])
    lost = 0
    for i, hyps in zip(swaps, protected, strict=True):
        restored = [swaps[i].restored(h.text) for h in hyps]
        if not hyps or restored[0] is None:
            lost += 1
            continue
        kept = []
        for h, text in zip(hyps, restored, strict=True):
            if text is not None:
                h.text = text
                kept.append(h)
        taken = {k.text for k in kept}
        found[i] = kept + [h for h in found[i] if h.text not in taken][: len(hyps) - len(kept)]
    if lost:
        log.info(
            "%d of %d sentences with rare numbers: the model did not carry a stand-in through; they keep "
            "the model's own numbers (check them)",
            lost,
            len(swaps),
        )
    return found
