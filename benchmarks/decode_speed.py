"""Decoding speed on the Multi30k test_2016_flickr source side (1,000 sentences).

    python benchmarks/decode_speed.py --model runs/de_en [--threads 2] [--uncached 100] [--join 1] [--profile]

Reports, in one run: sentences/s and total seconds for greedy and beam 5 (batched,
text in and text out, tokenization included), the latency of one sentence translated
alone (median over 20 sentences, beam 5), and the speed-up of cached over uncached
incremental decoding on the first `--uncached` sentences (same search, same outputs), and
of cached greedy search over the reference design's loop, which re-runs the whole model
(encoder, decoder, every position's logits) at every step.

--join N translates inputs made of N consecutive test sentences each (longer outputs: the
cached/uncached ratio grows with length); --profile prints where a cached beam-5 run on the
subset spends its time, operator by operator.
"""

from __future__ import annotations

import argparse
import json

import torch

from nmt.decoding import SearchLimits
from nmt.translator import Translator

from common import load_multi30k, median, timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="trained model directory")
    parser.add_argument("--src-lang", default="de")
    parser.add_argument("--tgt-lang", default="en")
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads (one worker)")
    parser.add_argument("--device", default="cpu", help="cpu | cuda (bf16 autocast on CUDA)")
    parser.add_argument("--uncached", type=int, default=100, help="sentences for the cached/uncached comparison")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats of each full-set run (median)")
    parser.add_argument("--join", type=int, default=1, help="join N consecutive sentences into one input")
    parser.add_argument("--profile", action="store_true", help="print the operator profile of cached beam 5")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    sources = [s for s, _ in load_multi30k("test_2016_flickr", args.src_lang, args.tgt_lang)]
    sources = [" ".join(sources[i : i + args.join]) for i in range(0, len(sources), args.join)]
    # One worker with every thread: this benchmark measures the search, not the parallel workers
    # (benchmarks/engine_speed.py compares those, and other engines).
    translator = Translator.load(args.model, device=args.device, workers=1, threads=torch.get_num_threads())
    translator.translate(sources[:50], beam=5)  # warm-up

    result: dict[str, float | int] = {
        "sentences": len(sources),
        "joined": args.join,
        "threads": torch.get_num_threads(),
        "device": str(translator.device),
    }
    for name, beam in (("greedy", 1), ("beam5", 5)):
        seconds = median(timed(lambda beam=beam: translator.translate(sources, beam=beam), args.repeats))
        result[f"{name}_seconds"] = seconds
        result[f"{name}_sentences_per_s"] = len(sources) / seconds

    result["latency_beam5_ms"] = 1000 * median(
        [timed(lambda s=s: translator.translate([s], beam=5), 1)[0] for s in sources[:20]]
    )

    subset = sources[: args.uncached]
    ids = [translator.encode_source(s)[0] for s in subset]
    for name, beam in (("greedy", 1), ("beam5", 5)):
        cached_out = translator.translate_ids(ids, beam=beam)
        cached = median(timed(lambda beam=beam: translator.translate_ids(ids, beam=beam), args.repeats))
        with uncached_search():
            uncached_out = translator.translate_ids(ids, beam=beam)
            uncached = median(timed(lambda beam=beam: translator.translate_ids(ids, beam=beam), args.repeats))
        same = all(a[0].tokens == b[0].tokens for a, b in zip(cached_out, uncached_out, strict=True))
        result[f"{name}_cached_seconds"], result[f"{name}_uncached_seconds"] = cached, uncached
        result[f"{name}_cached_speedup"] = uncached / cached
        result[f"{name}_cached_equals_uncached"] = same
        result[f"{name}_mean_output_tokens"] = sum(len(h[0].tokens) for h in cached_out) / len(cached_out)

    if args.profile:  # benchmarks/decode_profile.py profiles one search on its own, any precision
        from decode_profile import operator_table

        print(operator_table(lambda: translator.translate_ids(ids, beam=5), rows=15))

    # The reference design's loop: every step re-runs the whole model (encoder too) on the
    # source and the prefix and projects every position, then takes the last one's argmax.
    src = torch.nn.utils.rnn.pad_sequence([torch.as_tensor(i) for i in ids], batch_first=True)
    reference_tokens = []
    rerun = median(timed(lambda: reference_tokens.append(reference_greedy(translator.model, src)), 1))
    cached = median(timed(lambda: translator.translate_ids(ids, beam=1), args.repeats))
    ours = [h[0].tokens for h in translator.translate_ids(ids, beam=1)]
    result["greedy_speedup_over_full_rerun"] = rerun / cached
    result["greedy_full_rerun_same_tokens"] = sum(a == b for a, b in zip(ours, reference_tokens[0], strict=True)) / len(
        ours
    )

    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:30s} {round(value, 3) if isinstance(value, float) else value}")


@torch.inference_mode()
def reference_greedy(model, src: torch.Tensor, max_len_a: float = 1.5, max_len_b: int = 10) -> list[list[int]]:
    """Greedy search without any caching: the whole Transformer runs again at every step.

    Each sentence stops at EOS or at its own length limit, floor(a * src_len + b), as in ours.
    """
    prefix = torch.full((src.size(0), 1), 2, dtype=torch.long)  # [START]
    ended = torch.zeros(src.size(0), dtype=torch.bool)
    limits = SearchLimits(max_len_a, max_len_b).max_steps((src != 0).sum(1))  # (batch,)
    for step in range(1, int(limits.max()) + 1):
        logits = model(src, prefix)  # (batch, steps, vocab): every position, every step
        logits[:, -1, 0] = float("-inf")  # never padding
        token = logits[:, -1].argmax(-1).masked_fill(ended, 0)
        prefix = torch.cat([prefix, token[:, None]], dim=1)
        ended |= (token == 3) | (limits <= step)
        if ended.all():
            break
    out = []
    for row in prefix[:, 1:].tolist():
        out.append(row[: row.index(3)] if 3 in row else [t for t in row if t != 0])
    return out


class uncached_search:
    """Make the Translator's searches re-run the decoder over the whole prefix at every step."""

    def __enter__(self):
        import nmt.inference.batch_search as engine_module

        self.module = engine_module
        self.saved = engine_module.greedy_search, engine_module.beam_search
        greedy, beam = self.saved
        engine_module.greedy_search = lambda *a, **k: greedy(*a, **k, use_cache=False)
        engine_module.beam_search = lambda *a, **k: beam(*a, **k, use_cache=False)

    def __exit__(self, *exc):
        self.module.greedy_search, self.module.beam_search = self.saved


if __name__ == "__main__":
    main()
