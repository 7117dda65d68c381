"""The written form of a model's corpus, and turning what a user types into it and back.

Some corpora are published tokenised and lower-cased (TED talks of Qi et al. 2018, the
reference design's pt->en): a model trained on them has only ever seen

    "nós somos treinados para lidar com conflitos entre estados ."     (the corpus's form)

so what a user types, "Nós somos treinados para lidar com conflitos!", must be put into that form
first, and the model's output, "we 're trained to deal with conflicts .", read back as text:
"We're trained to deal with conflicts."

The corpus's form is the Penn Treebank's (Moses-style tokens, contractions split as "we 're",
"is n't", quotes as `` and ''), lower-cased. The Moses tokenizer and detokenizer (sacremoses) do the
language-specific work; the Treebank's differences from Moses and the casing are done here. The
round trip is measured on the corpus itself (tests/test_text_form.py): detokenised and re-tokenised,
its lines come back unchanged except where the corpus's own quotes are garbled.
"""

from __future__ import annotations

import collections
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .glossary import spelled_as_given
from .truecaser import Truecaser, recase

if TYPE_CHECKING:
    from sacremoses import MosesDetokenizer, MosesTokenizer

# Moses splits "isn't" as "isn 't"; the Treebank (and so the corpus) as "is n't".
_MOSES_NT = re.compile(r"\b(\w+)n 't\b", re.IGNORECASE)
# A sentence-final period, ! or ? glued to its word inside a line that held several sentences;
# Moses leaves "why. back" alone once the text is lower-cased, so the split is done while it is cased.
# A full stop after a single letter ends an abbreviation ("u.s.", "e.g."), not a sentence.
_SENTENCE_END = r"(?:[!?…]|(?<![\s.][^\W\d_])(?<!^[^\W\d_])\.)"
_SENTENCE_START = re.compile(rf"(^[\"“(\[]?|{_SENTENCE_END}\s+[\"“(\[]?|[.!?…] ['\"”’]\s+)([a-zà-ÿ])")
_LANGUAGE_TOKEN = re.compile(r"^\s*>>[^<>\s]+<<")  # a multi-target model's >>xx<< at the start of a source
_LONE_I = re.compile(r"(?<![\w'’])i(?=\s|'|’|$|[.,!?;:])")


# sacremoses is imported where it is first used: its regular expressions take 0.4 s to import, which
# every `nmt` process would pay, and only models trained on a tokenised corpus use it.
@functools.cache
def _tokenizer(lang: str) -> MosesTokenizer:
    from sacremoses import MosesTokenizer

    return MosesTokenizer(lang=lang)


@functools.cache
def _detokenizer(lang: str) -> MosesDetokenizer:
    from sacremoses import MosesDetokenizer

    return MosesDetokenizer(lang=lang)


def _treebank_quotes(tokens: list[str]) -> list[str]:
    """Straight double quotes as the Treebank writes them: `` where one opens, '' where one closes."""
    out, opening = [], True
    for token in tokens:
        if token == '"':
            token, opening = ("``" if opening else "''"), not opening
        out.append(token)
    return out


def tokenize_like_treebank(text: str, lang: str) -> str:
    """Penn-Treebank-style tokens of raw text, cased as it came: "Isn't it?" -> "Is n't it ?".

    Curly quotes count as straight ones; a hyphenated word ("disse-me", "solar-powered") stays one
    token, as in the corpus; characters are never escaped (no &amp;)."""
    text = text.replace("“", '"').replace("”", '"').replace("’", "'").replace("‘", "'")
    tokens = _tokenizer(lang).tokenize(text, escape=False, return_str=True, aggressive_dash_splits=False)
    tokens = re.sub(r"(\d) : (\d)", r"\1:\2", _MOSES_NT.sub(r"\1 n't", tokens))  # 9:30 stays whole
    # Moses splits a full stop off only at the line's end; the Treebank off every sentence's end.
    words = _treebank_quotes(tokens.split())
    for i, word in enumerate(words[:-1]):
        if len(word) > 1 and word.endswith(".") and not word[:-1].endswith(".") and words[i + 1][:1].isupper():
            if word[:-1].isalpha() and not (len(word) == 2 or _is_abbreviation(word, lang)):
                words[i] = word[:-1] + " ."
    return " ".join(" ".join(words).split())


