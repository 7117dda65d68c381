import math

import pytest

from nmt.decoding.penalties import gnmt_length_penalty
from nmt.translator import Sampling, Translator


@pytest.fixture(scope="module")
def translator(tiny_model_dir):
    return Translator.load(tiny_model_dir, device="cpu")


SENTENCES = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Ein Kind.", "Eine Frau mit einem Hut."]


def test_translates_each_sentence_in_order_regardless_of_batching(translator):
    together = translator.translate(SENTENCES, beam=1)
    alone = [translator.translate([s], beam=1)[0] for s in SENTENCES]
    assert together == alone
    assert all(isinstance(t, str) for t in together)


def test_n_best_lists_are_distinct_and_ranked(translator):
    for best in translator.translate_detailed(SENTENCES, beam=4, n_best=3):
        assert len(best) == 3
        assert len({tuple(h.tokens) for h in best}) == 3
        assert [h.score for h in best] == sorted((h.score for h in best), reverse=True)
        assert all(h.text == translator.tgt_tokenizer.decode(h.tokens) for h in best)


def test_empty_input_gives_empty_output(translator):
    assert translator.translate(["", "   ", SENTENCES[0]])[:2] == ["", ""]


def test_one_str_is_refused_rather_than_read_as_one_sentence_per_character(translator):
    for call in (translator.translate, translator.translate_detailed):
        with pytest.raises(TypeError, match=r"a list of sentences, not one str: translate\(\[text\]\)"):
            call(SENTENCES[0])


def test_overlong_input_is_truncated_not_an_error(translator):
    translator_short = Translator(
        translator.model,
        translator.src_tokenizer,
        translator.tgt_tokenizer,
        decode=translator.decode,
        max_source_tokens=8,
    )
    result = translator_short.translate_detailed([" ".join(["Mann"] * 50), "Ein Kind."])
    assert result[0][0].truncated and not result[1][0].truncated


def test_attention_is_returned_per_sentence_with_pieces(translator):
    result = translator.translate_detailed(SENTENCES[:2], beam=2, return_attention=True)
    for best in result:
        t = best[0]
        layers, heads, steps, src_len = t.attention.shape
        assert src_len == len(t.src_pieces)
        assert steps in (len(t.tokens), len(t.tokens) + 1)
        assert (layers, heads) == (translator.model.config.decoder_layers, translator.model.config.num_heads)


def test_invalid_beam_settings_are_refused(translator):
    with pytest.raises(ValueError, match="n_best"):
        translator.translate_detailed(SENTENCES, beam=2, n_best=3)


def test_length_penalty_sets_how_finished_hypotheses_are_scored(translator):
    # score = log_prob / ((5 + length) / 6)^alpha, the length counting the end token where there is one
    for alpha in (0.0, 2.0):
        for best in translator.translate_detailed(SENTENCES, beam=3, n_best=2, length_penalty=alpha):
            for t in best:
                lengths = (len(t.tokens), len(t.tokens) + 1)
                assert any(math.isclose(t.score, t.log_prob / gnmt_length_penalty(n, alpha)) for n in lengths)
    for alpha in (-0.5, math.nan, math.inf):
        with pytest.raises(ValueError, match=r"length_penalty must be (>= 0|a finite number)"):
            translator.translate(SENTENCES, beam=2, length_penalty=alpha)


def test_a_length_penalty_given_at_load_is_every_calls_default(tiny_model_dir, translator):
    loaded = Translator.load(tiny_model_dir, device="cpu", length_penalty=2.0)
    assert (loaded.decode.length_penalty, translator.decode.length_penalty) == (2.0, 0.6)
    # the same hypotheses and scores as naming alpha 2 in each call; a call's own alpha still wins
    expected = translator.translate_detailed(SENTENCES, beam=3, n_best=2, length_penalty=2.0)
    got = loaded.translate_detailed(SENTENCES, beam=3, n_best=2)
    assert [[(t.tokens, t.score) for t in best] for best in got] == [
        [(t.tokens, t.score) for t in best] for best in expected
    ]
    own = loaded.translate_detailed(SENTENCES, beam=3, length_penalty=0.6)
    default = translator.translate_detailed(SENTENCES, beam=3)
    assert [best[0].score for best in own] == [best[0].score for best in default]
    with pytest.raises(ValueError, match=r"length_penalty must be >= 0, got -1"):
        Translator.load(tiny_model_dir, device="cpu", length_penalty=-1)


