"""Harness: the subword tokenizer's round trip, nmt.tokenizer (the lossless kinds, bpe and unigram).

Contract: for any string (the input as UTF-8, lone surrogates included), `encode` never raises but
for a lone surrogate, which it refuses with a ValueError that names it ("lone surrogate"); `encode`
and `encode_batch` give the same ids, each inside the vocabulary, wrapped in [START] ... [END]; and
`decode(encode(text)) == normalize(text)`: NFKC, "▁" and every run of white space as one space, the
ends stripped, lower case where the tokenizer lower-cases (nmt.tokenizer's round-trip guarantee).
Not for a text that holds one of the four special tokens as typed ("[END]" is read as the marker:
decoding stops there): such a text is only held to the first two promises. The tokenizers (bpe,
bpe lower-casing, unigram; the input chooses) are trained once, at the start, on the first 300
lines of Multi30k's German and English training text ($NMT_MIRROR, as the tests find it).
"""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import atheris

from contract import FUZZ_DIR, Broken, as_text, fuzz, instrumented

with atheris.instrument_imports(include=instrumented("nmt.tokenizer")):
    from nmt.tokenizer import BOS_ID, EOS_ID, SPECIAL_TOKENS, SubwordTokenizer, TokenizerConfig, normalize_text


def multi30k_lines(count: int = 300) -> list[str]:
    """The first `count` lines of Multi30k's German and English training text (tests/conftest.py's mirror)."""
    root = Path(os.environ.get("NMT_MIRROR", FUZZ_DIR.parents[1] / "shared" / "data" / "multi30k"))
    root = root / "multi30k" if (root / "multi30k" / "data").is_dir() else root
    lines = []
    for lang in ("de", "en"):
        with gzip.open(root / "data" / "task1" / "raw" / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            lines += [line.rstrip("\n") for _, line in zip(range(count), f, strict=False)]
    return lines


LINES = multi30k_lines()
TOKENIZERS = [
    (SubwordTokenizer.train(LINES, TokenizerConfig(vocab_size=600)), False),
    (SubwordTokenizer.train(LINES, TokenizerConfig(vocab_size=600, lowercase=True)), True),
    (SubwordTokenizer.train(LINES, TokenizerConfig(kind="unigram", vocab_size=600)), False),
]


def check(data: bytes) -> bool:
    text = as_text(data)
    tokenizer, lowercase = TOKENIZERS[hashlib.sha1(data).digest()[0] % len(TOKENIZERS)]
    try:
        ids = tokenizer.encode(text)
    except ValueError as err:
        if "lone surrogate" not in str(err) or not any(0xD800 <= ord(c) < 0xE000 for c in text):
            raise
        try:  # the batch refuses it too, and names the same character
            tokenizer.encode_batch(["ok", text])
        except ValueError as batch_err:
            if "text 2 of 2" not in str(batch_err):
                raise Broken(f"the batch's refusal does not name the text: {batch_err}") from batch_err
        else:
            raise Broken(f"encode refused {text!r} and encode_batch did not") from err
        return True
    if tokenizer.encode_batch([text]) != [ids]:
        raise Broken(f"encode and encode_batch disagree on {text!r}")
    if ids[0] != BOS_ID or ids[-1] != EOS_ID or not all(0 <= i < tokenizer.vocab_size for i in ids):
        raise Broken(f"ids {ids} of {text!r}: not [START] ... [END] in a vocabulary of {tokenizer.vocab_size}")
    decoded = tokenizer.decode(ids)
    if not isinstance(decoded, str):
        raise Broken(f"decode gave {type(decoded).__name__}")
    if any(token in text for token in SPECIAL_TOKENS):
        return False
    expected = normalize_text(text, lowercase=lowercase)
    if tokenizer.normalize(text) != expected:
        raise Broken(f"the tokenizer normalises {text!r} as {tokenizer.normalize(text)!r}, not {expected!r}")
    if decoded != expected:
        raise Broken(f"decode(encode({text!r})) = {decoded!r}, not {expected!r}")
    return False


if __name__ == "__main__":
    fuzz(check)
