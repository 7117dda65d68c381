"""Padding in token-budget batches on Multi30k train (the default tokenizer, both sides counted).

    python benchmarks/padding_efficiency.py [--batch-tokens 4096] [--pair de-en]

Prints the padding fraction (pad slots / all slots of the padded source and target
tensors) for the bucketed sampler used in training, and for the same batch sizes
filled in random order, for contrast.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from nmt.data.batching import TokenBatchSampler, padding_stats
from nmt.data.encoded import encode_corpus

from common import joint_tokenizer, load_multi30k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--pair", default="de-en")
    args = parser.parse_args()
    src_lang, tgt_lang = args.pair.split("-")
    tokenizer = joint_tokenizer(Path(tempfile.gettempdir()) / "nmt_bench_tokenizer")
    corpus = encode_corpus(load_multi30k("train", src_lang, tgt_lang), tokenizer.encode_batch, tokenizer.encode_batch)
    src, tgt = corpus.src_lengths(), corpus.tgt_lengths()
    sampler = TokenBatchSampler(src, tgt, max_tokens=args.batch_tokens, seed=1)
    for epoch in range(3):
        batches = sampler.batches(epoch)
        stats = padding_stats(batches, src, tgt)
        print(
            f"epoch {epoch}: {len(batches)} batches, padding {100 * stats['padding_fraction']:.2f}% "
            f"({stats['pad_tokens']} of {stats['padded_tokens']} slots)"
        )
    sizes = [len(b) for b in sampler.batches(0)]
    order = np.random.default_rng(0).permutation(len(src))
    random_batches = np.split(order, np.cumsum(sizes)[:-1])
    print(
        f"same batch sizes, random order: padding "
        f"{100 * padding_stats(random_batches, src, tgt)['padding_fraction']:.2f}%"
    )


if __name__ == "__main__":
    main()
