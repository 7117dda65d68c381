"""Scripted translations for the format tests: each gives (translation, word alignment) per sentence,
as a model with alignments would, so what a format does with the words can be checked exactly."""

from __future__ import annotations


def upper(sentences: list[str]) -> list[tuple[str, list[tuple[int, int]]]]:
    """Each word upper-cased and aligned to itself: the order kept."""
    return [(s.upper(), [(i, i) for i in range(len(s.split()))]) for s in sentences]


def reversed_words(sentences: list[str]) -> list[tuple[str, list[tuple[int, int]]]]:
    """The words in reverse, aligned crosswise: the hardest order for whatever sits between words."""
    out = []
    for s in sentences:
        words = s.split()
        n = len(words)
        out.append((" ".join(reversed(words)), [(n - 1 - j, j) for j in range(n)]))
    return out
