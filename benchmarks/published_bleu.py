"""Score a model on Multi30k the way the published Multi30k results are scored, beside sacreBLEU.

    pip install -c constraints.txt sacremoses     # this script's one extra dependency
    python benchmarks/published_bleu.py --model runs/en_de_3h --pair en-de \
        [--weights FILE] [--split test_2016_flickr] [--beam 5] [--length-penalty ALPHA]

nmt reports detokenized sacreBLEU (13a) on the raw, cased text. The Multi30k papers (e.g. the
text-only Transformer of Wu et al. 2021, ~41 BLEU en→de, code LividWo/Revisit-MMT) train and
score on the corpus's `task1/tok` files instead: each sentence lower-cased, punctuation-normalised
and Moses-tokenized (`lowercase.perl | normalize-punctuation.perl | tokenizer.perl -l L`, no
aggressive hyphen splitting, XML escaping kept), BLEU counted over those tokens (fairseq's scorer,
as multi-bleu.perl). This script applies the same preparation, with sacremoses, to nmt's cased
output and to the raw references, and prints both scores, so that a published number and ours
are compared on the same terms.
"""

from __future__ import annotations

import argparse
import json

import sacrebleu

from nmt.translator import Translator

from common import load_multi30k


def published_preparation(lang: str):
    """The Multi30k task1/tok recipe as a function of one sentence."""
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    normalizer, tokenizer = MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)

    def prepare(sentence: str) -> str:
        return tokenizer.tokenize(normalizer.normalize(sentence.lower()), escape=True, return_str=True)

    return prepare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="trained model directory")
    parser.add_argument("--weights", default=None, help="weights file instead of DIR/model.safetensors")
    parser.add_argument("--pair", default="de-en", help="Multi30k language pair, SRC-TGT (default de-en)")
    parser.add_argument("--split", default="test_2016_flickr", help="Multi30k split (default test_2016_flickr)")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--length-penalty", type=float, default=None, help="default: the model's own")
    args = parser.parse_args()
    try:
        src_lang, tgt_lang = args.pair.split("-")
    except ValueError:
        parser.error(f"--pair {args.pair!r} must look like de-en")
    try:
        prepare = published_preparation(tgt_lang)
    except ImportError:
        parser.error("needs sacremoses: pip install -c constraints.txt sacremoses")

    pairs = load_multi30k(args.split, src_lang, tgt_lang)
    translator = Translator.load(args.model, weights=args.weights, length_penalty=args.length_penalty)
    hypotheses = translator.translate([s for s, _ in pairs], beam=args.beam)
    references = [t for _, t in pairs]
    published = sacrebleu.corpus_bleu(
        [prepare(h) for h in hypotheses], [[prepare(r) for r in references]], tokenize="none", force=True
    )
    print(
        json.dumps(
            {
                "model": args.model,
                "weights": args.weights,
                "split": args.split,
                "pair": args.pair,
                "beam": args.beam,
                "length_penalty": translator.decode.length_penalty,
                "sacrebleu_cased": round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2),
                "sacrebleu_lowercase": round(sacrebleu.corpus_bleu(hypotheses, [references], lowercase=True).score, 2),
                "published_protocol": round(published.score, 2),  # lower-cased, Moses-tokenized
                "published_protocol_ref_tokens": published.ref_len,
            }
        )
    )


if __name__ == "__main__":
    main()
