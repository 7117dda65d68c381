from collections import Counter

import pytest
import torch

from nmt.decoding import greedy_search, sample, sampling_distribution

from fake_model import BOS, EOS, LIMITS, A, B, C, ScriptedModel, source_batch, tiny_model

THREE_WAY = {(): {A: 0.5, B: 0.3, C: 0.2}}  # then EOS
MANY = torch.tensor([[BOS, 7, EOS]]).repeat(400, 1)  # 400 draws of the first token in one batch


def first_tokens(**kwargs) -> Counter:
    hyps = sample(ScriptedModel(THREE_WAY), MANY, generator=torch.Generator().manual_seed(0), **kwargs)
    return Counter(h.tokens[0] for h in hyps)


def test_top_1_is_greedy():
    model, src = tiny_model(), source_batch()
    sampled = sample(model, src, top_k=1, generator=torch.Generator().manual_seed(0), limits=LIMITS)
    assert [h.tokens for h in sampled] == [h.tokens for h in greedy_search(model, src, limits=LIMITS)]


def test_seeded_generator_reproduces_samples():
    model, src = tiny_model(), source_batch()
    draws = [sample(model, src, generator=torch.Generator().manual_seed(seed), limits=LIMITS) for seed in (7, 7, 8)]
    tokens = [[h.tokens for h in d] for d in draws]
    assert tokens[0] == tokens[1] and tokens[0] != tokens[2]


def test_top_k_keeps_only_the_k_best_tokens():
    assert set(first_tokens(top_k=2)) == {A, B}
    assert set(first_tokens()) == {A, B, C}


def test_temperature_sharpens_and_flattens():
    cold, plain, hot = first_tokens(temperature=0.1), first_tokens(), first_tokens(temperature=10.0)
    assert cold[A] > 390  # 0.5^10 vs 0.3^10: almost always A
    assert 160 < plain[A] < 240  # about 0.5 * 400
    assert hot[C] > 100  # nearly uniform over three: about 133


def test_log_prob_is_the_model_log_prob_not_the_tempered_one():
    model = ScriptedModel(THREE_WAY)
    for h in sample(model, MANY[:20], temperature=3.0, generator=torch.Generator().manual_seed(0)):
        assert h.log_prob == pytest.approx(model.sequence_log_prob(h.tokens), abs=1e-6) and h.score == h.log_prob


def test_sampling_distribution_and_bad_temperature():
    log_probs = torch.tensor([[0.5, 0.3, 0.2]]).log()
    assert torch.allclose(sampling_distribution(log_probs), torch.tensor([[0.5, 0.3, 0.2]]))
    assert torch.allclose(sampling_distribution(log_probs, top_k=2), torch.tensor([[0.625, 0.375, 0.0]]))
    with pytest.raises(ValueError):
        sample(ScriptedModel(THREE_WAY), MANY, temperature=0.0)
    assert sample(ScriptedModel(THREE_WAY), MANY[:0]) == []
