"""Tests for nmt.evaluation: sacreBLEU scores of raw and of pretokenized text."""

import pytest

from nmt.evaluation import score_translations


def test_raw_text_is_tokenised_by_sacrebleu():
    scores = score_translations(["A man walking."], ["A man walking ."])
    assert "tok:13a" in scores.bleu_signature and not scores.pretokenized
    assert scores.bleu == pytest.approx(100)  # 13a splits the full stop off the hypothesis
    assert scores.sentences == 1 and set(scores.to_dict()) >= {"bleu", "bleu_lowercase", "chrf", "pretokenized"}


def test_pretokenized_text_is_scored_on_its_own_tokens():
    refs = ["a man walking .", "it 's a dog ."]
    same = score_translations(list(refs), refs, pretokenized=True)
    assert "tok:none" in same.bleu_signature and same.pretokenized and same.to_dict()["pretokenized"]
    assert same.bleu == pytest.approx(100) and same.bleu_lowercase == pytest.approx(100)
    # Detokenised output does not match tokenised references token for token: tokenize=none says so.
    detok = score_translations(["a man walking.", "it's a dog."], refs, pretokenized=True)
    assert detok.bleu < 50
    assert score_translations(["a man walking.", "it's a dog."], refs).bleu > detok.bleu


def test_pretokenized_text_raises_no_detokenize_warning(caplog):
    # sacreBLEU takes 100 lines ending in " ." for text someone forgot to detokenise; for a
    # pretokenized corpus that is its form, and the warning would only mislead.
    lines = [f"line {i} ends like this ." for i in range(120)]
    with caplog.at_level("WARNING", logger="sacrebleu"):
        score_translations(lines, lines, pretokenized=True)
    assert "detokenize" not in caplog.text
    with caplog.at_level("WARNING", logger="sacrebleu"):
        score_translations(lines, lines)  # raw text: the warning is sacreBLEU's to give
    assert "detokenize" in caplog.text


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        score_translations(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no sentences"):
        score_translations([], [], pretokenized=True)
