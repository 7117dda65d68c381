import itertools
import math

import pytest
import torch

from nmt.decoding import SearchLimits, beam_search, beam_step, gnmt_length_penalty, greedy_search

from fake_model import (
    BOS,
    EOS,
    GREEDY_TRAP,
    LENGTH_TRADE,
    LIMITS,
    A,
    B,
    ScriptedModel,
    ended,
    source_batch,
    teacher_forced_log_prob,
    tiny_model,
)


def test_gnmt_length_penalty():
    assert gnmt_length_penalty(7, 0.0) == 1.0
    assert gnmt_length_penalty(1, 0.6) == 1.0  # (5 + 1) / 6
    assert gnmt_length_penalty(7, 1.0) == pytest.approx(2.0)
    assert gnmt_length_penalty(20, 0.6) > gnmt_length_penalty(10, 0.6)


def test_beam_step_ranks_over_beams_and_tokens():
    log_probs = torch.tensor([[[-1.0, -5.0, -2.5], [-1.5, -0.5, -9.0]]])  # (batch=1, beam=2, vocab=3)
    top, beams, tokens = beam_step(torch.zeros(1, 2), log_probs, 3)
    assert top.tolist() == [[-0.5, -1.0, -1.5]]
    assert beams.tolist() == [[1, 0, 1]]
    assert tokens.tolist() == [[1, 0, 0]]


def test_beam_step_equals_one_topk_over_beam_times_vocab():
    """Per-beam top-n then top-n over beams picks exactly what a top-n over every continuation picks."""
    gen = torch.Generator().manual_seed(0)
    batch, beams, vocab, n = 6, 4, 50, 8
    beam_scores = torch.randn(batch, beams, generator=gen) * 3  # offsets large enough to reorder beams
    log_probs = torch.randn(batch, beams, vocab, generator=gen).log_softmax(-1)
    top, beam_of, token_of = beam_step(beam_scores, log_probs, n)
    expected, flat = (beam_scores.unsqueeze(2) + log_probs).view(batch, -1).topk(n, dim=1)
    assert torch.equal(top, expected)
    assert torch.equal(beam_of, flat // vocab) and torch.equal(token_of, flat % vocab)
    assert torch.equal(top, beam_scores.gather(1, beam_of) + log_probs[torch.arange(batch)[:, None], beam_of, token_of])


def test_standard_batch_has_ended_and_capped_hypotheses():
    src = source_batch()
    kinds = [
        ended(h.tokens, s)
        for hs, s in zip(beam_search(tiny_model(), src, beam_size=3, n_best=3, limits=LIMITS), src, strict=True)
        for h in hs
    ]
    assert any(kinds) and not all(kinds)


def test_cached_equals_uncached():
    model, src = tiny_model(), source_batch()
    cached = beam_search(model, src, beam_size=3, n_best=3, limits=LIMITS)
    uncached = beam_search(model, src, beam_size=3, n_best=3, use_cache=False, limits=LIMITS)
    for c_hyps, u_hyps in zip(cached, uncached, strict=True):
        assert [h.tokens for h in c_hyps] == [h.tokens for h in u_hyps]
        assert [h.score for h in c_hyps] == pytest.approx([h.score for h in u_hyps], abs=1e-5)


def test_beam_of_one_is_greedy():
    model, src = tiny_model(), source_batch()
    greedy = greedy_search(model, src, limits=LIMITS)
    beam = beam_search(model, src, beam_size=1, limits=LIMITS)
    assert [hs[0].tokens for hs in beam] == [h.tokens for h in greedy]


def test_batch_equals_one_sentence_at_a_time():
    model, src = tiny_model(), source_batch()
    batched = beam_search(model, src, beam_size=3, n_best=2, limits=LIMITS)
    for row, hyps in zip(src, batched, strict=True):
        alone = beam_search(model, row[row != 0].unsqueeze(0), beam_size=3, n_best=2, limits=LIMITS)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in hyps]
        assert [h.score for h in alone] == pytest.approx([h.score for h in hyps], abs=1e-5)


def test_score_is_teacher_forced_log_prob_over_length_penalty():
    model, src = tiny_model(), source_batch()
    for row, hyps in zip(
        src, beam_search(model, src, beam_size=3, n_best=3, length_penalty=0.6, limits=LIMITS), strict=True
    ):
        for h in hyps:
            has_eos = ended(h.tokens, row)
            assert h.log_prob == pytest.approx(teacher_forced_log_prob(model, row, h.tokens, has_eos), abs=1e-4)
            assert h.score == pytest.approx(h.log_prob / gnmt_length_penalty(len(h.tokens) + has_eos, 0.6), abs=1e-4)


def test_beam_escapes_the_greedy_trap_with_the_exact_score():
    model, src = ScriptedModel(GREEDY_TRAP), torch.tensor([[BOS, 7, EOS]])
    assert greedy_search(model, src)[0].tokens == [A]
    best, second = beam_search(model, src, beam_size=2, n_best=2, length_penalty=0.0)[0]
    assert best.tokens == [B] and best.log_prob == pytest.approx(math.log(0.4 * 0.9), abs=1e-6)
    assert second.tokens == [A] and second.score == pytest.approx(math.log(0.6 * 0.4), abs=1e-6)


def test_length_penalty_changes_the_winner():
    model, src = ScriptedModel(LENGTH_TRADE), torch.tensor([[BOS, 7, EOS]])
    plain = beam_search(model, src, beam_size=2, length_penalty=0.0)[0][0]
    assert plain.tokens == [] and plain.score == pytest.approx(math.log(0.5))
    penalised = beam_search(model, src, beam_size=2, length_penalty=1.0)[0][0]
    assert penalised.tokens == [A, A]
    assert penalised.score == pytest.approx(math.log(0.5 * 0.95 * 0.9) / (8 / 6))


