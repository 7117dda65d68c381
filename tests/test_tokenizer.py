"""Tests for nmt.tokenizer: round trips on real Multi30k text, fixed special ids, files."""

import gzip
import logging
from pathlib import Path

import pytest

from nmt.tokenizer import (
    BOS,
    BOS_ID,
    EOS,
    EOS_ID,
    PAD,
    PAD_ID,
    UNK,
    UNK_ID,
    SubwordTokenizer,
    TokenizerConfig,
    load_or_train_tokenizers,
    load_tokenizers,
    normalize_text,
    save_tokenizers,
    train_tokenizers,
)

LANGS = ("en", "de", "fr", "cs")
# Characters absent from Multi30k: CJK, an emoji (4 UTF-8 bytes), a titlecase digraph
# that NFKC expands to "Dž", and a right-to-left script.
UNSEEN = "Ein Mann 中文 😀 ǅ שלום läuft."


def read_lines(root: Path, split: str, lang: str) -> list[str]:
    with gzip.open(root / "data/task1/raw" / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def round_trip_failures(tok: SubwordTokenizer, lines: list[str]) -> list[tuple[str, str]]:
    """(expected, got) for every line where decode(encode(line)) != normalize_text(line)."""
    decoded = [tok.decode(ids) for ids in tok.encode_batch(lines)]
    return [(normalize_text(s), d) for s, d in zip(lines, decoded, strict=True) if d != normalize_text(s)]


@pytest.fixture(scope="module")
def train_sample(multi30k_dir: Path) -> dict[str, list[str]]:
    """The first 3000 training sentences of each language: enough for a real vocabulary, fast."""
    return {lang: read_lines(multi30k_dir, "train", lang)[:3000] for lang in LANGS}


@pytest.fixture(scope="module")
def bpe(train_sample: dict[str, list[str]]) -> SubwordTokenizer:
    """The default scheme (byte-fallback BPE over Metaspace), joint over all four languages."""
    lines = [s for lang in LANGS for s in train_sample[lang]]
    return SubwordTokenizer.train(lines, TokenizerConfig(vocab_size=4000))


@pytest.fixture(scope="module")
def unigram(train_sample: dict[str, list[str]]) -> SubwordTokenizer:
    return SubwordTokenizer.train(
        train_sample["en"] + train_sample["de"], TokenizerConfig(kind="unigram", vocab_size=2000)
    )


@pytest.fixture(scope="module")
def wordpiece(train_sample: dict[str, list[str]]) -> SubwordTokenizer:
    return SubwordTokenizer.train(train_sample["en"], TokenizerConfig(kind="wordpiece", vocab_size=2000))


# ----- normalisation and round trips ----------------------------------------------------


def test_normalize_text_applies_nfkc_and_folds_whitespace():
    assert normalize_text("  Ｆｕｌｌ\u00a0width\t\tand\nﬁ  ") == "Full width and fi"
    assert normalize_text("A▁B") == "A B"  # the Metaspace marker is a space
    assert normalize_text("Ein MANN", lowercase=True) == "ein mann"
    assert normalize_text("") == ""


def test_round_trip_on_every_sentence_of_the_corpus_in_all_languages(bpe, multi30k_dir):
    lines = [
        s
        for lang in LANGS
        for split in ("train", "val", "test_2016_flickr")
        for s in read_lines(multi30k_dir, split, lang)
    ]
    assert len(lines) == 4 * (29000 + 1014 + 1000)
    failures = round_trip_failures(bpe, lines)
    assert failures == [], f"{len(failures)} sentences do not round-trip, e.g. {failures[:3]}"


def test_round_trip_on_full_train_en_de(multi30k_dir):
    en, de = read_lines(multi30k_dir, "train", "en"), read_lines(multi30k_dir, "train", "de")
    src, tgt = train_tokenizers(en, de, TokenizerConfig())
    failures = round_trip_failures(src, en + de)
    assert failures == [], f"{len(failures)} sentences do not round-trip, e.g. {failures[:3]}"
    assert src.vocab_size == 8192  # the corpus is rich enough to fill the whole budget


def test_round_trip_survives_odd_whitespace(bpe):
    text = "  Zwei\tMänner \n\n laufen   nach  Hause. "
    assert bpe.decode(bpe.encode(text)) == "Zwei Männer laufen nach Hause."


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_unseen_characters_fall_back_to_bytes_and_round_trip(kind, bpe, unigram):
    tok = {"bpe": bpe, "unigram": unigram}[kind]
    ids = tok.encode(UNSEEN)
    assert UNK_ID not in ids
    assert "<0xF0>" in tok.lookup(ids)  # the emoji's first UTF-8 byte
    assert tok.decode(ids) == normalize_text(UNSEEN)


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_a_lone_surrogate_is_refused_as_no_text_naming_it(kind, bpe, unigram):
    # HF's own error was a TypeError, "TextInputSequence must be str" (fuzz/fuzz_tokenizer.py holds encode to this)
    tok = {"bpe": bpe, "unigram": unigram}[kind]
    with pytest.raises(ValueError, match=r"lone surrogate \(U\+D800 at character 3\)"):
        tok.encode("Ein\ud800 Mann")
    with pytest.raises(ValueError, match=r"text 2 of 2 holds a lone surrogate \(U\+DCE9"):
        tok.encode_batch(["Ein Mann", "caf\udce9"])


def test_unigram_round_trips_on_val(unigram, multi30k_dir):
    lines = read_lines(multi30k_dir, "val", "en") + read_lines(multi30k_dir, "val", "de")
    assert round_trip_failures(unigram, lines) == []


def test_wordpiece_maps_unseen_characters_to_unk(wordpiece):
    ids = wordpiece.encode(UNSEEN)
    assert UNK_ID in ids
    assert "[UNK]" in wordpiece.decode(ids)  # visible, not silently dropped


# ----- special tokens ---------------------------------------------------------------------


def test_special_ids_are_fixed_in_every_kind(bpe, unigram, wordpiece):
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    for tok in (bpe, unigram, wordpiece):
        assert tok.lookup([0, 1, 2, 3]) == [PAD, UNK, BOS, EOS]


def test_encode_wraps_with_bos_and_eos(bpe):
    ids = bpe.encode("Ein Hund rennt.")
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID
    assert ids[1:-1] == bpe.encode("Ein Hund rennt.", add_special=False)
    assert bpe.encode_batch(["Ein Hund rennt.", "A dog."]) == [ids, bpe.encode("A dog.")]
    assert bpe.encode("") == [BOS_ID, EOS_ID]


def test_decode_strips_specials_and_stops_at_first_eos(bpe):
    body = bpe.encode("A dog runs.", add_special=False)
    other = bpe.encode("Something else.", add_special=False)
    assert bpe.decode([BOS_ID, *body, EOS_ID, PAD_ID, PAD_ID]) == "A dog runs."
    assert bpe.decode([BOS_ID, *body, EOS_ID, *other, EOS_ID]) == "A dog runs."
    assert bpe.decode([PAD_ID, BOS_ID, *body]) == "A dog runs."  # no EOS: decode everything
    assert bpe.decode([]) == ""


def test_lookup_returns_the_pieces(bpe):
    ids = bpe.encode("A dog runs.")
    pieces = bpe.lookup(ids)
    assert pieces[0] == BOS and pieces[-1] == EOS
    # Metaspace pieces spell the text with "▁" for each (prepended) space.
    assert "".join(pieces[1:-1]) == "▁A▁dog▁runs."
    with pytest.raises(ValueError, match="outside the vocabulary"):
        bpe.lookup([bpe.vocab_size])


# ----- other kinds and sizes ---------------------------------------------------------------


def test_wordpiece_lower_cases_and_is_lossy_only_around_punctuation(wordpiece, multi30k_dir):
    assert wordpiece.decode(wordpiece.encode("A Man Riding A Brown Horse")) == "a man riding a brown horse"
    for s in read_lines(multi30k_dir, "val", "en")[:200]:
        expected = normalize_text(s, lowercase=True)
        assert wordpiece.decode(wordpiece.encode(s)).replace(" ", "") == expected.replace(" ", "")


def test_lowercase_can_be_switched_on_for_bpe(train_sample):
    tok = SubwordTokenizer.train(train_sample["en"], TokenizerConfig(vocab_size=600, lowercase=True))
    assert tok.decode(tok.encode("Two DOGS")) == "two dogs"


@pytest.mark.parametrize("kind", ["bpe", "unigram", "wordpiece"])
def test_vocab_size_is_an_upper_bound(kind, train_sample):
    tok = SubwordTokenizer.train(train_sample["en"][:1000], TokenizerConfig(kind=kind, vocab_size=500))
    assert tok.kind == kind
    assert tok.vocab_size <= 500
    assert max(tok.encode(" ".join(train_sample["en"][:50]))) < tok.vocab_size


# ----- files -------------------------------------------------------------------------------


def test_save_load_joint_gives_identical_encodings(bpe, train_sample, tmp_path):
    save_tokenizers(bpe, bpe, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer.json"]
    src, tgt = load_tokenizers(tmp_path)
    assert src is tgt
    lines = train_sample["cs"][:300] + [UNSEEN]
    assert src.encode_batch(lines) == bpe.encode_batch(lines)
    assert src.decode(src.encode(UNSEEN)) == bpe.decode(bpe.encode(UNSEEN))


def test_separate_tokenizers_have_own_vocabularies_and_files(train_sample, tmp_path):
    config = TokenizerConfig(vocab_size=600, joint=False)
    src, tgt = train_tokenizers(train_sample["en"][:1000], train_sample["de"][:1000], config)
    assert src is not tgt
    assert src.encode("Männer") != tgt.encode("Männer")  # only German saw umlauts often
    save_tokenizers(src, tgt, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer.src.json", "tokenizer.tgt.json"]
    src2, tgt2 = load_tokenizers(tmp_path)
    lines = train_sample["en"][:200]
    assert src2.encode_batch(lines) == src.encode_batch(lines)
    assert tgt2.encode_batch(lines) == tgt.encode_batch(lines)


def test_load_or_train_reuses_files_and_never_retrains(train_sample, tmp_path, caplog):
    config = TokenizerConfig(vocab_size=600)
    caplog.set_level(logging.INFO, logger="nmt.tokenizer")
    src, _ = load_or_train_tokenizers(
        tmp_path, lambda: train_sample["en"][:500], lambda: train_sample["de"][:500], config
    )
    assert "training" in caplog.text and (tmp_path / "tokenizer.json").is_file()

    def must_not_train():
        raise AssertionError("retrained although tokenizer files exist")

    caplog.clear()
    again, _ = load_or_train_tokenizers(tmp_path, must_not_train, must_not_train, config)
    assert "loaded" in caplog.text
    assert again.encode("Ein Mann.") == src.encode("Ein Mann.")


# ----- errors --------------------------------------------------------------------------------


def test_train_on_no_lines_raises():
    with pytest.raises(ValueError, match="no lines"):
        SubwordTokenizer.train([], TokenizerConfig())
    with pytest.raises(ValueError, match="no lines"):
        SubwordTokenizer.train(iter(()), TokenizerConfig())


def test_bad_config_raises():
    with pytest.raises(ValueError, match=r"tokenizer\.kind must be one of bpe \| unigram \| wordpiece, got 'char'"):
        TokenizerConfig(kind="char")
    with pytest.raises(ValueError, match="too small"):
        TokenizerConfig(vocab_size=100)


def test_load_errors_name_the_path(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(FileNotFoundError, match="nope.json"):
        SubwordTokenizer.load(missing)
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{not json")
    with pytest.raises(ValueError, match="corrupt.json"):
        SubwordTokenizer.load(corrupt)
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        load_tokenizers(tmp_path)


# ----- BPE-dropout ----------------------------------------------------------------------
def test_bpe_dropout_samples_segmentations_of_the_same_text_and_leaves_the_original_alone(bpe, train_sample):
    lines = train_sample["de"][:200]
    dropped = bpe.with_bpe_dropout(0.3)
    first, second = dropped.encode_batch(lines), dropped.encode_batch(lines)
    assert first != second  # a new draw at every call
    assert [dropped.decode(ids) for ids in first] == [bpe.decode(ids) for ids in bpe.encode_batch(lines)]
    assert sum(map(len, first)) > sum(map(len, bpe.encode_batch(lines)))  # skipped merges: more pieces
    assert bpe.encode_batch(lines) == bpe.encode_batch(lines)  # the tokenizer itself stays deterministic


def test_bpe_dropout_needs_merges_to_drop(unigram, bpe):
    with pytest.raises(ValueError, match="BPE-dropout needs a bpe tokenizer, not unigram"):
        unigram.with_bpe_dropout(0.1)
    with pytest.raises(ValueError, match=r"must be in \(0, 1\)"):
        bpe.with_bpe_dropout(1.0)


def test_pretokenized_wordpiece_keeps_the_corpus_tokens():
    """Tokenised text (TED hrlr): split on spaces only, decoded by joining with spaces: exact round trip."""
    lines = ["it 's a man , walking .", "we do n't know where it 's from ."] * 100
    plain = SubwordTokenizer.train(lines, TokenizerConfig(kind="wordpiece", vocab_size=300))
    pre = SubwordTokenizer.train(lines, TokenizerConfig(kind="wordpiece", vocab_size=300, pretokenized=True))
    assert [pre.decode(pre.encode(s)) for s in lines[:2]] == lines[:2]
    assert plain.decode(plain.encode(lines[0])) == "it ' s a man, walking."  # BERT's splitting and spacing


def test_pretokenized_must_be_a_bool():
    with pytest.raises(ValueError, match="tokenizer.pretokenized must be bool"):
        TokenizerConfig(pretokenized="yes")
