"""Choose beam search's length penalty on a validation set, then report it on test.

    python benchmarks/length_penalty.py --model runs/de_en_3h [--weights FILE] [--pair de-en] \
        [--valid val] [--test test_2016_flickr] [--alphas 0,0.6,1.0,1.4,2.0] [--beam 5]

A finished hypothesis is ranked by log_prob / ((5 + length) / 6)^alpha (GNMT's penalty, see
nmt.decoding.penalties). The model's decode.length_penalty (0.6 by default, the value Wu et al.
chose for their WMT systems) is one setting for every model, but how short a model's beam output
runs depends on the model: one under-trained model here gave 0.89 of the reference length on
test at alpha 0.6. This script translates the validation set with each alpha, picks the alpha
with the best cased validation BLEU (the test set is never used to choose), and then scores the
test set with the model's own alpha and with the chosen one. Use the result with
`nmt translate|evaluate --length-penalty ALPHA`, or set decode.length_penalty in the model
directory's config.yaml.

Prints one line per (split, alpha): cased and lower-cased BLEU, chrF2, and the length ratio
(hypothesis words / reference words over the whole set); with --json, one object at the end.
"""

from __future__ import annotations

import argparse
import json

from nmt.evaluation import score_translations
from nmt.translator import Translator

from common import load_multi30k


def length_ratio(hypotheses: list[str], references: list[str]) -> float:
    """Whitespace words of all hypotheses over those of all references."""
    return sum(len(h.split()) for h in hypotheses) / max(1, sum(len(r.split()) for r in references))


def score(translator: Translator, pairs: list[tuple[str, str]], beam: int, alpha: float) -> dict[str, float]:
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    hypotheses = translator.translate(sources, beam=beam, length_penalty=alpha)
    s = score_translations(hypotheses, references)
    return {
        "alpha": alpha,
        "bleu": round(s.bleu, 2),
        "bleu_lowercase": round(s.bleu_lowercase, 2),
        "chrf": round(s.chrf, 2),
        "length_ratio": round(length_ratio(hypotheses, references), 3),
    }


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

    on_valid = []
    for alpha in alphas:
        on_valid.append(score(translator, valid, args.beam, alpha))
        print(f"{args.valid}: {on_valid[-1]}", flush=True)
    chosen = max(on_valid, key=lambda r: r["bleu"])["alpha"]
    on_test = []
    for alpha in dict.fromkeys([own, chosen]):  # the model's own first; once if they are the same
        on_test.append(score(translator, test, args.beam, alpha))
        print(f"{args.test}: {on_test[-1]}", flush=True)
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
