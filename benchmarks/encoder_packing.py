"""The encoder packed (its position-wise layers on real tokens only) against the padded encoder.

    python benchmarks/encoder_packing.py --model runs/de_en_base [--reps 9] [--rounds 5] [--precisions fp32,int8]

One worker of one thread. First records the batches that `Translator.translate` encodes for the
1,000 Multi30k test_2016_flickr sentences (greedy and beam 5), then per batch with at least 10%
padding times `encode` + `new_cache` packed and padded, alternating, --reps times (the median of
the per-rep ratios, with its range); then whole translate calls at the model's default packing
against never packing, alternating --rounds times, and counts the outputs that stayed the same.
Packing is forced on or off through the model's `pack_encoder_from` (the least share of padding
at which `encode` packs a batch; nmt.model.packing).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from nmt.translator import Translator

from common import load_multi30k

NEVER = 2.0  # no batch is more than all padding


def padding_share(src: torch.Tensor, pad_id: int) -> float:
    return 1 - int((src != pad_id).sum()) / src.numel()


def ratio_text(numerators: list[float], denominators: list[float]) -> str:
    ratios = sorted(a / b for a, b in zip(numerators, denominators, strict=True))
    return f"{statistics.median(ratios):.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f})"


def recorded_batches(translator: Translator, sources: list[str]) -> list[torch.Tensor]:
    """The (batch, src_len) id tensors that greedy and beam-5 translation of `sources` encode."""
    model, seen = translator.model, []
    encode = model.encode

    def recording(src, *args, **kwargs):
        seen.append(src.clone())
        return encode(src, *args, **kwargs)

    model.encode = recording
    try:
        translator.translate(sources, beam=1)
        translator.translate(sources, beam=5)
    finally:
        del model.encode  # the class's method again
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="trained nmt model directory (German source)")
    parser.add_argument("--reps", type=int, default=9, help="alternating repetitions per batch")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of whole translate calls")
    parser.add_argument("--precisions", default="fp32,int8", help="comma-separated: fp32, int8")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sources = [s for s, _ in load_multi30k("test_2016_flickr")]
    for precision in args.precisions.split(","):
        translator = Translator.load(args.model, device="cpu", precision=precision, workers=1, threads=1)
        model = translator.model
        default, pad = model.pack_encoder_from, model.config.pad_id
        batches = sorted(recorded_batches(translator, sources), key=lambda src: padding_share(src, pad))
        with torch.inference_mode():
            for src in (b for b in batches if padding_share(b, pad) >= 0.1):
                times = {NEVER: [], 0.0: []}
                for _ in range(args.reps):
                    for setting, spent in times.items():
                        model.pack_encoder_from = setting
                        began = time.perf_counter()
                        model.new_cache(model.encode(src))
                        spent.append(time.perf_counter() - began)
                share = padding_share(src, pad)
                chosen = "packed" if share >= default else "padded"
                print(
                    f"{precision} batch {tuple(src.shape)}, padding {share:.1%} ({chosen} by default): "
                    f"padded {statistics.median(times[NEVER]) * 1e3:.1f} ms, packed/padded "
                    f"{ratio_text(times[0.0], times[NEVER])}",
                    flush=True,
                )
        for beam in (1, 5):
            times, outputs = {NEVER: [], default: []}, {}
            for _ in range(args.rounds):
                for setting, spent in times.items():
                    model.pack_encoder_from = setting
                    began = time.perf_counter()
                    outputs[setting] = translator.translate(sources, beam=beam)
                    spent.append(time.perf_counter() - began)
            same = sum(a == b for a, b in zip(outputs[NEVER], outputs[default], strict=True))
            print(
                f"{precision} beam {beam}, whole call: never packed {statistics.median(times[NEVER]):.2f} s, "
                f"default {statistics.median(times[default]):.2f} s, "
                f"default/never {ratio_text(times[default], times[NEVER])}, "
                f"same outputs {same}/{len(sources)}",
                flush=True,
            )
        model.pack_encoder_from = default


if __name__ == "__main__":
    main()
