"""Alignment error rate of nmt's attention alignments on a German-English gold standard, per layer.

The gold standard is the 508 Europarl sentence pairs of Vilar, Popović and Ney (2006), hand-aligned
with sure and possible links (RWTH; the terms of the RWTH download: research use, no redistribution).
nmt does not ship it: point this at a copy, either the two files (`--pairs`: "de ||| en" per line,
tokenised; `--gold`: "1-1 2p3 ..." per line, 1-based, German first) or a git repository holding
them as data/test.de-en and data/deen.talp (`--repo`, read with `git show`; e.g. the public
lisasiyu/Cross-Align repository).

For each decoder layer, with and without the shift (nmt.alignment), the model reads each gold pair
(Translator.align) and AER = 1 - (|A & S| + |A & P|) / (|A| + |S|) is computed over the whole set
(Och and Ney 2003). The model must translate German into English.

    python benchmarks/alignment_error.py --model runs/de_en --repo /path/to/Cross-Align.git
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a German -> English model directory")
    parser.add_argument("--repo", help="a git directory holding data/test.de-en and data/deen.talp")
    parser.add_argument("--pairs", help="'de ||| en' per line")
    parser.add_argument("--gold", help="the gold links per line (1-based, 'p' for possible)")
    args = parser.parse_args()
    if not args.repo and not (args.pairs and args.gold):
        parser.error("give --repo, or --pairs and --gold")

    from nmt.alignment import AlignmentMethod
    from nmt.translator import Translator

    german, english, sure, possible = read_gold(args)
    translator = Translator.load(args.model, workers=1)
    layers = translator.model.config.decoder_layers
    results = []
    for layer in range(layers):
        for shift in (False, True):
            method = AlignmentMethod(layer=layer, shift=shift)
            found = translator.align(german, english, method)
            results.append({"layer": layer, "shift": shift, "aer": round(100 * aer(found, sure, possible), 2)})
            print(json.dumps(results[-1]), flush=True)
    best = min(results, key=lambda r: r["aer"])
    print(json.dumps({"model": args.model, "sentences": len(german), "best": best}))


if __name__ == "__main__":
    main()
