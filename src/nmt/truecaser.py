"""Each word's usual case in a language, learned from cased text: for a lower-cased model's output.

A model of a lower-cased corpus (ted_hrlr) writes "the chinese government said in january". The
source gives the case of the words it shares with the output (nmt.text_form.case_from_source,
through the word alignment for translated names), but not of words English capitalises and
Portuguese does not: "Chinese" from "chinês", "January" from "janeiro", "Monday", "English". Those
are the language's own rule, which cased text in it shows: a truecaser counts, for each word, how
often each casing of it occurs away from a sentence start (sacremoses' MosesTruecaser, Moses'
train-truecaser.perl; its model file is Moses' own, so a model trained by Moses reads too).

One word at a time cannot tell "the United States" from "the states": "States" is a capital only
inside the name. So pairs of adjacent words are counted as well, and a pair whose usual case is not
what its words' usual cases give is kept ("united states" -> "United States", "new york" -> "New
York"). The capitals a word has inside such a two-word name are the name's, not the word's: they
are taken off the word's own counts, so "times" alone stays lower case where the text has it
capitalised only in "Times Square".

The output is then recased conservatively: a lower-case word (or pair) takes another casing only
where cased text shows that casing more often than the lower-case one, at least `MIN_COUNT` times
("may" stays, "january" becomes "January"). Sentence starts are left to the caller, which
capitalises them anyway.

    truecaser = train_truecaser(open("news.en"), "en")
    truecaser.save("runs/ted/truecase-model.en", "runs/ted/truecase-pairs.en")
    recase("the chinese delegation arrived in new york in january .", truecaser)
    # "the Chinese delegation arrived in New York in January ."
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .files import atomic_write, atomic_write_text

if TYPE_CHECKING:  # imported where used: sacremoses takes 0.4 s to import, which only cased models need
    from sacremoses import MosesTruecaser

MIN_COUNT = 2  # a casing seen once may be a title or a typo, and would recase the word everywhere

Pair = tuple[str, str]


@dataclass
class Truecaser:
    """Each word's casings as cased text shows them (`words`, Moses' model), and the pairs of words
    whose usual case is their own (`pairs`: lower-case pair -> (cased pair, times seen))."""

    words: MosesTruecaser
    pairs: dict[Pair, tuple[Pair, int]] = field(default_factory=dict)

    def save(self, words_path: str | Path, pairs_path: str | Path) -> None:
        """The words in Moses' model format; the pairs one a line, "United States<TAB>count", the
        most seen first."""
        atomic_write(words_path, self.words.save_model)
        ranked = sorted(self.pairs.values(), key=lambda p: (-p[1], p[0]))
        atomic_write_text(pairs_path, "".join(f"{a} {b}\t{count}\n" for (a, b), count in ranked))


def train_truecaser(lines: Iterable[str], lang: str) -> Truecaser:
    """A truecaser of `lang` trained on cased `lines` (running text, one sentence or paragraph each),
    split into words by the Moses tokenizer, as a tokenised corpus's words are.

    In three steps: the two-word names ("United States": both words capitalised, more often than
    not); each word's casings counted away from those names (Moses' counts, less the names'
    words, each place once: "York" in "New York Times" is one "York"); and the other pairs whose
    case is not what their words' give ("a McDonald"), counted away from the names too."""
    from sacremoses import MosesTokenizer, MosesTruecaser

    tokenizer = MosesTokenizer(lang=lang)
    straight = str.maketrans("“”‘’", "\"\"''")  # curly quotes open sentences as straight ones do
    documents = [tokenizer.tokenize(line.translate(straight), escape=False) for line in lines if line.strip()]
    if not documents:
        raise ValueError("no text to learn case from: the cased text is empty")
    words = MosesTruecaser()
    words.train(documents, possibly_use_first_token=False)
    pairs = [list(_pairs_within_sentences(tokens, words)) for tokens in documents]

    names = {k: v for k, v in _usual_pairs(pairs).items() if not (v[0][0].islower() or v[0][1].islower())}
    inside_names = [_name_places(found, names) for found in pairs]
    casing = words.model["casing"]
    for tokens, places in zip(documents, inside_names, strict=True):
        for j in places:  # Moses counted each: a pair's words never start a sentence
            casing[tokens[j].lower()][tokens[j]] -= 1
    for word in list(casing):
        casing[word] = +casing[word]
        if not casing[word]:  # seen only inside names
            del casing[word]
    words.model = words._casing_to_model(casing)  # Moses' "best" and "known" follow the counts

    truecaser = Truecaser(words, dict(names))
    away = [
        [(i, a, b) for i, a, b in found if i not in places and i + 1 not in places]
        for found, places in zip(pairs, inside_names, strict=True)
    ]
    for key, value in _usual_pairs(away).items():
        if key not in names and tuple(usual_case(w, truecaser) for w in key) != value[0]:
            truecaser.pairs[key] = value
    return truecaser