def _is_abbreviation(word: str, lang: str) -> bool:
    """A word the Moses tokenizer for `lang` knows as one that a full stop does not end ("Dr.", "Sr.")."""
    return word[:-1].lower() in _abbreviations(lang)


@functools.cache
def _abbreviations(lang: str) -> frozenset[str]:
    return frozenset(prefix.lower() for prefix in _tokenizer(lang).NONBREAKING_PREFIXES)


def detokenize_treebank(text: str, lang: str) -> str:
    """Running text from Treebank-style tokens: "we 're here , is n't it ?" -> "we're here, isn't it?"."""
    text = text.replace(" n't", "n't")
    for escaped, bracket in _TREEBANK_BRACKETS.items():
        text = re.sub(rf"(?i){escaped}", bracket, text)
    text = re.sub(r"``\s*", '"', text)
    text = re.sub(r"\s*''", '"', text)
    # No unescaping: the corpus's form holds no XML escapes (tokenize_like_treebank writes none), so
    # an "&#124;" or "&lt;" in an output is what the model wrote, not a "|" or "<" to be made of it.
    return tidy_punctuation(_detokenizer(lang).detokenize(text.split(), unescape=False), lang)


# The Treebank's escaped brackets, which a model of a Treebank corpus may write.
_TREEBANK_BRACKETS = {"-lrb-": "(", "-rrb-": ")", "-lsb-": "[", "-rsb-": "]", "-lcb-": "{", "-rcb-": "}"}
_SPACE_BEFORE = re.compile(r"\s+([.,!?;:%…)\]}])")  # "word ." -> "word."
_SPACE_BEFORE_FRENCH = re.compile(r"\s+([.,…)\]}])")  # French keeps its space before ; : ! ? %
_SPACE_AFTER = re.compile(r"([(\[{])\s+")  # "( word" -> "(word"


# What running text must not keep of a tokenised corpus's form: a space before punctuation or after an
# opening bracket, Treebank quotes and brackets, a doubled quote, a lone quote between spaces, split
# contractions (the tests and benchmarks/cased_text.py count the lines that have any). For English and
# languages punctuated like it: French keeps a space before ; : ! ?
TOKENISED_LEFTOVERS = re.compile(
    r"\s[.,!?;:%)\]](?=\s|$)|[(\[]\s|``|''|-[lr][rsc]b-|\"\"|\s\"\s|\sn't\b|\s'(?:s|re|ve|ll|d|m)\b", re.I
)


def tidy_punctuation(text: str, lang: str = "en") -> str:
    """What a detokeniser leaves of a model's mistakes, made into plain punctuation: no space before
    a full stop, comma or closing bracket, none after an opening one, a doubled quote one quote, and
    straight double quotes paired (each opening one against the word after it, each closing one
    against the word before; a last unpaired one against its neighbour word)."""
    space_before = _SPACE_BEFORE_FRENCH if lang == "fr" else _SPACE_BEFORE
    # A doubled quote is one, but not a closing quote and an opening one between words: '"yes" "no"'.
    text = re.sub(r'(?<!\S)"(\s*")+|"(\s*")+(?!\S)', '"', re.sub(r'""+', '"', text))
    text = _SPACE_AFTER.sub(r"\1", space_before.sub(r"\1", text))
    parts = text.split('"')
    if len(parts) == 1:
        return text
    out = parts[0]
    for i, part in enumerate(parts[1:]):
        opening = i % 2 == 0 and (i + 1 < len(parts) - 1 or not out.strip() or out.endswith(" "))
        if opening:  # '" word' -> '"word'
            out = out + '"' + part.lstrip()
        else:  # 'word "' -> 'word"'
            out = out.rstrip() + '"' + part
    # pairing an odd count of quotes (the corpus's own garbled ones) can set two side by side again
    return space_before.sub(r"\1", re.sub(r'""+', '"', out))


# A parenthesised aside of one to three words: what TED transcripts mark the audience's and the
# stage's sounds with ("( laughter )", "( applause )"; nmt.data.annotations finds them in a corpus).
ASIDE = re.compile(r"\(\s*(?:[^\W\d_]+\s*){1,3}\)")
# An aside that quotes hold alone ('"(laughter)"'): the quotes go with it, or an empty pair is left.
_QUOTED_ASIDE = re.compile(rf'(?<!\S)"\s*({ASIDE.pattern})\s*"(?![^\W_])')


def aside_key(aside: str) -> str:
    """An aside as compared: lower-cased, inner spaces as one, none inside the brackets."""
    return "(" + " ".join(aside[1:-1].lower().split()) + ")"


