"""How the cost of `nmt train` grows with the corpus: synthetic corpora of 1M and 5M pairs.

    python benchmarks/corpus_scale.py [--pairs 1000000,5000000] [--steps 150] [--torchrun] [--json]

Each corpus is built on disk from Multi30k train (de-en): every line pair joins two Multi30k
pairs drawn at random (no two lines alike), so the text is real and every size has the same
length distribution. A corpus of 29,000 such pairs is the small reference, beside Multi30k itself.

For each size, `nmt train` runs twice in a fresh process (`small` model, `--quiet`,
`--set train.max_steps=N`), with its own empty encoded-data cache (NMT_DATA_HOME):
- fresh: the tokenizer is trained (on a bounded sample of the pairs) and the corpus encoded;
- warm: a new output folder holding the first run's tokenizer, so the cache is hit.
Reported: seconds from process start to the first training step (both runs), the tokenizer
training and encoding times (from the run's log), the encoded cache's size, the peak resident
memory of each run (and its anonymous and file-backed parts, polled: the encoded cache is a
file mapping), and the training tokens/s (median of the logged windows after the first).
--torchrun adds a warm run under `torchrun --nproc_per_node 2` on the largest corpus: the
anonymous and file-backed resident memory of each rank.

The machine must be otherwise idle: tokens/s is compared across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from common import REPO, load_multi30k

LAUNCHER = (  # runs a command, prints its peak resident memory (KiB) once it ends
    "import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
    "print('PEAK_KIB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, flush=True); sys.exit(rc)"
)


def build_corpus(out: Path, pairs: int, seed: int = 0) -> tuple[Path, Path]:
    """`pairs` distinct line pairs, each two Multi30k train pairs joined, written as out.de / out.en."""
    src, tgt = out.with_suffix(".de"), out.with_suffix(".en")
    if src.exists() and tgt.exists():
        return src, tgt
    train = load_multi30k("train")
    n = len(train)
    rng = np.random.default_rng(seed)
    codes = np.unique(rng.integers(0, n * n, size=int(pairs * 1.01) + 100))  # distinct (i, j) combinations
    codes = rng.permutation(codes)[:pairs]
    if len(codes) < pairs:
        raise SystemExit(f"could not draw {pairs} distinct combinations")
    first, second = codes // n, codes % n
    with open(src, "w", encoding="utf-8") as fs, open(tgt, "w", encoding="utf-8") as ft:
        for start in range(0, pairs, 100_000):
            i, j = first[start : start + 100_000], second[start : start + 100_000]
            fs.write("".join(f"{train[a][0]} {train[b][0]}\n" for a, b in zip(i, j, strict=True)))
            ft.write("".join(f"{train[a][1]} {train[b][1]}\n" for a, b in zip(i, j, strict=True)))
    return src, tgt


def write_config(path: Path, files: tuple[Path, Path] | None, steps: int) -> Path:
    """A training config on `files` (source, target), or on Multi30k itself when None."""
    from nmt.data.registry import parallel_files

    valid_src, valid_tgt = parallel_files("multi30k", "val", "de", "en")
    data = (
        {"corpus": "multi30k", "src_lang": "de", "tgt_lang": "en"}
        if files is None
        else {
            "train_src": str(files[0]),
            "train_tgt": str(files[1]),
            "valid_src": str(valid_src),
            "valid_tgt": str(valid_tgt),
        }
    )
    config = {
        "data": data,
        "tokenizer": {"kind": "bpe", "vocab_size": 8192, "joint": True},
        "model": {"preset": "small"},
        "train": {
            "max_steps": steps,
            "batch_tokens": 4096,
            "warmup": 300,
            "log_every": 10,
            "valid_every": 100_000,  # no validation inside the measured steps
            "valid_bleu_sentences": 0,
            "best_metric": "loss",
            "keep_last": 1,
        },
    }
    path.write_text(yaml.safe_dump(config))
    return path


def run_train(config: Path, out: Path, data_home: Path, *, torchrun: bool = False) -> dict:
    """One `nmt train` in a fresh process: time to its first step, its log's phases, peak memory, tokens/s."""
    env = dict(os.environ, NMT_DATA_HOME=str(data_home))
    nmt = [sys.executable, "-m", "nmt", "train", str(config), "--out", str(out), "--quiet"]
    if torchrun:
        nmt = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", *nmt[1:]]
    metrics = out / "metrics.jsonl"
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, *nmt], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    first_step, memory, polls = None, {}, 0
    while proc.poll() is None:
        if first_step is None and metrics.exists() and '"kind": "train"' in metrics.read_text():
            first_step = time.monotonic() - start
        if polls % 10 == 0:  # every half second: each rank's largest anonymous and file-backed memory
            for pid, anonymous, mapped in process_memory(proc.pid):
                old = memory.get(pid, (0, 0))
                memory[pid] = (max(old[0], anonymous), max(old[1], mapped))
        polls += 1
        time.sleep(0.05)
    stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"nmt train failed ({proc.returncode}):\n{stderr[-3000:]}")
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    speeds = [r["tokens_per_s"] for r in records if r.get("kind") == "train" and r["step"] > 10]
    peak = int(re.search(r"PEAK_KIB (\d+)", stdout)[1]) / 1024
    return {
        "first_step_s": round(first_step, 1) if first_step is not None else None,
        "phases_s": phases(stderr),
        "peak_rss_mib": round(peak),
        # per process (rank): the largest anonymous and file-backed resident MiB (see process_memory)
        "anonymous_file_mib": sorted(memory.values()),
        "tokens_per_s": round(statistics.median(speeds)) if speeds else None,
    }


