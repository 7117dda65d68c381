import math
import shutil

import pytest

from nmt.evaluation import Scores, score_translations
from nmt.model_dir import RUN_CONFIG, read_decode_config
from nmt.translator import Translator
from nmt.tuning import PenaltyTrial, best_trial, length_ratio, try_length_penalties, write_length_penalty

SOURCES = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Ein Kind.", "Eine Frau mit einem Hut."]
REFERENCES = ["A man rides a bike.", "Two dogs play in the snow.", "A child.", "A woman with a hat."]


def trial(alpha: float, bleu: float) -> PenaltyTrial:
    scores = Scores(bleu=bleu, bleu_lowercase=bleu, chrf=0.0, bleu_signature="", chrf_signature="", sentences=1)
    return PenaltyTrial(alpha, scores, 1.0)


def test_best_trial_is_the_highest_cased_bleu_and_the_earliest_of_equals():
    assert best_trial([trial(0.6, 30.0), trial(1.0, 31.5), trial(2.0, 29.0)]).alpha == 1.0
    assert best_trial([trial(0.6, 30.0), trial(1.0, 30.0)]).alpha == 0.6


def test_length_ratio_counts_words_over_the_whole_set():
    assert length_ratio(["a b", "c"], ["a b c", "d e f"]) == 0.5


def test_each_trial_scores_the_translations_made_with_its_alpha(tiny_model_dir):
    translator = Translator.load(tiny_model_dir)
    trials = try_length_penalties(translator, SOURCES, REFERENCES, [0.0, 2.0], beam=3)
    assert [t.alpha for t in trials] == [0.0, 2.0]
    for t in trials:
        hypotheses = translator.translate(SOURCES, beam=3, length_penalty=t.alpha)
        assert t.scores == score_translations(hypotheses, REFERENCES)
        assert t.length_ratio == length_ratio(hypotheses, REFERENCES)
    for bad, message in (([], "alphas must be one or more"), ([-1.0], "must be >= 0"), ([math.nan], "finite")):
        with pytest.raises(ValueError, match=message):
            try_length_penalties(translator, SOURCES, REFERENCES, bad)


def test_written_alpha_becomes_the_models_default_and_the_rest_stays(tiny_model_dir, tmp_path):
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    before = read_decode_config(model_dir)
    write_length_penalty(model_dir, 2.5)
    after = read_decode_config(model_dir)
    assert after.length_penalty == 2.5 and Translator.load(model_dir).decode.length_penalty == 2.5
    assert (after.beam, after.max_len_b) == (before.beam, before.max_len_b)  # the fixture's max_len_b: 5


def test_a_model_without_config_gets_the_defaults_and_the_alpha(tiny_model_dir, tmp_path):
    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    (model_dir / RUN_CONFIG).unlink()
    write_length_penalty(model_dir, 1.5)
    assert read_decode_config(model_dir).length_penalty == 1.5