def strip_asides(line: str, asides: frozenset[str] | None) -> tuple[str, int]:
    """`line` without the asides in `asides` (None: every aside), its spaces as they were elsewhere;
    and how many went."""
    removed = 0

    def dropped(aside: str) -> bool:
        nonlocal removed
        if asides is not None and aside_key(aside) not in asides:
            return False
        removed += 1
        return True

    stripped = _QUOTED_ASIDE.sub(lambda m: " " if dropped(m.group(1)) else m.group(0), line)
    stripped = ASIDE.sub(lambda m: " " if dropped(m.group(0)) else m.group(0), stripped)
    return (" ".join(stripped.split()) if removed else line), removed


def drop_annotations(
    text: str, source: str, src_annotations: frozenset[str] = frozenset(), tgt_annotations: frozenset[str] = frozenset()
) -> str:
    """`text` without the transcript annotations a model added where its source has none.

    With the corpus's annotations known (`tgt_annotations`, and the source language's
    `src_annotations`), those in `text` are dropped unless the source holds one of its own ("(Risos)"
    is translated as it is); without, any aside of one to three words is, where the source has no
    bracket at all."""
    if tgt_annotations:
        if any(aside_key(m.group(0)) in src_annotations for m in ASIDE.finditer(source)):
            return text
        return strip_asides(text, tgt_annotations)[0]
    return text if "(" in source else strip_asides(text, None)[0]


def case_from_source(text: str, source: str) -> str:
    """Words of `text` that the source has with capitals of their own (names, acronyms, mixed case:
    "Wuhan", "COVID-19", "SARS-CoV-2", "iPhone") written as the source writes them. A lower-cased
    model loses case; most words that keep their spelling across languages are the ones whose case
    matters. The capital a word has only for starting a sentence counts for nothing."""
    words = source.split()
    cased: dict[str, list[str]] = {}  # lower case -> the source's spellings, one per occurrence, in order
    for i in sorted(_own_capitals(words)):
        word = words[i].strip(_EDGE_PUNCTUATION)
        cased.setdefault(word.lower(), []).append(word)
    if not cased:
        return text

    def restore(match: re.Match) -> str:
        # as many occurrences as the source has: "US Open" makes one "us" "US", not the pronoun too
        left = cased.get(match.group(0).lower())
        return left.pop(0) if left else match.group(0)

    return re.sub(r"[^\s\"'“”‘’(){}\[\],.;:!?…]+", restore, text)


def case_through_alignment(output: str, source: str, alignment: list[tuple[int, int]], form: TextForm) -> str:
    """Output words (the corpus's form, whitespace-separated) aligned to a source word with capitals
    of its own take them: the same word as the source writes it; the translation of an acronym in
    capitals ("OMS" -> "WHO", `_is_acronym`); any other word of more than three letters with a
    capital first ("Estados Unidos" -> "United States"). Shorter ones, and capitals beyond the
    first, are left: those are mostly the articles and prepositions that an alignment joins to a
    name ("the" to "Alemanha"), which would otherwise read "The".
    alignment: (source word, output word) pairs (Translation.alignment)."""
    src_words, out = form.source_words(source), output.split()
    marked = _own_capitals(src_words)
    # A source mostly in capitals (a heading) says nothing of its words' case: only words it shares
    # with the output keep the source's spelling there.
    lettered = [word for word in src_words if any(c.isalpha() for c in word)]
    heading = sum(word.isupper() for word in lettered) * 2 > len(lettered)
    # A translated acronym ("OMS" -> "who") is the last word aligned to it, articles and prepositions
    # coming before the noun ("the WHO"), of about its length, and once in the output: a word the
    # output has elsewhere is more likely the article or preposition that took the alignment of an
    # acronym left untranslated ("a OMS alerta" -> "the alerts ... the").
    acronyms = {i for i in marked if _is_acronym(src_words[i])}
    once = {word for word, n in collections.Counter(out).items() if n == 1}
    last = {i: j for i, j in sorted(alignment, key=lambda pair: pair[1]) if j < len(out) and _letters(out[j])}
    for i, j in alignment:
        if i not in marked or j >= len(out) or not out[j].islower():
            continue
        word, said = src_words[i], out[j]
        if word.lower() == said:
            out[j] = word
        elif heading:
            continue
        elif i in acronyms and j == last.get(i) and said in once and abs(len(_letters(said)) - len(word)) <= 1:
            out[j] = said.upper()
        elif re.fullmatch(r"(?:[^\W\d_]\.){2,}", said):  # "u.k." for "Reino Unido": an abbreviation
            out[j] = said.upper()
        elif len(said) > 3 and said[0].isalpha():
            out[j] = said[0].upper() + said[1:]
    return " ".join(out)