def _name_places(found: list[tuple[int, str, str]], names: dict[Pair, tuple[Pair, int]]) -> set[int]:
    """The places of the words in `found` (a line's pairs) that make one of `names`, written as it is."""
    places = set()
    for i, a, b in found:
        name = names.get((a.lower(), b.lower()))
        if name is not None and name[0] == (a, b):
            places.update((i, i + 1))
    return places


def _usual_pairs(pairs: list[list[tuple[int, str, str]]]) -> dict[Pair, tuple[Pair, int]]:
    """The pairs (place, word, next word) whose usual casing (`_usual`) is not lower case: lower-case
    pair -> (that casing, times seen). Only pairs seen with a capital are counted, so the table
    grows with the text's capitalised pairs, not with all its pairs."""
    capitalised = {(a.lower(), b.lower()) for found in pairs for _, a, b in found if not (a.islower() and b.islower())}
    casings: defaultdict[Pair, Counter] = defaultdict(Counter)
    for found in pairs:
        for _, a, b in found:
            if (key := (a.lower(), b.lower())) in capitalised:
                casings[key][(a, b)] += 1
    usual = {key: _usual(counts, key) for key, counts in casings.items()}
    return {key: (cased, casings[key][cased]) for key, cased in usual.items() if cased != key}


def _pairs_within_sentences(tokens: list[str], moses_truecaser: MosesTruecaser) -> Iterable[tuple[int, str, str]]:
    """(place, word, next word) for adjacent words of `tokens` (each with a letter) of which
    neither starts a sentence. A sentence starts at the line's start and after . : ? !, and an
    opening quote or bracket does not end that, as in Moses' truecaser; unlike it, a sentence end
    right after another (". !") starts a sentence too, which only counts fewer pairs."""
    first, previous = True, None
    for i, token in enumerate(tokens):
        if token in moses_truecaser.DELAYED_SENT_START:
            previous = None
            continue
        if token in moses_truecaser.SENT_END:
            first, previous = True, None
            continue
        if not moses_truecaser.SKIP_LETTERS_REGEX.search(token):
            first, previous = False, None
            continue
        if previous is not None:
            yield i - 1, previous, token
        previous = None if first else token
        first = False


def _usual(counts: Counter | None, lower: str | Pair) -> str | Pair:
    """The casing in `counts` seen most, where it is not lower case and is seen at least MIN_COUNT
    times and more often than `lower`; else `lower`."""
    if not counts:
        return lower
    best, seen = counts.most_common(1)[0]
    return best if best != lower and seen >= MIN_COUNT and seen > counts.get(lower, 0) else lower


def load_truecaser(path: str | Path, pairs_path: str | Path | None = None) -> Truecaser:
    """A truecaser saved by `Truecaser.save` (or, words only, by Moses' train-truecaser.perl);
    `pairs_path` may be absent. Errors name the file (and line)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"truecaser model not found: {path}")
    pairs = {}
    if pairs_path is not None and Path(pairs_path).is_file():
        for number, line in enumerate(Path(pairs_path).read_text(encoding="utf-8").splitlines(), 1):
            match = re.fullmatch(r"(\S+) (\S+)\t(\d+)", line)
            if not match:
                raise ValueError(f"{pairs_path}:{number}: expected 'word word<TAB>count', got {line!r}")
            a, b, count = match.groups()
            pairs[(a.lower(), b.lower())] = ((a, b), int(count))
    from sacremoses import MosesTruecaser

    return Truecaser(MosesTruecaser(load_from=str(path)), pairs)


def usual_case(word: str, truecaser: Truecaser) -> str:
    """`word` (lower-case) in the casing cased text gives it more often than lower case, if any."""
    return _usual(truecaser.words.model["casing"].get(word), word)


def recase(text: str, truecaser: Truecaser) -> str:
    """Whitespace-separated tokens, the lower-case ones in their usual case: a pair's where the pair
    has one of its own ("united states"), else the word's (see `usual_case`)."""
    tokens = text.split()
    out: list[str | None] = [None] * len(tokens)  # a word's case once a pair has settled it
    for i in range(len(tokens) - 1):
        cased = truecaser.pairs.get((tokens[i].lower(), tokens[i + 1].lower()))
        if cased is not None:
            for j, word in zip((i, i + 1), cased[0], strict=True):
                if out[j] is None:
                    out[j] = word if tokens[j].islower() else tokens[j]
    return " ".join(
        done if done is not None else usual_case(t, truecaser) if t.islower() else t
        for t, done in zip(tokens, out, strict=True)
    )
