"""SIGKILL a tiny `nmt train` at random moments, resume it each time, and compare with an uninterrupted run.

    python benchmarks/sigkill_resume.py --kills 50

Every attempt is the same command (`nmt train CONFIG --out DIR --resume ...`), killed after a
random delay drawn from [0, 2 x start-up time) (timed on an uninterrupted run), so about half the
kills land in start-up (tokenizer training, data caching, loading the checkpoint) and half in
training steps and checkpoint writes (a checkpoint after every step). After the
last kill the run finishes; its final checkpoint must hold the same tensors as the
uninterrupted run's, in byte-identical files, with the same training records and no temporary
file left. Needs the Multi30k mirror (NMT_MIRROR or ../shared/data/multi30k).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TINY = [
    "model.preset=reference",
    "model.d_model=32",
    "model.num_heads=2",
    "model.d_ff=64",
    "model.encoder_layers=1",
    "model.decoder_layers=1",
    "tokenizer.vocab_size=400",
    "train.batch_tokens=600",
    "train.warmup=10",
    "train.valid_bleu_sentences=0",
    "train.best_metric=loss",
    "train.log_every=1",
    "train.valid_every=1",
    "train.keep_last=1",
    "train.seed=3",
]


def write_corpus(root: Path, mirror: Path) -> list[str]:
    """300 training and 40 validation pairs of Multi30k de-en as plain files; the --set overrides for them."""
    raw = mirror / "data/task1/raw"
    for split, n in (("train", 300), ("val", 40)):
        for lang in ("de", "en"):
            with gzip.open(raw / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
                lines = [next(f) for _ in range(n)]
            (root / f"{split}.{lang}").write_text("".join(lines), encoding="utf-8")
    return [
        f"data.train_src={root / 'train.de'}",
        f"data.train_tgt={root / 'train.en'}",
        f"data.valid_src={root / 'val.de'}",
        f"data.valid_tgt={root / 'val.en'}",
    ]


def start(config: Path, out: Path, sets: list[str], data_home: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "nmt", "train", str(config), "--out", str(out), "--quiet", "--resume"]
    command += [x for s in sets for x in ("--set", s)]
    env = {**os.environ, "NMT_DATA_HOME": str(data_home)}
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)


def saved_step(out: Path) -> int:
    """The newest checkpoint's step (0 before the first)."""
    steps = [int(p.name[5:13]) for p in (out / "checkpoints").glob("step_*.state.pt")] if out.exists() else []
    return max(steps, default=0)


def train_records(out: Path) -> list[tuple[int, float]]:
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in records if r["kind"] == "train"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=50, help="SIGKILLs before the run may finish (default 50)")
    parser.add_argument(
        "--steps",
        type=int,
        default=1500,
        help="training steps, a checkpoint after each: enough to outlast the kills (default 1500)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds the kill moments")
    args = parser.parse_args()
    mirror = Path(os.environ.get("NMT_MIRROR", REPO.parent / "shared" / "data" / "multi30k"))
    with tempfile.TemporaryDirectory(prefix="nmt-sigkill-") as tmp:
        tmp = Path(tmp)
        config = tmp / "empty.yaml"
        config.write_text("{}\n")
        sets = write_corpus(tmp, mirror) + TINY + [f"train.max_steps={args.steps}"]
        reference, killed = tmp / "reference", tmp / "killed"
        started = time.perf_counter()
        proc = start(config, reference, sets, tmp / "home_reference")
        while proc.poll() is None and not (reference / "metrics.jsonl").exists():
            time.sleep(0.01)
        startup_s = time.perf_counter() - started
        _, err = proc.communicate()
        if proc.returncode != 0:
            print(err, file=sys.stderr)
            return 1
        loop_s = time.perf_counter() - started - startup_s
        rng, kills, attempts, failures, kills_in_training = random.Random(args.seed), 0, 0, [], 0
        while True:
            attempts += 1
            if kills < args.kills and saved_step(killed) == args.steps:
                print(f"the run finished after {kills} kills: use more --steps", file=sys.stderr)
                return 1
            step_before = saved_step(killed)
            proc = start(config, killed, sets, tmp / "home_killed")
            if kills < args.kills:
                time.sleep(rng.uniform(0.0, 2 * startup_s))
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                    kills += 1
                    kills_in_training += saved_step(killed) > step_before  # it had saved a new checkpoint
            _, err = proc.communicate()
            if proc.returncode == 0 and kills >= args.kills:
                break
            if proc.returncode not in (0, -signal.SIGKILL):  # a resume that failed on its own
                failures.append(err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}")
                if len(failures) > 5:
                    break
        name = f"step_{args.steps:08d}.safetensors"
        same_files = all(
            (reference / p).read_bytes() == (killed / p).read_bytes()
            for p in (f"checkpoints/{name}", "model.safetensors")
        )
        leftovers = [str(p.relative_to(killed)) for p in killed.rglob("*.tmp")]
        result = {
            "kills": kills,
            "kills_after_a_new_checkpoint": kills_in_training,
            "attempts": attempts,
            "failed_resumes": len(failures),
            "failures": failures,
            "identical_weight_files": same_files,
            "identical_training_records": train_records(reference) == train_records(killed),
            "temp_files_left": leftovers,
            "uninterrupted_startup_s": round(startup_s, 1),
            "uninterrupted_training_s": round(loop_s, 1),
        }
    print(json.dumps(result, indent=2))
    ok = not failures and same_files and result["identical_training_records"] and not leftovers
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