def _is_acronym(word: str) -> bool:
    """Whether `word` is an acronym in capitals of two to five letters ("OMS", "EUA", "SDRA")."""
    return 2 <= len(word) <= 5 and word.isalpha() and word.isupper()


def _letters(word: str) -> str:
    """`word`'s letters if it is made of letters and full stops ("u.s." -> "us"), else ""."""
    letters = word.replace(".", "")
    return letters if letters.isalpha() else ""


def starts_in_lower_case(text: str) -> bool:
    """Whether `text` starts with a lower-case letter (after any opening punctuation and a >>xx<<
    token): "e a febre", not "5 de maio" or "(Risos)"."""
    text = _LANGUAGE_TOKEN.sub("", text, count=1)
    return text.lstrip(" \"'“‘«(¿¡[-–—").lstrip()[:1].islower()


def _own_capitals(words: list[str]) -> set[int]:
    """The places of the words written with capitals for themselves (see `_has_own_capitals`); a
    sentence starts after a word (or token) ending in . ! ? : or …"""
    return {i for i, word in enumerate(words) if _has_own_capitals(word, i == 0 or words[i - 1][-1:] in ".!?:…")}


def _has_own_capitals(word: str, starts_sentence: bool) -> bool:
    """Whether `word` is written with capitals for itself, not only for starting a sentence."""
    word = word.strip(_EDGE_PUNCTUATION)
    if len(word) < 2 or word.isdigit():
        return False
    return any(c.isupper() for c in word[1:]) or (word[0].isupper() and not starts_sentence)


_EDGE_PUNCTUATION = "\"'“”‘’()[]{}<>,.;:!?…«»"


def capitalize_sentences(text: str, lang: str, first: bool = True) -> str:
    """Upper-case the first letter of each sentence (and, in English, the pronoun "I" and the names
    of months and days: `capitalize_calendar_names`).
    first: the text starts a sentence (not so for the second piece of a cut sentence, or a subtitle
    cue that goes on with the last one's)."""

    def upper(m: re.Match) -> str:
        if m.start() == 0 and not first:
            return m.group(0)
        return m.group(1) + m.group(2).upper()

    text = _SENTENCE_START.sub(upper, text)
    if lang == "en":
        text = capitalize_calendar_names(_LONE_I.sub("I", text))
    return text


# English writes the months and days with a capital, which a source in a language that does not
# ("11 de março") cannot lend; "march" and "may" are also a verb, so they take one in a date only.
_MONTHS_AND_DAYS = re.compile(
    r"\b(january|february|april|june|july|august|september|october|november|december"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b"
)
_MARCH_OR_MAY = re.compile(r"\b(march|may)\b")


def capitalize_calendar_names(text: str) -> str:
    """English text with its month and day names capitalised: "on 11th of march" -> "on 11th of
    March"; "march" and "may" only with a number within two words of them ("we may go": not)."""
    text = _MONTHS_AND_DAYS.sub(lambda m: m.group(1).capitalize(), text)

    def in_a_date(m: re.Match) -> str:
        near = text[: m.start()].split()[-2:] + text[m.end() :].split()[:2]
        return m.group(1).capitalize() if any(any(c.isdigit() for c in word) for word in near) else m.group(0)

    return _MARCH_OR_MAY.sub(in_a_date, text)


