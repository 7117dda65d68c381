"""The `nmt` command: a thin shell over the Python API.

nmt train CONFIG --out DIR [--set section.key=value ...] [--resume | --init-from MODEL_DIR]
nmt translate --model DIR [--beam N | --sample [--temperature T] [--top-k K] [--seed S]] [--input FILE] [--output FILE]
nmt evaluate --model DIR (--src FILE --ref FILE | --test multi30k:test_2016_flickr:de-en) [--json]
nmt translate|evaluate ... [--length-penalty ALPHA]
nmt tune-length-penalty --model DIR --test multi30k:val:de-en [--alphas 0.6,1,1.5,2] [--write]
nmt translate|evaluate ... [--engine torch|ctranslate2] [--precision fp32|int8|bf16] [--workers N] [--threads N]
nmt export --model DIR --to ctranslate2 --out DIR2 [--quantization float32|int8|int16]
nmt average --model DIR [--last K | --best K [--metric bleu|loss]]
nmt serve --model DIR [--host 127.0.0.1] [--port 8000]
nmt plot DIR [--out FILE]
nmt attention --model DIR "sentence" [--out-dir DIR]
nmt positions [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import sys
from pathlib import Path
from typing import NoReturn

log = logging.getLogger("nmt")


# Far wider than useful (Vaswani et al. use 4): every step ranks 2 * beam candidates per sentence, so
# a typo like --beam 1000 is refused at once instead of running slowly or failing deep in the search.
MAX_BEAM = 256


class CommandError(Exception):
    """A user-facing failure: printed as one line, exit status 1, no traceback."""


class Parser(argparse.ArgumentParser):
    """argparse with its errors on one line, like every other failure (the usage is in --help)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# --- checks of options shared by several commands ------------------------------------------------
def check_beam(beam: int | None, option: str = "--beam") -> None:
    """Refuse a beam size outside 1..MAX_BEAM (None: the model's own decode.beam)."""
    if beam is not None and not 1 <= beam <= MAX_BEAM:
        raise CommandError(f"{option} must be between 1 and {MAX_BEAM}, got {beam}")


def check_length_penalty(alpha: float | None) -> None:
    """Refuse a negative or non-finite --length-penalty (None: the model's own decode.length_penalty)."""
    if alpha is not None and not 0 <= alpha < math.inf:
        raise CommandError(f"--length-penalty must be a number >= 0, got {alpha}")


def check_device(device: str) -> None:
    """Refuse a --device that torch could not use on this machine, before anything is loaded."""
    import torch

    from .config import DEVICE

    if not DEVICE.test(device):
        raise CommandError(f"--device must be {DEVICE.says}, got {device!r}")
    if device.startswith("cuda"):
        index, count = int(device.partition(":")[2] or 0), torch.cuda.device_count()
        if index >= count:
            raise CommandError(f"--device {device}: this machine has {count} CUDA device(s)")


def require_model_dir(model_dir: str, option: str = "--model") -> None:
    """Refuse a --model that is not a directory (commands that do not load a Translator)."""
    if not Path(model_dir).is_dir():
        raise CommandError(f"{option}: model directory {model_dir} does not exist")


# --- train -------------------------------------------------------------------------------------
def cmd_train(args: argparse.Namespace) -> int:
    from .config import load_config
    from .model_dir import RUN_CONFIG, holds_training_run
    from .training.run import train

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CommandError(f"--out {out} is a file: give a directory to train into")
    config_path = args.config
    if args.init_from:
        require_model_dir(args.init_from, "--init-from")
    if args.resume:
        if config_path is None:  # the run's own settings (a CONFIG given replaces them)
            config_path = out / RUN_CONFIG
            if not config_path.exists():
                raise CommandError(
                    f"--resume: {config_path} not found: give the run's CONFIG file, or start "
                    "a new run without --resume"
                )
        if args.init_from:
            raise CommandError("--init-from starts a new run from a trained model; --resume continues a run: not both")
    elif config_path is None:
        raise CommandError("give a CONFIG file (or --resume with --out DIR)")
    elif holds_training_run(out):
        raise CommandError(
            f"{out} already holds a training run: add --resume to continue it, "
            "or choose another --out (a tokenizer alone there is reused)"
        )
    # The run's own config.yaml names every key: a missing one means it was cut short.
    config = load_config(config_path, args.set or [], complete=args.resume and args.config is None)
    reason = train(config, out, resume=args.resume, progress_bar=not args.quiet, init_from=args.init_from)
    print(f"training stopped: {reason}; model in {out}", file=sys.stderr)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        # Everything is saved and the process group is gone, but under torchrun torch's C++ threads
        # now and then abort the interpreter's teardown ("terminate called without an active
        # exception", exit -6, seen on CPU/gloo in about 1 run in 15): skip the teardown.
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(0)
    return 0


