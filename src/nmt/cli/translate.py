"""nmt translate, evaluate and tune-length-penalty: the commands that run a model over sentences."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from pathlib import Path

from ..formats import BILINGUAL_FORMATS, DOCUMENT_FORMATS, REFUSED, TEXT_FORMATS
from ..inference.choices import CHUNK_LINES, INT8_TOLERANCE, LENGTH_PENALTIES
from ..search_settings import Sampling
from .common import (
    CommandError,
    beam_options,
    case_options,
    engine_arguments,
    length_penalty_options,
    load_translator,
    model_options,
    qe_passes_option,
    scored_set_options,
)
from .memory import memory_options, open_memory

log = logging.getLogger(__name__)
# Extensions of one kind: a template's translation (.pot in) is a catalog (.po out), and so on.
SAME_KIND = {".htm": ".html", ".pot": ".po", ".yaml": ".yml", ".xliff": ".xlf"}


def input_form_options(p: argparse.ArgumentParser) -> None:
    """--format, --split-sentences and --retranslate: what the input is, and how much of it to translate."""
    p.add_argument(
        "--format",
        choices=("lines", "text", *(f.lstrip(".") for f in DOCUMENT_FORMATS if f != ".htm")),
        default=None,
        help="lines: one sentence a line, as in a parallel corpus (the default); text: paragraphs of "
        "running text, split into sentences and put back with their spacing, long sentences cut at a safe "
        "point instead of truncated; html: a web page, its text translated in context and its markup kept "
        "(the default for an --input ending in .html or .htm); "
        f"{', '.join(f.lstrip('.') for f in DOCUMENT_FORMATS if f not in ('.htm', '.html'))}: a document of that "
        "kind, written as the same kind, "
        "its layout and formatting kept (the default for an --input with that extension; docs/real-text.md)",
    )
    p.add_argument("--split-sentences", action="store_true", help="the same as --format text")
    p.add_argument(
        "--retranslate",
        action="store_true",
        help="po, pot, xlf, xliff: translate the messages that have a translation too (default: only the "
        "untranslated ones; either way each one filled is marked for a translator to check: a catalog's "
        "fuzzy flag, XLIFF 1.2's needs-review-translation, XLIFF 2's subState nmt:machine)",
    )


def add_translate_commands(sub: argparse._SubParsersAction) -> None:
    model, beam, engine, length_penalty = model_options(), beam_options(), engine_arguments(), length_penalty_options()
    p = sub.add_parser(
        "translate",
        help="translate lines from a file or stdin",
        parents=[model, beam, length_penalty, engine, case_options()],
        description="One output line per input line, in order, written as it goes.",
    )
    p.add_argument("--input", help="input file (default: stdin)")
    p.add_argument("--output", help="output file (default: stdout)")
    target_lang_option(p)
    p.add_argument(
        "--source-lang",
        dest="source_lang",
        metavar="XX",
        help="the input's language, for a model trained from several (data.pairs): text, html and documents "
        "are split into its sentences, and a direction the model was not trained for is refused, naming "
        "those it has (default: the model's one source language; else sentences are split as English)",
    )
    p.add_argument(
        "--pretokenized",
        action="store_true",
        help="for a model trained on a tokenised, lower-cased corpus (ted_hrlr): the input is in that form "
        "already and the output stays in it (default: running text in and out, converted here)",
    )
    input_form_options(p)
    glossary_option(p)
    memory_options(p)
    p.add_argument(
        "--scores",
        action="store_true",
        help="after each translation: ' ||| ' and its confidence (mean token log-probability, 0 = certain), "
        "' ||| ' and each output token's probability, the end token's last (line format)",
    )
    p.add_argument(
        "--qe",
        action="store_true",
        help="after each translation: ' ||| ' and its quality score (the mean of its words' scores, each "
        "word's mean piece log-probability), ' ||| ' doubtful or ok (by the model's calibration, `nmt "
        "calibrate`; - without one) and ' ||| ' each word's score (line format)",
    )
    qe_passes_option(p)
    p.add_argument(
        "--qe-report",
        metavar="FILE",
        help="a document or web page (--input DOC --output OUT): also write FILE, each of its sentences once "
        "with its translation, quality score and flag (as --qe gives them), how often and where first it "
        "comes, the doubtful and least sure first; CSV, or an HTML table for a FILE ending in .html",
    )
    p.add_argument(
        "--alignments",
        action="store_true",
        help="after each translation: ' ||| ' and its word alignment, source-target pairs of 0-based word "
        "indices ('0-0 1-2', the fast_align/Pharaoh format; line format; either engine, though a CTranslate2 "
        "export made before alignments were exported must be made again)",
    )
    p.add_argument(
        "--n-best",
        type=int,
        default=1,
        metavar="N",
        help="the N best translations of each line, best first (N at most the beam), as Moses and Marian "
        "write them: 'LINE ||| translation ||| score', LINE counted from 0 (line format; default 1: the "
        "translation alone)",
    )
    p.add_argument(
        "--chunk",
        type=int,
        default=CHUNK_LINES,
        help="lines read, sorted and translated together (default %(default)s)",
    )
    p.add_argument(
        "--sample",
        action="store_true",
        help="draw each translation at random from the model (back-translation, data augmentation)",
    )
    sampling = Sampling()  # its defaults
    p.add_argument(
        "--temperature",
        type=float,
        default=None,
        help=f"with --sample: > 1 flattens, < 1 sharpens (default {sampling.temperature:g})",
    )
    p.add_argument(
        "--top-k",
        type=int,
        default=None,
        help=f"with --sample: draw among the k most likely tokens, 0 among all (default {sampling.top_k})",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="with --sample or --qe-passes: seed for reproducible draws (--qe-passes: default 0)",
    )
    p.set_defaults(func=cmd_translate)
    add_scoring_commands(sub)


TEST_SET = "multi30k:test_2016_flickr:de-en"  # the example a scored command's --help gives


def add_scoring_commands(sub: argparse._SubParsersAction) -> None:
    """evaluate, tune-length-penalty and tune-precision: the commands that translate a scored set."""
    model, beam, engine, length_penalty = model_options(), beam_options(), engine_arguments(), length_penalty_options()
    p = sub.add_parser(
        "evaluate",
        help="BLEU and chrF (sacreBLEU) on a test set",
        parents=[
            model,
            beam,
            length_penalty,
            engine,
            case_options(),
            scored_set_options("multi30k:test_2016_flickr:de-en"),
        ],
        description="Translate a test set and score it with sacreBLEU.",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--zero-shot",
        action="store_true",
        help="a multilingual model: evaluate a --test direction it was not trained for (its target token "
        "must exist); refused without this",
    )
    target_lang_option(p)
    p.add_argument(
        "--source-lang",
        dest="source_lang",
        metavar="XX",
        help="with --src/--ref on a model trained from several languages: the source's, checked against the "
        "directions it was trained for (a --test pair is checked by itself)",
    )
    glossary_option(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser(
        "tune-length-penalty",
        help="choose beam search's length penalty on a validation set",
        parents=[model, beam, engine, case_options(), scored_set_options("multi30k:val:de-en")],
        description="Translate a validation set with beam search under each length penalty alpha, print "
        "BLEU, chrF and the length ratio of each, and name the alpha with the best cased BLEU. Choose on a "
        "validation set, never on the test set you report.",
    )
    p.add_argument(
        "--alphas",
        help=f"comma-separated alphas to try (default: {','.join(f'{a:g}' for a in LENGTH_PENALTIES)})",
    )
    p.add_argument(
        "--write",
        action="store_true",
        help="make the best alpha the model's decode.length_penalty (in DIR/config.yaml, or an imported "
        "model's imported_from.json)",
    )
    target_lang_option(p)
    p.set_defaults(func=cmd_tune_length_penalty)

    p = sub.add_parser(
        "tune-precision",
        help="make int8 (or bf16 with AMX) a model's default on CPU where it is faster and as good, on a "
        "validation set",
        parents=[model, beam, case_options(), scored_set_options("multi30k:val:de-en")],
        description="Translate a validation set on CPU in fp32, in int8 and, on a CPU with AMX, in bf16 (the "
        "fastest engine here, as --engine auto picks it), print BLEU, chrF and time of each, and choose the "
        "fastest that beat fp32's time with a cased BLEU at most --tolerance below fp32's (default "
        f"{INT8_TOLERANCE:g}); fp32 if none did. --write makes the "
        "choice the model's decode.precision, which translate, evaluate and serve then use on CPU unless "
        "given --precision. Choose on a validation set, never on the test set you report.",
    )
    p.add_argument(
        "--tolerance", type=float, default=INT8_TOLERANCE, help="BLEU int8 or bf16 may lose (default %(default)s)"
    )
    target_lang_option(p)
    p.add_argument("--write", action="store_true", help="make the choice the model's decode.precision")
    p.set_defaults(func=cmd_tune_precision)


# --- translate ----------------------------------------------------------------------------------
def glossary_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--glossary",
        metavar="FILE.tsv",
        help="source term<TAB>required target term per line: where a source term occurs (whole words, any "
        "case), its target term appears in the translation (constrained beam search; the torch engine)",
    )


def load_glossary(args: argparse.Namespace):
    """The --glossary file read and checked (a CommandError naming the file and line), or None."""
    from ..glossary import Glossary, GlossaryError

    if not getattr(args, "glossary", None):
        return None
    try:
        return Glossary.load(args.glossary)
    except GlossaryError as err:
        raise CommandError(str(err)) from None


def target_lang_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target-lang",
        dest="target_lang",
        metavar="XX",
        help="the output language of a multi-target model (one of its >>XX<< tokens; the error lists them); "
        "a model with one output language takes its own",
    )


def choose_direction(translator, args: argparse.Namespace) -> None:
    """--target-lang and --source-lang (checked against the directions the model was trained for)."""
    translator.choose_target_language(args.target_lang)
    if args.source_lang is not None:
        translator.choose_source_language(args.source_lang)


def sampling_option(args: argparse.Namespace):
    """The Sampling that --sample and its options ask for (None without --sample); checked."""
    given = {
        k: v
        for k, v in (("temperature", args.temperature), ("top_k", args.top_k), ("seed", args.seed))
        if v is not None
    }
    if not args.sample:
        if set(given) - ({"seed"} if getattr(args, "qe_passes", 1) > 1 else set()):
            raise CommandError("--temperature and --top-k apply to --sample only, --seed to --sample or --qe-passes")
        return None
    if args.beam is not None:
        raise CommandError("--sample draws one translation at random: leave out --beam")
    if args.length_penalty is not None:
        raise CommandError("--length-penalty ranks beam search hypotheses: it does not apply to --sample")
    return Sampling(**given)


def input_format(args: argparse.Namespace) -> str:
    """--format, or the kind of document the --input's extension names (a web page's too), else lines."""
    if args.format is not None:
        return args.format
    extension = Path(args.input).suffix.lower() if args.input else ""
    if extension in REFUSED:  # a document nmt does not write back: say what to do, not "not UTF-8"
        raise CommandError(f"{args.input}: {REFUSED[extension]} (or give --format lines to read it as text)")
    return extension.lstrip(".") if extension in DOCUMENT_FORMATS else "lines"


def refuse_line_options(args: argparse.Namespace, kind: str) -> None:
    """The options that act on each line, refused for a document or web page (`kind`) in the words
    used for --format text."""
    if args.scores or args.qe or args.alignments:
        raise CommandError("--scores, --qe and --alignments are per sentence: use them with --format lines")
    if args.qe_passes != 1:
        raise CommandError("--qe-passes averages the scores of --qe (--format lines); --qe-report scores one pass")
    if args.n_best > 1:
        raise CommandError("--n-best lists each sentence's translations: use it with --format lines, without --sample")
    if args.glossary:
        raise CommandError("--glossary applies to --format lines without --sample")
    if args.split_sentences:
        raise CommandError(f"--split-sentences is --format text; a {kind} is split into sentences anyway")


def translate_document_file(args: argparse.Namespace, extension: str) -> int:
    """--input DOCUMENT --output DOCUMENT: nothing is written unless the whole document translated."""
    from ..files import atomic_write

    refuse_line_options(args, "web page" if extension in (".html", ".htm") else "document")
    if not args.input and extension not in TEXT_FORMATS:
        raise CommandError(f"a {extension} document is read from a file: give --input FILE")
    if extension not in TEXT_FORMATS and not args.output:
        raise CommandError(f"a {extension} document is written to a file: give --output FILE")
    written_as = Path(args.output).suffix.lower() if args.output else ""
    if written_as in DOCUMENT_FORMATS and SAME_KIND.get(written_as, written_as) != SAME_KIND.get(extension, extension):
        raise CommandError(
            f"--output {args.output} names a {written_as} file, but the translation of a {extension} document is "
            f"a {extension} document: name the output {Path(args.output).with_suffix(extension).name}"
        )
    if args.input:
        with open(args.input, "rb") as source:
            content = source.read()
    else:
        content = sys.stdin.buffer.read()
    translator = load_translator(args)
    choose_direction(translator, args)
    request = translator.request(sampling=sampling_option(args))
    with contextlib.ExitStack() as files:
        memory, memory_update = open_memory(args, translator, files)
        translated = translated_document(args, translator, request, content, extension, memory, memory_update)
    if args.output:
        atomic_write(args.output, lambda tmp: Path(tmp).write_bytes(translated))
    else:
        sys.stdout.buffer.write(translated)
    return 0


def translated_document(args, translator, request, content: bytes, extension: str, memory, memory_update) -> bytes:
    """The document's bytes translated: the memory's exact matches first, the model for the rest."""
    from ..formats import read_document
    from ..memory import memory_first, memory_summary
    from ..translation_io import align_memory_hits, scored_translations

    name = args.input or "<stdin>"
    if args.retranslate and extension not in BILINGUAL_FORMATS:
        raise CommandError(f"--retranslate is for {', '.join(BILINGUAL_FORMATS)} files, not {extension}")
    target = translator.target_lang or translator.directions.output
    lang = translator.source_lang or "en"
    document = read_document(content, name, lang, extension, target=target, retranslate=args.retranslate)
    log.info("%s: %d sentences to translate", name, len(document.sentences))
    pieces_of: dict[str, list] = {}  # each searched sentence's pieces' Translations, for --qe-report

    def search(rest: list[str]) -> list:
        found, pieces = scored_translations(translator, rest, request, scores=bool(args.qe_report))
        pieces_of.update(zip(rest, pieces, strict=True))
        return found

    found, matches = memory_first(memory, document.sentences, search, lambda match: (match.target, None))
    found = align_memory_hits(translator, document.sentences, found, matches)
    if memory is not None:
        log.info("%s: %s", name, memory_summary(matches, memory.threshold))
    if memory_update is not None:
        for sentence, (text, _), match in zip(document.sentences, found, matches, strict=True):
            if match is None or not match.exact:
                memory_update.write(f"{' '.join(sentence.split())}\t{' '.join(text.split())}\n")
    if args.qe_report:
        write_quality_report(
            args.qe_report, name, document, found, pieces_of, lang, calibrated=translator.quality is not None
        )
    return document.rebuilt(found)


def write_quality_report(path: str, name: str, document, found: list, pieces_of: dict, lang: str, *, calibrated: bool):
    """--qe-report: each sentence and its translation as the documents have them, placeholders
    included (the model read them without: a reviewer would think one lost), and how sure the model was."""
    from ..formats import reviewed_pairs
    from ..quality_report import report_rows, write_report

    pairs = reviewed_pairs(document, found, lang)
    rows = report_rows([s for s, _ in pairs], [t for _, t in pairs], pieces_of, read=document.sentences)
    write_report(path, rows, title=f"{name}: quality of its translation")
    # without a calibration no sentence is flagged: "0 doubtful" would read as a finding
    flags = f"{sum(bool(r.doubtful) for r in rows)} doubtful" if calibrated else "not calibrated: no flag"
    log.info("%s: %d sentence%s, %s: %s", name, len(rows), "" if len(rows) == 1 else "s", flags, path)


def cmd_translate(args: argparse.Namespace) -> int:
    from ..files import staged_text_file
    from ..translation_io import translate_stream

    args.format = input_format(args)
    if args.pretokenized and f".{args.format}" in DOCUMENT_FORMATS:
        raise CommandError(f"--pretokenized is for lines of a tokenised corpus, not --format {args.format}")
    if f".{args.format}" in DOCUMENT_FORMATS:
        return translate_document_file(args, f".{args.format}")
    if args.retranslate:
        raise CommandError(f"--retranslate is for {', '.join(BILINGUAL_FORMATS)} files, not --format {args.format}")
    if args.chunk < 1:
        raise CommandError(f"--chunk must be at least 1, got {args.chunk}")
    sampling = sampling_option(args)
    split = args.split_sentences or args.format == "text"
    if split and (args.scores or args.qe or args.alignments):
        raise CommandError("--scores, --qe and --alignments are per sentence: use them with --format lines")
    if args.qe_report:
        raise CommandError("--qe-report is for documents and web pages (--input DOC --output OUT); lines take --qe")
    if args.qe_passes != 1 and (args.qe_passes < 1 or not args.qe):
        raise CommandError(
            f"--qe-passes averages the quality scores of --qe: at least 1, with --qe (got {args.qe_passes})"
        )
    if args.n_best < 1:
        raise CommandError(f"--n-best must be at least 1, got {args.n_best}")
    if args.n_best > 1 and (split or sampling is not None):
        raise CommandError("--n-best lists each sentence's translations: use it with --format lines, without --sample")
    glossary = load_glossary(args)
    if glossary is not None and (split or sampling is not None):
        raise CommandError("--glossary applies to --format lines without --sample")
    with contextlib.ExitStack() as files:
        # A missing input fails before the model loads; the output is not emptied if loading fails,
        # nor if the search asked for is one the model or engine cannot run.
        source = files.enter_context(open(args.input, "rb")) if args.input else sys.stdin.buffer
        translator = load_translator(args)
        choose_direction(translator, args)
        memory, memory_update = open_memory(args, translator, files)
        request = translator.request(n_best=args.n_best, sampling=sampling)  # the search options are the model's now
        if args.alignments:  # an old CTranslate2 export gives none: known once it is loaded
            translator.engine.capabilities.require(["alignment"], translator.engine.name)
        # The output file appears when the last line is written: an error part-way leaves none.
        target = files.enter_context(staged_text_file(args.output)) if args.output else sys.stdout
        translate_stream(
            translator,
            source,
            target,
            request,
            name=args.input or "<stdin>",
            chunk_lines=args.chunk,
            pretokenized=args.pretokenized,
            split_sentences=split,
            scores=args.scores,
            quality=args.qe,
            qe_passes=args.qe_passes,
            qe_seed=args.seed or 0,
            alignments=args.alignments,
            glossary=glossary,
            memory=memory,
            memory_update=memory_update,
        )
    return 0


# --- evaluate -----------------------------------------------------------------------------------
def read_test_set(args: argparse.Namespace) -> tuple[Path, list[str], list[str], bool]:
    """(source path, sources, references, pretokenized) from --test or --src/--ref, checked."""
    from ..data.corpus import read_lines
    from ..data.registry import is_pretokenized, parallel_files

    pretokenized = args.pretokenized
    if args.test and (args.src or args.ref):  # one set is scored: the other would be dropped unsaid
        raise CommandError("give --src FILE and --ref FILE, or --test CORPUS:SPLIT:SRC-TGT, not both")
    if args.test:
        try:
            corpus, split, pair = args.test.split(":")
            src_lang, tgt_lang = pair.split("-")
        except ValueError:
            raise CommandError(f"--test {args.test!r} must look like multi30k:test_2016_flickr:de-en") from None
        given = getattr(args, "source_lang", None)
        if given is not None and given != src_lang:  # the test set says which language its source is
            raise CommandError(f"--source-lang {given} is not the language of {args.test}'s source ({src_lang})")
        src_path, ref_path = parallel_files(corpus, split, src_lang, tgt_lang)  # the corpus knows the pair
        check_test_direction(args, src_lang, tgt_lang)
        pretokenized = pretokenized or is_pretokenized(corpus)
    elif args.src and args.ref:
        src_path, ref_path = Path(args.src), Path(args.ref)
    else:
        raise CommandError("give --src FILE and --ref FILE, or --test CORPUS:SPLIT:SRC-TGT")
    sources, references = list(read_lines(src_path)), list(read_lines(ref_path))
    if len(sources) != len(references):
        raise CommandError(f"{src_path} has {len(sources)} lines but {ref_path} has {len(references)}")
    if not sources:
        raise CommandError(f"{src_path} and {ref_path} are empty: no sentences to evaluate")
    return src_path, sources, references, pretokenized


def check_test_direction(args: argparse.Namespace, src_lang: str, tgt_lang: str) -> None:
    """Refuse a --test direction that a model of nmt's own was not trained for, naming those it was,
    before the model loads: its scores would be those of a language the model never read
    (--zero-shot, where a command has it, tries a multilingual model anyway, into a language it writes)."""
    from ..config_checks import ConfigError
    from ..directions import Directions
    from ..model_dir import read_directions

    directions = Directions(tuple(read_directions(args.model)))  # none for an imported model: nothing to go by
    try:
        directions.check_test_set(src_lang, tgt_lang, zero_shot=getattr(args, "zero_shot", None))
    except ConfigError as err:
        raise CommandError(f"{args.model} {err}") from None


def target_of_test_set(args: argparse.Namespace, target_languages: list[str]) -> str | None:
    """--target-lang, or a multi-target model's --test target (target_languages: the model's >>xx<<
    languages); a --target-lang other than the test's is refused where the model has a token for the
    test's (its references are in that language)."""
    if not args.test or ":" not in args.test or "-" not in args.test.rsplit(":", 1)[-1]:
        return args.target_lang
    src_lang, tgt_lang = args.test.rsplit(":", 1)[-1].split("-", 1)
    if args.target_lang is not None and args.target_lang != tgt_lang and tgt_lang in target_languages:
        raise CommandError(f"--target-lang {args.target_lang} is not the language of {args.test}'s references")
    if args.target_lang is None and tgt_lang in target_languages:
        return tgt_lang
    return args.target_lang


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ..evaluation import score_translations
    from ..translation_io import translate_sentences

    src_path, sources, references, pretokenized = read_test_set(args)
    glossary = load_glossary(args)
    translator = load_translator(args)
    translator.choose_target_language(target_of_test_set(args, translator.target_languages))
    if args.source_lang is not None:
        translator.choose_source_language(args.source_lang)
    hypotheses = translate_sentences(
        translator, sources, name=str(src_path), pretokenized=pretokenized, glossary=glossary
    )
    scores = score_translations(hypotheses, references, pretokenized=pretokenized)
    if args.json:
        settings = {
            "model": str(args.model),
            **translator.decode.search_settings(),
            "min_len": translator.decode.min_len,
            "engine": translator.engine.name,
            "precision": translator.engine.precision,
        }
        print(json.dumps({**settings, **scores.to_dict()}))
    else:
        print(f"BLEU {scores.bleu:.2f}   {scores.bleu_signature}")
        print(f"BLEU (lower-cased) {scores.bleu_lowercase:.2f}")
        print(f"chrF {scores.chrf:.2f}   {scores.chrf_signature}")
    return 0


