"""MKL (nn.Linear) against oneDNN with a prepacked weight, for the `small` model's linear layers.

    python benchmarks/linear_kernels.py [--threads 1] [--rows 1,4,8,...] [--vocab 8192]

Prints, for each layer shape and row count, MKL's time over oneDNN's (above 1: oneDNN is
faster), the median of 5 timed blocks. This is what `nmt.inference.precision.packed_output_is_faster`
rests on: run it on a new CPU kind before changing that choice. Needs the machine to itself.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from nmt.inference.packed_linear import PackedLinear, onednn_linear_available

from common import median

ROWS = "1,2,4,8,16,32,64,128,256,512,1024"


def seconds_per_call(fn, budget: float = 0.15) -> float:
    """Median seconds of one call over 5 blocks of repeated calls (about `budget` s in all)."""
    fn()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < 0.05:
        fn()
        calls += 1
    repeats = max(3, int(calls * budget / 0.05 / 5))
    blocks = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        blocks.append((time.perf_counter() - start) / repeats)
    return median(blocks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1: one worker)")
    parser.add_argument("--rows", default=ROWS, help=f"comma-separated row counts (default {ROWS})")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=8192)
    args = parser.parse_args()
    if not onednn_linear_available():
        parser.error("this torch build has no oneDNN linear ops")
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    d, ff = args.d_model, args.d_ff
    shapes = {
        "output projection": (d, args.vocab, False),
        "self-attention Q,K,V": (d, 3 * d, True),
        "feed-forward in": (d, ff, True),
        "feed-forward out": (ff, d, True),
        "attention out": (d, d, True),
    }
    rows = [int(r) for r in args.rows.split(",")]
    print(f"MKL time / oneDNN-packed time, {args.threads} thread(s); rows:", *rows, sep="\t")
    for name, (n_in, n_out, bias) in shapes.items():
        linear = torch.nn.Linear(n_in, n_out, bias=bias).requires_grad_(False)
        packed = PackedLinear(linear)
        ratios = []
        with torch.inference_mode():
            for m in rows:
                x = torch.randn(m, n_in)
                mkl = seconds_per_call(lambda x=x, w=linear.weight, b=linear.bias: F.linear(x, w, b))
                onednn = seconds_per_call(lambda x=x, packed=packed: packed(x))
                ratios.append(f"{mkl / onednn:.2f}")
        print(f"{name} {n_in}->{n_out}", *ratios, sep="\t", flush=True)


if __name__ == "__main__":
    main()
