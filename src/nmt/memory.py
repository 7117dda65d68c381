"""A translation memory: sentences translated before, looked up before any search.

    memory = TranslationMemory.load("project.tmx", source="de", target="en")
    memory.lookup("Lösche %d Dateien?")   ->  MemoryMatch(score=100.0, target="Delete %d files?")

A memory holds (source, target) segments, from a TMX file (what translation tools exchange) or a
two-column file (source TAB target). A sentence is looked up by its key: spacing collapsed and its
placeholders (nmt.placeholders: %s, {name}, <b>...) left out, so "Delete %d files" finds "Delete {0}
files", and so does "Delete files", the same string as a file format reads it for translation (its
placeholders taken out, to be put back by alignment). What comes back:

- an exact match (score 100): the memory's translation, used as it is, with the sentence's own
  placeholders in the places of the memory's (by their order in the source); no search is run;
- else the closest segment at or above the threshold (rapidfuzz's normalised Indel similarity,
  0-100, on the keys), offered beside the model's translation for a person to choose;
- else nothing.

Exact lookups are a dict's. Fuzzy ones are indexed: only segments that share one of the sentence's
rarest words and whose length allows the threshold are scored: at a million segments an exact
lookup takes hundredths of a millisecond, a fuzzy one tens of milliseconds (docs/results.md).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
from rapidfuzz import fuzz, process

from .placeholders import CODE

DEFAULT_THRESHOLD = 75.0  # the fuzzy match translation tools offer by default (OmegaT, Trados: 70-75%)
RARE_WORDS = 3  # the sentence's rarest words whose segments are candidates
MAX_CANDIDATES = 20_000
Result = TypeVar("Result")


@dataclass(frozen=True)
class MemoryMatch:
    """A memory's answer for a sentence: its segment, its translation (with the sentence's
    placeholders), and how close (100: exact)."""

    source: str
    target: str
    score: float

    @property
    def exact(self) -> bool:
        return self.score >= 100.0


def memory_key(text: str) -> str:
    """What a lookup compares: the text with spacing collapsed and without its placeholders, so a
    string and the same string read for translation (its placeholders taken out: nmt.placeholders)
    find the same segment."""
    return " ".join(CODE.sub(" ", text).split())


def _words(key: str) -> set[str]:
    return {w for w in re.findall(r"\w+", key.lower())}


class TranslationMemory:
    """Segments and their translations, looked up exactly or fuzzily (see the module's docstring)."""

    def __init__(self, pairs: Iterable[tuple[str, str]] = (), *, threshold: float = DEFAULT_THRESHOLD):
        if not 0 < threshold <= 100:
            raise ValueError(f"a memory's threshold is a similarity from 1 to 100, got {threshold:g}")
        self.threshold = threshold
        self.sources: list[str] = []
        self.targets: list[str] = []
        self.keys: list[str] = []
        self.exact: dict[str, int] = {}  # key -> the latest segment with it
        self.postings: dict[str, list[int]] = defaultdict(list)  # word -> segments holding it
        self._arrays: dict[str, np.ndarray] = {}  # the postings looked up so far, as arrays
        self._key_lengths = np.empty(0, dtype=np.int64)
        for source, target in pairs:
            self.add(source, target)

    def __len__(self) -> int:
        return len(self.sources)

    def add(self, source: str, target: str) -> None:
        """One segment and its translation (a later one with the same key wins)."""
        key = memory_key(source)
        if not key:
            return
        index = len(self.sources)
        self.sources.append(source)
        self.targets.append(target)
        self.keys.append(key)
        self.exact[key] = index
        for word in _words(key):
            self.postings[word].append(index)

    def lookup(self, text: str) -> MemoryMatch | None:
        """The exact match of `text`, else its closest fuzzy match at or above the threshold, else None."""
        key = memory_key(text)
        if not key:
            return None
        if (index := self.exact.get(key)) is not None:
            ours, theirs = len(CODE.findall(text)), len(CODE.findall(self.sources[index]))
            if ours in (0, theirs):  # none (read for translation: placed after) or as many to put back
                return self._match(text, index, 100.0)
        candidates = self._candidates(key)
        if not len(candidates):
            return None
        best = process.extractOne(
            key, [self.keys[i] for i in candidates.tolist()], scorer=fuzz.ratio, score_cutoff=self.threshold
        )
        if best is None:
            return None
        _, score, position = best
        return self._match(text, int(candidates[position]), min(float(score), 99.99))  # only a key's equal is 100

    def _candidates(self, key: str) -> np.ndarray:
        """The segments worth scoring: those holding one of the key's rarest words, of a length that
        can reach the threshold (Indel similarity is at most 2 min / (a + b) of the two lengths).
        In NumPy: a common word's segments are tens of thousands."""
        words = sorted((w for w in _words(key) if w in self.postings), key=lambda w: len(self.postings[w]))
        if not words:
            return np.empty(0, dtype=np.int64)
        found = np.unique(np.concatenate([self._posting(w)[:MAX_CANDIDATES] for w in words[:RARE_WORDS]]))
        lengths = self._lengths()[found]
        n = len(key)
        return found[2 * np.minimum(n, lengths) >= self.threshold / 100 * (n + lengths)]

    def _posting(self, word: str) -> np.ndarray:
        cached = self._arrays.get(word)
        if cached is None or len(cached) != len(self.postings[word]):  # made again after add()
            cached = self._arrays[word] = np.asarray(self.postings[word], dtype=np.int64)
        return cached

    def _lengths(self) -> np.ndarray:
        if len(self._key_lengths) != len(self.keys):
            self._key_lengths = np.fromiter((len(k) for k in self.keys), dtype=np.int64, count=len(self.keys))
        return self._key_lengths

    def _match(self, text: str, index: int, score: float) -> MemoryMatch:
        return MemoryMatch(self.sources[index], with_codes_of(text, self.sources[index], self.targets[index]), score)

    # --- files ----------------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        source: str | None = None,
        target: str | None = None,
        threshold: float = DEFAULT_THRESHOLD,
    ) -> TranslationMemory:
        """A memory from a .tmx file (its `source` and `target` languages; where it holds only two,
        its header's srclang is the source) or a two-column file (source TAB target, UTF-8). A
        ValueError naming the file and line for anything else."""
        from .memory_files import read_pairs  # noqa: PLC0415 (lxml loads only for a TMX)

        return cls(read_pairs(Path(path), source=source, target=target), threshold=threshold)


