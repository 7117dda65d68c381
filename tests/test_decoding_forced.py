"""Teacher-forced scoring (nmt.decoding.forced) agrees with what the search itself computed."""

from __future__ import annotations

import pytest
import torch

from nmt.decoding import greedy_search
from nmt.decoding.forced import force_decode

from fake_model import LIMITS, PAD, ended, source_batch, tiny_model


def _rows(src: torch.Tensor) -> list[list[int]]:
    return [row[row != PAD].tolist() for row in src]


def test_forced_scores_add_up_to_the_search_log_prob_and_repeat_its_attention():
    model = tiny_model()
    src = source_batch()
    hyps = greedy_search(model, src, limits=LIMITS, return_attention=True)
    done = [ended(h.tokens, row) for h, row in zip(hyps, src, strict=True)]
    assert any(done) and not all(done)  # both kinds of output are scored
    scored = force_decode(model, _rows(src), [h.tokens for h in hyps], ended=done, need_attention=True)
    for h, forced, end in zip(hyps, scored, done, strict=True):
        assert len(forced.token_log_probs) == len(h.tokens) + (1 if end else 0)
        assert sum(forced.token_log_probs) == pytest.approx(h.log_prob, abs=1e-4)
        assert all(lp <= 0 for lp in forced.token_log_probs)
        # (layers, heads, steps, src_len): the search's attention, row for row
        assert forced.cross_attention.shape == h.attention.shape
        torch.testing.assert_close(forced.cross_attention, h.attention, atol=1e-5, rtol=1e-4)


def test_attention_alone_skips_the_scores_and_is_the_same_attention():
    model = tiny_model()
    src = source_batch()
    outputs = [h.tokens for h in greedy_search(model, src, limits=LIMITS)]
    both = force_decode(model, _rows(src), outputs, need_attention=True)
    alone = force_decode(model, _rows(src), outputs, need_attention=True, need_log_probs=False)
    for b, a in zip(both, alone, strict=True):
        assert a.token_log_probs == [] and b.token_log_probs
        torch.testing.assert_close(a.cross_attention, b.cross_attention)


def test_a_sentence_scores_the_same_alone_as_in_a_padded_batch():
    model = tiny_model()
    src = source_batch()
    outputs = [h.tokens for h in greedy_search(model, src, limits=LIMITS)]
    together = force_decode(model, _rows(src), outputs)
    for i in range(len(outputs)):
        alone = force_decode(model, _rows(src)[i : i + 1], outputs[i : i + 1])[0]
        assert alone.token_log_probs == pytest.approx(together[i].token_log_probs, abs=1e-5)


def test_a_later_token_does_not_change_an_earlier_score():
    model = tiny_model()
    src = _rows(source_batch([6]))
    short = force_decode(model, src, [[5, 6, 7]], ended=[False])[0].token_log_probs
    longer = force_decode(model, src, [[5, 6, 7, 8, 9]], ended=[False])[0].token_log_probs
    assert longer[:3] == pytest.approx(short, abs=1e-6)


def test_nothing_to_score_and_mismatched_lists():
    model = tiny_model()
    assert force_decode(model, [], []) == []
    with pytest.raises(ValueError, match="2 sources but 1 outputs"):
        force_decode(model, [[2, 3], [2, 3]], [[5]])


def test_forced_scores_follow_the_search_s_minimum_length():
    # Within the first min_len steps the search renormalised without the end token; teacher forcing
    # with the same min_len must add up to the same log-prob (and without it, to less).
    from nmt.decoding import SearchLimits

    model, src = tiny_model(eos_bias=4.0), source_batch()
    limits = SearchLimits(max_len_a=LIMITS.max_len_a, max_len_b=LIMITS.max_len_b, min_len=2)
    hyps = greedy_search(model, src, limits=limits)
    done = [ended(h.tokens, row) for h, row in zip(hyps, src, strict=True)]
    outputs = [h.tokens for h in hyps]
    scored = force_decode(model, _rows(src), outputs, ended=done, min_len=2)
    raw = force_decode(model, _rows(src), outputs, ended=done)
    for h, forced, plain in zip(hyps, scored, raw, strict=True):
        assert sum(forced.token_log_probs) == pytest.approx(h.log_prob, abs=1e-4)
        assert forced.token_log_probs[2:] == pytest.approx(plain.token_log_probs[2:], abs=1e-6)  # only steps 0, 1
        assert all(f > p for f, p in zip(forced.token_log_probs[:2], plain.token_log_probs[:2], strict=True))
    # An output shorter than min_len cannot have come from the search: it is scored as the model sees it.
    (short,) = force_decode(model, _rows(src)[:1], [[]], min_len=2)
    (unruled,) = force_decode(model, _rows(src)[:1], [[]])
    assert short.token_log_probs == unruled.token_log_probs and short.token_log_probs[0] > float("-inf")
