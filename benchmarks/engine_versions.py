"""nmt's engine at two checkouts side by side, CTranslate2 beside them: did a change make decoding slower?

    git worktree add ../before COMMIT
    python benchmarks/engine_versions.py --model runs/de_en_base --before ../before [--after .] \
        [--before-model DIR] [--precision fp32] [--rounds 7]

Each checkout's engine runs in a process of its own (its `src` first on the path, so the installed
nmt is not the one imported), loaded once with its default workers; CTranslate2 is called directly
in the "after" process on the model's export. Calls alternate between the three, the order
rotating every round, on the 1,000 test_2016_flickr sentences, greedy and beam 5; the host's noise
moves whole calls by 10-25%, so the figures are per-round ratios, medians with their ranges.
--before-model: the model directory as the older checkout reads it (a copy whose config.yaml lacks
the keys that checkout does not know yet). Whatever a version's defaults do is in its time (a
newer version's extra passes included).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def serve(model: str, precision: str, with_ct2: bool, out_dir: Path) -> None:
    """The child: load, warm up, then answer 'ENGINE MODE' lines with 'SECONDS DIGEST' (the outputs
    of the last such call in out_dir/ENGINE_MODE.txt)."""
    sys.path.insert(0, str(HERE))
    from nmt.translator import Translator  # noqa: PLC0415 - the checkout's own, from PYTHONPATH

    from common import load_multi30k  # noqa: PLC0415 - this script's helpers, imported under the child's nmt

    sources = [s for s, _ in load_multi30k("test_2016_flickr")]
    translator = Translator.load(model, device="cpu", precision=precision)
    engines = {"nmt": lambda texts, beam: translator.translate(texts, beam=beam)}
    if with_ct2:  # the newer checkout only: engine_speed's helpers need its nmt
        from engine_speed import direct_ctranslate2  # noqa: PLC0415

        from nmt.inference.export_ctranslate2 import export_ctranslate2  # noqa: PLC0415

        exported = export_ctranslate2(model, out_dir / "ct2")
        reference = Translator.load(model, device="cpu", precision="fp32", workers=1, threads=1)
        compute = "float32" if precision == "fp32" else "int8_float32"
        engines["ct2"] = direct_ctranslate2(exported, reference, compute, len(os.sched_getaffinity(0)))
    for translate in engines.values():
        translate(sources[:50], 5)  # warm-up
    translator.start_workers(wait=True)
    print("ready", flush=True)
    for line in sys.stdin:
        engine, mode = line.split()
        began = time.perf_counter()
        outputs = engines[engine](sources, 1 if mode == "greedy" else 5)
        seconds = time.perf_counter() - began
        text = "\n".join(outputs)
        (out_dir / f"{engine}_{mode}.txt").write_text(text + "\n", encoding="utf-8")
        print(f"{seconds:.4f} {hashlib.md5(text.encode()).hexdigest()[:12]}", flush=True)


class Child:
    """One checkout's engine in its own process."""

    def __init__(self, checkout: Path, model: str, precision: str, with_ct2: bool):
        self.out_dir = Path(tempfile.mkdtemp(prefix="engine-versions-"))
        env = dict(os.environ, PYTHONPATH=str(checkout / "src"))
        command = [sys.executable, __file__, "--serve", model, "--precision", precision, "--out", str(self.out_dir)]
        command += ["--with-ct2"] if with_ct2 else []
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        if self.process.stdout.readline().strip() != "ready":
            raise SystemExit(f"{checkout}: the engine did not start (its error is above)")

    def ask(self, engine: str, mode: str) -> tuple[float, str]:
        self.process.stdin.write(f"{engine} {mode}\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().split()
        if len(answer) != 2:
            raise SystemExit(f"the {engine} engine stopped during a {mode} call (its error is above)")
        return float(answer[0]), answer[1]

    def outputs(self, call: str) -> list[str]:
        """The outputs of this process's last `call` ("nmt_greedy", ...)."""
        return (self.out_dir / f"{call}.txt").read_text(encoding="utf-8").splitlines()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="trained nmt model directory (German source)")
    parser.add_argument("--before", type=Path, help="the older checkout (a git worktree)")
    parser.add_argument("--after", type=Path, default=HERE.parent, help="the newer checkout (default: this one)")
    parser.add_argument("--before-model", help="the model directory for the older checkout (default: --model)")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "int8"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--serve", help=argparse.SUPPRESS)  # the child's mode: the model to serve
    parser.add_argument("--with-ct2", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.precision, args.with_ct2, args.out)
        return
    if not args.model or not args.before:
        parser.error("--model and --before are required")
    for checkout in (args.before, args.after):
        if not (checkout / "src" / "nmt").is_dir():
            parser.error(f"{checkout}: not an nmt checkout (no src/nmt)")

    children = {
        "before": Child(args.before.resolve(), args.before_model or args.model, args.precision, with_ct2=False),
        "after": Child(args.after.resolve(), args.model, args.precision, with_ct2=True),
    }
    calls = {"before": ("before", "nmt"), "after": ("after", "nmt"), "ct2": ("after", "ct2")}
    times = {(name, mode): [] for name in calls for mode in ("greedy", "beam5")}
    digests: dict[tuple[str, str], set[str]] = {key: set() for key in times}
    names = list(calls)
    try:
        for round_ in range(args.rounds):
            for name in names[round_ % 3 :] + names[: round_ % 3]:
                child, engine = calls[name]
                for mode in ("greedy", "beam5"):
                    seconds, digest = children[child].ask(engine, mode)
                    times[(name, mode)].append(seconds)
                    digests[(name, mode)].add(digest)
            spent = ", ".join(f"{n} {m} {t[-1]:.2f} s" for (n, m), t in times.items())
            print(f"round {round_ + 1}: {spent}", flush=True)
    finally:
        for child in children.values():
            child.close()

    print(f"\n{args.precision}, {args.rounds} rounds, seconds for 1,000 sentences (medians, ranges):")
    for mode in ("greedy", "beam5"):
        for name in names:
            spent = times[(name, mode)]
            print(f"  {mode:6s} {name:6s} {statistics.median(spent):.2f} ({min(spent):.2f}-{max(spent):.2f})")
        for a, b in (("before", "ct2"), ("after", "ct2"), ("after", "before")):
            ratios = [x / y for x, y in zip(times[(a, mode)], times[(b, mode)], strict=True)]
            print(f"  {mode:6s} {a}/{b}: {statistics.median(ratios):.3f}x ({min(ratios):.3f}-{max(ratios):.3f})")
        before, after = (children[c].outputs(f"nmt_{mode}") for c in ("before", "after"))
        same = sum(a == b for a, b in zip(before, after, strict=True))
        steady = all(len(digests[(name, mode)]) == 1 for name in ("before", "after"))
        print(f"  {mode:6s} the same output before and after: {same} / {len(after)} sentences", end="")
        print("" if steady else " (a version's outputs changed between its own rounds)")
    for child in children.values():
        shutil.rmtree(child.out_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
