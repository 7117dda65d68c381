"""The `nmt` parser and entry point: each command group adds its own subcommands."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from ..config_checks import ConfigError
from .common import CommandError, Parser
from .data import add_data
from .distill import add_distill
from .info import add_info
from .models import add_model_commands
from .pictures import add_picture_commands
from .quality import add_calibrate
from .serve import add_serve
from .shortlist import add_shortlist
from .train import add_train
from .translate import add_translate_commands
from .truecaser import add_truecaser

# Exit statuses: 2 for input the user can fix (a bad value, file or option: our own words, as
# argparse's usage errors), 1 for a failure that is not the input's fault (a bug, a library's
# runtime error), 130/141 for an interrupt or a closed pipe.
BAD_INPUT = (CommandError, ValueError, OSError, ImportError)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="nmt", description="Transformer neural machine translation.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_train(sub)
    add_distill(sub)
    add_translate_commands(sub)
    add_data(sub)
    add_model_commands(sub)
    add_shortlist(sub)
    add_truecaser(sub)
    add_info(sub)
    add_calibrate(sub)
    add_serve(sub)
    add_picture_commands(sub)
    for command in sub.choices.values():  # to name an option in the words of a value's error (see describe_error)
        command.set_defaults(options={a.dest: a.option_strings[0] for a in command._actions if a.option_strings})
    return parser


def describe_error(err: Exception, options: dict[str, str] | None = None) -> str:
    """One line for the user: our own messages as they are, anything unexpected with its type.

    A value checked by a settings dataclass (EngineOptions, SearchRequest, Sampling) names its field
    alone; where the command has an option of that name, the message names the option instead.
    """
    options = options or {}
    if isinstance(err, ConfigError) and err.key in options:
        text = f"{options[err.key]} {err.problem}"
    elif isinstance(err, OSError) and err.filename is not None and err.strerror:
        text = f"{err.filename}: {err.strerror}"  # as cat says it, without Python's "[Errno 2]"
    elif isinstance(err, (*BAD_INPUT, RuntimeError)):
        text = str(err)
    else:  # a bug, or a library's own failure we have not put into words
        text = f"{type(err).__name__}: {err} (run with -v for the traceback)"
    return " ".join(text.split())  # a library's multi-line message still makes one line


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the command's own parser, whose --help lists the options it does take
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
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
        print(f"nmt {args.command}: error: {describe_error(err, args.options)}", file=sys.stderr)
        return 2 if isinstance(err, BAD_INPUT) else 1
