"""What the end of `nmt train` chose for a model, against the config it was trained with: test BLEU
and translation time of the model's own decoding settings (decode.length_penalty and
decode.precision in its config.yaml, chosen on validation) and of the config's (its alpha, fp32).

    python benchmarks/tuned_decoding.py --model runs/de_en --config configs/multi30k_de_en.yaml \\
        [--test test_2016_flickr] [--rounds 3]

Both settings run on `--engine auto` in one process, loaded once and warmed up; each round times one
pass over the test set with each, alternating; the figures are the median of the rounds, with the
range. BLEU is the same every round (the search is deterministic).
"""

from __future__ import annotations

import argparse
import statistics
import time

from nmt.config import load_config
from nmt.evaluation import score_translations
from nmt.model_dir import read_decode_config
from nmt.translator import Translator

from common import load_multi30k


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--config", required=True, help="the config the model was trained with")
    p.add_argument("--test", default="test_2016_flickr")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    shipped, own = load_config(args.config).decode, read_decode_config(args.model)
    pairs = load_multi30k(args.test, "de", "en")
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    runs = {
        f"the config's (alpha {shipped.length_penalty:g}, {shipped.precision or 'fp32'})": Translator.load(
            args.model, engine="auto", precision=shipped.precision or "fp32", length_penalty=shipped.length_penalty
        ),
        f"the model's own (alpha {own.length_penalty:g}, {own.precision or 'fp32'})": Translator.load(
            args.model, engine="auto"
        ),
    }
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    bleu = {}
    for translator in runs.values():
        translator.start_workers(wait=True)
        translator.translate(sources[:32])
    for _ in range(args.rounds):
        for name, translator in runs.items():
            start = time.perf_counter()
            hypotheses = translator.translate(sources)
            seconds[name].append(time.perf_counter() - start)
            bleu[name] = score_translations(hypotheses, references)
    print(f"| settings | engine | BLEU | BLEU lower-cased | chrF | seconds, {len(sources)} sentences (median, range) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, translator in runs.items():
        s, times = bleu[name], seconds[name]
        spread = f"{statistics.median(times):.2f} ({min(times):.2f}-{max(times):.2f})"
        engine = f"{translator.engine.name} {translator.engine.precision}"
        print(f"| {name} | {engine} | {s.bleu:.2f} | {s.bleu_lowercase:.2f} | {s.chrf:.2f} | {spread} |")


if __name__ == "__main__":
    main()
