"""torch's fused attention against two plain `bmm`s, on the shapes of a decoding step.

    python benchmarks/attention_kernels.py [--threads 1]

A cached decoding step asks attention for one query per row (beam search folds a sentence's beams
into a query length of 5), and the CPU flash kernel pays a fixed cost per (row, head) problem. This
times `F.scaled_dot_product_attention` against scores = q k^T by `bmm` over (rows x heads), masked
softmax, then `bmm` with v, for the shapes of a `small` model's step (4 heads of 64), and prints the
largest difference between the two. Needs the machine to itself.
"""

from __future__ import annotations

import argparse
import math
import time

import torch
import torch.nn.functional as F

from common import median

# name: (sentences or rows, queries per row of keys, keys, buffer capacity, masked)
SHAPES = {
    "cross-attention, greedy (235 rows, 34 source positions)": (235, 1, 34, 34, True),
    "cross-attention, beam 5 folded (47 sentences x 5)": (47, 5, 34, 34, True),
    "self-attention over a 20-step cache (a view of 32)": (235, 1, 20, 32, False),
}


def two_bmms(q, k, v, mask):
    """The attention of (b, h, g, d) queries over (b, h, L, d) keys and values, by two bmm's."""
    b, h, g, d = q.shape
    keys = k.size(2)
    scores = torch.bmm(q.reshape(b * h, g, d), k.reshape(b * h, keys, d).transpose(1, 2)).view(b, h, g, keys)
    scores.mul_(1 / math.sqrt(d))
    if mask is not None:
        scores.masked_fill_(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return torch.bmm(weights.view(b * h, g, keys), v.reshape(b * h, keys, d)).view(b, h, g, d)


def ms_per_call(fn, *args, calls: int = 100) -> float:
    """Median milliseconds of one fn(*args) over 5 blocks of `calls` calls."""
    fn(*args)
    blocks = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        blocks.append((time.perf_counter() - start) / calls * 1e3)
    return median(blocks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"{args.threads} thread(s): fused ms, two bmm's ms, largest difference")
    for name, (rows, group, keys, capacity, masked) in SHAPES.items():
        q = torch.randn(rows, 4, group, 64)
        k, v = torch.randn(rows, 4, capacity, 64)[:, :, :keys], torch.randn(rows, 4, capacity, 64)[:, :, :keys]
        mask = None
        if masked:
            mask = torch.rand(rows, 1, 1, keys) > 0.1
            mask[..., 0] = True  # every row sees at least one position
        fused = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        difference = (fused - two_bmms(q, k, v, mask)).abs().max().item()
        fused_ms = ms_per_call(F.scaled_dot_product_attention, q, k, v, mask)
        bmm_ms = ms_per_call(two_bmms, q, k, v, mask)
        print(f"{name}: {fused_ms:.2f}, {bmm_ms:.2f}, {difference:.1e}")


if __name__ == "__main__":
    main()
