"""What several commands share: the parser class, the user-facing error, option groups and their checks.

Nothing here imports torch at load: `nmt --help` builds every parser without it. Choices and
defaults come from their owners (nmt.inference.choices, EngineOptions, WorkerPolicy), never
restated.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path
from typing import NoReturn

from ..inference.choices import COMMAND_LINE_ENGINE, ENGINES, PRECISIONS
from ..inference.contract import ENGINE_CAPABILITIES, ENGINE_DEFAULTS, Capabilities, EngineOptions, engine_for
from ..inference.plan import DEFAULT_POLICY
from ..search_settings import SEARCH_FIELD_INFO, SEARCH_FIELDS, SearchRequest


class CommandError(Exception):
    """A user-facing failure: printed as one line, exit status 2, no traceback."""


class Parser(argparse.ArgumentParser):
    """argparse with its errors on one line, like every other failure (the usage is in --help)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# --- checks of options shared by several commands ------------------------------------------------
def check_device(device: str) -> None:
    """Refuse a --device that torch could not use on this machine, before anything is loaded."""
    import torch

    from ..config import DEVICE

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


# --- option groups ------------------------------------------------------------------------------
def model_options() -> argparse.ArgumentParser:
    """The option of every command that reads a model directory."""
    parent = Parser(add_help=False)
    parent.add_argument("--model", required=True, help="model directory")
    return parent


def search_flag(parser: argparse.ArgumentParser, name: str) -> None:
    """The flag of search setting `name` (`--length-penalty` for length_penalty), as SearchSettings
    declares it; its default None leaves the model's own decode setting."""
    info = SEARCH_FIELD_INFO[name]
    flag, kind = "--" + name.replace("_", "-"), info["type"]
    if kind == "bool":
        parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=info["help"])
    elif info["choices"]:
        parser.add_argument(flag, choices=info["choices"], default=None, help=info["help"])
    else:
        typed = {"int": int, "float": float}[kind]
        parser.add_argument(flag, type=typed, default=None, metavar=info["metavar"], help=info["help"])


def beam_options() -> argparse.ArgumentParser:
    """The search width, for the commands that translate with the model's defaults."""
    parent = Parser(add_help=False)
    search_flag(parent, "beam")
    return parent


def count(text: str) -> int:
    """An argparse type: a whole number >= 0 (argparse reports the option and the value otherwise)."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def length_penalty_options() -> argparse.ArgumentParser:
    """How beam search ranks and stops, for the commands that translate with it: every search
    setting but the beam (nmt.search_settings), and the model's minimum output length."""
    parent = Parser(add_help=False)
    for name in SEARCH_FIELDS:
        if name != "beam":
            search_flag(parent, name)
    parent.add_argument(
        "--min-len",
        type=count,
        default=None,
        metavar="N",
        help="output tokens a sentence must have before the end token may come (default: the model's "
        "decode.min_len: 1 for nmt's own models, so that no real sentence is translated to nothing; "
        "transformers' min_length - 1, usually 0, for an imported one)",
    )
    return parent


def engine_arguments() -> argparse.ArgumentParser:
    """The options that choose how a model translates (translate, evaluate, tune, serve): EngineOptions."""
    parent = Parser(add_help=False)
    g = parent.add_argument_group("engine")
    g.add_argument(
        "--engine",
        choices=ENGINES,
        default=COMMAND_LINE_ENGINE,
        help="auto (the default): CTranslate2 on CPU where it is installed and can run the model (measured "
        "faster; its export is kept in MODEL_DIR/ctranslate2), nmt's engine otherwise and for "
        "--sample and --glossary; torch: nmt's own; ctranslate2: a directory from `nmt export --to "
        "ctranslate2`, or a model directory converted at load",
    )
    g.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=ENGINE_DEFAULTS.precision,
        help="int8: int8 linear layers (CPU, either engine); bf16: CUDA (either engine) or, for the "
        "torch engine, CPUs with AMX (default: the model's decode.precision on CPU, int8 or bf16 where "
        "`nmt tune-precision` chose it, else fp32; bf16 for ctranslate2 on CUDA); refused where the device "
        "does not run it well",
    )
    most = DEFAULT_POLICY.max_default_workers
    # Both engines: one worker, every core its threads, for a model whose decoding step reads more
    # weights than WorkerPolicy.max_parallel_step_mib (memory bandwidth, not cores, bounds it).
    large = f"one for a model whose step reads over {DEFAULT_POLICY.max_parallel_step_mib} MiB of weights"
    workers_default = f"torch: a core each, at most {most}, one for a small batch; ctranslate2: a core each; {large}"
    g.add_argument(
        "--workers",
        type=int,
        default=ENGINE_DEFAULTS.workers,
        help=f"batches translated in parallel (default: {workers_default})",
    )
    g.add_argument(
        "--threads",
        type=int,
        default=ENGINE_DEFAULTS.threads,
        help="intra-op threads per worker (default: cores / workers)",
    )
    g.add_argument(
        "--worker-threads",
        dest="worker_processes",
        action="store_false",
        default=ENGINE_DEFAULTS.worker_processes,
        help="torch engine: every worker a thread of this process (by default the workers beyond the "
        "first become processes once a run has decoded a while, or when `nmt serve` starts: faster, "
        "but each holds a copy of the model)",
    )
    g.add_argument(
        "--no-shortlist",
        dest="shortlist",
        action="store_false",
        default=ENGINE_DEFAULTS.shortlist,
        help="score the whole vocabulary at every step even where the model directory has a lexical "
        "shortlist (`nmt shortlist`; by default greedy and beam search score its candidates only)",
    )
    g.add_argument("--weights", default=ENGINE_DEFAULTS.weights, help="weights file instead of DIR/model.safetensors")
    g.add_argument("--device", default=ENGINE_DEFAULTS.device, help="auto | cpu | cuda[:N]")
    return parent


