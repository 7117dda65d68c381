"""nmt calibrate: what a model's quality scores mean, fitted on a set with references."""

from __future__ import annotations

import argparse

from .common import (
    CommandError,
    beam_options,
    case_options,
    engine_arguments,
    load_translator,
    model_options,
    qe_passes_option,
    scored_set_options,
)
from .translate import read_test_set, target_lang_option, target_of_test_set


def add_calibrate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit what a model's quality scores mean on a set with references",
        parents=[
            model_options(),
            beam_options(),
            engine_arguments(),
            case_options(),
            scored_set_options("multi30k:val:de-en"),
        ],
        description="Translate a set with references (a validation set: not the test set you report), score "
        "each translation (the mean of its words' scores, each word's mean piece log-probability) and its "
        "sentence chrF, and write MODEL_DIR/quality.json: the score below which a sentence is doubtful (the "
        "least sure fifth of the set) and the chrF to expect at each score. Every interface then marks "
        "doubtful sentences (nmt.quality).",
    )
    target_lang_option(p)
    qe_passes_option(p)
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from ..tuning import calibrate_quality

    src_path, sources, references, pretokenized = read_test_set(args)
    if len(sources) < 10:
        raise CommandError(
            f"{src_path}: {len(sources)} sentences; a calibration needs at least 10 (a few hundred is better)"
        )
    if args.qe_passes < 1:
        raise CommandError(f"--qe-passes must be at least 1, got {args.qe_passes}")
    translator = load_translator(args)
    translator.choose_target_language(target_of_test_set(args, translator.target_languages))
    fitted_on = args.test or str(src_path)
    calibration = calibrate_quality(
        translator, sources, references, fitted_on=fitted_on, pretokenized=pretokenized, passes=args.qe_passes
    )
    path = calibration.save(args.model)
    print(f"wrote {path}: {calibration.describe()}")
    return 0
