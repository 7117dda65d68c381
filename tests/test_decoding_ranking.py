"""The chunked top-k and argmax must give exactly what torch.topk / torch.argmax give."""

import pytest
import torch

from nmt.decoding.ranking import best_token, top_tokens


def log_probs(rows: int, vocab: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return (3 * torch.randn(rows, vocab, generator=generator)).log_softmax(dim=-1)


@pytest.mark.parametrize(
    "rows, vocab, k",
    [(40, 8192, 10), (40, 8192, 1), (9, 1008, 6), (64, 4096, 20), (3, 8192, 10), (20, 8191, 10), (12, 58101, 10)],
)
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


def test_top_tokens_finds_the_best_tokens_in_the_tail_no_chunk_holds():
    scores = log_probs(10, 8191)  # 127 chunks of 64, then a tail of 63
    scores[:, 8190] = 5.0  # the very last token is the best
    scores[:, 8180:8185] = torch.tensor([4.0, 4.5, 3.0, 3.5, 2.0])  # the next five, in the tail too
    values, ids = top_tokens(scores, 6)
    expected_values, expected_ids = scores.topk(6, dim=-1)
    assert torch.equal(values, expected_values) and torch.equal(ids, expected_ids)
    assert ids[0].tolist() == [8190, 8181, 8180, 8183, 8182, 8184]


@pytest.mark.parametrize("rows, vocab", [(40, 8192), (12, 1000), (2, 8192), (20, 8191), (16, 58101)])
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


def test_best_token_in_the_tail_wins_only_when_strictly_larger():
    scores = torch.full((10, 8195), -5.0)  # 128 chunks of 64, then a tail of 3
    scores[:, 8193] = 1.0  # the tail's maximum
    scores[:5, 100] = 1.0  # rows 0-4: tied with a chunk token, which comes first
    scores[5:, 100] = 0.5  # rows 5-9: the tail's is larger
    assert torch.equal(best_token(scores), scores.argmax(dim=-1))
    assert best_token(scores).tolist() == [100] * 5 + [8193] * 5
