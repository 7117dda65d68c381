"""Transcript annotations: the asides that talk transcripts mark sounds with, stripped from training pairs.

TED transcripts (the reference design's corpus) carry "( laughter )", "( applause )", "( music )"
in English and "( risos )", "( aplausos )" in Portuguese: about 2,000 of 51,785 training pairs.
A model trained on them writes "(laughter)" into other text too (a medical sentence included),
since the corpus taught it that a sentence often ends in one. So a run can strip them.

Which asides are annotations is read off the corpus itself, not a list per language: an
annotation is a parenthesised aside of one to three words that the training side repeats
verbatim at least `MIN_REPEATS` times. A real parenthetical ("( in 1998 )", "( the one on the
left )") is rarely said twice; "( laughter )" is said a thousand times.

    asides = frequent_asides(lines)                    # {"(laughter)", "(applause)", ...}
    strip_asides("( laughter ) thank you .", asides)   # -> ("thank you .", 1): nmt.text_form
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..text_form import ASIDE, aside_key, strip_asides

MIN_REPEATS = 20  # "( laughter )" and its kin repeat hundreds of times; a parenthetical seldom twice


def frequent_asides(lines: Iterable[str], min_repeats: int = MIN_REPEATS) -> frozenset[str]:
    """The asides (as nmt.text_form.aside_key writes them) that `lines` hold at least `min_repeats` times."""
    counts = Counter(aside_key(m.group(0)) for line in lines for m in ASIDE.finditer(line))
    return frozenset(aside for aside, n in counts.items() if n >= min_repeats)


@dataclass
class AnnotationStats:
    """What stripping did to a corpus, for the log."""

    asides: tuple[str, ...] = ()  # the annotations found, both sides
    stripped: int = 0  # annotations taken out
    pairs_changed: int = 0  # pairs that held at least one
    pairs_dropped: int = 0  # pairs that were nothing but annotations on a side

    def report(self) -> str:
        return (
            f"stripped {self.stripped} transcript annotations ({', '.join(self.asides) or 'none found'}) "
            f"from {self.pairs_changed} pairs; dropped {self.pairs_dropped} pairs that held nothing else"
        )


def without_annotations(
    pairs: Iterable[tuple[str, str]],
    src_asides: frozenset[str],
    tgt_asides: frozenset[str],
    stats: AnnotationStats,
) -> Iterator[tuple[str, str]]:
    """`pairs` with each side's annotations stripped (counted in `stats`); a pair left with an empty
    side is dropped, as a pair read with one is."""
    stats.asides = tuple(sorted(src_asides | tgt_asides))
    for src, tgt in pairs:
        src, from_src = strip_asides(src, src_asides)
        tgt, from_tgt = strip_asides(tgt, tgt_asides)
        if from_src or from_tgt:
            stats.stripped += from_src + from_tgt
            stats.pairs_changed += 1
            if not src or not tgt:
                stats.pairs_dropped += 1
                continue
        yield src, tgt
