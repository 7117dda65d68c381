"""nmt plot, attention and positions: PNG pictures of a run, of a translation, of the encodings."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..search_settings import check_beam
from .common import ENGINE_DEFAULTS, CommandError, check_device, model_options, require_model_dir


def add_picture_commands(sub: argparse._SubParsersAction) -> None:
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
        parents=[model_options()],
        description="Cross- and self-attention of every layer and head, one PNG per kind.",
    )
    p.add_argument("sentence", help="source sentence")
    p.add_argument("--out-dir", help="folder for the PNGs (default: MODEL_DIR/attention)")
    p.add_argument("--beam", type=int, help="beam size for the translation (default: the model's, as nmt translate)")
    p.add_argument("--device", default=ENGINE_DEFAULTS.device, help="auto | cpu | cuda[:N]")
    p.set_defaults(func=cmd_attention)

    p = sub.add_parser(
        "positions",
        help="plot the sinusoidal positional encodings (PNG)",
        description="Heatmap of PE(p, i) as in the reference design: a model's own (--model), or one of "
        "the width --d-model.",
    )
    p.add_argument(
        "--model",
        metavar="DIR",
        help="draw this model's table (its d_model, base and layout) into DIR/positional_encoding.png",
    )
    p.add_argument(
        "--out",
        help="PNG to write (default: DIR/positional_encoding.png with --model, else positional_encoding.png here)",
    )
    p.add_argument("--d-model", type=int, default=None, help="encoding width without --model (default 128)")
    p.add_argument("--length", type=int, default=100, help="positions to draw (default %(default)s)")
    p.set_defaults(func=cmd_positions)


def cmd_plot(args: argparse.Namespace) -> int:
    from ..plots import plot_learning_curves

    print(plot_learning_curves(args.model_dir, args.out))
    return 0


def cmd_attention(args: argparse.Namespace) -> int:
    from ..plots import plot_attention
    from ..translator import Translator

    if args.beam is not None:
        check_beam(args.beam)
    check_device(args.device)
    translator = Translator.load(args.model, device=args.device)
    out_dir = args.out_dir or Path(args.model) / "attention"  # beside the model, as `nmt plot` writes
    for path in plot_attention(translator, args.sentence, out_dir, translator.request(beam=args.beam)):
        print(path)
    return 0


def cmd_positions(args: argparse.Namespace) -> int:
    from ..plots import plot_model_positions, plot_positional_encoding

    if args.model is None:
        out = args.out or "positional_encoding.png"
        d_model = 128 if args.d_model is None else args.d_model
        print(plot_positional_encoding(out, d_model=d_model, length=args.length))
        return 0
    if args.d_model is not None:
        raise CommandError("--d-model draws a table of that width; --model draws the model's own: not both")
    require_model_dir(args.model, "--model")
    out = args.out or Path(args.model) / "positional_encoding.png"  # beside the model, as `nmt plot` writes
    print(plot_model_positions(args.model, out, length=args.length))
    return 0