# --- tune-length-penalty ------------------------------------------------------------------------
def parse_alphas(text: str) -> list[float]:
    """ "0.6,1,2" -> [0.6, 1.0, 2.0]; CommandError for anything else."""
    from ..search_settings import check_length_penalty

    try:
        alphas = [float(a) for a in text.split(",")]
        for alpha in alphas:
            check_length_penalty(alpha)
    except ValueError:
        raise CommandError(f"--alphas must be comma-separated numbers >= 0, e.g. 0.6,1,2; got {text!r}") from None
    return alphas


def cmd_tune_length_penalty(args: argparse.Namespace) -> int:
    from ..tuning import DEFAULT_ALPHAS, best_trial, try_length_penalty, write_length_penalty

    alphas = parse_alphas(args.alphas) if args.alphas is not None else list(DEFAULT_ALPHAS)
    _, sources, references, pretokenized = read_test_set(args)
    translator = load_translator(args)
    translator.choose_target_language(target_of_test_set(args, translator.target_languages))
    request = translator.request(beam=args.beam)
    if request.beam < 2:
        raise CommandError("greedy search (beam 1) has no length penalty to choose: give --beam N, N >= 2")
    trials = []
    for alpha in alphas:  # one line as each finishes: each is a whole pass over the set
        t = try_length_penalty(translator, sources, references, alpha, request=request, pretokenized=pretokenized)
        trials.append(t)
        print(
            f"alpha {t.alpha:<5g} BLEU {t.scores.bleu:6.2f}  lower-cased {t.scores.bleu_lowercase:6.2f}  "
            f"chrF {t.scores.chrf:6.2f}  length ratio {t.length_ratio:.3f}",
            flush=True,
        )
    best = best_trial(trials)
    print(f"best alpha {best.alpha:g} (the model's own: {translator.decode.length_penalty:g})")
    if args.write:
        path = write_length_penalty(args.model, best.alpha)
        print(f"wrote decode.length_penalty: {best.alpha:g} to {path}", file=sys.stderr)
    else:
        print(
            f"use it with --length-penalty {best.alpha:g}, or --write to make it the model's default", file=sys.stderr
        )
    return 0