def with_codes_of(text: str, memory_source: str, memory_target: str) -> str:
    """The memory's translation with `text`'s placeholders where the memory's source had its own:
    the k-th placeholder of the memory's source is the k-th of `text`. A text without any (a string
    read for translation, whose placeholders go back by themselves) gets the translation without
    them; where they do not pair up (a fuzzy match), the translation is as the memory has it."""
    ours, theirs = CODE.findall(text), CODE.findall(memory_source)
    if not ours and theirs:
        return " ".join(CODE.sub(" ", memory_target).split())
    if ours == theirs or len(ours) != len(theirs):
        return memory_target
    unused = list(enumerate(theirs))

    def swap(m: re.Match) -> str:
        for k, (i, code) in enumerate(unused):
            if code == m.group(0):
                del unused[k]
                return ours[i]
        return m.group(0)

    return CODE.sub(swap, memory_target)


def memory_first(
    memory: TranslationMemory | None,
    texts: Sequence[str],
    translate: Callable[[list[str]], list[Result]],
    from_memory: Callable[[MemoryMatch], Result],
) -> tuple[list[Result], list[MemoryMatch | None]]:
    """Each text's result: `from_memory(match)` where the memory has an exact match, else what
    `translate` gives for it (one call for all the others, in order); and each text's match (exact,
    fuzzy or None). Without a memory, `translate(texts)` and no matches."""
    if not texts:
        return [], []
    if memory is None:
        return translate(list(texts)), [None] * len(texts)
    matches = [memory.lookup(text) for text in texts]
    searched = [i for i, match in enumerate(matches) if match is None or not match.exact]
    found = iter(translate([texts[i] for i in searched]) if searched else [])
    results = [next(found) if match is None or not match.exact else from_memory(match) for match in matches]
    return results, matches


def memory_summary(matches: Sequence[MemoryMatch | None], threshold: float) -> str:
    """How a memory served `matches`' sentences, in words: '12 of 40 sentences from the memory, ...'."""
    exact = sum(1 for m in matches if m is not None and m.exact)
    fuzzy = sum(1 for m in matches if m is not None and not m.exact)
    return (
        f"{exact} of {len(matches)} sentences from the memory (exact matches, not searched); {fuzzy} with a fuzzy "
        f"match of {threshold:g}% or more, translated by the model"
    )
