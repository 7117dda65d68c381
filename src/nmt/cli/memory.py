"""--memory, --memory-threshold and --memory-update: a translation memory for nmt translate and serve."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .common import CommandError

if TYPE_CHECKING:
    from ..memory import TranslationMemory
    from ..translator import Translator


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


def read_memory(path: str | Path, *, source: str | None, target: str | None, threshold: float) -> TranslationMemory:
    """The memory in `path` for a direction; a CommandError naming the file and line for a bad one."""
    from ..memory import TranslationMemory  # noqa: PLC0415

    try:
        return TranslationMemory.load(path, source=source, target=target, threshold=threshold)
    except ValueError as err:
        raise CommandError(str(err)) from None


def open_memory(
    args: argparse.Namespace, translator: Translator, files: contextlib.ExitStack
) -> tuple[TranslationMemory | None, TextIO | None]:
    """nmt translate's (the memory --memory names, or None; the stream --memory-update writes to, or
    None), for the translator's direction; refused, with the reason, where the options do not go
    together."""
    from ..memory import TranslationMemory  # noqa: PLC0415

    if args.memory is None:
        if args.memory_update:
            raise CommandError("--memory-update adds to the --memory FILE: give one")
        return None, None
    per_sentence = [
        name
        for name, given in (
            ("--scores", args.scores),
            ("--qe", args.qe),
            ("--alignments", args.alignments),
            ("--n-best", args.n_best > 1),
            ("--sample", args.sample),
            ("--glossary", args.glossary),
            ("--pretokenized", args.pretokenized),
        )
        if given
    ]
    if per_sentence:
        raise CommandError(f"--memory gives a translation it holds as it is, without {per_sentence[0]}: leave one out")
    path = Path(args.memory)
    if args.memory_update and path.suffix.lower() == ".tmx":
        raise CommandError("--memory-update writes a two-column file (source TAB translation), not a .tmx")
    if args.memory_update and not path.exists():
        memory = TranslationMemory(threshold=args.memory_threshold)
    else:
        target = translator.target_lang or translator.directions.output
        memory = read_memory(path, source=translator.source_lang, target=target, threshold=args.memory_threshold)
    stream = files.enter_context(open(path, "a", encoding="utf-8")) if args.memory_update else None
    return memory, stream