# --- tune-precision -----------------------------------------------------------------------------
def cmd_tune_precision(args: argparse.Namespace) -> int:
    from ..model_dir import read_decode_config, read_directions
    from ..search_settings import SearchRequest
    from ..tuning import chosen_precision, try_precisions, write_precision

    if not args.tolerance >= 0:
        raise CommandError(f"--tolerance must be >= 0, got {args.tolerance}")
    request = SearchRequest.of(read_decode_config(args.model), beam=args.beam)  # checks --beam before any load
    _, sources, references, pretokenized = read_test_set(args)
    targets = sorted({t for _, t in read_directions(args.model)})  # an imported model's: only --target-lang
    target_lang = target_of_test_set(args, targets if len(targets) > 1 else [])
    trials = try_precisions(
        args.model,
        sources,
        references,
        request=request,
        pretokenized=pretokenized,
        target_lang=target_lang,
        source_case=args.source_case,
        truecase=args.truecase,
    )
    for t in trials:
        print(f"{t.precision:<5} BLEU {t.scores.bleu:6.2f}  chrF {t.scores.chrf:6.2f}  {t.seconds:6.2f} s", flush=True)
    choice = chosen_precision(trials, args.tolerance)
    print(f"choice: {choice}")
    if args.write:
        path = write_precision(args.model, choice)
        print(f"wrote decode.precision: {choice} to {path}", file=sys.stderr)
    else:
        print(f"--write makes {choice} the model's decode.precision", file=sys.stderr)
    return 0
