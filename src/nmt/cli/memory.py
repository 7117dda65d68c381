"""--memory, --memory-threshold and --memory-update: a translation memory for nmt translate and serve."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import TextIO

from .common import CommandError


def memory_options(parser: argparse.ArgumentParser, *, update: bool = True) -> None:
    from ..memory import DEFAULT_THRESHOLD  # noqa: PLC0415 (rapidfuzz loads only when a memory is used)

    parser.add_argument(
        "--memory",
        metavar="FILE",
        help="a translation memory: a .tmx file, or a two-column file (source TAB translation). A sentence it "
        "holds (spacing and placeholders aside) is translated as it says, without a search; the closest one "
        "at or above --memory-threshold is offered beside the model's translation (nmt serve's JSON API)",
    )
    parser.add_argument(
        "--memory-threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        metavar="PERCENT",
        help="the least similarity of a fuzzy match, 1-100 (default %(default)g)",
    )
    if update:
        parser.add_argument(
            "--memory-update",
            action="store_true",
            help="add each sentence the model translated to the --memory file (two-column; created if missing), "
            "so the next run finds it",
        )


def open_memory(args: argparse.Namespace, translator, files: contextlib.ExitStack) -> tuple[object, TextIO | None]:
    """(the memory --memory names, or None; the stream --memory-update writes to, or None), for the
    translator's direction; refused, with the reason, where the options do not go together."""
    from ..memory import TranslationMemory  # noqa: PLC0415

    update = getattr(args, "memory_update", False)
    if args.memory is None:
        if update:
            raise CommandError("--memory-update adds to the --memory FILE: give one")
        return None, None
    per_sentence = [
        name
        for name, given in (
            ("--scores", getattr(args, "scores", False)),
            ("--qe", getattr(args, "qe", False)),
            ("--alignments", getattr(args, "alignments", False)),
            ("--n-best", getattr(args, "n_best", 1) > 1),
            ("--sample", getattr(args, "sample", False)),
            ("--glossary", getattr(args, "glossary", None)),
            ("--pretokenized", getattr(args, "pretokenized", False)),
        )
        if given
    ]
    if per_sentence:
        raise CommandError(f"--memory gives a translation it holds as it is, without {per_sentence[0]}: leave one out")
    path = Path(args.memory)
    if update and path.suffix.lower() == ".tmx":
        raise CommandError("--memory-update writes a two-column file (source TAB translation), not a .tmx")
    target = translator.target_lang or translator.directions.output
    try:
        if update and not path.exists():
            memory = TranslationMemory(threshold=args.memory_threshold)
        else:
            memory = TranslationMemory.load(
                path, source=translator.source_lang, target=target, threshold=args.memory_threshold
            )
    except ValueError as err:
        raise CommandError(str(err)) from None
    stream = files.enter_context(open(path, "a", encoding="utf-8")) if update else None
    return memory, stream