def test_the_minimum_length_and_the_stopping_rule_given_at_load_replace_the_directory_s(tiny_model_dir, translator):
    assert (translator.decode.min_len, translator.decode.early_stopping) == (1, True)  # the directory's
    loaded = Translator.load(tiny_model_dir, device="cpu", min_len=4, early_stopping=False)
    assert (loaded.decode.min_len, loaded.decode.early_stopping) == (4, False)
    assert loaded.request(beam=3).early_stopping is False  # what reaches the search
    assert all(len(best[0].tokens) >= 4 for best in loaded.translate_detailed(SENTENCES, beam=3))
    with pytest.raises(ValueError, match=r"decode.min_len must be >= 0, got -1"):
        Translator.load(tiny_model_dir, device="cpu", min_len=-1)


def test_a_repeated_sentence_is_searched_once_and_each_copy_gets_its_translations(translator, monkeypatch):
    searched = []
    translate_ids = translator.engine.translate_ids

    def counting(ids, request, groups=None):
        searched.append(len(ids))
        return translate_ids(ids, request, groups)

    monkeypatch.setattr(translator.engine, "translate_ids", counting)
    texts = [SENTENCES[0], SENTENCES[1], SENTENCES[0], SENTENCES[0], SENTENCES[2], SENTENCES[1]]
    repeated = translator.translate_detailed(texts, beam=3, n_best=2)
    distinct = translator.translate_detailed(SENTENCES[:3], beam=3, n_best=2)
    assert searched == [3, 3]
    by_text = dict(zip(SENTENCES[:3], distinct, strict=True))
    for text, found in zip(texts, repeated, strict=True):
        assert [(t.text, t.tokens, t.score) for t in found] == [(t.text, t.tokens, t.score) for t in by_text[text]]
    assert repeated[0][0] is not repeated[2][0]  # a Translation of its own: a caller may change one copy

    # Sampling: each copy is a draw of its own, so the engine sees them all and they differ.
    searched.clear()
    draws = translator.translate([SENTENCES[0]] * 8, sampling=Sampling(temperature=3.0, seed=0))
    assert searched == [8] and len(set(draws)) > 1


def test_missing_model_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Translator.load(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="model.json"):
        Translator.load(tmp_path)


def test_sampling_draws_reproducibly_and_top_1_is_greedy(translator):
    seeded = Sampling(temperature=1.5, seed=3)
    first = translator.translate(SENTENCES, sampling=seeded)
    assert translator.translate(SENTENCES, sampling=seeded) == first
    # A flattened distribution over an 8-sentence batch: different seeds draw different outputs.
    draws = {tuple(translator.translate(SENTENCES * 2, sampling=Sampling(temperature=2.0, seed=s))) for s in range(4)}
    assert len(draws) > 1
    assert translator.translate(SENTENCES, sampling=Sampling(top_k=1, seed=0)) == translator.translate(
        SENTENCES, beam=1
    )


def test_sampling_settings_are_checked(translator):
    with pytest.raises(ValueError, match="temperature"):
        Sampling(temperature=0.0)
    with pytest.raises(ValueError, match="top_k"):
        Sampling(top_k=-1)
    with pytest.raises(ValueError, match="no beam"):
        translator.translate(SENTENCES, beam=4, sampling=Sampling())


