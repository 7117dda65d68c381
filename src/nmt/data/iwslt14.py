"""IWSLT 2014 German-English (TED talks), split the way fairseq's prepare-iwslt14.sh splits it.

The archive is the IWSLT 2014 release's ``de-en.tgz`` as fairseq now hosts
it (the original WIT3 address answers 404). It publishes no checksum: the
size and sha256 of the first copy obtained are recorded beside it in the
cache and later copies must match (see ``archive.py``).

The splits, from the members of ``de-en/``:

- the training lines are ``train.tags.de-en.{de,en}`` without the lines
  that hold a ``<url>``, ``<talkid>`` or ``<keywords>`` tag, and with the
  ``<title>``/``<description>`` tags (not their text) taken out;
- ``valid`` is every 23rd of those lines (the 23rd, 46th, ...), ``train``
  the rest;
- ``test`` is the ``<seg>`` text of ``IWSLT14.TED.dev2010``,
  ``IWSLT14.TEDX.dev2012``, ``IWSLT14.TED.tst2010``, ``tst2011`` and
  ``tst2012`` (``.xml``), in that order, with spaces around it stripped and
  "’" written "'" as fairseq does: 6,750 sentences (fairseq's figure).

Unlike fairseq's script this keeps the text as it is (no Moses
tokenisation, no lower-casing: nmt's subword tokenizers take raw text, and
sacreBLEU scores detokenised output), and it has no clean-corpus-n step,
whose length and ratio limits count Moses tokens; only pairs with an empty
side are dropped, before the every-23rd split as clean-corpus-n would.
nmt's own length filters apply at training. So ``test`` holds the same
sentences as fairseq's (untokenised, cased), while ``train``/``valid`` are
split from a few percent more lines than fairseq's 160,239 / 7,283 and
differ from them after the first dropped line. BLEU on this text is not
comparable with the tokenised, lower-cased BLEU that fairseq's recipe
reports.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .archive import NamedArchive
from .archive_corpus import ArchiveCorpus, Build, Members, PairWriter, aligned, is_blank_pair

__all__ = ["IWSLT14_ARCHIVE", "IWSLT14", "VALID_EVERY", "TEST_SETS"]

IWSLT14_ARCHIVE = NamedArchive(
    filename="de-en.tgz",
    urls=("http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz",),
    sha256=None,  # not published: recorded on first download
    size=None,
)

VALID_EVERY = 23  # prepare-iwslt14.sh: awk 'NR%23 == 0' -> valid, the rest -> train
TEST_SETS = (
    "IWSLT14.TED.dev2010",
    "IWSLT14.TEDX.dev2012",
    "IWSLT14.TED.tst2010",
    "IWSLT14.TED.tst2011",
    "IWSLT14.TED.tst2012",
)
_DROPPED_TAGS = ("<url>", "<talkid>", "<keywords>")  # a line holding one is metadata, not a sentence
_STRIPPED_TAGS = ("<title>", "</title>", "<description>", "</description>")  # their text is a sentence
# re.ASCII: \s as sed's [[:space:]] in the C locale, so a no-break space inside a segment stays.
_SEG_OPEN = re.compile(r'<seg id="[0-9]*">\s*', re.ASCII)
_SEG_CLOSE = re.compile(r"\s*</seg>\s*", re.ASCII)


def _train_member(lang: str) -> str:
    return f"de-en/train.tags.de-en.{lang}"


def _test_member(name: str, lang: str) -> str:
    return f"de-en/{name}.de-en.{lang}.xml"


def training_lines(lines: Iterator[str]) -> Iterator[str]:
    """The sentence lines of a ``train.tags`` file: tag-only lines dropped, title/description tags stripped."""
    for line in lines:
        if any(tag in line for tag in _DROPPED_TAGS):
            continue
        for tag in _STRIPPED_TAGS:
            line = line.replace(tag, "")
        yield line


def segments(lines: Iterator[str]) -> Iterator[str]:
    """The text of each ``<seg id="N">`` line of an IWSLT .xml file."""
    for line in lines:
        if "<seg id" in line:
            # strip(): the indentation before <seg>, which sed keeps and Moses' tokenizer then drops.
            yield _SEG_CLOSE.sub("", _SEG_OPEN.sub("", line)).replace("\u2019", "'").strip()


def _write(found: Members, out: PairWriter) -> None:
    pairs = aligned(
        training_lines(found.lines(_train_member("de"))),
        training_lines(found.lines(_train_member("en"))),
        _train_member("de"),
        _train_member("en"),
    )
    kept = 0
    for de, en in pairs:
        if is_blank_pair(de, en):
            out.drop("train")  # before the split, so the every-23rd count runs over real pairs
            continue
        kept += 1
        out.add("valid" if kept % VALID_EVERY == 0 else "train", de, en)

    def test_side(lang: str) -> Iterator[str]:
        for name in TEST_SETS:
            yield from segments(found.lines(_test_member(name, lang)))

    for de, en in aligned(test_side("de"), test_side("en"), "the German test segments", "the English test segments"):
        out.add("test", de, en)


def iwslt14_build(split: str, pair: tuple[str, str], *, archive: NamedArchive = IWSLT14_ARCHIVE) -> Build:
    """Every split in one go: valid is carved out of the training lines."""
    members = tuple(_train_member(lang) for lang in pair) + tuple(
        _test_member(name, lang) for name in TEST_SETS for lang in pair
    )
    return Build(
        folder="de-en", langs=pair, splits=("train", "valid", "test"), members=((archive, members),), write=_write
    )


IWSLT14 = ArchiveCorpus(
    name="iwslt14",
    pairs=(("de", "en"),),
    splits=("train", "valid", "test"),
    archives=(IWSLT14_ARCHIVE,),
    build=iwslt14_build,
    notes="TED talks, raw text; splits as fairseq's prepare-iwslt14.sh (no Moses tokenisation or cleaning)",
    citation=(
        "Cettolo, Niehues, Stüker, Bentivogli and Federico (2014), Report on the 11th IWSLT Evaluation "
        "Campaign; WIT3 (Cettolo, Girardi and Federico 2012). TED talks: CC BY-NC-ND."
    ),
)
