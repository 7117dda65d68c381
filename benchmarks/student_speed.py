"""A distilled student against its teacher on CTranslate2 int8 (Multi30k test_2016_flickr, text to text).

    python benchmarks/student_speed.py --teacher runs/de_en --student runs/de_en_student \
        [--rounds 3] [--memory] [--json]

The race of issue 40: the teacher runs the way a CTranslate2 user would run it (int8, beam 5,
one single-threaded translator per core, sorted token batches; nmt's tokenizer only for the
pieces), the student the way `nmt translate` runs it by default (engine auto: CTranslate2 on CPU
where it is installed, in the student's decode.precision, int8 where `nmt distill` chose it, else
fp32; with the student's lexical shortlist as its vocabulary map; its own beam), and variants of
both. Every setting
translates the same 1,000 sentences in alternating rounds with the models loaded and worker
processes ready; the median time of each is reported with its cased sacreBLEU, and with
--memory the peak resident memory of `nmt translate` (summed over worker processes) and the
model's size on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from engine_speed import direct_ctranslate2, peak_memory_mib

from nmt.evaluation import score_translations
from nmt.inference.export_ctranslate2 import export_ctranslate2
from nmt.translator import Translator

from common import load_multi30k, median, timed


def disk_mib(folder: Path) -> float:
    """What a model directory's files take on disk (checkpoints and distilled corpora left out)."""
    skip = {"checkpoints", "distilled", "ctranslate2"}  # the last: auto's export, measured on its own
    files = [f for f in folder.rglob("*") if f.is_file() and not skip & set(f.relative_to(folder).parts)]
    return sum(f.stat().st_size for f in files) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--teacher", required=True, help="the teacher's model directory")
    parser.add_argument("--student", required=True, help="the student's model directory")
    parser.add_argument("--src-lang", default="de")
    parser.add_argument("--tgt-lang", default="en")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (medians reported)")
    parser.add_argument("--memory", action="store_true", help="peak RSS of `nmt translate` and size on disk")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    pairs = load_multi30k("test_2016_flickr", args.src_lang, args.tgt_lang)
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    cores = len(os.sched_getaffinity(0))
    tmp = Path(tempfile.mkdtemp(prefix="student-speed-"))
    teacher_ct2 = export_ctranslate2(args.teacher, tmp / "teacher.ct2")
    student_ct2 = export_ctranslate2(args.student, tmp / "student.ct2")  # with its vocabulary map, if any

    student = Translator.load(args.student, engine="auto")  # what `nmt translate` runs
    translators = {
        "student auto (default)": student,
        "student nmt fp32": Translator.load(args.student, precision="fp32"),
        "student nmt fp32, no shortlist": Translator.load(args.student, precision="fp32", shortlist=False),
        "student nmt int8 (no shortlist with int8)": Translator.load(args.student, precision="int8"),
        "student ct2 int8": Translator.load(student_ct2, engine="ctranslate2", precision="int8"),
        "student ct2 int8, no shortlist": Translator.load(
            student_ct2, engine="ctranslate2", precision="int8", shortlist=False
        ),
        "teacher nmt int8 beam 5": Translator.load(args.teacher, precision="int8"),
        "teacher nmt->ct2 int8 beam 5": Translator.load(teacher_ct2, engine="ctranslate2", precision="int8"),
    }
    beams = {name: (5 if "beam 5" in name else student.decode.beam) for name in translators}
    settings = {
        name: (lambda texts, t=t, beam=beams[name]: t.translate(texts, beam=beam)) for name, t in translators.items()
    }
    reference = Translator.load(args.teacher, device="cpu", workers=1, threads=1)
    teacher_direct = direct_ctranslate2(teacher_ct2, reference, "int8_float32", cores)
    settings = {"teacher ct2 int8 beam 5": lambda texts: teacher_direct(texts, 5), **settings}

    for translator in translators.values():
        translator.start_workers()
    for fn in settings.values():
        fn(sources[:50])  # warm-up
    for translator in translators.values():
        translator.start_workers(wait=True)
    times: dict[str, list[float]] = {name: [] for name in settings}
    outputs: dict[str, list[str]] = {}
    for _ in range(args.rounds):
        for name, fn in settings.items():
            times[name] += timed(lambda name=name, fn=fn: outputs.__setitem__(name, fn(sources)), 1)

    baseline = median(times["teacher ct2 int8 beam 5"])
    result: dict[str, object] = {"sentences": len(sources), "cores": cores, "rounds": args.rounds}
    for name in settings:
        seconds = median(times[name])
        result[name] = {
            "seconds": round(seconds, 3),
            "speedup_vs_teacher_ct2_int8": round(baseline / seconds, 2),
            "bleu": round(score_translations(outputs[name], references).bleu, 2),
        }
    if args.memory:
        (tmp / "src.txt").write_text("\n".join(sources) + "\n")
        nmt = [sys.executable, "-m", "nmt", "translate"]
        runs = {
            "teacher ct2 int8 beam 5": ([*nmt, "--model", str(teacher_ct2), "--engine", "ctranslate2",
                                         "--precision", "int8", "--beam", "5"], teacher_ct2),
            "student auto (default)": ([*nmt, "--model", args.student], Path(args.student) / "ctranslate2"),
            "student nmt fp32": ([*nmt, "--model", args.student, "--engine", "torch", "--precision", "fp32"],
                                 Path(args.student)),
            "student nmt int8 (no shortlist with int8)": ([*nmt, "--model", args.student, "--engine", "torch",
                                                           "--precision", "int8"],
                                 Path(args.student)),
            "student ct2 int8": ([*nmt, "--model", str(student_ct2), "--engine", "ctranslate2",
                                  "--precision", "int8"], student_ct2),
        }  # fmt: skip
        for name, (command, folder) in runs.items():
            result[name]["peak_rss_mib"] = round(peak_memory_mib(command, tmp / "src.txt"), 1)
            result[name]["disk_mib"] = round(disk_mib(folder), 1)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:34s} {value}")


if __name__ == "__main__":
    main()