# --- translate ----------------------------------------------------------------------------------
def model_options() -> argparse.ArgumentParser:
    """The option of every command that reads a model directory."""
    parent = Parser(add_help=False)
    parent.add_argument("--model", required=True, help="model directory")
    return parent


def beam_options() -> argparse.ArgumentParser:
    """The search width, for the commands that translate with the model's defaults."""
    parent = Parser(add_help=False)
    parent.add_argument(
        "--beam", type=int, default=None, help="beam size (default: the model's decode.beam; 1 = greedy)"
    )
    return parent


def length_penalty_options() -> argparse.ArgumentParser:
    """The length penalty, for the commands that translate with beam search."""
    parent = Parser(add_help=False)
    parent.add_argument(
        "--length-penalty",
        type=float,
        default=None,
        metavar="ALPHA",
        help="GNMT length penalty alpha for beam search: a finished hypothesis scores log-prob / "
        "((5 + length) / 6)^alpha; 0 ranks by log-prob, larger favours longer output (default: the "
        "model's decode.length_penalty; choose it on a validation set with `nmt tune-length-penalty`)",
    )
    return parent


def engine_options(
    workers_default: str = "one per core; the torch engine uses at most 8, and fewer for few sentences",
) -> argparse.ArgumentParser:
    """The options that choose how a model translates (translate, evaluate, serve)."""
    parent = Parser(add_help=False)
    g = parent.add_argument_group("engine")
    g.add_argument(
        "--engine",
        choices=("torch", "ctranslate2"),
        default="torch",
        help="torch: nmt's own; ctranslate2: a directory from `nmt export --to ctranslate2`, or a "
        "model directory converted at load (needs the ctranslate2 extra)",
    )
    g.add_argument(
        "--precision",
        choices=("fp32", "int8", "bf16"),
        default=None,
        help="int8: int8 linear layers (CPU, either engine); bf16: CUDA (either engine) or, for the "
        "torch engine, CPUs with AMX (default: fp32, except bf16 for ctranslate2 on CUDA: the torch "
        "engine's bf16 decoding was slower on an H100, see docs/benchmarks.md); refused where the "
        "device does not run it well",
    )
    g.add_argument(
        "--workers", type=int, default=None, help=f"batches translated in parallel (default: {workers_default})"
    )
    g.add_argument("--threads", type=int, default=None, help="intra-op threads per worker (default: cores / workers)")
    g.add_argument(
        "--worker-threads",
        action="store_true",
        help="torch engine: every worker a thread of this process (by default, once a run has decoded for 30 s "
        "or at the start of `nmt serve`, the workers beyond the first are processes: faster, but each holds a "
        "copy of the model)",
    )
    g.add_argument("--weights", help="weights file to use instead of DIR/model.safetensors")
    g.add_argument("--device", default="auto", help="auto | cpu | cuda")
    return parent


def scored_set_options(example: str) -> argparse.ArgumentParser:
    """The sentences to translate and score against references (evaluate, tune-length-penalty)."""
    parent = Parser(add_help=False)
    parent.add_argument("--src", help="source file")
    parent.add_argument("--ref", help="reference file")
    parent.add_argument("--test", help=f"a named set of a known corpus, e.g. {example}")
    parent.add_argument(
        "--pretokenized",
        action="store_true",
        help="the text is tokenised already: BLEU on its own tokens (tokenize=none); automatic for a --test "
        "corpus that is (ted_hrlr)",
    )
    return parent


