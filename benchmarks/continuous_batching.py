"""Continuous batching for greedy search, prototyped: is it faster than batch by batch?

    python benchmarks/continuous_batching.py --model runs/de_en_base [--precision fp32] [--rows 250]
        [--refill-at 0.25] [--rounds 3]

nmt's engine decodes batch by batch: a batch runs until its longest sentence ends, and most of its
steps come after most of its rows have finished (69% of one-worker greedy's steps have 16 rows or
fewer), each step paying the operators' fixed cost and a read of every decoder weight. Here the
sentences (longest first) join a pool as cohorts: when at most --refill-at of --rows are still
decoding, the next sentences are encoded as a new cohort. A step runs the linear layers, the
feed-forward blocks and the output projection once over every cohort's rows; attention runs per
cohort, over that cohort's own history and source (so no row attends over a longer window than
its own, which sank an earlier prototype that padded one shared window). Against batch by batch
with the same step code (one cohort at a time), one worker of one thread, alternating rounds;
prints the times, the steps and how many outputs are the same, and the engine's own greedy
(`Translator.translate`, whose batches and search differ in detail) for reference. A prototype for the engine's
decoding loop (issue 85), not what `nmt translate` runs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from nmt.decoding.penalties import SearchLimits
from nmt.translator import Translator

from common import load_multi30k


class Cohort:
    """Sentences that joined the pool together: their decoder cache, source mask, tokens and outputs."""

    def __init__(self, model, ids: list[list[int]], sentences: list[int], limits: SearchLimits):
        pad = model.config.pad_id
        src = torch.full((len(sentences), max(len(ids[i]) for i in sentences)), pad)
        for row, i in enumerate(sentences):
            src[row, : len(ids[i])] = torch.tensor(ids[i])
        encoded = model.encode(src)
        self.mask, self.cache = encoded.src_mask, model.new_cache(encoded)
        self.max_len = limits.max_steps((src != pad).sum(1))
        self.tokens = torch.full((len(sentences), 1), model.config.bos_id)
        self.sentences, self.outputs = list(sentences), [[] for _ in sentences]

    def rows(self) -> int:
        return self.tokens.size(0)

    def keep(self, alive: list[int]) -> None:
        """Drop the finished rows (as batch-by-batch greedy does once a quarter of them have finished)."""
        keep = torch.tensor(alive, dtype=torch.long)
        self.cache.reorder(keep)
        self.cache.select_sentences(keep)
        self.mask, self.max_len, self.tokens = self.mask.index_select(0, keep), self.max_len[keep], self.tokens[keep]
        self.sentences = [self.sentences[a] for a in alive]
        self.outputs = [self.outputs[a] for a in alive]


def joined(parts: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat(parts) if len(parts) > 1 else parts[0]


def step(model, cohorts: list[Cohort]) -> list[int]:
    """One greedy step for every cohort: the linear layers on all rows, attention per cohort."""
    x = joined([model.positions(model.tgt_embed(c.tokens), offset=c.cache.length) for c in cohorts])  # (rows, 1, d)
    bounds = torch.tensor([0] + [c.rows() for c in cohorts]).cumsum(0).tolist()
    spans = list(zip(bounds[:-1], bounds[1:], strict=True))
    for i, layer in enumerate(model.decoder_layers):
        self_attn, cross_attn = layer.self_attn, layer.cross_attn
        qkv = self_attn.in_proj(layer.self_residual.before(x))
        values = []
        for c, (a, b) in zip(cohorts, spans, strict=True):
            q, k, v = self_attn.split_qkv(qkv[a:b])
            k, v = c.cache.layers[i].append(k, v)
            values.append(self_attn.heads(q, k, v, None)[0])
        x = layer.self_residual.after(x, self_attn.out_proj(joined(values)))
        q = cross_attn.project_q(layer.cross_residual.before(x))
        values = []
        for c, (a, b) in zip(cohorts, spans, strict=True):
            cache = c.cache.layers[i]
            values.append(cross_attn.heads(q[a:b], cache.cross_k, cache.cross_v, c.mask)[0])
        x = layer.cross_residual.after(x, cross_attn.out_proj(joined(values)))
        x = layer.ff_residual.after(x, layer.feed_forward(layer.ff_residual.before(x)))
    for c in cohorts:
        c.cache.length += 1
    logits = model.logits(model.decoder_norm(x)[:, -1]).float()
    logits[:, model.config.pad_id] = float("-inf")
    return torch.log_softmax(logits, -1).argmax(-1).tolist()


def greedy(model, ids, order, rows: int, refill_at: float | None, limits: SearchLimits) -> tuple[dict, int]:
    """({sentence: output ids}, steps); refill_at None: batch by batch (a cohort joins when the last has ended)."""
    results, queue, steps, cohorts = {}, list(order), 0, []
    eos = model.config.eos_id
    while queue or cohorts:
        alive = sum(c.rows() for c in cohorts)
        if queue and (not cohorts or (refill_at is not None and alive <= refill_at * rows)):
            cohorts.append(Cohort(model, ids, queue[: rows - alive], limits))
            del queue[: rows - alive]
        chosen = step(model, cohorts)
        steps += 1
        start, kept = 0, []
        for c in cohorts:
            n, finished = c.rows(), 0
            for row in range(n):
                output = c.outputs[row]
                if output is None:
                    finished += 1
                    continue
                output.append(chosen[start + row])
                if output[-1] == eos or len(output) >= int(c.max_len[row]):
                    results[c.sentences[row]], c.outputs[row] = output, None
                    finished += 1
            c.tokens = torch.tensor(chosen[start : start + n]).unsqueeze(1)
            start += n
            if 4 * finished >= n:
                alive_rows = [row for row, output in enumerate(c.outputs) if output is not None]
                if not alive_rows:
                    continue
                c.keep(alive_rows)
            kept.append(c)
        cohorts = kept
    return results, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="trained nmt model directory (German source)")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "int8"])
    parser.add_argument("--rows", type=int, default=250, help="the pool's rows (and the batches' sentences)")
    parser.add_argument("--refill-at", type=float, default=0.25, help="share of --rows alive at which a cohort joins")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    args = parser.parse_args()
    torch.set_num_threads(1)
    translator = Translator.load(args.model, device="cpu", precision=args.precision, workers=1, threads=1)
    sources = [s for s, _ in load_multi30k("test_2016_flickr")]
    ids = [translator.encode_source(s)[0] for s in sources]
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    settings = {"batch by batch": None, "cohorts": args.refill_at}
    times, outputs, steps = {k: [] for k in [*settings, "engine"]}, {}, {"engine": "its own"}
    with torch.inference_mode():
        for refill_at in settings.values():  # warm-up
            greedy(translator.model, ids, order, args.rows, refill_at, SearchLimits())
        for _ in range(args.rounds):
            for name, refill_at in settings.items():
                began = time.perf_counter()
                outputs[name], steps[name] = greedy(translator.model, ids, order, args.rows, refill_at, SearchLimits())
                times[name].append(time.perf_counter() - began)
            began = time.perf_counter()  # what `nmt translate --beam 1 --workers 1` runs, for reference
            translator.translate(sources, beam=1)
            times["engine"].append(time.perf_counter() - began)
    ratios = sorted(a / b for a, b in zip(times["cohorts"], times["batch by batch"], strict=True))
    same = sum(outputs["cohorts"][i] == outputs["batch by batch"][i] for i in outputs["cohorts"])
    for name, spent in times.items():
        median, low, high = statistics.median(spent), min(spent), max(spent)
        print(f"{args.precision} {name:15s} {median:.2f} s ({low:.2f}-{high:.2f}), {steps[name]} steps")
    ratio = f"{statistics.median(ratios):.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f})"
    print(f"cohorts / batch by batch {ratio}; same outputs {same}/{len(ids)}")


if __name__ == "__main__":
    main()
