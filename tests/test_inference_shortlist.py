"""Lexical shortlists: Model 1 estimates, candidates, the file, and searches restricted to a vocabulary."""

import re
import shutil
import subprocess
import sys

import pytest
import torch

from nmt.decoding import beam_search, greedy_search
from nmt.inference.shortlist import (
    SHORTLIST,
    VOCABULARY_MAP,
    LexicalShortlist,
    ShortlistError,
    build_shortlist,
    model1_probabilities,
)
from nmt.model import Transformer
from nmt.search_settings import SearchRequest
from nmt.tokenizer import load_tokenizers

from fake_model import EOS, LIMITS, PAD, source_batch, tiny_config

LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d [A-Z]+ ")  # the format `nmt` gives its log lines


def test_model1_finds_the_translation_that_cooccurrence_alone_cannot():
    """ "a b" -> "x y" and "a" -> "x": co-occurrence ties (a, y) with (a, x) in the first pair, Model 1
    learns from the second pair that x is a's, so y must be b's."""
    pairs = [([0, 1], [10, 11]), ([0], [10]), ([1, 2], [11, 12]), ([2], [12])]
    src, tgt, prob = model1_probabilities(pairs, src_vocab=3, tgt_vocab=13, iterations=10)
    table = {(s, t): p for s, t, p in zip(src.tolist(), tgt.tolist(), prob.tolist(), strict=True)}
    assert table[(0, 10)] > 0.9 and table[(1, 11)] > 0.9 and table[(2, 12)] > 0.9
    assert table[(0, 11)] < 0.1
    for s in (0, 1, 2, 3):  # each source row (NULL = 3 included) is a distribution over targets
        assert sum(p for (a, _), p in table.items() if a == s) == pytest.approx(1.0)


@pytest.fixture(scope="module")
def shortlist_and_tokenizers(tiny_model_dir, multi30k_dir):
    from conftest import read_head

    src_tok, tgt_tok = load_tokenizers(tiny_model_dir)
    raw = multi30k_dir / "data/task1/raw"
    de, en = read_head(raw / "train.de.gz", 300), read_head(raw / "train.en.gz", 300)
    src_ids, tgt_ids = src_tok.encode_batch(de, add_special=False), tgt_tok.encode_batch(en, add_special=False)
    pairs = list(zip(src_ids, tgt_ids, strict=True))
    return build_shortlist(pairs, src_tok, tgt_tok, per_source=5, frequent=20), src_tok, tgt_tok, de


def test_candidates_are_the_rows_of_the_source_ids_plus_the_common_ones(shortlist_and_tokenizers):
    shortlist, src_tok, tgt_tok, de = shortlist_and_tokenizers
    ids = src_tok.encode(de[0])
    found = shortlist.candidates([ids]).tolist()
    expected = {t for i in ids for t in shortlist.table[i].tolist() if t >= 0}
    expected |= set(shortlist.always.tolist()) | set(ids)  # a joint vocabulary: the source ids may be copied
    assert shortlist.copy_source
    assert found == sorted(expected)
    assert {tgt_tok.eos_id, tgt_tok.unk_id, tgt_tok.start_id} <= set(found)
    assert len(found) < tgt_tok.vocab_size / 2  # the point of it
    # A batch's candidates are the union of its sentences'
    batch = [src_tok.encode(s) for s in de[:4]]
    union = set().union(*(shortlist.candidates([b]).tolist() for b in batch))
    assert shortlist.candidates(batch).tolist() == sorted(union)


def test_a_batch_is_restricted_to_the_union_with_each_sentence_to_its_own(shortlist_and_tokenizers):
    shortlist, src_tok, _, de = shortlist_and_tokenizers
    batch = [src_tok.encode(s) for s in de[:5]]
    union, allowed = shortlist.restrict(batch)
    assert union.tolist() == shortlist.candidates(batch).tolist()
    for row, ids in zip(allowed, batch, strict=True):
        assert union[row].tolist() == shortlist.candidates([ids]).tolist()
    own = min(int(row.sum()) for row in allowed)
    _, loose = shortlist.restrict(batch, least=own + 1)  # too few for a beam: that sentence gets the union
    assert bool(loose[allowed.sum(dim=1) == own].all()) and not bool(loose.all())
    assert shortlist.restrict(batch, least=union.numel() + 1) == (None, None)


def test_the_file_round_trips_and_refuses_other_vocabularies_and_other_files(shortlist_and_tokenizers, tmp_path):
    shortlist, src_tok, tgt_tok, de = shortlist_and_tokenizers
    path = tmp_path / SHORTLIST
    shortlist.save(path)
    loaded = LexicalShortlist.load(path)
    assert torch.equal(loaded.table, shortlist.table) and torch.equal(loaded.always, shortlist.always)
    assert loaded.copy_source == shortlist.copy_source
    loaded.check_fits(src_tok, tgt_tok, str(path))  # no error
    from nmt.tokenizer import TokenizerConfig, train_tokenizers

    other, _ = train_tokenizers(de[:200], de[:200], TokenizerConfig(vocab_size=400))
    with pytest.raises(ShortlistError, match="built for another vocabulary"):
        loaded.check_fits(src_tok, other, str(path))
    path.write_bytes(path.read_bytes()[:50])  # cut short
    with pytest.raises(ShortlistError, match=f"{path}: not a readable shortlist"):
        LexicalShortlist.load(path)
    wrong = LexicalShortlist(
        shortlist.table + 10_000, shortlist.always, True, "0" * 64, "0" * 64, shortlist.tgt_vocab_size
    )
    wrong.save(path)
    with pytest.raises(ShortlistError, match="wrong shape, type or ids"):
        LexicalShortlist.load(path)


