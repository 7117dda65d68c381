"""Training steps in fp32 against bf16 mixed precision (`train.precision`), side by side, on this CPU.

    python benchmarks/train_precision.py [--preset small] [--batch-tokens 1536] [--batches 6] [--rounds 5]

Two copies of one model (the same initial weights) see the same Multi30k batches with Adam, one in
fp32 and one under the bf16 autocast that nmt's trainer uses (nmt.training.precision); rounds
alternate between them so that machine noise hits both alike. Printed: target tokens per second,
median and range over the rounds, the speed-up, and a plain matrix product's GFLOP/s in both types,
with the CPU's bf16 units (what `train.precision: auto` decides by).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from nmt.data.batching import TokenBatchSampler, collate
from nmt.data.encoded import encode_corpus
from nmt.model import ModelConfig, Transformer
from nmt.training.loss import sequence_loss
from nmt.training.precision import bf16_units, training_precision

from common import joint_tokenizer, load_multi30k

CPU = torch.device("cpu")


def matmul_gflops(dtype: torch.dtype, n: int = 1024, repeats: int = 5) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * n**3 * repeats / (time.perf_counter() - start) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="small")
    parser.add_argument("--batch-tokens", type=int, default=1536)
    parser.add_argument("--batches", type=int, default=6, help="batches per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--profile", action="store_true", help="then print where one round's time goes, by operator")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    tokenizer = joint_tokenizer(Path(tempfile.gettempdir()) / "nmt_bench_tokenizer")
    corpus = encode_corpus(load_multi30k("train"), tokenizer.encode_batch, tokenizer.encode_batch)
    sampler = TokenBatchSampler(corpus.src_lengths(), corpus.tgt_lengths(), max_tokens=args.batch_tokens, seed=1)
    batches = [
        collate([corpus.src[i] for i in idx], [corpus.tgt[i] for i in idx], idx)
        for idx in sampler.batches(0)[: args.batches]
    ]
    tokens = sum(b.num_tgt_tokens for b in batches)
    config = ModelConfig.preset(args.preset, src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size)
    runs = {}
    for name in ("fp32", "bf16"):
        torch.manual_seed(0)
        model = Transformer(config).train()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
        runs[name] = (model, optimizer, training_precision(name, CPU))

    def steps(name: str) -> float:
        model, optimizer, precision = runs[name]
        start = time.perf_counter()
        for batch in batches:
            with precision.autocast(CPU):
                out = sequence_loss(model, batch.src, batch.tgt_in, batch.tgt_out, normaliser=batch.num_tgt_tokens)
            out.loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    for name in runs:  # warm-up: allocator, optimizer state, oneDNN's kernels
        steps(name)
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name in runs:
            seconds[name].append(steps(name))
    print(
        f"CPU bf16 units: {bf16_units()}; threads {torch.get_num_threads()}; preset {args.preset}; "
        f"{tokens / len(batches):.0f} target tokens a batch"
    )
    print(f"matmul 1024^2: fp32 {matmul_gflops(torch.float32):.0f} GFLOP/s, bf16 {matmul_gflops(torch.bfloat16):.0f}")
    for name, times in seconds.items():
        rates = [tokens / t for t in times]
        print(f"{name}: {statistics.median(rates):.0f} target tokens/s ({min(rates):.0f}-{max(rates):.0f})")
    print(f"bf16 / fp32 speed: {statistics.median(seconds['fp32']) / statistics.median(seconds['bf16']):.2f}x")
    if args.profile:
        for name in runs:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
                steps(name)
            print(f"\n{name}, one round by operator:")
            print(profile.key_averages().table(sort_by="self_cpu_time_total", row_limit=14, max_name_column_width=40))


if __name__ == "__main__":
    main()
