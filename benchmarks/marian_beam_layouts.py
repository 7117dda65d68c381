"""Beam 5 in int8 on the CTranslate2 path: which worker layout and batch size is fastest?

    python benchmarks/marian_beam_layouts.py [--sentences 100] [--max-new 32] [--rounds 5] [--beam 5]

The OPUS-MT-shaped random Marian of marian_speed.py, imported by nmt and exported to CTranslate2
int8, timed text to text against transformers' `generate` (fp32, the baseline of issue 39's 3x
goal; timed in a fresh process each round, "alone", the baseline of the ratios, and in this one
among the others) in alternating rounds (median of --rounds). The layouts:

- default:           what Translator.load picks (one worker, every core its threads, batches of
                     the whole token budget, since a base model's decoding step reads more weights
                     than the cache holds)
- 1x2, small batches: the same worker, batches capped as for a small model
- 2x1:               two single-threaded CTranslate2 workers, a few batches each
- ct2 direct 1x2/2x1: CTranslate2's own converter and translate_batch, no nmt around it

Outputs are compared with transformers' (count equal): a layout changes batching, not the search.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import marian_speed
import torch

from common import load_multi30k, median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--max-new", type=int, default=32, help="the output cap, the same for every setting")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--beam", type=int, default=5)
    args = parser.parse_args()
    import ctranslate2
    from transformers import MarianTokenizer

    from nmt.translator import Translator

    sources = [s for s, _ in load_multi30k("test_2016_flickr")][: args.sentences]
    cores = os.cpu_count() or 1
    decode = marian_speed.capped_decode(args.max_new)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        hf_dir = marian_speed.build_model(folder)
        marian_speed.import_cost(hf_dir, folder / "nmt")
        converted = folder / "ct2"
        ctranslate2.converters.TransformersConverter(str(hf_dir)).convert(str(converted))
        tokenizer = MarianTokenizer.from_pretrained(hf_dir)
        src_tokens = [tokenizer.convert_ids_to_tokens(tokenizer(s)["input_ids"]) for s in sources]

        def nmt_layout(small_batches: bool = False, **options):
            translator = Translator.load(folder / "nmt", engine="ctranslate2", precision="int8", **options)
            translator.decode = translator.engine.decode = decode
            if small_batches:
                translator.engine.whole_budget = False  # capped at CPU_BATCH_TOKENS // 2 for a beam
            translator.start_workers(wait=True)
            return lambda: translator.translate(sources, beam=args.beam)

        def ct2_direct(inter: int, intra: int):
            torch_threads = torch.get_num_threads()
            model = ctranslate2.Translator(
                str(converted), compute_type="int8_float32", inter_threads=inter, intra_threads=intra
            )
            torch.set_num_threads(torch_threads)  # CTranslate2 set the OpenMP count torch shares to `intra`

            def translate():
                found = model.translate_batch(
                    src_tokens,
                    beam_size=args.beam,
                    max_decoding_length=args.max_new,
                    max_batch_size=2048,
                    batch_type="tokens",
                )
                return [tokenizer.convert_tokens_to_string(r.hypotheses[0]) for r in found]

            return translate

        hf_translate, hf_out = marian_speed.run_transformers(hf_dir, sources, args.beam, args.max_new)

        def transformers():
            hf_translate()
            return list(hf_out)

        settings = {
            "transformers alone": None,  # marian_speed.transformers_alone, timed in its own process
            "transformers fp32": transformers,
            "nmt->ct2 int8 default": nmt_layout(),
            "nmt->ct2 int8 1x2 small batches": nmt_layout(small_batches=True, workers=1, threads=cores),
            f"nmt->ct2 int8 {cores}x1": nmt_layout(workers=cores, threads=1),
            f"ct2 int8 direct 1x{cores}": ct2_direct(1, cores),
            f"ct2 int8 direct {cores}x1": ct2_direct(cores, 1),
        }
        timings: dict[str, list[float]] = {}
        outputs: dict[str, list[str]] = {}
        for _ in range(args.rounds):  # alternating rounds: a slow spell hits every setting alike
            for name, translate in settings.items():
                if translate is None:
                    seconds, outputs[name] = marian_speed.transformers_alone(hf_dir, sources, args.beam, args.max_new)
                    timings.setdefault(name, []).append(seconds)
                    continue
                start = time.perf_counter()
                outputs[name] = translate()
                timings.setdefault(name, []).append(time.perf_counter() - start)
    base, reference = median(timings["transformers alone"]), outputs["transformers alone"]
    rows = {
        name: {
            "seconds": round(median(times), 3),
            "all_seconds": [round(t, 3) for t in times],
            "vs_transformers": round(base / median(times), 2),  # transformers alone
            "same_as_transformers": sum(a == b for a, b in zip(outputs[name], reference, strict=True)),
        }
        for name, times in timings.items()
    }
    print(
        json.dumps(
            {
                "cores": cores,
                "torch_threads": torch.get_num_threads(),  # transformers' threads: every core
                "sentences": len(sources),
                "beam": args.beam,
                "max_new": args.max_new,
            }
        )
    )
    for name, row in rows.items():
        print(
            f"{name:34s} {row['seconds']:7.2f} s  {row['vs_transformers']:5.2f}x  same {row['same_as_transformers']}"
            f"  {row['all_seconds']}"
        )


if __name__ == "__main__":
    main()
