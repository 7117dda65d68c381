"""nmt data: the corpora nmt knows, and fetching one ahead of a run."""

from __future__ import annotations

import argparse

from .common import CommandError


def add_data(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "data",
        help="list the corpora nmt knows, or fetch one ahead of a run",
        description="list: every registered corpus with its pairs, splits, download size and what is cached. "
        "get NAME [PAIR]: download, verify and extract it (all its pairs without PAIR) into $NMT_DATA_HOME "
        "(NMT_MIRROR: a local mirror or URL tried first).",
    )
    p.add_argument("action", choices=("list", "get"), help="list the corpora, or get one")
    p.add_argument("name", nargs="?", help="with get: a corpus name from nmt data list, e.g. ted_hrlr")
    p.add_argument("pair", nargs="?", help="with get: one language pair, e.g. pt-en (default: every pair)")
    p.add_argument("--split", action="append", help="with get: only this split (repeat for several)")
    p.set_defaults(func=cmd_data)


def cmd_data(args: argparse.Namespace) -> int:
    from ..data.catalog import fetch_corpus, format_corpus_table, human_bytes, list_corpora

    if args.action == "list":
        if args.name is not None or args.split:
            raise CommandError("nmt data list takes no corpus name or --split (nmt data get NAME fetches one)")
        print(format_corpus_table(list_corpora()))
        return 0
    if args.name is None:
        raise CommandError("nmt data get needs a corpus NAME (see nmt data list)")
    splits = tuple(args.split) if args.split else None
    fetched = fetch_corpus(args.name, args.pair, splits=splits)
    for pair, by_split in fetched.items():
        for split, (src, tgt) in by_split.items():
            size = human_bytes(src.stat().st_size + tgt.stat().st_size)
            print(f"{args.name} {pair} {split}: {src} {tgt} ({size})")
    return 0
