"""The chunked top-k and argmax must give exactly what torch.topk / torch.argmax give."""

import pytest
import torch

from nmt.decoding.ranking import best_token, top_tokens


def log_probs(rows: int, vocab: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (3 * torch.randn(rows, vocab, generator=generator)).log_softmax(dim=-1)


@pytest.mark.parametrize("rows, vocab, k", [(40, 8192, 10), (40, 8192, 1), (9, 1008, 6), (64, 4096, 20), (3, 8192, 10)])
def test_top_tokens_equals_topk(rows, vocab, k):
    scores = log_probs(rows, vocab, seed=rows + k)
    values, ids = top_tokens(scores, k)
    expected_values, expected_ids = scores.topk(k, dim=-1)
    assert torch.equal(values, expected_values)
    assert torch.equal(ids, expected_ids)


def test_top_tokens_finds_the_best_tokens_when_they_crowd_one_chunk():
    # All ten best tokens sit in one chunk of 64: the other chunks' maxima must not crowd them out.
    scores = log_probs(16, 8192)
    scores[:, 128:138] = torch.arange(10, 0, -1, dtype=torch.float)  # the best ten, best first
    values, ids = top_tokens(scores, 10)
    assert torch.equal(ids, torch.arange(128, 138).expand(16, 10))
    assert torch.equal(values, torch.arange(10, 0, -1, dtype=torch.float).expand(16, 10))


def test_top_tokens_on_a_vocabulary_without_a_usable_chunk_size():
    scores = log_probs(20, 8191)  # prime: no chunk divides it, so plain topk runs
    assert torch.equal(top_tokens(scores, 10)[1], scores.topk(10, dim=-1).indices)


@pytest.mark.parametrize("rows, vocab", [(40, 8192), (12, 1000), (2, 8192), (20, 8191)])
def test_best_token_equals_argmax(rows, vocab):
    scores = log_probs(rows, vocab, seed=vocab)
    assert torch.equal(best_token(scores), scores.argmax(dim=-1))


def test_best_token_takes_the_first_of_tied_maxima_like_argmax():
    scores = torch.full((10, 8192), -5.0)
    scores[:, [700, 70, 7000]] = 0.0  # three tied maxima in different chunks; and -inf padding
    scores[:, 0] = float("-inf")
    scores[3, 64:128] = 0.0  # a whole chunk of ties, earlier than the rest
    expected = scores.argmax(dim=-1)
    assert torch.equal(best_token(scores), expected)
    assert expected[0] == 70 and expected[3] == 64