def check_engine_options(args: argparse.Namespace) -> None:
    """Refuse bad engine options before anything is loaded."""
    check_device(args.device)
    for name in ("workers", "threads"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise CommandError(f"--{name} must be at least 1, got {getattr(args, name)}")
    if getattr(args, "sample", False) and args.engine == "ctranslate2":
        raise CommandError("--sample needs --engine torch (the ctranslate2 engine does not sample here)")


def load_translator(args: argparse.Namespace):
    """The Translator that the engine and beam options describe."""
    from .translator import Translator

    check_beam(args.beam)
    check_length_penalty(getattr(args, "length_penalty", None))
    check_engine_options(args)
    return Translator.load(
        args.model,
        device=args.device,
        weights=args.weights,
        engine=args.engine,
        precision=args.precision,
        workers=args.workers,
        threads=args.threads,
        worker_processes=not args.worker_threads,
    )


def cmd_translate(args: argparse.Namespace) -> int:
    from .translation_io import translate_stream
    from .translator import Sampling

    if args.chunk < 1:
        raise CommandError(f"--chunk must be at least 1, got {args.chunk}")
    sampling = None
    if args.sample:
        if args.beam is not None:
            raise CommandError("--sample draws one translation at random: leave out --beam")
        if args.length_penalty is not None:
            raise CommandError("--length-penalty ranks beam search hypotheses: it does not apply to --sample")
        sampling = Sampling(temperature=args.temperature, top_k=args.top_k, seed=args.seed)
    elif (args.temperature, args.top_k, args.seed) != (1.0, 0, None):
        raise CommandError("--temperature, --top-k and --seed apply to --sample only")
    with contextlib.ExitStack() as files:
        # A missing input fails before the model loads; the output is not emptied if loading fails.
        source = files.enter_context(open(args.input, "rb")) if args.input else sys.stdin.buffer
        translator = load_translator(args)
        target = files.enter_context(open(args.output, "w", encoding="utf-8")) if args.output else sys.stdout
        translate_stream(
            translator,
            source,
            target,
            beam=args.beam,
            length_penalty=args.length_penalty,
            sampling=sampling,
            name=args.input or "<stdin>",
            chunk_lines=args.chunk,
        )
    return 0


# --- evaluate -----------------------------------------------------------------------------------
def read_test_set(args: argparse.Namespace) -> tuple[Path, list[str], list[str], bool]:
    """(source path, sources, references, pretokenized) from --test or --src/--ref, checked."""
    from .data.corpus import read_lines
    from .data.registry import is_pretokenized, parallel_files

    pretokenized = args.pretokenized
    if args.test:
        try:
            corpus, split, pair = args.test.split(":")
            src_lang, tgt_lang = pair.split("-")
        except ValueError:
            raise CommandError(f"--test {args.test!r} must look like multi30k:test_2016_flickr:de-en") from None
        src_path, ref_path = parallel_files(corpus, split, src_lang, tgt_lang)
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


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .evaluation import score_translations
    from .translation_io import translate_sentences

    src_path, sources, references, pretokenized = read_test_set(args)
    translator = load_translator(args)
    hypotheses = translate_sentences(
        translator, sources, beam=args.beam, length_penalty=args.length_penalty, name=str(src_path)
    )
    scores = score_translations(hypotheses, references, pretokenized=pretokenized)
    if args.json:
        print(
            json.dumps(
                {
                    "model": str(args.model),
                    "beam": args.beam or translator.decode.beam,
                    "length_penalty": translator.decode.length_penalty
                    if args.length_penalty is None
                    else args.length_penalty,
                    "engine": translator.engine.name,
                    "precision": translator.engine.precision,
                    **scores.to_dict(),
                }
            )
        )
    else:
        print(f"BLEU {scores.bleu:.2f}   {scores.bleu_signature}")
        print(f"BLEU (lower-cased) {scores.bleu_lowercase:.2f}")
        print(f"chrF {scores.chrf:.2f}   {scores.chrf_signature}")
    return 0


def parse_alphas(text: str) -> list[float]:
    """ "0.6,1,2" -> [0.6, 1.0, 2.0]; CommandError for anything else."""
    try:
        alphas = [float(a) for a in text.split(",")]
    except ValueError:
        alphas = []
    if not alphas or any(not 0 <= a < math.inf for a in alphas):
        raise CommandError(f"--alphas must be comma-separated numbers >= 0, e.g. 0.6,1,2; got {text!r}")
    return alphas


def cmd_tune_length_penalty(args: argparse.Namespace) -> int:
    from .tuning import DEFAULT_ALPHAS, best_trial, try_length_penalty, write_length_penalty

    alphas = parse_alphas(args.alphas) if args.alphas is not None else list(DEFAULT_ALPHAS)
    _, sources, references, pretokenized = read_test_set(args)
    translator = load_translator(args)
    if (args.beam or translator.decode.beam) < 2:
        raise CommandError("greedy search (beam 1) has no length penalty to choose: give --beam N, N >= 2")
    trials = []
    for alpha in alphas:  # one line as each finishes: each is a whole pass over the set
        t = try_length_penalty(translator, sources, references, alpha, beam=args.beam, pretokenized=pretokenized)
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


# --- data ---------------------------------------------------------------------------------------
def cmd_data(args: argparse.Namespace) -> int:
    from .data.catalog import fetch_corpus, format_corpus_table, human_bytes, list_corpora

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


# --- export -------------------------------------------------------------------------------------
def cmd_export(args: argparse.Namespace) -> int:
    from .export_ctranslate2 import export_ctranslate2

    require_model_dir(args.model)
    out = export_ctranslate2(
        args.model, args.out, quantization=args.quantization, weights=args.weights, force=args.force
    )
    print(f"exported to {out}; translate with: nmt translate --model {out} --engine ctranslate2", file=sys.stderr)
    return 0


# --- average ------------------------------------------------------------------------------------
def cmd_average(args: argparse.Namespace) -> int:
    from .checkpoint import average_best_checkpoints, average_last_checkpoints, save_weights
    from .model_dir import read_run_config

    count = args.best if args.best is not None else args.last
    if args.metric is not None and args.best is None:
        raise CommandError("--metric ranks checkpoints for --best: give --best K with it")
    if count < 1:
        raise CommandError(f"--{'best' if args.best is not None else 'last'} must be at least 1, got {count}")
    require_model_dir(args.model)
    if args.best is not None:
        run = read_run_config(args.model)
        metric = args.metric or (run.train.best_metric if run is not None else "bleu")
        model, names = average_best_checkpoints(args.model, args.best, metric)
        if len(names) < args.best:
            print(f"note: only {len(names)} kept checkpoints have a validation {metric}", file=sys.stderr)
        if run is not None and (run.train.keep_best < args.best or run.train.best_metric != metric):
            # Pruning ran during training by other rules: the true K best may be gone.
            print(
                f"note: this run kept its last {run.train.keep_last} checkpoints and its {run.train.keep_best} "
                f"best by {run.train.best_metric} (train.keep_last, train.keep_best); the best by {metric} "
                "are chosen among those",
                file=sys.stderr,
            )
    else:
        model, names = average_last_checkpoints(args.model, args.last)
    out = Path(args.output) if args.output else Path(args.model) / "model.averaged.safetensors"
    save_weights(model, out)
    print(
        f"averaged {len(names)} checkpoints ({', '.join(names)}) into {out}; use it with --weights {out}",
        file=sys.stderr,
    )
    return 0


# --- serve and pictures ---------------------------------------------------------------------------
def cmd_serve(args: argparse.Namespace) -> int:
    from .server import BatchingConfig, ConnectionOptions, ServerLimits, access_policy, serve

    check_beam(args.max_beam, "--max-beam")
    # The dataclasses check every value (ValueError: one line for the user, see main).
    limits = ServerLimits(
        max_sentences=args.max_sentences,
        max_chars=args.max_chars,
        max_beam=args.max_beam,
        max_body_bytes=args.max_body_bytes,
        max_attention_sentences=args.max_attention_sentences,
        max_attention_cells=args.max_attention_cells,
        body_timeout_s=args.body_timeout,
        deadline_s=args.deadline,
    )
    batching = BatchingConfig(
        window_ms=args.batch_window_ms,
        max_sentences=args.batch_sentences,
        max_pending_sentences=args.max_pending_sentences,
        stop_timeout_s=args.stop_timeout,
    )
    connections = ConnectionOptions(
        header_timeout_s=args.header_timeout,
        keep_alive_s=args.keep_alive,
        max_connections=args.max_connections or None,
        max_header_bytes=args.max_header_bytes,
        backlog=args.backlog,
        graceful_timeout_s=args.graceful_timeout,
    )
    access = access_policy(args.host, allowed_hosts=args.allowed_hosts, allowed_origins=args.allowed_origins)
    if batching.max_pending_sentences < limits.max_sentences:
        raise CommandError(
            f"--max-pending-sentences ({batching.max_pending_sentences}) must be at least "
            f"--max-sentences ({limits.max_sentences})"
        )
    if not 0 <= args.port <= 65535:
        raise CommandError(f"--port must be between 0 and 65535, got {args.port}")
    check_engine_options(args)
    check_length_penalty(args.length_penalty)
    load = dict(
        length_penalty=args.length_penalty,
        device=args.device,
        weights=args.weights,
        engine=args.engine,
        precision=args.precision,
        workers=args.workers,
        threads=args.threads,
        worker_processes=not args.worker_threads,
    )
    serve(
        args.model,
        host=args.host,
        port=args.port,
        limits=limits,
        load=load,
        batching=batching,
        access=access,
        connections=connections,
    )
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from .plots import plot_learning_curves

    out = plot_learning_curves(args.model_dir, args.out)
    print(out)
    return 0


def cmd_attention(args: argparse.Namespace) -> int:
    from .plots import plot_attention
    from .translator import Translator

    check_beam(args.beam)
    check_device(args.device)
    translator = Translator.load(args.model, device=args.device)
    for path in plot_attention(translator, args.sentence, args.out_dir, beam=args.beam):
        print(path)
    return 0


def cmd_positions(args: argparse.Namespace) -> int:
    from .plots import plot_positional_encoding

    print(plot_positional_encoding(args.out, d_model=args.d_model, length=args.length))
    return 0


# --- the parser ---------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="nmt", description="Transformer neural machine translation.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "train",
        help="train a tokenizer (if needed) and a model",
        description="Train into a self-contained model directory.",
    )
    p.add_argument("config", nargs="?", help="YAML config (see configs/); optional with --resume")
    p.add_argument("--out", required=True, help="model directory to create (or resume)")
    p.add_argument(
        "--set",
        action="extend",
        nargs="+",
        metavar="SECTION.KEY=VALUE",
        help="override config fields, e.g. --set train.max_steps=200 train.seed=2 (or repeat --set)",
    )
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --out")
    p.add_argument(
        "--init-from",
        metavar="MODEL_DIR",
        help="fine-tune: start from this trained model's weights and tokenizer (fresh optimizer and "
        "warm-up; the config's model section must build the same model, dropout aside)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_train)

    model, beam, engine = model_options(), beam_options(), engine_options()
    length_penalty = length_penalty_options()
    p = sub.add_parser(
        "translate",
        help="translate lines from a file or stdin",
        parents=[model, beam, length_penalty, engine],
        description="One output line per input line, in order, written as it goes.",
    )
    p.add_argument("--input", help="input file (default: stdin)")
    p.add_argument("--output", help="output file (default: stdout)")
    p.add_argument("--chunk", type=int, default=1000, help="lines read, sorted and translated together")
    p.add_argument(
        "--sample",
        action="store_true",
        help="draw each translation at random from the model (back-translation, data augmentation)",
    )
    p.add_argument("--temperature", type=float, default=1.0, help="with --sample: > 1 flattens, < 1 sharpens")
    p.add_argument("--top-k", type=int, default=0, help="with --sample: draw among the k most likely tokens (0: all)")
    p.add_argument("--seed", type=int, default=None, help="with --sample: seed for reproducible draws")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser(
        "evaluate",
        help="BLEU and chrF (sacreBLEU) on a test set",
        parents=[model, beam, length_penalty, engine, scored_set_options("multi30k:test_2016_flickr:de-en")],
        description="Translate a test set and score it with sacreBLEU.",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser(
        "tune-length-penalty",
        help="choose beam search's length penalty on a validation set",
        parents=[model, beam, engine, scored_set_options("multi30k:val:de-en")],
        description="Translate a validation set with beam search under each length penalty alpha, print "
        "BLEU, chrF and the length ratio of each, and name the alpha with the best cased BLEU. Choose on a "
        "validation set, never on the test set you report.",
    )
    p.add_argument(
        "--alphas", help="comma-separated alphas to try (default: nmt.tuning.DEFAULT_ALPHAS, 0.6,1,1.5,2,2.5,3)"
    )
    p.add_argument(
        "--write", action="store_true", help="make the best alpha the model's decode.length_penalty (DIR/config.yaml)"
    )
    p.set_defaults(func=cmd_tune_length_penalty)

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

    p = sub.add_parser(
        "export",
        help="export a model to another inference engine (CTranslate2)",
        parents=[model],
        description="Write the model as a CTranslate2 model directory (with nmt's tokenizer and "
        "settings copied), for `--engine ctranslate2`.",
    )
    p.add_argument("--to", choices=("ctranslate2",), default="ctranslate2", help="target engine")
    p.add_argument("--out", required=True, help="directory to create")
    p.add_argument(
        "--quantization",
        choices=("float32", "int8", "int16"),
        default="float32",
        help="how the weights are stored (default float32; --precision can still quantise at load)",
    )
    p.add_argument("--weights", help="weights file to use instead of DIR/model.safetensors")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "average",
        help="average the last K checkpoints (or the K that validated best)",
        parents=[model],
        description="Element-wise mean of the last K checkpoints' weights, or of the K best by "
        "validation (--best K; train.keep_best K keeps them on disk), written to a new file (the "
        "best weights, DIR/model.safetensors, are left alone).",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--last", type=int, default=5, help="how many checkpoints (default 5, or all that are kept)")
    which.add_argument(
        "--best",
        type=int,
        metavar="K",
        help="average the K kept checkpoints that validated best instead of the last ones (train with "
        "train.keep_best K so that they are kept)",
    )
    p.add_argument(
        "--metric",
        choices=("bleu", "loss"),
        help="validation metric that ranks checkpoints for --best (default: the run's train.best_metric)",
    )
    p.add_argument(
        "--output",
        help="weights file to write (default: DIR/model.averaged.safetensors); translate with it through --weights",
    )
    p.set_defaults(func=cmd_average)

    p = sub.add_parser(
        "serve",
        help="HTTP translation server with a web page",
        parents=[
            model,
            length_penalty,
            engine_options("torch: a core each, at most 8, a small batch on one; ctranslate2: 1"),
        ],
        description="Serve POST /translate, GET /health, GET /metrics and a web page at /. "
        "Every limit below is explained in docs/serving.md.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    g = p.add_argument_group("what one request may ask for (larger: 413/422 naming the limit)")
    g.add_argument("--max-sentences", type=int, default=64, help="most sentences in one request (default 64)")
    g.add_argument("--max-chars", type=int, default=1000, help="most characters in one sentence (default 1000)")
    g.add_argument("--max-beam", type=int, default=8, help="largest beam a request may ask for (default 8)")
    g.add_argument("--max-body-bytes", type=int, default=256 * 1024, help="largest request body (default 262144)")
    g.add_argument(
        "--max-attention-sentences",
        type=int,
        default=8,
        help="most sentences in a request that asks for attention (default 8)",
    )
    g.add_argument(
        "--max-attention-cells",
        type=int,
        default=2_000_000,
        help="most attention weights in one answer, about 8 bytes each as JSON (default 2000000)",
    )
    g = p.add_argument_group("load (over it: 503 with Retry-After)")
    g.add_argument(
        "--max-pending-sentences",
        type=int,
        default=256,
        help="sentences waiting for the model; more are refused (default 256)",
    )
    g.add_argument(
        "--deadline",
        type=float,
        default=30.0,
        help="seconds from a request's body to its answer; past it, 503 and the work is dropped (default 30)",
    )
    g.add_argument(
        "--batch-window-ms",
        type=float,
        default=5.0,
        help="how long the worker waits for more requests to batch (default 5)",
    )
    g.add_argument("--batch-sentences", type=int, default=64, help="sentences per model call, at most (default 64)")
    g = p.add_argument_group("connections (uvicorn's own limits)")
    g.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        help="seconds for a request's line and headers to arrive; then the connection closes (default 10)",
    )
    g.add_argument(
        "--body-timeout", type=float, default=10.0, help="seconds for the body to arrive; then 408 (default 10)"
    )
    g.add_argument(
        "--keep-alive", type=int, default=5, help="seconds an idle keep-alive connection stays open (default 5)"
    )
    g.add_argument(
        "--max-connections",
        type=int,
        default=1024,
        help="connections plus requests in progress; more get 503 (0: no limit; default 1024)",
    )
    g.add_argument(
        "--max-header-bytes",
        type=int,
        default=16 * 1024,
        help="request line and headers; more is a 400 (default 16384)",
    )
    g.add_argument("--backlog", type=int, default=128, help="connections waiting to be accepted (default 128)")
    g.add_argument(
        "--graceful-timeout",
        type=float,
        default=5.0,
        help="at SIGTERM, seconds for requests in progress before they are answered 503 (default 5)",
    )
    g.add_argument(
        "--stop-timeout",
        type=float,
        default=4.0,
        help="then, seconds for the batch in the model's hands before the process exits anyway (default 4)",
    )
    g = p.add_argument_group("cross-site protection")
    g.add_argument(
        "--allowed-hosts",
        default=None,
        help="comma-separated Host names to answer, '*' for any (default: 127.0.0.1, localhost, ::1 "
        "and --host); behind a proxy, the public name",
    )
    g.add_argument(
        "--allowed-origins",
        default="",
        help="comma-separated origins (scheme://host[:port]) whose pages may call the API, besides the "
        "server's own page; '*' for any (default: none)",
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser(
        "plot",
        help="learning curves of a model directory (PNG)",
        description="Draw loss, BLEU and learning rate from DIR/metrics.jsonl.",
    )
    p.add_argument("model_dir", help="model directory")
    p.add_argument("--out", help="PNG to write (default: DIR/learning_curves.png)")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser(
        "attention",
        help="attention heatmaps for one sentence (PNG)",
        parents=[model],
        description="Cross- and self-attention of every layer and head, one PNG per kind.",
    )
    p.add_argument("sentence", help="source sentence")
    p.add_argument("--out-dir", default="attention", help="folder for the PNGs (default ./attention)")
    p.add_argument("--beam", type=int, default=1, help="beam size for the translation (default 1)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.set_defaults(func=cmd_attention)

    p = sub.add_parser(
        "positions",
        help="plot the sinusoidal positional encodings (PNG)",
        description="Heatmap of PE(p, i) as in the reference design.",
    )
    p.add_argument("--out", default="positional_encoding.png", help="PNG to write")
    p.add_argument("--d-model", type=int, default=128, help="encoding width")
    p.add_argument("--length", type=int, default=100, help="positions to draw")
    p.set_defaults(func=cmd_positions)
    return parser


def describe_error(err: Exception) -> str:
    """One line for the user: our own messages as they are, anything unexpected with its type."""
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        text = f"{err.filename}: {err.strerror}"  # as cat says it, without Python's "[Errno 2]"
    elif isinstance(err, (CommandError, ValueError, OSError, RuntimeError, ImportError)):
        text = str(err)
    else:  # a bug, or a library's own failure we have not put into words
        text = f"{type(err).__name__}: {err} (run with -v for the traceback)"
    return " ".join(text.split())  # a library's multi-line message still makes one line


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
    )
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("nmt: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`nmt translate ... | head`): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 141  # 128 + SIGPIPE, what the shell reports for a writer the pipe stopped
    except Exception as err:  # one line for the user; -v shows the traceback
        if args.verbose:
            raise
        print(f"nmt {args.command}: error: {describe_error(err)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
