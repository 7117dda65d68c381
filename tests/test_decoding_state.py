import math

import pytest
import torch

from nmt.decoding import SearchLimits, beam_search, greedy_search
from nmt.decoding.state import log_softmax_in_place

from fake_model import EOS, LENGTH_TRADE, A, ScriptedModel, source_batch, tiny_model


@pytest.mark.parametrize("rows", [1, 37, 450])
def test_log_softmax_in_place_equals_the_allocating_call(rows):
    # The search's table: a wide range of logits, and -inf at the padding id as next_step sets it.
    torch.manual_seed(rows)
    logits = torch.randn(rows, 8192) * 8
    logits[:, 1] = -math.inf
    expected = logits.log_softmax(dim=-1)
    result = log_softmax_in_place(logits)
    assert torch.equal(result, expected)  # bit for bit, -inf included
    assert result.data_ptr() == logits.data_ptr()  # written over the input: no new (rows, vocab) table


def test_log_softmax_in_place_leaves_a_tensor_that_needs_gradients_alone():
    logits = torch.randn(3, 10, requires_grad=True)
    result = log_softmax_in_place(logits)
    result.sum().backward()  # an in-place write would have broken the graph
    assert result.data_ptr() != logits.data_ptr() and torch.allclose(result, logits.detach().log_softmax(-1))


# --- the minimum output length (SearchLimits.min_len) ---------------------------------------------


def test_min_len_refuses_the_end_token_before_the_softmax():
    # LENGTH_TRADE's first step: EOS 0.5, A 0.5. Without a minimum greedy ends at once (the tie goes
    # to the lower id); with min_len=1 the end token is gone and A takes all the mass: log 1 = 0.
    model, src = ScriptedModel(LENGTH_TRADE), torch.tensor([[2, 7, 3]])
    assert greedy_search(model, src)[0].tokens == []
    (found,) = greedy_search(model, src, limits=SearchLimits(min_len=1))
    assert found.tokens == [A, A]
    assert found.log_prob == pytest.approx(math.log(1.0) + math.log(0.95) + math.log(0.9), abs=1e-6)


def test_min_len_keeps_an_empty_output_out_of_the_beam_too():
    # The empty output (-0.69) beats A A EOS (-0.85) on plain log-prob; once it may not be chosen,
    # A A EOS scores log 0.855 (A renormalised to 1) and no hypothesis is empty.
    model, src = ScriptedModel(LENGTH_TRADE), torch.tensor([[2, 7, 3]])
    assert beam_search(model, src, beam_size=2, length_penalty=0.0)[0][0].tokens == []
    found = beam_search(model, src, beam_size=2, n_best=2, length_penalty=0.0, limits=SearchLimits(min_len=1))[0]
    assert found[0].tokens == [A, A] and found[0].log_prob == pytest.approx(math.log(0.95 * 0.9), abs=1e-6)
    assert all(h.tokens for h in found)


@pytest.mark.parametrize("beam", [1, 3])
def test_min_len_holds_for_every_sentence_of_a_real_model_cached_or_not(beam):
    model, src = tiny_model(eos_bias=6.0), source_batch()  # a strong end bias: most outputs would be empty
    limits = SearchLimits(max_len_a=1.0, max_len_b=4, min_len=3)

    def search(**options):
        if beam == 1:
            return [[h] for h in greedy_search(model, src, **options)]
        return beam_search(model, src, beam_size=beam, n_best=beam, **options)

    plain = search(limits=SearchLimits(max_len_a=1.0, max_len_b=4))
    assert any(len(hyps[0].tokens) < 3 for hyps in plain)  # the rule has work to do
    found = search(limits=limits)
    assert all(len(h.tokens) >= 3 for hyps in found for h in hyps)
    assert all(EOS not in h.tokens for hyps in found for h in hyps)
    uncached = search(limits=limits, use_cache=False)
    assert [[h.tokens for h in hyps] for hyps in found] == [[h.tokens for h in hyps] for hyps in uncached]


def test_search_limits_refuse_a_negative_min_len():
    with pytest.raises(ValueError, match="min_len >= 0"):
        SearchLimits(min_len=-1)
