"""What guided alignment costs a training step: the same batches with and without it, side by side.

One worker of the README's recipe (`nmt train configs/multi30k_de_en.yaml` runs one single-threaded
process per core, each with its share of the 2,048-token batch): the small preset, 1,024-token
Multi30k batches, one thread, Adam. Rounds alternate between the plain step and the guided one
(the alignment head's weights, the loss on the batch's links, and building those links from the
cached corpus links, as the trainer does), so machine noise hits both alike; figures are medians
of the rounds' target tokens per second. The aligner's own time (once per corpus, then cached) is
printed apart.

    python benchmarks/guided_alignment_speed.py [--rounds 7] [--batches 20]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from nmt.data.batching import TokenBatchSampler, collate
from nmt.data.corpus_alignment import piece_links
from nmt.data.encoded import encode_corpus
from nmt.model import ModelConfig, Transformer
from nmt.training.guided_alignment import batch_links
from nmt.training.loss import LossModule

from common import joint_tokenizer, load_multi30k, median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-tokens", type=int, default=1024)
    parser.add_argument("--batches", type=int, default=20, help="batches per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    tokenizer = joint_tokenizer(Path(tempfile.gettempdir()) / "nmt_bench_tokenizer")
    corpus = encode_corpus(load_multi30k("train"), tokenizer.encode_batch, tokenizer.encode_batch)
    table = tokenizer.lookup(range(tokenizer.vocab_size))
    started = time.perf_counter()
    links = piece_links(corpus, table, table)
    aligner_seconds = time.perf_counter() - started
    sampler = TokenBatchSampler(corpus.src_lengths(), corpus.tgt_lengths(), max_tokens=args.batch_tokens, seed=1)
    chosen = sampler.batches(0)[: args.batches]
    batches = [collate([corpus.src[i] for i in idx], [corpus.tgt[i] for i in idx], idx) for idx in chosen]
    tokens = sum(b.num_tgt_tokens for b in batches)

    config = ModelConfig.preset("small", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size)
    results: dict[str, list[float]] = {"plain": [], "guided": []}
    runs = {}
    for name in results:
        torch.manual_seed(0)
        head = {"alignment_layer": -2, "alignment_heads": 1, "alignment_shift": True}  # as nmt train's default
        model = Transformer(ModelConfig(**{**config.to_dict(), **head})).train()
        weight = 0.1 if name == "guided" else 0.0
        runs[name] = (LossModule(model, 0.1, alignment_weight=weight), torch.optim.Adam(model.parameters(), fused=True))

    def run(name: str) -> float:
        step, optimizer = runs[name]
        begin = time.perf_counter()
        for batch in batches:
            batch_link = batch_links(links, batch.indices.numpy(), shift=True) if name == "guided" else None
            loss, *_ = step(batch.src, batch.tgt_in, batch.tgt_out, batch.num_tgt_tokens, batch_link)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return tokens / (time.perf_counter() - begin)

    for name in results:  # warm-up
        run(name)
    for _ in range(args.rounds):
        for name in results:
            results[name].append(run(name))
    plain, guided = median(results["plain"]), median(results["guided"])
    print(
        json.dumps(
            {
                "plain_tokens_per_s": round(plain),
                "guided_tokens_per_s": round(guided),
                "cost_percent": round(100 * (1 - guided / plain), 1),
                "plain_range": [round(min(results["plain"])), round(max(results["plain"]))],
                "guided_range": [round(min(results["guided"])), round(max(results["guided"]))],
                "aligner_seconds": round(aligner_seconds, 1),
                "pairs": len(corpus),
                "threads": args.threads,
            }
        )
    )


if __name__ == "__main__":
    main()