# Options that ask for an engine feature (nmt.inference.contract.Capabilities): dest -> feature.
FEATURE_OPTIONS = {"sample": "sampling", "glossary": "constraints", "alignments": "alignment"}


def asked_features(args: argparse.Namespace) -> list[str]:
    """The engine features a command line asks for; --no-early-stopping named by the user is
    honoured or refused, never a warning."""
    asked = [feature for dest, feature in FEATURE_OPTIONS.items() if getattr(args, dest, None)]
    asked += ["mc_dropout"] if getattr(args, "qe_passes", 1) > 1 else []
    return asked + (["transformers_stopping"] if getattr(args, "early_stopping", None) is False else [])


def qe_passes_option(p: argparse.ArgumentParser) -> None:
    """--qe-passes: quality scores by MC dropout (translate --qe, calibrate)."""
    p.add_argument(
        "--qe-passes",
        type=int,
        default=1,
        metavar="N",
        help="quality scores averaged over N teacher-forced passes with the model's dropout kept on (MC dropout, "
        "Fomicheva et al. 2020; N times the scoring's cost; nmt's engine; default 1: one pass, no dropout). A "
        "calibration fitted with one N flags only scores of that N",
    )


def engine_options(args: argparse.Namespace) -> EngineOptions:
    """The EngineOptions that the engine options on the command line describe: auto becomes nmt's
    engine where CTranslate2 lacks a feature asked for, a named engine that lacks one is refused
    before any model loads (or converts)."""
    check_device(args.device)
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(EngineOptions)}
    asked = asked_features(args)
    try:
        engine = engine_for(values["engine"], asked)
    except ValueError as err:
        raise CommandError(str(err)) from None
    if engine != values["engine"]:
        needs = ", ".join(Capabilities.NAMES[name] for name in ENGINE_CAPABILITIES["ctranslate2"].missing(asked))
        logging.getLogger(__name__).info("engine auto: nmt's engine, for %s", needs)
        values["engine"] = engine
    return EngineOptions(**values)


def case_options() -> argparse.ArgumentParser:
    """How a lower-cased model's output is cased (translate, evaluate, serve, the tuning commands)."""
    parent = Parser(add_help=False)
    parent.add_argument(
        "--source-case",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a model of a lower-cased corpus (ted_hrlr) writes the words it shares with the source as the "
        "source writes them (names, acronyms: Wuhan, COVID-19); --no-source-case: not (with --no-truecase "
        "too, only sentence starts and 'I' are capitalised; nmt.text_form.case_from_source)",
    )
    parent.add_argument(
        "--truecase",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="where the model directory has a truecaser (nmt truecaser), the other words of a lower-cased "
        "model's output take their usual case in the target language (Chinese, January, New York); --no-truecase: not",
    )
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


def search_options(args: argparse.Namespace) -> dict:
    """The search settings given on the command line (the options named after SearchSettings'
    fields), checked: a bad value's error names its option."""
    given = {name: getattr(args, name) for name in SEARCH_FIELDS if getattr(args, name, None) is not None}
    SearchRequest(**given, n_best=1)
    return given


def load_translator(args: argparse.Namespace):
    """The Translator that the engine and search options describe: the search options replace the
    model's decode settings for every call it makes."""
    from ..translator import Translator

    settings = search_options(args)
    return Translator.load(
        args.model,
        engine_options(args),
        min_len=getattr(args, "min_len", None),
        source_case=getattr(args, "source_case", True),
        truecase=getattr(args, "truecase", True),
        **settings,
    )
