"""nmt train: a tokenizer (if needed) and a model, into a self-contained model directory."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from .common import CommandError, require_model_dir


def add_set_option(parser: argparse.ArgumentParser, help: str) -> None:
    """--set SECTION.KEY=VALUE ...: overrides of a config's fields (train and distill)."""
    parser.add_argument("--set", action="extend", nargs="+", metavar="SECTION.KEY=VALUE", help=help)


def add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a tokenizer (if needed) and a model",
        description="Train into a self-contained model directory.",
    )
    p.add_argument("config", nargs="?", help="YAML config (see configs/); optional with --resume")
    p.add_argument("--out", required=True, help="model directory to create (or resume)")
    add_set_option(p, "override config fields, e.g. --set train.max_steps=200 train.seed=2 (or repeat --set)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --out")
    p.add_argument(
        "--init-from",
        metavar="MODEL_DIR",
        help="fine-tune: start from this trained model's weights and tokenizer (fresh optimizer and "
        "warm-up; the config's model section must build the same model, dropout aside)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    # distill (which calls cmd_train) chooses them itself, once the student's shortlist is built
    p.set_defaults(func=cmd_train, tune_decoding=True)


def config_path(args: argparse.Namespace) -> Path | str:
    """The config file a run reads: CONFIG, or with --resume alone the run's own config.yaml."""
    from ..model_dir import RUN_CONFIG, already_holds_run, holds_training_run
    from ..training.distributed import restarts_allowed

    out = Path(args.out)
    if args.init_from:
        require_model_dir(args.init_from, "--init-from")
    if args.resume:
        if args.init_from:
            raise CommandError("--init-from starts a new run from a trained model; --resume continues a run: not both")
        if args.config is not None:  # a CONFIG given replaces the run's own settings
            return args.config
        path = out / RUN_CONFIG
        if not path.exists():
            raise CommandError(
                f"--resume: {path} not found: give the run's CONFIG file, or start a new run without --resume"
            )
        return path
    if args.config is None:
        raise CommandError("give a CONFIG file (or --resume with --out DIR)")
    # Where torchrun may have restarted the job (--max-restarts), the ranks decide together in train().
    if holds_training_run(out) and not restarts_allowed():
        raise CommandError(already_holds_run(out))
    return args.config


def worker_command(args: argparse.Namespace) -> list[str]:
    """This same `nmt train` for each worker process (which loads the config again, and trains)."""
    command = [sys.executable, "-m", "nmt"] + (["-v"] if args.verbose else []) + ["train"]
    command += ([args.config] if args.config else []) + ["--out", args.out]
    command += ["--resume"] if args.resume else []
    command += ["--init-from", args.init_from] if args.init_from else []
    command += ["--quiet"] if args.quiet else []
    return command + (["--set", *args.set] if args.set else [])


def cmd_train(args: argparse.Namespace) -> int:
    from ..config import load_config
    from ..training.distributed import RENDEZVOUS_FILE, wants_cuda
    from ..training.launch import choose_layout, run_workers
    from ..training.run import train
    from ..training.signals import interrupted_status, was_interrupted

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CommandError(f"--out {out} is a file: give a directory to train into")
    path = config_path(args)
    # The run's own config.yaml names every key: a missing one means it was cut short.
    config = load_config(path, args.set or [], complete=args.resume and args.config is None)
    layout = choose_layout(config.train, on_cuda=wants_cuda(config.train.device))
    if layout.processes > 1:
        logging.getLogger(__name__).info("%s", layout.describe(config.train.batch_tokens))
        status = run_workers(worker_command(args), layout)
        if was_interrupted(status):
            say_how_to_continue(args, out)
        elif status == 0 and args.tune_decoding:
            return tune_after_training(out, config)
        return status
    created = not out.exists()
    try:
        stopped = train(config, out, resume=args.resume, progress_bar=not args.quiet, init_from=args.init_from)
    except BaseException:
        if created:  # a run that failed before writing anything leaves no empty directory behind
            with contextlib.suppress(OSError):
                out.rmdir()  # only if empty
        raise
    print(f"training stopped: {stopped}; model in {out}", file=sys.stderr)
    status = 0 if stopped.signum is None else interrupted_status(stopped.signum)
    if int(os.environ.get("WORLD_SIZE", "1")) == 1:
        if status:
            say_how_to_continue(args, out)
        elif args.tune_decoding:
            return tune_after_training(out, config)
        return status
    # Everything is saved and the process group is gone, but under torchrun torch's C++ threads
    # now and then abort the interpreter's teardown ("terminate called without an active
    # exception", exit -6, seen on CPU/gloo in about 1 run in 15): skip the teardown. Under nmt's
    # own launcher rank 0 alone reports an interrupted run (the launcher returns its status and
    # says how to continue); under torchrun, which handles the signal itself, every rank exits 0.
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(status if os.environ.get(RENDEZVOUS_FILE) and os.environ.get("RANK") == "0" else 0)


def say_how_to_continue(args: argparse.Namespace, out: Path) -> None:
    """After SIGINT / SIGTERM: the command that resumes the run (`args.continue_with` where the
    caller is another command, such as nmt distill, that has steps left after training)."""
    continuing = getattr(args, "continue_with", None) or f"nmt train --out {out} --resume"
    print(f"the run is saved but not finished; to continue it: {continuing}", file=sys.stderr)


class TuningStopped(Exception):
    """SIGINT / SIGTERM while the decoding settings were being chosen."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def tune_after_training(out: Path, config, *, precision: bool = True) -> int:
    """`tune_decoding`, stopped by SIGINT / SIGTERM with a word: the model is trained and saved by
    then, so the stop costs only the choice. Returns the exit status (128 + the signal's number when
    stopped, so that a script does not take the run for a finished one)."""
    from ..training.signals import STOP_SIGNALS, interrupted_status

    def stop(signum, frame):
        raise TuningStopped(signum)

    main_thread = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, stop) for s in STOP_SIGNALS} if main_thread else {}
    try:
        tune_decoding(out, config, precision=precision)
        return 0
    except TuningStopped as stopped:
        print(
            f"choosing the decoding settings stopped by {stopped}: the model in {out} is trained and saved, "
            f"with the settings chosen before the stop or its config's; `nmt tune-length-penalty --model {out}` "
            f"and `nmt tune-precision --model {out}` choose them",
            file=sys.stderr,
        )
        return interrupted_status(stopped.signum)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def tune_decoding(out: Path, config, *, precision: bool = True) -> None:
    """Choose the trained model's length penalty and CPU precision on its validation set
    (nmt.tuning.choose_decoding) and say what was chosen, with the figures; skipped where the config
    says so (train.tune_decoding false) or the model scored below train.tune_min_bleu on validation."""
    from ..model_dir import read_metrics
    from ..training.datasets import split_files, validation_is_pretokenized
    from ..training.multilingual import validation_files
    from ..tuning import choose_decoding

    if not config.train.tune_decoding:
        print("decoding settings: the config's (train.tune_decoding is false)", file=sys.stderr)
        return
    scores = [r["bleu"] for r in read_metrics(out) if r.get("kind") == "valid" and r.get("bleu") is not None]
    if scores and max(scores) < config.train.tune_min_bleu:  # no BLEU measured: nothing to go by, so tuned
        print(
            f"decoding settings: the config's (best validation BLEU {max(scores):.2f}, below "
            f"train.tune_min_bleu {config.train.tune_min_bleu:g}: too little trained to choose them on)",
            file=sys.stderr,
        )
        return
    if config.data.pairs is not None:  # every direction's validation set, with its target token where needed
        sets = validation_files(config.data)
    else:
        sets = [split_files(config.data, "valid")]
    pairs = [pair for files in sets for pair in files.pairs()]
    where = ", ".join(str(files.src) for files in sets)
    print(f"choosing the decoding settings on {where} ({len(pairs)} sentences)", file=sys.stderr)
    choice = choose_decoding(
        out,
        [s for s, _ in pairs],
        [t for _, t in pairs],
        pretokenized=validation_is_pretokenized(config.data),
        precision=precision,
    )
    for line in choice.report(config.decode.length_penalty, ", ".join(files.src.name for files in sets)):
        print(line, file=sys.stderr)
    print(f"written to {out}/config.yaml (--set train.tune_decoding=false keeps the config's)", file=sys.stderr)
