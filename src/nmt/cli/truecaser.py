"""nmt truecaser: teach a lower-cased model's output each word's usual case, from cased text."""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

from .common import CommandError, require_model_dir


def add_truecaser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "truecaser",
        help="learn the target language's usual case of each word from cased text, for a model of a "
        "lower-cased corpus (ted_hrlr)",
        description="Count how each word of cased text in the model's target language is written away from "
        "a sentence start (Moses' truecaser, sacremoses), and each pair of adjacent words (United States), and "
        "store them in MODEL_DIR as truecase-model.LANG and truecase-pairs.LANG. "
        "The model's output then writes a word the source does not case in its usual case where the text "
        "shows that case more often than lower case, at least twice (Chinese, January, Monday, New York); every "
        "interface reads it (translate, evaluate, serve, the Python API); `--no-truecase` leaves it out "
        "for one call. Replaces an earlier one. The text should be in the domain the model translates: "
        "names and terms it never shows stay as the model writes them.",
    )
    p.add_argument("model", metavar="MODEL_DIR", help="a model of a lower-cased corpus (its text_form.json)")
    p.add_argument(
        "--text",
        action="append",
        default=[],
        metavar="FILE",
        help="cased text in the target language, one sentence or paragraph a line (.gz too; repeat for several files)",
    )
    p.add_argument(
        "--corpus",
        action="append",
        default=[],
        metavar="NAME",
        help="a registered corpus whose training split has the target language, e.g. multi30k (repeat for several)",
    )
    p.add_argument("--max-lines", type=int, metavar="N", help="read at most N lines of each source (default: all)")
    p.set_defaults(func=cmd_truecaser)


def cased_training_file(name: str, lang: str) -> Path:
    """The `lang` side of corpus `name`'s training split (of its first pair with that language, for a
    corpus built from archives); a ValueError for one without it or without case to learn from."""
    from ..data.archive_corpus import ArchiveCorpus
    from ..data.registry import corpus_path, get_corpus, parallel_files

    corpus = get_corpus(name)
    if not isinstance(corpus, ArchiveCorpus):
        return corpus_path(name, "train", lang)
    if corpus.pretokenized:
        raise ValueError("its text is tokenised and lower-cased: a truecaser learns the case from cased text")
    pair = next((pair for pair in corpus.pairs if lang in pair), None)
    if pair is None:
        listed = ", ".join(f"{a}-{b}" for a, b in corpus.pairs)
        raise ValueError(f"{name} has no {lang} side; pairs: {listed}")
    other = pair[0] if pair[1] == lang else pair[1]
    return parallel_files(name, "train", other, lang)[1]


def cmd_truecaser(args: argparse.Namespace) -> int:
    from ..data.corpus import read_lines
    from ..model_dir import TRUECASE_PAIRS, TRUECASER, read_text_form
    from ..truecaser import train_truecaser, usual_case

    require_model_dir(args.model, "MODEL_DIR")
    form = read_text_form(args.model, truecaser=False)  # an earlier truecaser is replaced, even a broken one
    if form is None or not form.lowercased:
        raise CommandError(
            f"{args.model} writes cased text already (no lower-cased text_form.json): a truecaser is for models "
            "of lower-cased corpora"
        )
    if not args.text and not args.corpus:
        raise CommandError("give cased text in the target language: --text FILE or --corpus NAME")
    if args.max_lines is not None and args.max_lines < 1:
        raise CommandError(f"--max-lines must be >= 1, got {args.max_lines}")
    sources = [Path(f) for f in args.text]
    for name in args.corpus:
        try:
            sources.append(cased_training_file(name, form.tgt_lang))
        except ValueError as err:
            raise CommandError(f"--corpus {name}: {err}; give its {form.tgt_lang} file with --text") from None
    lines = itertools.chain.from_iterable(itertools.islice(read_lines(path), args.max_lines) for path in sources)
    truecaser = train_truecaser(lines, form.tgt_lang)
    out = Path(args.model) / TRUECASER.format(lang=form.tgt_lang)
    truecaser.save(out, Path(args.model) / TRUECASE_PAIRS.format(lang=form.tgt_lang))
    words = truecaser.words.model["casing"]
    recased = sum(1 for word in words if usual_case(word, truecaser) != word)
    print(
        f"truecaser written to {out}: {len(words)} words from {', '.join(map(str, sources))}; the output "
        f"takes another case than lower for {recased} of them, and for {len(truecaser.pairs)} pairs of words",
        file=sys.stderr,
    )
    return 0
