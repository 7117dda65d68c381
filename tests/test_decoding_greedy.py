import math

import pytest
import torch

from nmt.decoding import SearchLimits, greedy_search

from fake_model import (
    BOS,
    EOS,
    GREEDY_TRAP,
    LIMITS,
    PAD,
    A,
    ScriptedModel,
    ended,
    source_batch,
    teacher_forced_log_prob,
    tiny_model,
)


def test_max_steps_is_linear_in_source_length_and_capped():
    lengths = torch.tensor([0, 2, 10, 100])
    assert SearchLimits(1.5, 10, 100).max_steps(lengths).tolist() == [10, 13, 25, 100]
    assert SearchLimits(0.0, 0, 100).max_steps(lengths).tolist() == [1, 1, 1, 1]  # always at least one step


@pytest.mark.parametrize("bad", [dict(max_len_a=-1.0), dict(max_len_b=-1), dict(max_len_cap=0)])
def test_search_limits_refuse_negative_values(bad):
    with pytest.raises(ValueError, match="search limits need"):
        SearchLimits(**bad)


def test_search_uses_the_models_own_start_and_end_ids():
    """A model whose vocabulary puts BOS and EOS elsewhere: the search starts and stops on its ids."""
    model = ScriptedModel({(): {A: 1.0}, (A,): {6: 1.0}})  # after A, token 6 takes every bit of mass
    model.config.eos_id, model.config.bos_id = 6, 7
    (h,) = greedy_search(model, torch.tensor([[BOS, EOS]]), limits=SearchLimits(max_len_b=5))
    assert h.tokens == [A] and h.log_prob == 0.0  # 6 ended it (and is not part of the output)
    assert model.fed_first == 7


def test_standard_batch_has_ended_and_capped_outputs():
    # guards the other tests: they mean something only if both kinds occur
    src = source_batch()
    kinds = [ended(h.tokens, s) for h, s in zip(greedy_search(tiny_model(), src, limits=LIMITS), src, strict=True)]
    assert any(kinds) and not all(kinds)


def test_cached_equals_uncached():
    model, src = tiny_model(), source_batch()
    cached = greedy_search(model, src, limits=LIMITS)
    uncached = greedy_search(model, src, use_cache=False, limits=LIMITS)
    assert [h.tokens for h in cached] == [h.tokens for h in uncached]
    for c, u in zip(cached, uncached, strict=True):
        assert c.score == pytest.approx(u.score, abs=1e-5)


def test_batch_equals_one_sentence_at_a_time():
    model, src = tiny_model(), source_batch()
    batched = greedy_search(model, src, limits=LIMITS)
    for row, hypothesis in zip(src, batched, strict=True):
        alone = greedy_search(model, row[row != 0].unsqueeze(0), limits=LIMITS)[0]
        assert alone.tokens == hypothesis.tokens
        assert alone.score == pytest.approx(hypothesis.score, abs=1e-5)


def test_score_is_the_teacher_forced_log_prob():
    model, src = tiny_model(), source_batch()
    for row, h in zip(src, greedy_search(model, src, limits=LIMITS), strict=True):
        expected = teacher_forced_log_prob(model, row, h.tokens, ended(h.tokens, row))
        assert h.log_prob == pytest.approx(expected, abs=1e-4)
        assert h.score == h.log_prob  # greedy applies no length penalty
        assert EOS not in h.tokens


def test_greedy_takes_the_locally_best_token():
    (h,) = greedy_search(ScriptedModel(GREEDY_TRAP), torch.tensor([[BOS, 7, EOS]]))
    assert h.tokens == [A]  # A (0.6) first, though B EOS (0.36) beats A EOS (0.24)
    assert h.log_prob == pytest.approx(math.log(0.6 * 0.4), abs=1e-6)


def test_padding_is_never_chosen_and_the_rest_is_renormalised():
    # PAD is masked before the softmax: A, the only other token, gets all of the probability.
    (h,) = greedy_search(ScriptedModel({(): {PAD: 0.7, A: 0.3}}), torch.tensor([[BOS, 7, EOS]]))
    assert h.tokens == [A] and h.log_prob == pytest.approx(0.0, abs=1e-6)


def test_empty_batch_and_empty_source():
    model = tiny_model()
    assert greedy_search(model, torch.zeros(0, 5, dtype=torch.long)) == []
    (h,) = greedy_search(model, torch.tensor([[BOS, EOS]]), limits=SearchLimits(max_len_a=1.0, max_len_b=3))
    assert len(h.tokens) <= 5 and math.isfinite(h.score)


def test_attention_has_one_row_per_step_over_the_real_source():
    model, src = tiny_model(), source_batch()
    plain = greedy_search(model, src, limits=LIMITS)
    with_attention = greedy_search(model, src, return_attention=True, limits=LIMITS)
    uncached = greedy_search(model, src, return_attention=True, use_cache=False, limits=LIMITS)
    for row, p, h, u in zip(src, plain, with_attention, uncached, strict=True):
        assert h.tokens == p.tokens and p.attention is None
        steps = len(h.tokens) + ended(h.tokens, row)  # the EOS step has a row too
        assert h.attention.shape == (2, 4, steps, int((row != 0).sum()))  # (layers, heads, steps, src_len)
        assert torch.allclose(h.attention.sum(-1), torch.ones(2, 4, steps), atol=1e-5)
        assert torch.allclose(h.attention, u.attention, atol=1e-5)