def test_options_that_choose_what_to_load_are_refused_for_a_model_in_memory(translator):
    from nmt.translator import EngineOptions

    for options in ({"engine": "ctranslate2"}, {"device": "cpu"}, {"weights": "other.safetensors"}):
        with pytest.raises(ValueError, match="a model in memory runs on nmt's engine as it is"):
            Translator(translator.model, translator.src_tokenizer, translator.tgt_tokenizer, **options)
    with pytest.raises(TypeError, match="an engine comes with its options"):
        Translator(translator.engine, translator.src_tokenizer, translator.tgt_tokenizer, options=EngineOptions())


def test_scores_are_the_search_s_own_log_probability_token_by_token(translator):
    found = translator.translate_detailed(SENTENCES + [""], beam=1, scores=True)
    for best in found[:-1]:
        t = best[0]
        assert len(t.token_probs) in (len(t.tokens), len(t.tokens) + 1)  # + the end token, if it ended
        assert all(0 < p <= 1 for p in t.token_probs)
        assert sum(math.log(p) for p in t.token_probs) == pytest.approx(t.log_prob, abs=1e-4)
        assert t.confidence == pytest.approx(t.log_prob / len(t.token_probs), abs=1e-4)
    assert found[-1][0].confidence == 0.0 and found[-1][0].token_probs == []  # nothing in, nothing out
    assert translator.translate_detailed(SENTENCES[:1])[0][0].confidence is None  # only when asked


def test_a_word_s_score_is_the_mean_log_probability_of_its_pieces(translator):
    """Bergamot's word score: one per word of the output (as alignments count words), each the mean
    log-probability of that word's pieces; the end token belongs to no word."""
    found = translator.translate_detailed(SENTENCES + [""], beam=2, n_best=2, scores=True)
    for best in found[:-1]:
        for t in best:
            assert len(t.word_scores) == len(t.text.split())
            starts = [i for i, piece in enumerate(t.pieces) if piece.startswith("▁") or i == 0]
            ends = [*starts[1:], len(t.pieces)]
            for score, first, end in zip(t.word_scores, starts, ends, strict=True):
                pieces = [math.log(p) for p in t.token_probs[first:end]]
                assert score == pytest.approx(sum(pieces) / len(pieces), abs=1e-5)
    assert found[-1][0].word_scores == []  # nothing in, nothing out
    assert translator.translate_detailed(SENTENCES[:1])[0][0].word_scores is None  # only when asked


def test_alignments_link_words_of_the_source_and_of_the_output(translator):
    found = translator.translate_detailed(SENTENCES, beam=2, n_best=2, alignments=True)
    for sentence, best in zip(SENTENCES, found, strict=True):
        for t in best:
            assert t.alignment, "every output word comes from somewhere"
            assert all(0 <= i < len(sentence.split()) for i, _ in t.alignment)
            assert sorted({j for _, j in t.alignment}) == list(range(len(t.text.split())))


def test_alignments_read_from_the_search_equal_those_of_the_teacher_forced_pass(translator):
    # Alone, alignments come from the attention the search recorded; with scores, from the forced
    # pass that computes the scores anyway. The two read the same attention.
    from_search = translator.translate_detailed(SENTENCES + [""], beam=3, n_best=2, alignments=True)
    forced = translator.translate_detailed(SENTENCES + [""], beam=3, n_best=2, alignments=True, scores=True)
    assert [[t.alignment for t in s] for s in from_search] == [[t.alignment for t in s] for s in forced]
    assert from_search[-1][0].alignment == [] and all(t.attention is None for s in from_search for t in s)


def test_aligning_given_pairs_covers_every_target_word_and_ignores_batching(translator):
    targets = ["A man rides a bike .", "Two dogs play in the snow .", "A child .", "A woman with a hat ."]
    together = translator.align(SENTENCES, targets)
    alone = [translator.align([s], [t])[0] for s, t in zip(SENTENCES, targets, strict=True)]
    assert together == alone
    for source, target, pairs in zip(SENTENCES, targets, together, strict=True):
        assert {j for _, j in pairs} == set(range(len(target.split())))  # every target word, once or more
        assert all(0 <= i < len(source.split()) for i, _ in pairs)
