"""Training speed: nmt vs a plain torch.nn.Transformer, side by side, and model FLOPs utilisation.

    python benchmarks/train_speed.py [--preset small] [--batches 8] [--rounds 3] [--threads 2] [--profile]

Both models have the same size, see the same Multi30k batches (token budget 4096), use
Adam(0.9, 0.98, 1e-9) and label smoothing 0.1. Rounds alternate between the two so that
machine noise hits both alike; the figures are medians over rounds. The fp32 matmul peak
is measured in the same run (the best of a few large square matmuls), and MFU is the
model FLOPs of a training step (6 x multiply-adds of every matmul, attention included,
output projection on real target tokens only) divided by time and by that peak.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from nmt.data.batching import TokenBatchSampler, collate
from nmt.data.encoded import encode_corpus
from nmt.model import ModelConfig, Transformer
from nmt.model.embedding import sinusoidal_encoding
from nmt.training.loss import sequence_loss

from common import joint_tokenizer, load_multi30k, median, timed


class BaselineTransformer(nn.Module):
    """What a PyTorch user writes first: nn.Transformer + embeddings + positions + a Linear."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.d_model = c.d_model
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=0)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model, padding_idx=0)
        self.core = nn.Transformer(
            c.d_model, c.num_heads, c.encoder_layers, c.decoder_layers, c.d_ff, c.dropout, batch_first=True
        )
        self.out = nn.Linear(c.d_model, c.tgt_vocab_size)
        self.dropout = nn.Dropout(c.dropout)

    def embed(self, emb: nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
        pe = sinusoidal_encoding(torch.arange(ids.size(1)), self.d_model)
        return self.dropout(emb(ids) * math.sqrt(self.d_model) + pe)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        causal = torch.ones(tgt_in.size(1), tgt_in.size(1), dtype=torch.bool).triu(1)  # True = masked
        h = self.core(
            self.embed(self.src_embed, src),
            self.embed(self.tgt_embed, tgt_in),
            tgt_mask=causal,
            src_key_padding_mask=src == 0,
            tgt_key_padding_mask=tgt_in == 0,
            memory_key_padding_mask=src == 0,
            tgt_is_causal=True,
        )
        return self.out(h)


def step_flops(c: ModelConfig, batch) -> float:
    """Model FLOPs of one training step (forward + backward = 3 x forward)."""
    b, s = batch.src.shape
    t = batch.tgt_in.size(1)
    d, f = c.d_model, c.d_ff
    enc = c.encoder_layers * (b * s * (4 * d * d + 2 * d * f) + 2 * b * s * s * d)
    dec = c.decoder_layers * (
        b * t * (4 * d * d + 2 * d * d + 2 * d * f) + b * s * 2 * d * d + 2 * b * t * t * d + 2 * b * t * s * d
    )
    out = batch.num_tgt_tokens * d * c.tgt_vocab_size
    return 3 * 2 * (enc + dec + out)


def matmul_peak(n: int = 2048, repeats: int = 5) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    return max(2 * n**3 / t for t in timed(lambda: a @ b, repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="small")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--batches", type=int, default=8, help="batches per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--profile", action="store_true", help="also print where nmt's steps spend their time")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    tokenizer = joint_tokenizer(Path(tempfile.gettempdir()) / "nmt_bench_tokenizer")
    pairs = load_multi30k("train")
    corpus = encode_corpus(pairs, tokenizer.encode_batch, tokenizer.encode_batch)
    sampler = TokenBatchSampler(corpus.src_lengths(), corpus.tgt_lengths(), max_tokens=args.batch_tokens, seed=1)
    batches = [
        collate([corpus.src[i] for i in idx], [corpus.tgt[i] for i in idx], idx)
        for idx in sampler.batches(0)[: args.batches]
    ]
    tokens = sum(b.num_tgt_tokens for b in batches)

    config = ModelConfig.preset(
        args.preset, src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, sharing="none"
    )
    torch.manual_seed(0)
    ours = Transformer(config).train()
    base = BaselineTransformer(config).train()
    adam = dict(lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    ours_opt = torch.optim.Adam(ours.parameters(), **adam, fused=True)
    base_opt = torch.optim.Adam(base.parameters(), **adam)

    def run_ours():
        for batch in batches:
            out = sequence_loss(ours, batch.src, batch.tgt_in, batch.tgt_out, normaliser=batch.num_tgt_tokens)
            out.loss.backward()
            ours_opt.step()
            ours_opt.zero_grad(set_to_none=True)

    def run_base():
        for batch in batches:
            logits = base(batch.src, batch.tgt_in)
            loss = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=0, label_smoothing=0.1)
            loss.backward()
            base_opt.step()
            base_opt.zero_grad(set_to_none=True)

    run_ours(), run_base()  # warm-up: allocator, optimizer state
    if args.profile:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            run_ours()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    ours_t, base_t = [], []
    for _ in range(args.rounds):
        ours_t += timed(run_ours, 1)
        base_t += timed(run_base, 1)
    peak = matmul_peak()
    flops = sum(step_flops(config, b) for b in batches)
    result = {
        "preset": args.preset,
        "threads": torch.get_num_threads(),
        "batches": len(batches),
        "target_tokens_per_batch": tokens / len(batches),
        "nmt_tokens_per_s": tokens / median(ours_t),
        "baseline_tokens_per_s": tokens / median(base_t),
        "speedup": median(base_t) / median(ours_t),
        "matmul_peak_gflops": peak / 1e9,
        "nmt_mfu": flops / median(ours_t) / peak,
        "baseline_mfu": flops / median(base_t) / peak,
        "nmt_round_s": ours_t,
        "baseline_round_s": base_t,
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:24s} {value if not isinstance(value, float) else round(value, 3)}")


if __name__ == "__main__":
    main()
