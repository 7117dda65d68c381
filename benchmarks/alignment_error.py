"""Alignment error rate of nmt's attention alignments on a German-English gold standard, per layer.

The gold standard is the 508 Europarl sentence pairs of Vilar, Popović and Ney (2006), hand-aligned
with sure and possible links (RWTH; the terms of the RWTH download: research use, no redistribution).
nmt does not ship it: point this at a copy, either the two files (`--pairs`: "de ||| en" per line,
tokenised; `--gold`: "1-1 2p3 ..." per line, 1-based, German first) or a git repository holding
them as data/test.de-en and data/deen.talp (`--repo`, read with `git show`; e.g. the public
lisasiyu/Cross-Align repository).

For each decoder layer, with and without the shift (nmt.alignment), every head averaged, and then
by the model's own method (its guided-alignment head where it has one), the model reads each gold pair
(Translator.align) and AER = 1 - (|A & S| + |A & P|) / (|A| + |S|) is computed over the whole set
(Och and Ney 2003). The model must translate German into English. For reference, `--aligner` also
scores the statistical aligner that guided alignment learns from (nmt.data.word_alignment, on the
model's own pieces), trained on Multi30k's training pairs plus the gold sentences, as is usual for an
aligner, and the diagonal (word i to word i).

    python benchmarks/alignment_error.py --model runs/de_en --repo /path/to/Cross-Align.git [--aligner]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path


def read_gold(args: argparse.Namespace) -> tuple[list[str], list[str], list[set], list[set]]:
    """(German, English, sure links, possible links) with links as 0-based (de, en) pairs; possible
    links include the sure ones."""
    if args.repo:
        pairs = subprocess.run(
            ["git", "--git-dir", args.repo, "show", "HEAD:data/test.de-en"], capture_output=True, check=True
        ).stdout.decode("utf-8")
        gold = subprocess.run(
            ["git", "--git-dir", args.repo, "show", "HEAD:data/deen.talp"], capture_output=True, check=True
        ).stdout.decode("utf-8")
    else:
        pairs = Path(args.pairs).read_text(encoding="utf-8")
        gold = Path(args.gold).read_text(encoding="utf-8")
    german, english, sure, possible = [], [], [], []
    for pair, links in zip(pairs.splitlines(), gold.splitlines(), strict=True):
        de, en = (side.strip() for side in pair.split("|||"))
        s, p = set(), set()
        for link in links.split():
            separator = "p" if "p" in link else "-"
            i, j = (int(x) - 1 for x in link.split(separator))
            p.add((i, j))
            if separator == "-":
                s.add((i, j))
        german.append(de)
        english.append(en)
        sure.append(s)
        possible.append(p)
    return german, english, sure, possible


def aer(found: list[list[tuple[int, int]]], sure: list[set], possible: list[set]) -> float:
    hits_sure = sum(len(set(a) & s) for a, s in zip(found, sure, strict=True))
    hits_possible = sum(len(set(a) & p) for a, p in zip(found, possible, strict=True))
    size = sum(len(a) for a in found) + sum(len(s) for s in sure)
    return 1 - (hits_sure + hits_possible) / size


def aligner_links(args: argparse.Namespace, german: list[str], english: list[str]) -> list[list[tuple[int, int]]]:
    """The statistical aligner's word links of the gold pairs, trained on Multi30k train + the gold pairs."""
    import time

    import numpy as np

    from nmt.alignment import word_index
    from nmt.data.corpus import read_parallel
    from nmt.data.corpus_alignment import piece_links
    from nmt.data.encoded import EncodedCorpus, RaggedArray
    from nmt.data.registry import parallel_files
    from nmt.tokenizer import load_tokenizers

    src_tok, tgt_tok = load_tokenizers(args.model)
    pairs = list(read_parallel(*parallel_files("multi30k", "train", "de", "en")))
    sources, targets = [p[0] for p in pairs] + german, [p[1] for p in pairs] + english
    src_ids, tgt_ids = src_tok.encode_batch(sources), tgt_tok.encode_batch(targets)
    corpus = EncodedCorpus(RaggedArray.from_sequences(src_ids), RaggedArray.from_sequences(tgt_ids))
    src_pieces, tgt_pieces = (t.lookup(range(t.vocab_size)) for t in (src_tok, tgt_tok))
    started = time.perf_counter()
    links = piece_links(corpus, src_pieces, tgt_pieces, progress=True)
    print(json.dumps({"aligner_seconds": round(time.perf_counter() - started, 1), "pairs": len(corpus)}))
    found = []
    for k in range(len(pairs), len(corpus)):
        src_words = word_index([src_pieces[i] for i in src_ids[k]], set(src_pieces[:4]))
        tgt_words = word_index([tgt_pieces[i] for i in tgt_ids[k]], set(tgt_pieces[:4]))
        piece_pairs = np.asarray(links[k]).reshape(-1, 2).tolist()
        found.append(sorted({(src_words[a], tgt_words[b]) for a, b in piece_pairs}))
    return found