def test_n_best_are_distinct_and_sorted():
    model, src = tiny_model(), source_batch()
    for hyps in beam_search(model, src, beam_size=4, n_best=4, limits=LIMITS):
        assert len(hyps) == 4
        assert len({tuple(h.tokens) for h in hyps}) == 4
        assert all(a.score >= b.score for a, b in itertools.pairwise(hyps))


def test_hypotheses_cut_at_the_limit_have_no_eos_and_their_own_length():
    model = ScriptedModel({(): {A: 1.0}, (A,): {A: 1.0}, (A, A): {A: 1.0}, (A, A, A): {A: 0.5, B: 0.5}})
    hyps = beam_search(
        model, torch.tensor([[BOS, 7, EOS]]), beam_size=2, n_best=2, limits=SearchLimits(max_len_a=0.0, max_len_b=4)
    )[0]
    assert sorted(h.tokens for h in hyps) == [[A, A, A, A], [A, A, A, B]]
    assert hyps[0].score == pytest.approx(math.log(0.5) / gnmt_length_penalty(4, 0.6))


def test_empty_batch_empty_source_and_bad_n_best():
    model = tiny_model()
    assert beam_search(model, torch.zeros(0, 5, dtype=torch.long)) == []
    (hyps,) = beam_search(
        model, torch.tensor([[BOS, EOS]]), beam_size=3, n_best=3, limits=SearchLimits(max_len_a=1.0, max_len_b=3)
    )
    assert len(hyps) == 3 and all(math.isfinite(h.score) for h in hyps)
    with pytest.raises(ValueError):
        beam_search(model, torch.tensor([[BOS, EOS]]), beam_size=2, n_best=3)


def test_attention_follows_each_hypothesis_through_reordering():
    model, src = tiny_model(), source_batch()
    results = beam_search(model, src, beam_size=3, n_best=3, return_attention=True, limits=LIMITS)
    for row, hyps in zip(src, results, strict=True):
        real = row[row != 0].unsqueeze(0)
        for h in hyps:
            steps = len(h.tokens) + ended(h.tokens, row)
            assert h.attention.shape == (2, 4, steps, real.size(1))  # (layers, heads, steps, src_len)
            assert torch.allclose(h.attention.sum(-1), torch.ones(2, 4, steps), atol=1e-5)
            # the same weights as a teacher-forced pass over this hypothesis: the history moved with its beam
            tgt_in = torch.tensor([[BOS] + h.tokens])[:, :steps]
            with torch.no_grad():
                out = model.decode(tgt_in, model.encode(real), need_weights=True)
            assert torch.allclose(h.attention, torch.stack(out.cross_weights, dim=1)[0], atol=1e-5)


# Beam 2. Step 1 ends the empty output (log 0.5 = -0.69); step 2 ends B (log 0.12 / 2 = -1.06) while
# A A lives (log 0.21 = -1.56). With two finished, fairseq's rule stops and the empty output wins;
# transformers' early_stopping=False sees A A at -1.56 / 2 = -0.78 above the worst finished (-1.06)
# and goes on: step 3 ends A A EOS at log(0.21 * 0.95) / 3 = -0.54, the best of all. Then the best
# live beam (A A A, log 0.0105 / 3 = -1.52) cannot beat the worst of the two best (-0.69): done.
LATE_WINNER = {
    (): {EOS: 0.5, A: 0.3, B: 0.2},
    (A,): {A: 0.7, EOS: 0.3},
    (B,): {EOS: 0.6, B: 0.4},
    (A, A): {EOS: 0.95, A: 0.05},
}
LATE_OPTIONS = dict(beam_size=2, length_penalty=1.0, length_normalization="average")


def test_without_early_stopping_a_longer_hypothesis_can_still_win():
    model, src = ScriptedModel(LATE_WINNER), torch.tensor([[BOS, 7, EOS]])
    (first,) = beam_search(model, src, **LATE_OPTIONS)[0]
    assert first.tokens == [] and first.score == pytest.approx(math.log(0.5), abs=1e-6)
    late = beam_search(model, src, n_best=2, early_stopping=False, **LATE_OPTIONS)[0]
    assert late[0].tokens == [A, A] and late[0].score == pytest.approx(math.log(0.21 * 0.95) / 3, abs=1e-6)
    assert late[1].tokens == []


def test_without_early_stopping_the_search_stops_when_no_live_beam_can_win():
    model, src = ScriptedModel(LATE_WINNER), torch.tensor([[BOS, 7, EOS]])
    calls = 0
    decode = model.decode

    def counting(*args, **kwargs):
        nonlocal calls
        calls += 1
        return decode(*args, **kwargs)

    model.decode = counting
    beam_search(model, src, limits=SearchLimits(max_len_a=0.0, max_len_b=20), early_stopping=False, **LATE_OPTIONS)
    assert calls == 3  # not the 20 steps of the length limit


def test_without_early_stopping_cached_batched_and_n_best_agree():
    model, src = tiny_model(), source_batch()
    options = dict(
        beam_size=3, n_best=3, limits=LIMITS, length_penalty=1.0, length_normalization="average", early_stopping=False
    )
    batched = beam_search(model, src, **options)
    uncached = beam_search(model, src, use_cache=False, **options)
    assert [[h.tokens for h in hyps] for hyps in batched] == [[h.tokens for h in hyps] for hyps in uncached]
    for i in range(src.size(0)):
        row = src[i : i + 1, : int((src[i] != 0).sum())]
        alone = beam_search(model, row, **options)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in batched[i]]
        assert all(a.score == pytest.approx(b.score, abs=1e-5) for a, b in zip(alone, batched[i], strict=True))
