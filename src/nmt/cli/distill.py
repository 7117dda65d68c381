"""nmt distill: a student model trained on a teacher's translations of the training corpus."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..inference.choices import INT8_TOLERANCE
from .common import CommandError, require_model_dir
from .shortlist import shortlist_from_corpus
from .train import add_set_option, cmd_train, tune_after_training

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ..training.distill import Distillation

STUDENT_CONFIG = "student.yaml"  # in the distilled folder: what `nmt train` workers load


def add_distill(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "distill",
        help="train a student on a teacher's translations (sequence-level knowledge distillation)",
        description="The teacher translates the training corpus that the student config names (with its "
        "own beam and length penalty, on the fastest engine here as `--engine auto` picks it, which may keep "
        "a CTranslate2 export in the teacher's directory; resumable: run the same command again after a kill), "
        "then the student trains on those translations with the teacher's tokenizer (a one-direction student of a "
        "multi-target teacher: without its >>xx<< tokens), into an ordinary model "
        "directory, and its lexical shortlist is built from them; last, int8 (or bf16 on a CPU with AMX) becomes its "
        "default precision on CPU where it translates the validation set faster and as well "
        "(`nmt tune-precision`). Run again, it continues whichever step was left unfinished.",
    )
    p.add_argument("--teacher", required=True, metavar="MODEL_DIR", help="the trained model to learn from")
    p.add_argument("--config", required=True, help="the student's YAML config (its data section names the corpus)")
    p.add_argument("--out", required=True, help="the student's model directory (the distilled corpus goes inside)")
    add_set_option(p, "override fields of the student config, e.g. --set train.max_time=20m")
    p.add_argument("--beam", type=int, help="the teacher's beam (default: its decode.beam)")
    p.add_argument(
        "--with-references",
        action="store_true",
        help="train on the human references too: each source sentence with the teacher's translation(s) "
        "and once more with its reference",
    )
    p.add_argument(
        "--hypotheses",
        type=int,
        default=1,
        metavar="N",
        help="keep the teacher's N best translations of each sentence (N at most the beam, --beam or the "
        "teacher's decode.beam) and train the student on every one: more varied targets, for a small "
        "corpus seen many times (default: 1)",
    )
    p.add_argument("--chunk", type=int, default=512, help="sentences translated and saved at a time (default: 512)")
    p.add_argument("--translate-only", action="store_true", help="stop once the distilled corpus is complete")
    p.add_argument(
        "--no-shortlist",
        dest="shortlist",
        action="store_false",
        help="do not build the student's lexical shortlist (by default built from the distilled corpus once "
        "the student has trained: `nmt shortlist`)",
    )
    p.add_argument(
        "--no-int8",
        dest="choose_precision",
        action="store_false",
        help="keep fp32 as the student's default precision (by default the student translates the validation "
        "set in fp32 and int8, and int8 becomes its default on CPU where it was faster and at most "
        f"{INT8_TOLERANCE:g} BLEU lower: `nmt tune-precision`)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_distill)


def cmd_distill(args: argparse.Namespace) -> int:
    from ..config import load_config
    from ..model_dir import read_decode_config
    from ..training.distill import DISTILLED, copy_teacher_tokenizer, plan_distillation

    require_model_dir(args.teacher, "--teacher")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CommandError(f"--out {out} is a file: give a directory for the student")
    if out.resolve() == Path(args.teacher).resolve():
        raise CommandError(f"--out {out} is the teacher's directory: give the student a directory of its own")
    config = load_config(args.config, args.set or [])
    # Every check before any work: a teacher that does not fit is refused with nothing written.
    for option, value in (("--beam", args.beam), ("--chunk", args.chunk), ("--hypotheses", args.hypotheses)):
        if value is not None and value < 1:
            raise CommandError(f"{option} must be >= 1, got {value}")
    distillation = plan_distillation(
        args.teacher, config, out, with_references=args.with_references, hypotheses=args.hypotheses
    )
    beam = args.beam or read_decode_config(args.teacher).beam
    if args.hypotheses > beam:
        raise CommandError(
            f"--hypotheses {args.hypotheses} asks for more translations than the beam ({beam}) finds: "
            f"give --beam {args.hypotheses} or more"
        )
    refuse_another_corpus(out, distillation)
    refuse_another_teacher(out / DISTILLED, Path(args.teacher), beam)
    out.mkdir(parents=True, exist_ok=True)
    copy_teacher_tokenizer(Path(args.teacher), out, config.data)  # the student's vocabulary is the teacher's
    for plan in distillation.plans:
        plan.write_source()
    stages: dict[str, float] = {}  # seconds each step of this run took (for the budget a user plans)
    started = time.perf_counter()
    translate_with_teacher(args, distillation, beam)
    stages["teacher's translation"] = time.perf_counter() - started
    distillation.write_training_pairs()
    if args.translate_only:
        for plan in distillation.plans:
            print(f"distilled corpus: {plan.distilled_source} -> {plan.distilled}", file=sys.stderr)
        return 0
    student_config = out.resolve() / DISTILLED / STUDENT_CONFIG
    distillation.student_config().save(student_config)
    run = student_run(args, out, student_config)
    started = time.perf_counter()
    status = cmd_train(run)
    stages["student's training"] = time.perf_counter() - started
    if status != 0:  # stopped by a signal (or failed): the shortlist and precision wait for a finished student
        return status
    started = time.perf_counter()
    if args.shortlist:  # the student's own output vocabulary: the teacher's translations
        if distillation.multilingual:  # every direction's, read through the student's data.pairs
            path, summary = shortlist_from_corpus(out)
        else:
            (plan,) = distillation.plans
            path, summary = shortlist_from_corpus(out, str(plan.distilled_source), str(plan.distilled))
        print(f"shortlist written to {path}: {summary}", file=sys.stderr)
    status = tune_after_training(out, distillation.student_config(), precision=args.choose_precision)
    stages["shortlist and precision"] = time.perf_counter() - started
    spent = ", ".join(f"{name} {seconds / 60:.1f}" for name, seconds in stages.items())
    print(f"distill took {sum(stages.values()) / 60:.1f} min in this run ({spent})", file=sys.stderr)
    return status


def translate_with_teacher(args: argparse.Namespace, distillation, beam: int) -> None:
    """Every direction's source translated by the teacher into its distilled corpus (a run stopped
    part-way goes on from where it stopped); the teacher is loaded only if a sentence is left."""
    from ..training.distill import n_best_lines, translate_corpus
    from ..translator import Translator

    n = args.hypotheses
    teacher: list[Translator] = []  # loaded only if a sentence is left to translate

    def translate_into(plan) -> Callable[[list[str]], list[str]]:
        said = []  # the log's line, once per direction with sentences left

        def translate(batch: list[str]) -> list[str]:
            if not said:
                log.info("the teacher translates %s with beam %d", plan.source, beam)
                said.append(True)
            if not teacher:
                # the fastest engine here, in fp32 whatever the teacher's own default: the corpus is the
                # student's reference, and a resumed corpus must not change precision halfway
                teacher.append(Translator.load(args.teacher, engine="auto", precision="fp32"))
            request = teacher[0].request(beam=beam, n_best=n)
            found = teacher[0].translate_detailed(
                batch, request, target_lang=plan.target_lang, pretokenized=plan.pretokenized
            )
            return n_best_lines([[t.text for t in best] for best in found], n)

        return translate

    for plan in distillation.plans:
        translate_corpus(
            translate_into(plan), plan.source, plan.distilled, chunk=args.chunk, progress=not args.quiet, per_sentence=n
        )
    for loaded in teacher:
        loaded.close()


def student_run(args: argparse.Namespace, out: Path, student_config: Path) -> argparse.Namespace:
    """The `nmt train` command line that trains (or resumes) the student in `out`."""
    from ..model_dir import holds_training_run

    return argparse.Namespace(
        config=str(student_config),
        out=str(out),
        set=None,
        resume=holds_training_run(out),  # a student run already started: continue it
        init_from=None,
        quiet=args.quiet,
        verbose=getattr(args, "verbose", False),
        # a stopped student is resumed by distill, which then builds its shortlist and precision
        continue_with="the same nmt distill command again",
        tune_decoding=False,  # chosen below, once the shortlist is there
    )


TEACHER_RECORD = "teacher.json"  # in the distilled folder: whose translations these are, at which beam


def refuse_another_teacher(distilled: Path, teacher: Path, beam: int) -> None:
    """The teacher's translations in `distilled` continue with the teacher and beam they started with:
    a command that names another is refused, before any translation, rather than mixing two kinds of
    output in one corpus. The first run writes down its own."""
    from ..files import atomic_write_text

    record = distilled / TEACHER_RECORD
    wanted = {"teacher": str(teacher.resolve()), "beam": beam}
    if record.is_file():
        try:
            started = json.loads(record.read_text(encoding="utf-8"))
        except ValueError as err:
            raise CommandError(f"{record}: not JSON ({err}): remove it to start the record again") from None
        if {k: started.get(k) for k in wanted} != wanted:
            raise CommandError(
                f"{distilled} holds translations by {started.get('teacher')} with beam {started.get('beam')}; this "
                f"command asks {wanted['teacher']} with beam {beam}: give them as then, or another --out"
            )
        return
    distilled.mkdir(parents=True, exist_ok=True)
    atomic_write_text(record, json.dumps(wanted, indent=2) + "\n")


def refuse_another_corpus(out: Path, distillation: Distillation) -> None:
    """A student already training in `out` continues on the files it started with: a command whose
    --hypotheses or --with-references would give it others is refused, before any translation."""
    from ..model_dir import holds_training_run, read_run_config

    started = read_run_config(out) if holds_training_run(out) else None
    if started is None:
        return
    wanted = distillation.student_config().data
    if (started.data.train_src, started.data.train_tgt, started.data.pairs) != (
        wanted.train_src,
        wanted.train_tgt,
        wanted.pairs,
    ):
        raise CommandError(
            f"{out} holds a student that started on {started.data.train_tgt or started.data.pairs}; this command "
            f"would train it on {wanted.train_tgt or wanted.pairs} (--hypotheses or --with-references differ from "
            "its first run): give them as then, or another --out"
        )