def in_domain(args: argparse.Namespace, translator) -> None:
    """The model's alignments of Multi30k test pairs against the statistical aligner's (no gold exists
    for Multi30k): how well the model agrees with the links it was taught, on its own domain."""
    from nmt.alignment import AlignmentMethod
    from nmt.data.corpus import read_parallel
    from nmt.data.registry import parallel_files

    pairs = list(read_parallel(*parallel_files("multi30k", "test_2016_flickr", "de", "en")))[: args.in_domain]
    german, english = [p[0] for p in pairs], [p[1] for p in pairs]
    reference = [set(links) for links in aligner_links(args, german, english)]
    own = translator.align(german, english)
    averaged = translator.align(german, english, AlignmentMethod())
    lengths = [min(len(d.split()), len(e.split())) for d, e in pairs]
    diagonal = [[(i, i) for i in range(n)] for n in lengths]
    result = {"model": args.model, "pairs": len(pairs), "reads": translator.engine.alignment.describe()}
    for name, found in (("own", own), ("top_layer_averaged", averaged), ("diagonal", diagonal)):
        result[name] = round(100 * aer(found, reference, reference), 2)
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a German -> English model directory")
    parser.add_argument("--repo", help="a git directory holding data/test.de-en and data/deen.talp")
    parser.add_argument("--pairs", help="'de ||| en' per line")
    parser.add_argument("--gold", help="the gold links per line (1-based, 'p' for possible)")
    parser.add_argument(
        "--aligner", action="store_true", help="also the statistical aligner's AER and the diagonal's (NMT_MIRROR)"
    )
    parser.add_argument(
        "--in-domain",
        type=int,
        metavar="N",
        help="instead: the first N Multi30k test_2016_flickr pairs, the aligner's links as the reference (NMT_MIRROR)",
    )
    args = parser.parse_args()
    if not args.in_domain and not args.repo and not (args.pairs and args.gold):
        parser.error("give --repo, or --pairs and --gold (or --in-domain N)")

    from nmt.alignment import AlignmentMethod
    from nmt.translator import Translator

    translator = Translator.load(args.model, workers=1)
    if args.in_domain:
        in_domain(args, translator)
        return
    german, english, sure, possible = read_gold(args)
    layers = translator.model.config.decoder_layers
    results = []
    for layer in range(layers):
        for shift in (False, True):
            method = AlignmentMethod(layer=layer, shift=shift)
            found = translator.align(german, english, method)
            results.append({"layer": layer, "shift": shift, "aer": round(100 * aer(found, sure, possible), 2)})
            print(json.dumps(results[-1]), flush=True)
    own = round(100 * aer(translator.align(german, english), sure, possible), 2)
    print(json.dumps({"method": "the model's own", "aer": own, "reads": translator.engine.alignment.describe()}))
    best = min(results, key=lambda r: r["aer"])
    summary = {"model": args.model, "sentences": len(german), "own": own, "best_averaged": best}
    if args.aligner:
        lengths = [min(len(d.split()), len(e.split())) for d, e in zip(german, english, strict=True)]
        diagonal = [[(i, i) for i in range(n)] for n in lengths]
        summary["diagonal"] = round(100 * aer(diagonal, sure, possible), 2)
        summary["aligner"] = round(100 * aer(aligner_links(args, german, english), sure, possible), 2)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
