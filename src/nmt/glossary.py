"""A glossary: source terms and the target terms their translations must use.

    # glossary.tsv: source term <TAB> required target term; '#' starts a comment line
    Vertrag<TAB>contract
    Europäische Union<TAB>European Union

A term matches in a source sentence as whole words, whatever their case ("vertrag", "VERTRAG"), the
longest first where two overlap. Inflected forms match only if listed ("Vertrags<TAB>contract"):
nmt does not guess a language's morphology. The target term is produced exactly as written, as one
more constraint of the beam search (nmt.decoding.constrained).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path


class GlossaryError(ValueError):
    """A glossary file that cannot be read, naming the file and line."""


class Glossary:
    """(source term, target term) entries; see the module's docstring for the file and the matching."""

    def __init__(self, entries: Sequence[tuple[str, str]]):
        self.entries = tuple(entries)
        longest_first = sorted(self.entries, key=lambda e: -len(e[0]))
        words = "|".join(re.escape(source) for source, _ in longest_first)
        self._targets = {source.casefold(): target for source, target in longest_first}
        self._pattern = re.compile(rf"(?<!\w)(?:{words})(?!\w)", re.IGNORECASE) if words else None

    @classmethod
    def load(cls, path: str | Path) -> Glossary:
        """Read a tab-separated glossary file (UTF-8); GlossaryError naming the file and line if it is malformed."""
        path = Path(path)
        try:
            lines = path.read_text(encoding="utf-8-sig").splitlines()
        except FileNotFoundError:
            raise GlossaryError(f"{path}: no such glossary file") from None
        except UnicodeDecodeError as err:
            line = path.read_bytes()[: err.start].count(b"\n") + 1
            raise GlossaryError(f"{path}:{line}: not UTF-8 text") from None
        except IsADirectoryError:
            raise GlossaryError(f"{path}: is a directory, not a glossary file") from None
        entries, seen = [], {}
        for number, line in enumerate(lines, start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
                raise GlossaryError(f"{path}:{number}: expected 'source term<TAB>target term', got {line[:80]!r}")
            source, target = fields[0].strip(), fields[1].strip()
            key = source.casefold()
            if key in seen and seen[key][1] != target:
                raise GlossaryError(
                    f"{path}:{number}: {source!r} is given two translations ({seen[key][1]!r} on line "
                    f"{seen[key][0]}, {target!r} here)"
                )
            seen[key] = (number, target)
            entries.append((source, target))
        if not entries:
            raise GlossaryError(f"{path}: no terms (an empty glossary): give 'source term<TAB>target term' lines")
        return cls(tuple(dict.fromkeys(entries)))

    def matches(self, sentence: str) -> list[tuple[str, str]]:
        """The (source term as written in the sentence, target term) pairs found, in order of appearance."""
        if self._pattern is None:
            return []
        return [(m.group(0), self._target_of(m.group(0))) for m in self._pattern.finditer(sentence)]

    def _target_of(self, matched: str) -> str:
        """The target term of the source term `matched` is: by its case-folded form, or, where the regex's
        case-insensitivity and case folding disagree (Turkish dotted İ), by matching each entry."""
        found = self._targets.get(matched.casefold())
        if found is not None:
            return found
        for source, target in self.entries:
            if re.fullmatch(re.escape(source), matched, re.IGNORECASE):
                return target
        raise AssertionError(f"{matched!r} matched no entry")  # the pattern is built from the entries

    def __len__(self) -> int:
        return len(self.entries)


def spelled_as_given(text: str, placed: Sequence[tuple[str, str]]) -> str:
    """`text` with each placed target term written as the glossary spells it, where a model of a
    lower-cased corpus wrote it without capitals ("who" for a required "WHO").

    placed: (the term as the model's output reads in running text, the term as the glossary spells
    it), once for each time the source called for it: that many matches are spelled as given (those
    spelled so already count), first come first, and only matches with no capitals of their own
    (beyond a sentence's first letter), so that a "who" the model wrote for itself beside them is
    more likely kept."""
    for (written, target), times in Counter(placed).items():
        if target == target.lower():
            continue  # nothing to restore, and a capital the output has for other reasons stays
        pattern = re.compile(rf"(?<!\w){re.escape(written)}(?!\w)", re.IGNORECASE)
        matches = list(pattern.finditer(text))
        left = times - sum(m.group(0) == target for m in matches)
        for m in reversed([m for m in matches if m.group(0)[1:] == m.group(0)[1:].lower()][: max(left, 0)]):
            text = text[: m.start()] + target + text[m.end() :]  # from the end: earlier offsets hold
    return text
