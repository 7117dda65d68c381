"""nmt import, export and average: model directories in from other toolkits, out to other engines,
and new weights files from a trained model."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..inference.choices import QUANTIZATIONS
from .common import CommandError, model_options, require_model_dir


def add_model_commands(sub: argparse._SubParsersAction) -> None:
    model = model_options()
    p = sub.add_parser(
        "import",
        help="import a pretrained model (Marian / OPUS-MT) as an nmt model directory",
        description="Read a Hugging Face MarianMTModel directory (config.json, model.safetensors or "
        "pytorch_model.bin, source.spm, target.spm, vocab.json, tokenizer_config.json), or a release in "
        "Marian's own format (decoder.yml and the .npz and vocabulary .yml files it names, source.spm, "
        "target.spm), and write an nmt model directory that translate, evaluate, serve, export and "
        "--init-from take. Nothing is written unless every file checks out. See docs/pretrained.md.",
    )
    p.add_argument("--from", dest="source_format", choices=("marian",), required=True, help="the format of DIR")
    p.add_argument("directory", metavar="DIR", help="the directory to import")
    p.add_argument("--out", required=True, help="model directory to create (must not exist)")
    for side in ("source", "target"):
        p.add_argument(
            f"--{side}-lang",
            metavar="XX",
            help=f"the {side} language's code (e.g. de): a Marian release does not name it; a Hugging Face "
            "directory's tokenizer_config.json does, and this replaces it (the server's LibreTranslate API "
            "and sentence splitting need it)",
        )
    p.set_defaults(func=cmd_import)

    p = sub.add_parser(
        "export",
        help="export a model to another inference engine (CTranslate2) or to Hugging Face transformers",
        parents=[model],
        description="--to ctranslate2: write the model as a CTranslate2 model directory (with nmt's "
        "tokenizer and settings copied), for `--engine ctranslate2`. --to huggingface: write a post-norm model "
        "(nmt's own with a joint vocabulary, or one imported from Marian) as a MarianMTModel directory that "
        "transformers loads, with its tokenizer (AutoTokenizer).",
    )
    p.add_argument(
        "--to", choices=("ctranslate2", "huggingface"), default="ctranslate2", help="target (default %(default)s)"
    )
    p.add_argument("--out", required=True, help="directory to create")
    p.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default=QUANTIZATIONS[0],
        help="how the weights are stored (default %(default)s; --precision can still quantise at load)",
    )
    p.add_argument("--weights", help="weights file to use instead of DIR/model.safetensors")
    p.add_argument(
        "--force", action="store_true", help="replace --out if it holds a CTranslate2 export (--to ctranslate2 only)"
    )
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
    which.add_argument(
        "--last", type=int, default=5, help="how many checkpoints (default %(default)s, or all that are kept)"
    )
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


def cmd_import(args: argparse.Namespace) -> int:
    from ..pretrained.importing import import_marian

    out = import_marian(args.directory, args.out, source_lang=args.source_lang, target_lang=args.target_lang)
    print(f"imported into {out}; translate with: nmt translate --model {out}", file=sys.stderr)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from ..inference.export_ctranslate2 import export_ctranslate2

    require_model_dir(args.model)
    if args.to == "huggingface":
        from ..pretrained.marian_export import export_huggingface

        if args.force or args.quantization != QUANTIZATIONS[0]:
            raise CommandError("--force and --quantization apply to --to ctranslate2 only")
        out = export_huggingface(args.model, args.out, weights=args.weights)
        print(
            f"exported to {out}; load it with transformers' MarianMTModel and AutoTokenizer .from_pretrained",
            file=sys.stderr,
        )
        return 0
    out = export_ctranslate2(
        args.model, args.out, quantization=args.quantization, weights=args.weights, force=args.force
    )
    print(f"exported to {out}; translate with: nmt translate --model {out} --engine ctranslate2", file=sys.stderr)
    return 0


def cmd_average(args: argparse.Namespace) -> int:
    from ..checkpoint import average_best_checkpoints, average_last_checkpoints, save_weights
    from ..model_dir import read_run_config

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
