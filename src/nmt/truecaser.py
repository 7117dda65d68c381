"""Each word's usual case in a language, learned from cased text: for a lower-cased model's output.

A model of a lower-cased corpus (ted_hrlr) writes "the chinese government said in january". The
source gives the case of the words it shares with the output (nmt.text_form.case_from_source,
through the word alignment for translated names), but not of words English capitalises and
Portuguese does not: "Chinese" from "chinês", "January" from "janeiro", "Monday", "English". Those
are the language's own rule, which cased text in it shows: a truecaser counts, for each word, how
often each casing of it occurs away from a sentence start (sacremoses' MosesTruecaser, Moses'
train-truecaser.perl; its model file is Moses' own, so a model trained by Moses reads too).

The output is then recased word by word, conservatively: a lower-case word takes another casing
only where cased text shows that casing more often than the lower-case one, at least `MIN_COUNT`
times ("may" stays, "january" becomes "January"). Sentence starts are left to the caller, which
capitalises them anyway.

    truecaser = train_truecaser(open("news.en"), "en")
    truecaser.save_model("runs/ted/truecase-model.en")
    recase("the chinese delegation arrived in january .", truecaser)
    # "the Chinese delegation arrived in January ."
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from sacremoses import MosesTokenizer, MosesTruecaser

MIN_COUNT = 2  # a casing seen once may be a title or a typo, and would recase the word everywhere


def train_truecaser(lines: Iterable[str], lang: str) -> MosesTruecaser:
    """A truecaser of `lang` trained on cased `lines` (running text, one sentence or paragraph each),
    split into words by the Moses tokenizer, as a tokenised corpus's words are."""
    tokenizer = MosesTokenizer(lang=lang)
    documents = [tokenizer.tokenize(line, escape=False) for line in lines if line.strip()]
    if not documents:
        raise ValueError("no text to learn case from: the cased text is empty")
    truecaser = MosesTruecaser()
    truecaser.train(documents, possibly_use_first_token=False)
    return truecaser


def load_truecaser(path: str | Path) -> MosesTruecaser:
    """A truecaser saved by `MosesTruecaser.save_model` (or Moses' train-truecaser.perl); errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"truecaser model not found: {path}")
    return MosesTruecaser(load_from=str(path))


def usual_case(word: str, truecaser: MosesTruecaser) -> str:
    """`word` (lower-case) in the casing cased text gives it more often than lower case, if any."""
    counts = truecaser.model["casing"].get(word)
    if not counts:
        return word
    best, seen = counts.most_common(1)[0]
    return best if best != word and seen >= MIN_COUNT and seen > counts.get(word, 0) else word


def recase(text: str, truecaser: MosesTruecaser) -> str:
    """Whitespace-separated tokens, each lower-case one in its usual case (see `usual_case`)."""
    return " ".join(usual_case(t, truecaser) if t.islower() else t for t in text.split())