def phases(log: str) -> dict[str, int]:
    """Seconds between the log lines that open and close the long steps (HH:MM:SS stamps)."""
    stamps = {}
    for line in log.splitlines():
        match = re.match(r"(\d\d):(\d\d):(\d\d) ", line)
        if not match:
            continue
        t = int(match[1]) * 3600 + int(match[2]) * 60 + int(match[3])
        for name, pattern in (
            ("tokenizer_start", "training .* tokenizer"),
            ("tokenizer_end", "saved tokenizers"),
            ("encoded", "training pairs: kept"),
        ):
            if re.search(pattern, line) and name not in stamps:
                stamps[name] = t
    out = {}
    if "tokenizer_start" in stamps and "tokenizer_end" in stamps:
        out["tokenizer"] = stamps["tokenizer_end"] - stamps["tokenizer_start"]
        if "encoded" in stamps:
            out["encode"] = stamps["encoded"] - stamps["tokenizer_end"]
    return out


def process_memory(launcher_pid: int) -> list[tuple[int, int, int]]:
    """(pid, anonymous MiB, file-backed MiB) resident, of every `nmt train` process (rank) below the launcher.

    Anonymous memory is the process's own; file-backed pages (the mapped encoded cache, libraries)
    are page cache, shared by every process that maps the file, and the kernel can drop them.
    """
    found, todo = [], [launcher_pid]
    while todo:
        children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(todo.pop())], capture_output=True, text=True)
        for pid in map(int, children.stdout.split()):
            todo.append(pid)
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
            except OSError:
                continue
            if b"torch.distributed.run" in cmdline or b"nmt" not in cmdline:
                continue
            fields = {k: int(v) for k, v in re.findall(r"^(\w+):\s+(\d+) kB", rollup, re.M)}
            anonymous = fields.get("Anonymous", 0)  # the process's own memory (heap, tensors)
            found.append((pid, anonymous // 1024, (fields.get("Rss", 0) - anonymous) // 1024))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", default="1000000,5000000", help="comma-separated corpus sizes")
    parser.add_argument("--steps", type=int, default=60, help="training steps per run")
    parser.add_argument("--work", default=None, help="folder for corpora and runs (default: a temporary one)")
    parser.add_argument("--torchrun", action="store_true", help="also a warm 2-rank torchrun on the largest corpus")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--warm-only", action="store_true", help="only the warm runs, in a --work folder kept before")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.pairs.split(",")]
    work = Path(args.work or tempfile.mkdtemp(prefix="corpus-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    try:
        for name, size in [("multi30k", None), ("synthetic 29000", 29_000)] + [(f"synthetic {n}", n) for n in sizes]:
            files = None
            if size is not None:
                t0 = time.monotonic()
                files = build_corpus(work / f"pairs{size}", size)
                print(f"{name}: corpus written in {time.monotonic() - t0:.0f} s", file=sys.stderr)
            config = write_config(work / f"{size}.yaml", files, args.steps)
            home = work / f"home{size}"
            fresh_out, warm_out = work / f"run{size}_fresh", work / f"run{size}_warm"
            shutil.rmtree(warm_out, ignore_errors=True)
            row: dict = {"pairs": size or 29_000}
            if args.warm_only:  # the fresh run's tokenizer and cache, from an earlier --keep run
                if not (home / "encoded").is_dir():
                    raise SystemExit(f"--warm-only needs {home} from an earlier run with --work {work} --keep")
            else:
                for folder in (home, fresh_out):
                    shutil.rmtree(folder, ignore_errors=True)
                row["fresh"] = run_train(config, fresh_out, home)
            warm_out.mkdir()
            for tokenizer in fresh_out.glob("tokenizer*.json"):
                shutil.copy(tokenizer, warm_out / tokenizer.name)
            row["warm"] = run_train(config, warm_out, home)
            cache = home / "encoded"
            row["cache_mib"] = round(sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) / 2**20)
            if files is not None:
                row["corpus_mib"] = round(sum(f.stat().st_size for f in files) / 2**20)
            if args.torchrun and size == max(sizes):
                ddp_out = work / f"run{size}_ddp"
                shutil.rmtree(ddp_out, ignore_errors=True)
                ddp_out.mkdir()
                for tokenizer in fresh_out.glob("tokenizer*.json"):
                    shutil.copy(tokenizer, ddp_out / tokenizer.name)
                row["torchrun_warm"] = run_train(config, ddp_out, home, torchrun=True)
            results[name] = row
            print(name, json.dumps(row), file=sys.stderr, flush=True)
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(results))
        return
    print(
        f"{'corpus':<18} {'start fresh/warm s':>19} {'tokenizer/encode s':>19} {'cache MiB':>9} "
        f"{'peak MiB fresh/warm':>20} {'anon/file MiB warm':>24} {'tokens/s':>8}"
    )
    for name, row in results.items():
        warm = row["warm"]
        fresh = row.get("fresh", {"first_step_s": "-", "peak_rss_mib": "-", "phases_s": {}})
        ph = fresh["phases_s"]
        anonymous, mapped = warm["anonymous_file_mib"][-1]
        print(
            f"{name:<18} {fresh['first_step_s']:>9} / {warm['first_step_s']:<7} "
            f"{ph.get('tokenizer', '-'):>9} / {ph.get('encode', '-'):<7} {row['cache_mib']:>9} "
            f"{fresh['peak_rss_mib']:>9} / {warm['peak_rss_mib']:<8} {anonymous:>11} / {mapped:<10} "
            f"{warm['tokens_per_s']:>8}"
        )
        if "torchrun_warm" in row:
            print(f"  torchrun x2 (warm): {row['torchrun_warm']}")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "src"))
    main()
