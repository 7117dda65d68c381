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

import functools
import re
from dataclasses import dataclass

from sacremoses import MosesDetokenizer, MosesTokenizer

# Moses splits "isn't" as "isn 't"; the Treebank (and so the corpus) as "is n't".
_MOSES_NT = re.compile(r"\b(\w+)n 't\b", re.IGNORECASE)
# A sentence-final period, ! or ? glued to its word inside a line that held several sentences;
# Moses leaves "why. back" alone once the text is lower-cased, so the split is done while it is cased.
_SENTENCE_START = re.compile(r"(^|[.!?…]\s+|[.!?…] ['\"”’]\s+)([a-zà-ÿ])")
_LONE_I = re.compile(r"(?<![\w'’])i(?=\s|'|’|$|[.,!?;:])")


@functools.cache
def _tokenizer(lang: str) -> MosesTokenizer:
    return MosesTokenizer(lang=lang)


@functools.cache
def _detokenizer(lang: str) -> MosesDetokenizer:
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
    text = re.sub(r"``\s*", '"', text)
    text = re.sub(r"\s*''", '"', text)
    return _detokenizer(lang).detokenize(text.split())


def capitalize_sentences(text: str, lang: str) -> str:
    """Upper-case the first letter of each sentence (and, in English, the pronoun "I")."""
    text = _SENTENCE_START.sub(lambda m: m.group(1) + m.group(2).upper(), text)
    if lang == "en":
        text = _LONE_I.sub("I", text)
    return text


@dataclass(frozen=True)
class TextForm:
    """A corpus's written form: Treebank-tokenised (`tokenized`) and/or lower-cased (`lowercased`).

    `to_corpus_form` prepares what a user typed in `src_lang`; `to_running_text` reads back the model's
    output in `tgt_lang`. A model trained on ordinary running text has no TextForm (None).
    """

    src_lang: str
    tgt_lang: str
    tokenized: bool = True
    lowercased: bool = True

    def to_corpus_form(self, text: str) -> str:
        """What a user typed -> the corpus's form: "Olá, mundo!" -> "olá , mundo !"."""
        if self.tokenized:
            text = tokenize_like_treebank(text, self.src_lang)
        return text.lower() if self.lowercased else text

    def to_running_text(self, text: str) -> str:
        """The model's output in the corpus's form -> text to read: "it 's here ." -> "It's here."."""
        if self.tokenized:
            text = detokenize_treebank(text, self.tgt_lang)
        return capitalize_sentences(text, self.tgt_lang) if self.lowercased else text

    def to_dict(self) -> dict:
        return {"tokenized": self.tokenized, "lowercased": self.lowercased}