@dataclass(frozen=True)
class TextForm:
    """A corpus's written form: Treebank-tokenised (`tokenized`) and/or lower-cased (`lowercased`).

    `to_corpus_form` prepares what a user typed in `src_lang`; `to_running_text` reads back the model's
    output in `tgt_lang`. A model trained on ordinary running text has no TextForm (None).
    case_from_source: a lower-cased model's output takes the source's own capitals for the words it
    shares with it (`case_from_source`); off, only sentence starts and "I" are capitalised.
    truecaser: with one (nmt.truecaser, trained on cased text of the target language), the output's
    other words take their usual case in it ("Chinese", "January", "New York").
    """

    src_lang: str
    tgt_lang: str
    tokenized: bool = True
    lowercased: bool = True
    # The transcript annotations of the corpus's each side, "(laughter)" (nmt.data.annotations): an
    # output's own are dropped where the source holds none (`drop_annotations`).
    src_annotations: tuple[str, ...] = ()
    tgt_annotations: tuple[str, ...] = ()
    case_from_source: bool = True  # a choice of the reader's, not the corpus's: never written to the file
    truecaser: Truecaser | None = field(default=None, compare=False, repr=False)  # nor is this: its own file

    def to_corpus_form(self, text: str) -> str:
        """What a user typed -> the corpus's form: "Olá, mundo!" -> "olá , mundo !"."""
        if self.tokenized:
            text = tokenize_like_treebank(text, self.src_lang)
        return text.lower() if self.lowercased else text

    def to_running_text(
        self, text: str, source: str | None = None, alignment: list[tuple[int, int]] | None = None
    ) -> str:
        """The model's output in the corpus's form -> text to read: "it 's here ." -> "It's here.".

        source: the text it translates, as typed: the transcript annotations it lacks are dropped
        from the output (`drop_annotations`), and a lower-cased model's words take its capitals
        (`case_from_source`; with the output's word `alignment` to the source, its translated names
        too: `case_through_alignment`); the other words take their usual case (`truecaser`)."""
        if self.lowercased and self.case_from_source and source is not None and alignment is not None:
            text = case_through_alignment(text, source, alignment, self)
        if self.lowercased and self.truecaser is not None:  # after the source's own: it recases lower case only
            text = recase(text, self.truecaser)
        if self.tokenized:
            text = detokenize_treebank(text, self.tgt_lang)
        if source is not None:
            kept = drop_annotations(text, source, frozenset(self.src_annotations), frozenset(self.tgt_annotations))
            if kept != text:  # the annotation went after detokenising: the space before its comma too
                text = tidy_punctuation(kept, self.tgt_lang)
        if not self.lowercased:
            return text
        if source is not None and self.case_from_source:
            text = case_from_source(text, source)
        # a source that starts in lower case goes on from text before it (a cut sentence's later
        # piece, a subtitle cue, a line that starts mid-sentence): so does its translation
        return capitalize_sentences(text, self.tgt_lang, first=source is None or not starts_in_lower_case(source))

    def output_text(
        self,
        text: str,
        source: str,
        alignment: list[tuple[int, int]] | None = None,
        terms: Sequence[tuple[str, str]] = (),
    ) -> str:
        """A translation as the user reads it: `to_running_text`, then each glossary term the source
        called for (terms: (source term, target term) pairs) as the glossary spells it, not as a
        lower-cased model's output was recased ("who" -> "WHO")."""
        text = self.to_running_text(text, source, alignment)
        if terms and self.lowercased:
            text = spelled_as_given(text, [(self.target_as_written(target), target) for _, target in terms])
        return text

    def target_to_corpus_form(self, text: str) -> str:
        """Target-language text as the corpus writes its target side: "It's here." -> "it 's here ." (Treebank's)."""
        return TextForm(self.tgt_lang, self.tgt_lang, self.tokenized, self.lowercased).to_corpus_form(text)

    def target_as_written(self, term: str) -> str:
        """A target-language term as this form's output reads once it is running text (in lower
        case): "C++" -> "c + +" in the corpus -> "c++"; the spacing a model's output of it has."""
        written = self.target_to_corpus_form(term)
        return (detokenize_treebank(written, self.tgt_lang) if self.tokenized else written).lower()

    def source_words(self, source: str) -> list[str]:
        """The words of `source` as the model reads them, cased as typed (alignments count these)."""
        return (tokenize_like_treebank(source, self.src_lang) if self.tokenized else source).split()

    def has_own_capitals(self, source: str) -> bool:
        """Whether `source` has a word with capitals of its own: a lower-cased output can take them
        (`case_through_alignment`); without one, there is nothing to align for."""
        return self.lowercased and bool(_own_capitals(self.source_words(source)))

    def to_dict(self) -> dict:
        """What the model directory's text_form.json holds: the corpus's form."""
        form = {"src_lang": self.src_lang, "tgt_lang": self.tgt_lang}
        form |= {"tokenized": self.tokenized, "lowercased": self.lowercased}
        if self.src_annotations or self.tgt_annotations:
            form |= {"src_annotations": list(self.src_annotations), "tgt_annotations": list(self.tgt_annotations)}
        return form
