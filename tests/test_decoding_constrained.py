"""Terminology constraints in beam search (nmt.decoding.constrained)."""

from __future__ import annotations

import pytest
import torch

from nmt.decoding import SearchLimits, beam_search, gnmt_length_penalty
from nmt.decoding.constrained import Progress, as_constraints, constrained_beam_search

from fake_model import BOS, EOS, LIMITS, PAD, A, C, ScriptedModel, source_batch, tiny_model


def contains(tokens: list[int], run: list[int]) -> bool:
    return any(tokens[i : i + len(run)] == run for i in range(len(tokens) - len(run) + 1))


def test_progress_counts_a_constraint_only_once_it_is_whole():
    constraints = as_constraints([[7, 8, 9], [12]])
    p = Progress().advance(7, constraints)
    assert (p.met, p.partial, p.tokens_met(constraints)) == (frozenset(), {(0, 1)}, 1)
    assert p.wanted(constraints) == {8, 7, 12}
    p = p.advance(5, constraints)  # left half-way: undone
    assert (p.met, p.partial, p.tokens_met(constraints)) == (frozenset(), frozenset(), 0)
    p = p.advance(12, constraints).advance(7, constraints).advance(8, constraints).advance(9, constraints)
    assert (p.met, p.tokens_met(constraints), p.wanted(constraints)) == (frozenset({0, 1}), 4, set())


def test_terms_that_share_a_start_or_restart_inside_themselves_are_followed_at_once():
    constraints = as_constraints([[5, 6], [5, 7]])  # "European Union", "European Court"
    p = Progress()
    for token in (5, 7, 5, 6):
        p = p.advance(token, constraints)
    assert p.met == {0, 1}
    restart = as_constraints([[4, 4, 9]])  # found in 4 4 4 9 only by restarting the match one token later
    p = Progress()
    for token in (4, 4, 4, 9):
        p = p.advance(token, restart)
    assert p.met == {0}


def test_shared_starts_are_both_placed_by_the_search():
    model = tiny_model()
    src = source_batch([9])
    constraints = [[10, 11], [10, 13]]
    result = constrained_beam_search(model, src, constraints, beam_size=3, limits=LIMITS)
    assert result.missed == [] and all(contains(result.hypotheses[0].tokens, c) for c in constraints)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_constraint_appears_in_the_output(seed):
    # No end bias: a model that wants to end early would rightly refuse terms pasted after its end
    # (test_a_term_is_never_pasted_after_the_end_of_the_sentence); here the terms fit in the sentence.
    model = tiny_model(seed=seed, eos_bias=0.0)
    src = source_batch([9], seed=seed)
    constraints = [[7, 8, 9], [12], [20, 21]]
    free = beam_search(model, src, beam_size=4, limits=LIMITS)[0][0].tokens
    assert not all(contains(free, c) for c in constraints)  # left alone, the model would not write them
    result = constrained_beam_search(model, src, constraints, beam_size=4, n_best=2, limits=LIMITS)
    assert result.missed == []
    for hypothesis in result.hypotheses:
        assert all(contains(hypothesis.tokens, c) for c in constraints)
    best = result.hypotheses[0]
    length = len(best.tokens) + (1 if len(best.tokens) < 9 + LIMITS.max_len_b else 0)  # + EOS where it ended
    assert best.score == pytest.approx(best.log_prob / gnmt_length_penalty(length, 0.6), rel=1e-5)


def test_the_score_is_the_model_s_log_probability_of_the_output():
    from nmt.decoding.forced import force_decode

    model = tiny_model()
    src = source_batch([7])
    best = constrained_beam_search(model, src, [[10, 11]], beam_size=3, limits=LIMITS).hypotheses[0]
    row = src[0][src[0] != PAD].tolist()
    ended = len(best.tokens) < len(row) + LIMITS.max_len_b
    forced = force_decode(model, [row], [best.tokens], ended=[ended])[0]
    assert sum(forced.token_log_probs) == pytest.approx(best.log_prob, abs=1e-4)


def test_constraints_that_cannot_fit_are_reported_not_raised():
    model = tiny_model()
    src = source_batch([3])
    short = SearchLimits(max_len_a=0.0, max_len_b=4)  # four steps at most
    result = constrained_beam_search(model, src, [[5, 6, 7], [9, 10, 11]], beam_size=3, limits=short)
    assert result.hypotheses and len(result.hypotheses[0].tokens) <= 4
    assert len(result.missed) >= 1
    tokens = result.hypotheses[0].tokens
    assert all(contains(tokens, c) for i, c in enumerate([[5, 6, 7], [9, 10, 11]]) if i not in result.missed)


def test_no_constraints_searches_as_a_beam_would():
    model = tiny_model()
    src = source_batch([6])
    result = constrained_beam_search(model, src, [], beam_size=4, limits=LIMITS)
    assert result.missed == [] and result.hypotheses
    plain = beam_search(model, src, beam_size=4, limits=LIMITS)[0][0]
    assert result.hypotheses[0].score >= plain.score - 1e-5 or result.hypotheses[0].tokens == plain.tokens
    assert torch.isfinite(torch.tensor(result.hypotheses[0].log_prob))


def test_a_position_may_be_met_by_any_of_several_tokens():
    # a term whose last piece may also come merged with punctuation: 11 or 12 ("▁dog" or "▁dog.")
    model = tiny_model()
    src = source_batch([8])
    result = constrained_beam_search(model, src, [[10, frozenset({11, 12})]], beam_size=3, limits=LIMITS)
    tokens = result.hypotheses[0].tokens
    assert result.missed == [] and (contains(tokens, [10, 11]) or contains(tokens, [10, 12]))
    p = Progress().advance(10, as_constraints([[10, {11, 12}]])).advance(12, as_constraints([[10, {11, 12}]]))
    assert p.met == {0}


STOP = 7  # the scripted model's full stop


def test_a_term_is_never_pasted_after_the_end_of_the_sentence():
    # The model says "A ." and would end there (EOS 0.9); it could go on with the term C after it.
    pasted_only = {(): {A: 1.0}, (A,): {STOP: 1.0}, (A, STOP): {EOS: 0.9, C: 0.1}, (A, STOP, C): {STOP: 1.0}}
    model, src = ScriptedModel(pasted_only), torch.tensor([[BOS, 7, EOS]])
    limits = SearchLimits(max_len_a=0.0, max_len_b=6)
    result = constrained_beam_search(model, src, [[C]], beam_size=3, limits=limits)
    assert result.hypotheses[0].tokens == [A, STOP] and result.missed == [0]  # "A . C ." is no placement
    # Where the term fits inside the sentence, it is placed there, though the model prefers "A .".
    inside = {**pasted_only, (): {A: 0.6, C: 0.4}, (C,): {A: 1.0}, (C, A): {STOP: 1.0}}
    result = constrained_beam_search(ScriptedModel(inside), src, [[C]], beam_size=3, limits=limits)
    assert result.hypotheses[0].tokens == [C, A, STOP] and result.missed == []
    p = Progress().advance(A, as_constraints([[C]])).advance(C, as_constraints([[C]]), past_end=True)
    assert (p.met, p.outside, p.missed(as_constraints([[C]]))) == ({0}, {0}, [0])
