"""How well each sentence splitter recovers sentence boundaries, per language nmt serves.

Paragraphs are built from sentences known to be one each, joined by a space: Multi30k's captions
(de, en, fr, cs; those ending in . ! or ?) and TED talks' Portuguese and English (lines with no
sentence punctuation but the last, read back as running text: capitalised, detokenised). A
splitter scores a paragraph only if it returns exactly its sentences; boundary precision and recall
count each cut. Captions and talk transcripts are easy text: abbreviations, numbers and quotes
are rare in them, so read the figures as an upper bound and the ranking as the finding.

    python benchmarks/sentence_split.py [--paragraphs 2000] [--mirror ../shared/data]
"""

from __future__ import annotations

import argparse
import gzip
import random
import re
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
END = re.compile(r"[.!?][\"')\]]*$")


def read_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.strip() for line in f]


def sentences_for(lang: str, mirror: Path) -> list[str]:
    """Single sentences of running text in `lang`."""
    if lang in ("de", "en", "fr", "cs"):
        lines = read_gz(mirror / "multi30k" / "data" / "task1" / "raw" / f"train.{lang}.gz")
        found = [s for s in lines if END.search(s) and not re.search(r"[.!?]\s", s)]
        if lang == "en":
            found += ted_sentences("en", mirror)
        return found
    return ted_sentences(lang, mirror)


def ted_sentences(lang: str, mirror: Path) -> list[str]:
    from nmt.text_form import TextForm

    form = TextForm(lang, lang)
    lines = read_gz(mirror / "ted_hrlr" / "pt_to_en" / f"{lang}.train.gz")
    one = [s for s in lines if END.search(s) and not re.search(r"[.!?] ", s[:-1]) and "``" not in s]
    return [form.to_running_text(s) for s in one[:20000]]


def splitters(lang: str) -> dict[str, Callable[[str], list[str]]]:
    """name -> text -> sentences, for the splitters installed that know `lang`."""
    found: dict[str, Callable[[str], list[str]]] = {}
    try:
        import sentencex

        found["sentencex"] = lambda text: [s.strip() for s in sentencex.segment(lang, text) if s.strip()]
    except ImportError:
        pass
    try:
        import pysbd
        from pysbd.languages import LANGUAGE_CODES

        if lang in LANGUAGE_CODES:
            segmenter = pysbd.Segmenter(language=lang, clean=False)
            found["pysbd"] = lambda text: [s.strip() for s in segmenter.segment(text) if s.strip()]
    except ImportError:
        pass
    try:
        from sentence_splitter import SentenceSplitter

        splitter = SentenceSplitter(language=lang)
        found["sentence-splitter"] = lambda text: [s.strip() for s in splitter.split(text) if s.strip()]
    except (ImportError, Exception):  # noqa: BLE001 - a language it lacks raises its own error type
        pass
    return found


def cuts(sentences: list[str]) -> set[int]:
    """Character offsets of the boundaries in the paragraph these sentences make."""
    at, out = 0, set()
    for s in sentences[:-1]:
        at += len(s) + 1
        out.add(at)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paragraphs", type=int, default=2000, help="paragraphs per language (default 2000)")
    parser.add_argument("--mirror", default=str(REPO.parent / "shared" / "data"), help="the corpus mirror")
    parser.add_argument("--langs", default="de,en,fr,cs,pt")
    args = parser.parse_args()
    mirror = Path(args.mirror)
    print("| language | splitter | paragraphs exactly right | boundary precision | boundary recall | ms / paragraph |")
    print("| --- | --- | --- | --- | --- | --- |")
    for lang in args.langs.split(","):
        pool = sentences_for(lang, mirror)
        rng = random.Random(0)
        paragraphs = [rng.sample(pool, rng.randint(2, 6)) for _ in range(args.paragraphs)]
        for name, split in splitters(lang).items():
            right = hits = predicted = gold = 0
            start = time.perf_counter()
            for sentences in paragraphs:
                text = " ".join(sentences)
                found = split(text)
                right += found == sentences
                # offsets of the predicted cuts, measured the same way on the normalised spacing
                mine, theirs = cuts([" ".join(s.split()) for s in found]), cuts(sentences)
                hits += len(mine & theirs)
                predicted += len(mine)
                gold += len(theirs)
            ms = 1000 * (time.perf_counter() - start) / len(paragraphs)
            print(
                f"| {lang} | {name} | {100 * right / len(paragraphs):.1f}% | {100 * hits / max(predicted, 1):.1f}% "
                f"| {100 * hits / max(gold, 1):.1f}% | {ms:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
