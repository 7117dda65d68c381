"""Formatting placed on the right words: one bold word per test sentence, in HTML and in a .docx.

For each of Multi30k's 1,000 test_2016_flickr German sentences one word is made bold: a word of 4+
letters (a capitalised noun where the sentence has one) that the statistical aligner
(nmt.data.word_alignment, trained on the training pairs plus the test pairs) links to exactly one
word of the reference translation, itself a word of 3+ letters. The sentences are translated as one
web page (`<p>` per sentence, the word in `<b>`) and as one Word document (a paragraph per
sentence, the word a bold run), through nmt's document path (word alignments, placement); then in
each output the bold words are read back.

A sentence counts where the output contains the reference's word (lower-cased; a plural "s" or "es"
ignored): the model translated the word as the reference did, so where it went is known. Of those:
right = the bold words include it; exact = the bold words are that word alone; vanished = no bold
word at all. Links (`<a>`) and italics are placed by the same code as bold.

    python benchmarks/formatting.py --model runs/de_en [--json out.json]
"""

from __future__ import annotations

import argparse
import html
import io
import json
import re
import time

import numpy as np

WORD = re.compile(r"[^\W\d_]+")


def normal(word: str) -> str:
    """A word as the match compares it: letters only, lower-cased, a plural ending off."""
    word = "".join(WORD.findall(word.lower()))
    for ending in ("es", "s"):
        if len(word) > len(ending) + 2 and word.endswith(ending):
            return word[: -len(ending)]
    return word


def choose_words(model: str) -> tuple[list[str], list[str], list[tuple[int, str] | None]]:
    """The test pairs and, per pair, (the source word's index, the reference word) or None."""
    from nmt.alignment import word_index
    from nmt.data.corpus import read_parallel
    from nmt.data.corpus_alignment import alignment_units, piece_links
    from nmt.data.encoded import EncodedCorpus, RaggedArray
    from nmt.data.registry import parallel_files
    from nmt.tokenizer import load_tokenizers

    src_tok, tgt_tok = load_tokenizers(model)
    train = list(read_parallel(*parallel_files("multi30k", "train", "de", "en")))
    test = list(read_parallel(*parallel_files("multi30k", "test_2016_flickr", "de", "en")))
    pairs = train + test
    src_ids = src_tok.encode_batch([s for s, _ in pairs])
    tgt_ids = tgt_tok.encode_batch([t for _, t in pairs])
    corpus = EncodedCorpus(RaggedArray.from_sequences(src_ids), RaggedArray.from_sequences(tgt_ids))
    src_table, tgt_table = (t.lookup(range(t.vocab_size)) for t in (src_tok, tgt_tok))
    links = piece_links(corpus, src_table, tgt_table, progress=True)
    chosen = []
    for k in range(len(train), len(pairs)):
        source, reference = pairs[k]
        sides = []
        for ids, table in ((src_ids[k], src_table), (tgt_ids[k], tgt_table)):
            pieces = [table[i] for i in ids[1:-1]]
            sides.append((word_index(pieces, set()), alignment_units(pieces)))
        (src_word, src_unit), (tgt_word, tgt_unit) = sides
        linked: dict[int, set[int]] = {}  # source unit -> target units
        for s, t in np.asarray(links[k]).reshape(-1, 2).tolist():
            linked.setdefault(src_unit[s - 1], set()).add(tgt_unit[t - 1])
        src_words, ref_words = source.split(), reference.split()
        candidates = []
        for w, word in enumerate(src_words):
            units = {u for u, owner in zip(src_unit, src_word, strict=True) if owner == w}
            if not (word.isalpha() and len(word) >= 4 and len(units) == 1):
                continue
            targets = linked.get(units.pop(), set())
            if len(targets) != 1:
                continue
            target = targets.pop()
            owners = {owner for u, owner in zip(tgt_unit, tgt_word, strict=True) if u == target}
            ref = ref_words[owners.pop()] if len(owners) == 1 else ""
            if ref.isalpha() and len(ref) >= 3:
                candidates.append((w > 0 and word[0].isupper(), w, ref))
        nouns = [c for c in candidates if c[0]]
        best = (nouns or candidates or [None])[0]
        chosen.append((best[1], best[2]) if best else None)
    return [s for s, _ in test], [t for _, t in test], chosen


def bold_html(sources: list[str], chosen: list[tuple[int, str] | None]) -> str:
    paragraphs = []
    for source, pick in zip(sources, chosen, strict=True):
        words = [html.escape(w) for w in source.split()]
        if pick is not None:
            words[pick[0]] = f"<b>{words[pick[0]]}</b>"
        paragraphs.append(f"<p>{' '.join(words)}</p>")
    return "<html><body>\n" + "\n".join(paragraphs) + "\n</body></html>\n"


def bold_docx(sources: list[str], chosen: list[tuple[int, str] | None]) -> bytes:
    import docx

    document = docx.Document()
    for source, pick in zip(sources, chosen, strict=True):
        paragraph = document.add_paragraph()
        words = source.split()
        if pick is None:
            paragraph.add_run(source)
            continue
        before, word, after = " ".join(words[: pick[0]]), words[pick[0]], " ".join(words[pick[0] + 1 :])
        paragraph.add_run(before + (" " if before else ""))
        paragraph.add_run(word).bold = True
        paragraph.add_run((" " if after else "") + after)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def html_bold_words(page: str) -> list[tuple[str, str]]:
    """(the paragraph's text, its bold text) per <p> of a translated page."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    return [(p.get_text(), " ".join(b.get_text() for b in p.find_all("b"))) for p in soup.find_all("p")]


def docx_bold_words(content: bytes) -> list[tuple[str, str]]:
    import docx

    document = docx.Document(io.BytesIO(content))
    return [(p.text, " ".join(r.text for r in p.runs if r.bold)) for p in document.paragraphs]


def score(outputs: list[tuple[str, str]], chosen: list[tuple[int, str] | None]) -> dict:
    counted = right = exact = vanished = 0
    for (text, bold), pick in zip(outputs, chosen, strict=True):
        if pick is None:
            continue
        expected = normal(pick[1])
        if expected not in {normal(w) for w in text.split()}:
            continue  # translated otherwise: where the word went is not known
        counted += 1
        bold_words = [normal(w) for w in bold.split() if normal(w)]
        right += expected in bold_words
        exact += bold_words == [expected]
        vanished += not bold_words
    share = lambda n: round(100 * n / max(counted, 1), 1)  # noqa: E731
    return {"counted": counted, "right": share(right), "exact": share(exact), "vanished": share(vanished)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a German -> English model directory")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--limit", type=int, help="only the first N test sentences (a quick look)")
    args = parser.parse_args()

    from nmt.formats import translate_document
    from nmt.markup import translate_html
    from nmt.translation_io import aligned_translations
    from nmt.translator import Translator

    sources, _, chosen = choose_words(args.model)
    sources, chosen = sources[: args.limit], chosen[: args.limit]
    translator = Translator.load(args.model)
    translate = lambda sentences: aligned_translations(translator, sentences)  # noqa: E731
    results = {"model": args.model, "sentences": len(sources), "with_a_bold_word": sum(c is not None for c in chosen)}
    results["reads"] = translator.engine.alignment.describe()
    started = time.perf_counter()
    page = translate_html(bold_html(sources, chosen), translate, lang="de")
    results["html"] = score(html_bold_words(page), chosen)
    document = translate_document(bold_docx(sources, chosen), "bold.docx", translate, lang="de")
    results["docx"] = score(docx_bold_words(document), chosen)
    results["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
