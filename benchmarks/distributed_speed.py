"""Training tokens/s with 1 process and with 2 torchrun processes (gloo on CPU, nccl on GPU).

    python benchmarks/distributed_speed.py [--steps 40] [--preset small]

Both runs train the same model on Multi30k de-en with the same global batch (1 process
x accumulation 2 against 2 processes x accumulation 1) and the same total number of
threads (2 threads in one process, or 1 thread in each of two). The figure is the median
of the logged target tokens/s after the first logging window. On this 2-core machine no
speed-up is expected: the point is that it runs, and what the communication costs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import REPO  # noqa: F401  (sets NMT_MIRROR)


def run(out: Path, nproc: int, args: argparse.Namespace) -> float:
    sets = [
        f"model.preset={args.preset}",
        f"train.max_steps={args.steps}",
        "train.log_every=5",
        "train.valid_every=100000",
        "train.valid_bleu_sentences=0",
        "train.best_metric=loss",
        f"train.accumulate={2 // nproc}",
        f"train.batch_tokens={args.batch_tokens}",
    ]
    cmd = ["-m", "nmt", "train", str(REPO / "configs" / "multi30k_de_en.yaml"), "--out", str(out), "--quiet"]
    for s in sets:
        cmd += ["--set", s]
    env = dict(os.environ, OMP_NUM_THREADS=str(2 // nproc))
    if nproc > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"] + cmd
    else:
        cmd = [sys.executable] + cmd
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    speeds = [r["tokens_per_s"] for r in records if r["kind"] == "train" and r["step"] > 5]
    return statistics.median(speeds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--preset", default="small")
    parser.add_argument("--batch-tokens", type=int, default=2048, help="per process and accumulation step")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        one = run(Path(tmp) / "one", 1, args)
        two = run(Path(tmp) / "two", 2, args)
    print(f"1 process  x accumulate 2: {one:8.0f} target tokens/s")
    print(f"2 processes x accumulate 1: {two:8.0f} target tokens/s  ({two / one:.2f}x)")


if __name__ == "__main__":
    main()
