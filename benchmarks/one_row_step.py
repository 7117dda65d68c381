"""Where a one-row decoding step's time goes: the operators' fixed cost, or the matrix products.

    python benchmarks/one_row_step.py --model runs/de_en_base [--precision fp32] [--rounds 7]

One sentence of Multi30k test_2016_flickr, greedy, one thread. A step's time is the slope between
1 and 41 steps (so the encoder and the first step's set-up drop out), for: the model; a model of
the same depth and heads with 32-wide matrices (the same operators, next to no arithmetic: the
cost per operator); and CTranslate2 on the model's export, where installed (its `min_decoding_length`
= `max_decoding_length` fixes the step count). Alternating rounds, medians with their ranges.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
from pathlib import Path

import torch

from nmt.decoding.state import SearchState
from nmt.inference.precision import prepare_for_inference
from nmt.model import ModelConfig, Transformer
from nmt.translator import Translator

from common import load_multi30k


def seconds_per_step(model: Transformer, src: torch.Tensor) -> float:
    def run(steps: int) -> float:
        began = time.perf_counter()
        with torch.inference_mode():
            state = SearchState.start(model, src)
            for _ in range(steps):
                now = state.next_step()
                state.advance(now, now.log_probs.argmax(-1))
        return time.perf_counter() - began

    run(2)
    return (run(41) - run(1)) / 40


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="trained nmt model directory (German source)")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "int8"])
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds")
    parser.add_argument("--sentence", type=int, default=7, help="which test sentence (index)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sentence = [s for s, _ in load_multi30k("test_2016_flickr")][args.sentence]
    translator = Translator.load(args.model, device="cpu", precision=args.precision, workers=1, threads=1)
    model, c = translator.model, translator.model.config
    ids = translator.encode_source(sentence)[0]
    tiny = Transformer(
        ModelConfig(
            src_vocab_size=64,
            tgt_vocab_size=64,
            encoder_layers=c.encoder_layers,
            decoder_layers=c.decoder_layers,
            d_model=32,
            num_heads=c.num_heads,
            d_ff=64,
            dropout=0.0,
            norm_position=c.norm_position,
        )
    )
    prepare_for_inference(tiny, args.precision)
    settings = {
        "the model": lambda: seconds_per_step(model, torch.tensor([ids])),
        "same depth, 32-wide": lambda: seconds_per_step(tiny, torch.tensor([ids]).clamp(max=63)),
    }
    if importlib.util.find_spec("ctranslate2"):
        import ctranslate2  # noqa: PLC0415 - optional

        from nmt.inference.export_ctranslate2 import export_ctranslate2, vocabulary  # noqa: PLC0415

        exported = export_ctranslate2(args.model, Path(tempfile.mkdtemp(prefix="one-row-")) / "ct2")
        compute = "float32" if args.precision == "fp32" else "int8_float32"
        engine = ctranslate2.Translator(str(exported), compute_type=compute, inter_threads=1, intra_threads=1)
        pieces = [[vocabulary(translator.src_tokenizer)[i] for i in ids]]

        def ct2_step() -> float:
            def run(steps: int) -> float:
                began = time.perf_counter()
                engine.translate_batch(pieces, beam_size=1, min_decoding_length=steps, max_decoding_length=steps)
                return time.perf_counter() - began

            run(2)
            return (run(41) - run(1)) / 40

        settings["CTranslate2"] = ct2_step
    times = {name: [] for name in settings}
    for _ in range(args.rounds):
        for name, measure in settings.items():
            times[name].append(measure())
    for name, spent in times.items():
        print(
            f"{args.precision} {name:20s} {statistics.median(spent) * 1e3:.2f} ms a step "
            f"({min(spent) * 1e3:.2f}-{max(spent) * 1e3:.2f})"
        )


if __name__ == "__main__":
    main()
