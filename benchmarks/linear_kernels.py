"""MKL (nn.Linear) against oneDNN with a prepacked weight, for the `small` model's linear layers.

    python benchmarks/linear_kernels.py [--threads 1] [--rows 1,4,8,...] [--vocab 8192] [--int8]

Prints, for each layer shape and row count, MKL's time over oneDNN's (above 1: oneDNN is
faster), the median of 5 timed blocks. This is what `nmt.inference.precision.packed_output_is_faster`
rests on: run it on a new CPU kind before changing that choice. With --int8, the same for nmt's
int8 layers: fbgemm's kernels' time over oneDNN's (what `nmt.inference.int8_linear.ONEDNN_MIN_MACS`
rests on). Needs the machine to itself.
"""

from __future__ import annotations

import argparse
import copy
import time

import torch
import torch.nn.functional as F

from nmt.inference.packed_linear import PackedLinear, onednn_linear_available
from nmt.inference.precision import quantize_int8

from common import median

ROWS = "1,2,4,8,16,32,64,128,256,512,1024"


def seconds_per_call(fn, budget: float = 0.15, clock=time.perf_counter) -> float:
    """Median seconds of one call over 5 blocks of repeated calls (about `budget` s in all), by `clock`."""
    fn()
    calls, start = 0, clock()
    while clock() - start < 0.05:
        fn()
        calls += 1
    repeats = max(3, int(calls * budget / 0.05 / 5))
    blocks = []
    for _ in range(5):
        start = clock()
        for _ in range(repeats):
            fn()
        blocks.append((clock() - start) / repeats)
    return median(blocks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1: one worker)")
    parser.add_argument("--rows", default=ROWS, help=f"comma-separated row counts (default {ROWS})")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--int8", action="store_true", help="time int8 layers: fbgemm against oneDNN")
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
    if args.int8:
        return compare_int8(shapes, rows, args.threads)
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


def compare_int8(shapes: dict[str, tuple[int, int, bool]], rows: list[int], threads: int) -> None:
    """Print fbgemm's time over oneDNN's for each int8 layer shape and row count.

    With one thread the times are the thread's CPU time, which other processes on a shared machine
    disturb far less than wall time.
    """
    clock = time.thread_time if threads == 1 else time.perf_counter
    print(f"int8: fbgemm time / oneDNN time ({clock.__name__}), {threads} thread(s); rows:", *rows, sep="\t")
    for name, (n_in, n_out, bias) in shapes.items():
        linear = torch.nn.Sequential(torch.nn.Linear(n_in, n_out, bias=bias))
        fbgemm = quantize_int8(copy.deepcopy(linear), onednn=False)
        onednn = quantize_int8(copy.deepcopy(linear), onednn=True)
        onednn[0].onednn_rows = 0  # every call to oneDNN
        ratios = []
        with torch.inference_mode():
            for m in rows:
                x = torch.randn(m, n_in)
                times = [seconds_per_call(lambda x=x, layer=layer: layer(x), clock=clock) for layer in (fbgemm, onednn)]
                ratios.append(f"{times[0] / times[1]:.2f}")
        print(f"{name} {n_in}->{n_out}", *ratios, sep="\t", flush=True)


if __name__ == "__main__":
    main()
