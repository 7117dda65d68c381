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

from sacremoses import MosesTokenizer, MosesTruecaser

MIN_COUNT = 2  # a casing seen once may be a title or a typo, and would recase the word everywhere

Pair = tuple[str, str]


@dataclass
class Truecaser:
    """Each word's casings as cased text shows them (`words`, Moses' model), and the pairs of words
    whose usual case is their own (`pairs`: lower-case pair -> (cased pair, times seen))."""

    words: MosesTruecaser
    pairs: dict[Pair, tuple[Pair, int]] = field(default_factory=dict)

    def save(self, words_path: str | Path, pairs_path: str | Path) -> None:
        """The words in Moses' model format; the pairs one a line, "United States<TAB>count"."""
        self.words.save_model(str(words_path))
        lines = [f"{a} {b}\t{count}\n" for (a, b), count in sorted(self.pairs.values(), key=lambda p: -p[1])]
        Path(pairs_path).write_text("".join(lines), encoding="utf-8")


def train_truecaser(lines: Iterable[str], lang: str) -> Truecaser:
    """A truecaser of `lang` trained on cased `lines` (running text, one sentence or paragraph each),
    split into words by the Moses tokenizer, as a tokenised corpus's words are."""
    tokenizer = MosesTokenizer(lang=lang)
    documents = [tokenizer.tokenize(line, escape=False) for line in lines if line.strip()]
    if not documents:
        raise ValueError("no text to learn case from: the cased text is empty")
    words = MosesTruecaser()
    words.train(documents, possibly_use_first_token=False)
    pair_casings: defaultdict[Pair, Counter] = defaultdict(Counter)
    for tokens in documents:
        for pair in _pairs_within_sentences(tokens, words):
            pair_casings[(pair[0].lower(), pair[1].lower())][pair] += 1
    casing = words.model["casing"]
    cased_pairs = {}
    for key, counts in pair_casings.items():
        cased = _usual(counts, key)
        if cased == key:
            continue
        cased_pairs[key] = (cased, counts[cased])
        if not (cased[0].islower() or cased[1].islower()):  # a two-word name: its capitals are its own
            for word in cased:
                casing[word.lower()][word] -= counts[cased]
    for word in list(casing):
        casing[word] = +casing[word]  # a word seen only inside names keeps no count
        if not casing[word]:
            del casing[word]
    truecaser = Truecaser(words)
    # Only the pairs that the words' own cases would get wrong are needed.
    truecaser.pairs = {k: v for k, v in cased_pairs.items() if tuple(usual_case(w, truecaser) for w in k) != v[0]}
    return truecaser


def _pairs_within_sentences(tokens: list[str], moses: MosesTruecaser) -> Iterable[Pair]:
    """Adjacent words of `tokens` (each with a letter) of which neither starts a sentence, by the rule
    Moses' truecaser counts words with: a sentence starts at the line's start and after . : ? !,
    and an opening quote or bracket does not end that."""
    first, previous = True, None
    for token in tokens:
        if token in moses.DELAYED_SENT_START:
            previous = None
            continue
        if token in moses.SENT_END:
            first, previous = True, None
            continue
        if not moses.SKIP_LETTERS_REGEX.search(token):
            first, previous = False, None
            continue
        if previous is not None:
            yield previous, token
        previous = None if first else token
        first = False


def _usual(counts: Counter, lower: str | Pair):
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