def test_a_large_corpus_is_estimated_on_a_seeded_sample_that_fits():
    from nmt.inference.shortlist import sample_pairs

    pairs = [([i % 7] * (1 + i % 5), [i % 11] * (1 + i % 3)) for i in range(400)]
    cells = sum((len(s) + 1) * len(t) for s, t in pairs)
    assert sample_pairs(pairs, cells) is pairs
    sample = sample_pairs(pairs, cells // 3, seed=1)
    assert sum((len(s) + 1) * len(t) for s, t in sample) <= cells // 3 and len(sample) > 50
    assert sample == sample_pairs(pairs, cells // 3, seed=1) != sample_pairs(pairs, cells // 3, seed=2)


def test_vocabulary_map_lists_each_source_piece_with_its_candidates(shortlist_and_tokenizers):
    shortlist, src_tok, tgt_tok, _ = shortlist_and_tokenizers
    src_pieces = src_tok.lookup(list(range(src_tok.vocab_size)))
    tgt_pieces = tgt_tok.lookup(list(range(tgt_tok.vocab_size)))
    lines = shortlist.vocabulary_map(src_pieces, tgt_pieces).splitlines()
    assert lines[0] == "\t" + " ".join(tgt_pieces[i] for i in shortlist.always.tolist())
    rows = dict(line.split("\t") for line in lines[1:])
    some = next(s for s in range(src_tok.vocab_size) if (shortlist.table[s] >= 0).any())
    expected = [tgt_pieces[t] for t in shortlist.table[some].tolist() if t >= 0] + [tgt_pieces[some]]
    assert rows[src_pieces[some]].split(" ") == expected


def plain_model(seed: int = 2) -> Transformer:
    """A seeded 2+2-layer model with an output bias that makes some outputs end early."""
    torch.manual_seed(seed)
    model = Transformer(tiny_config(output_bias=True)).eval()
    with torch.no_grad():
        model.output.bias.zero_()
        model.output.bias[EOS] = 2.5
    return model


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_search_over_every_token_is_the_search_without_a_vocabulary(search):
    model, src = plain_model(), source_batch()
    every = torch.tensor([i for i in range(24) if i != PAD])
    run = (
        (lambda **kw: greedy_search(model, src, limits=LIMITS, **kw))
        if search == "greedy"
        else (lambda **kw: [h[0] for h in beam_search(model, src, beam_size=3, limits=LIMITS, **kw)])
    )
    plain, restricted = run(), run(vocabulary=every)
    assert [h.tokens for h in restricted] == [h.tokens for h in plain]
    assert any(len(h.tokens) < 4 for h in plain)  # some ended with EOS: the end id is mapped too
    for a, b in zip(restricted, plain, strict=True):
        assert a.score == pytest.approx(b.score, abs=1e-5)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_restricted_search_is_the_search_of_a_model_that_gives_other_tokens_no_mass(search):
    """Restricting the output projection to a set of ids equals masking every other id's logit:
    the same tokens and log-probabilities (renormalised over the set), only faster."""
    model, src = plain_model(), source_batch()
    allowed = torch.tensor([EOS, 5, 7, 8, 11, 13, 17, 19, 23])
    masked = plain_model()
    with torch.no_grad():
        keep = torch.zeros(24, dtype=torch.bool)
        keep[allowed] = True
        masked.output.bias[~keep] = -1e9
    if search == "greedy":
        got = greedy_search(model, src, limits=LIMITS, vocabulary=allowed)
        want = greedy_search(masked, src, limits=LIMITS)
    else:
        got = [h[0] for h in beam_search(model, src, beam_size=3, limits=LIMITS, vocabulary=allowed)]
        want = [h[0] for h in beam_search(masked, src, beam_size=3, limits=LIMITS)]
    assert [h.tokens for h in got] == [h.tokens for h in want]
    assert all(set(h.tokens) <= set(allowed.tolist()) for h in got)
    for a, b in zip(got, want, strict=True):
        assert a.log_prob == pytest.approx(b.log_prob, abs=1e-4)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_each_sentence_searches_its_own_columns_of_the_batchs_vocabulary(search):
    """A batch projects onto the union of its sentences' candidates but each sentence's row is masked
    to its own: the result is what each sentence gets searched alone over its own candidates."""
    model, src = plain_model(), source_batch()
    own = [[EOS, 5, 7, 8, 11], [EOS, 5, 6, 9, 12, 13], [EOS, 7, 10, 14, 15]]
    own = [own[i % 3] for i in range(src.size(0))]
    union = torch.tensor(sorted(set().union(*map(set, own))))
    allowed = torch.stack([torch.isin(union, torch.tensor(o)) for o in own])

    def run(source, **kw):
        if search == "greedy":
            return greedy_search(model, source, limits=LIMITS, **kw)
        return [h[0] for h in beam_search(model, source, beam_size=2, limits=LIMITS, **kw)]

    together = run(src, vocabulary=union, allowed=allowed)
    for i, hyp in enumerate(together):
        (alone,) = run(src[i : i + 1], vocabulary=torch.tensor(own[i]))
        assert hyp.tokens == alone.tokens and set(hyp.tokens) <= set(own[i])
        assert hyp.log_prob == pytest.approx(alone.log_prob, abs=1e-4)


def test_a_vocabulary_without_the_end_token_is_refused():
    with pytest.raises(ValueError, match="end token"):
        greedy_search(plain_model(), source_batch(), limits=LIMITS, vocabulary=torch.tensor([5, 6, 7]))


def test_int8_output_rows_equal_the_whole_int8_projection():
    from nmt.inference.precision import quantize_int8

    model = quantize_int8(plain_model())
    ids = torch.tensor([EOS, 5, 9, 23])
    x = torch.randn(6, 32)
    assert torch.equal(model.output.select_outputs(ids)(x), model.output(x)[:, ids])


def run_nmt(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "nmt", *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=300)


def test_nmt_shortlist_is_used_by_both_engines_unless_turned_off(tiny_model_dir, multi30k_dir, tmp_path):
    from nmt.translator import Translator

    from conftest import read_head

    model_dir = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model_dir, ignore=shutil.ignore_patterns("ctranslate2"))
    raw = multi30k_dir / "data/task1/raw"
    de, en = read_head(raw / "train.de.gz", 300), read_head(raw / "train.en.gz", 300)
    (tmp_path / "train.de").write_text("\n".join(de) + "\n")
    (tmp_path / "train.en").write_text("\n".join(en) + "\n")
    done = run_nmt(
        "shortlist", str(model_dir), "--src", str(tmp_path / "train.de"), "--tgt", str(tmp_path / "train.en")
    )
    assert done.returncode == 0, done.stderr
    assert "candidates" in done.stderr and (model_dir / SHORTLIST).is_file()

    on = Translator.load(model_dir, workers=1)
    off = Translator.load(model_dir, workers=1, shortlist=False)
    assert on.engine.shortlist is not None and off.engine.shortlist is None
    sentences = de[:6]
    ids = [on.encode_source(sentence)[0] for sentence in sentences]
    for beam in (1, 3):  # a sentence's translation is the same alone and among others
        together = on.engine.translate_ids(ids, SearchRequest(beam=beam))
        for one, found in zip(ids, together, strict=True):
            ((alone,),) = on.engine.translate_ids([one], SearchRequest(beam=beam))
            assert found[0].tokens == alone.tokens
            assert set(alone.tokens) <= set(on.engine.shortlist.candidates([one]).tolist())

    from nmt.inference.export_ctranslate2 import export_ctranslate2

    pytest.importorskip("ctranslate2")
    ct2 = export_ctranslate2(model_dir, tmp_path / "ct2")
    assert (ct2 / VOCABULARY_MAP).is_file()
    with_map = Translator.load(ct2, engine="ctranslate2")
    without = Translator.load(ct2, engine="ctranslate2", shortlist=False)
    assert with_map.engine.use_vmap and not without.engine.use_vmap
    for one in ids:  # alone, CTranslate2's candidates are the sentence's (and padding, never emitted)
        ((hyp,),) = with_map.engine.translate_ids([one], SearchRequest(beam=1))
        assert set(hyp.tokens) <= set(on.engine.shortlist.candidates([one]).tolist())
    plain = [without.engine.translate_ids([one], SearchRequest(beam=1))[0][0].tokens for one in ids]
    outside = [t for p in plain for t in p if t not in set(on.engine.shortlist.candidates(ids).tolist())]
    assert outside  # without the map it does emit other pieces: the check above can fail


def test_a_shortlist_of_another_vocabulary_is_refused_in_one_line(tiny_model_dir, tmp_path, shortlist_and_tokenizers):
    shortlist, *_ = shortlist_and_tokenizers
    model_dir = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model_dir, ignore=shutil.ignore_patterns("ctranslate2"))
    wrong = LexicalShortlist(shortlist.table, shortlist.always, True, "0" * 64, "0" * 64, shortlist.tgt_vocab_size)
    wrong.save(model_dir / SHORTLIST)
    for engine in ("torch", "auto"):  # auto: refused by the CTranslate2 export, before anything is written
        done = run_nmt("translate", "--model", str(model_dir), "--engine", engine, stdin="Ein Hund.\n")
        assert done.returncode == 2
        *logged, error = done.stderr.strip().splitlines()
        assert f"{model_dir / SHORTLIST} was built for another vocabulary" in error
        assert all(LOG_LINE.match(line) for line in logged)
    assert not (model_dir / "ctranslate2").exists()
    assert run_nmt("translate", "--model", str(model_dir), "--no-shortlist", stdin="Ein Hund.\n").returncode == 0
