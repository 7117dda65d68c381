import torch

from nmt.model.masks import causal_mask, decoder_self_mask, padding_mask


def test_causal_mask_is_lower_triangular_with_diagonal():
    m = causal_mask(4)
    assert m.dtype == torch.bool
    for i in range(4):
        for j in range(4):
            assert m[i, j].item() == (j <= i)


def test_causal_mask_with_cached_prefix_places_queries_at_the_end():
    # 2 new queries after 3 cached positions: absolute positions 3 and 4.
    m = causal_mask(2, 5)
    assert m.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


def test_padding_mask_marks_real_tokens():
    ids = torch.tensor([[5, 6, 0], [7, 0, 0]])
    m = padding_mask(ids)
    assert m.shape == (2, 1, 1, 3)
    assert m[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]


def test_decoder_self_mask_combines_causal_and_padding():
    ids = torch.tensor([[2, 6, 0]])
    m = decoder_self_mask(ids)
    assert m.shape == (1, 1, 3, 3)
    expected = [[True, False, False], [True, True, False], [True, True, False]]
    assert m[0, 0].tolist() == expected
