"""Choose beam search's length penalty on a validation set, then report it on test.

    python benchmarks/length_penalty.py --model runs/de_en_3h [--weights FILE] [--pair de-en] \
        [--valid val] [--test test_2016_flickr] [--alphas 0,0.6,1.0,1.4,2.0] [--beam 5]

A finished hypothesis is ranked by log_prob / ((5 + length) / 6)^alpha (GNMT's penalty, see
nmt.decoding.penalties). The model's decode.length_penalty (0.6 by default, the value Wu et al.
chose for their WMT systems) is one setting for every model, but how short a model's beam output
runs depends on the model: one under-trained model here gave 0.89 of the reference length on
test at alpha 0.6. This script translates the validation set with each alpha, picks the alpha
with the best cased validation BLEU (the test set is never used to choose), and then scores the
test set with the model's own alpha and with the chosen one, for the record.
`nmt tune-length-penalty` makes the same choice for any model and held-out set (`--write`
stores it in the model directory).

Prints one line per (split, alpha): cased and lower-cased BLEU, chrF2, and the length ratio
(hypothesis words / reference words over the whole set); with --json, one object at the end.
"""

from __future__ import annotations

import argparse
import json

from nmt.translator import Translator
from nmt.tuning import PenaltyTrial, best_trial, try_length_penalties

from common import load_multi30k


def row(trial: PenaltyTrial) -> dict[str, float]:
    s = trial.scores
    return {
        "alpha": trial.alpha,
        "bleu": round(s.bleu, 2),
        "bleu_lowercase": round(s.bleu_lowercase, 2),
        "chrf": round(s.chrf, 2),
        "length_ratio": round(trial.length_ratio, 3),
    }


def trials_on(translator: Translator, pairs: list[tuple[str, str]], alphas: list[float], beam: int) -> list:
    return try_length_penalties(
        translator, [s for s, _ in pairs], [t for _, t in pairs], alphas, request=translator.request(beam=beam)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="trained model directory")
    parser.add_argument("--weights", default=None, help="weights file instead of DIR/model.safetensors")
    parser.add_argument("--pair", default="de-en", help="Multi30k language pair, SRC-TGT (default de-en)")
    parser.add_argument("--valid", default="val", help="Multi30k split to choose on (default val)")
    parser.add_argument("--test", default="test_2016_flickr", help="Multi30k split to report on")
    parser.add_argument("--alphas", default="0,0.6,1.0,1.4,2.0", help="comma-separated alphas to try")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = parser.parse_args()
    try:
        alphas = [float(a) for a in args.alphas.split(",")]
        src_lang, tgt_lang = args.pair.split("-")
    except ValueError:
        parser.error(f"--alphas {args.alphas!r} and --pair {args.pair!r} must look like 0,0.6,1.0 and de-en")
    if any(not 0 <= a < float("inf") for a in alphas):
        parser.error(f"--alphas must be numbers >= 0, got {args.alphas}")

    translator = Translator.load(args.model, weights=args.weights)
    own = translator.decode.length_penalty
    valid, test = load_multi30k(args.valid, src_lang, tgt_lang), load_multi30k(args.test, src_lang, tgt_lang)

    on_valid = trials_on(translator, valid, alphas, args.beam)
    for trial in on_valid:
        print(f"{args.valid}: {row(trial)}", flush=True)
    chosen = best_trial(on_valid).alpha
    on_test = trials_on(translator, test, list(dict.fromkeys([own, chosen])), args.beam)  # own first; once if equal
    for trial in on_test:
        print(f"{args.test}: {row(trial)}", flush=True)
    print(f"chosen on {args.valid}: alpha {chosen} (the model's own: {own})")
    if args.json:
        print(
            json.dumps(
                {
                    "model": args.model,
                    "weights": args.weights,
                    "beam": args.beam,
                    "own_alpha": own,
                    "chosen_alpha": chosen,
                    "valid": on_valid,
                    "test": on_test,
                }
            )
        )


if __name__ == "__main__":
    main()
