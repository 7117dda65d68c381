import math

import torch

from nmt.model.embedding import PositionalEncoding, TokenEmbedding, sinusoidal_encoding


def test_positional_encoding_matches_the_formula():
    d, base = 64, 10000.0
    positions = [0, 1, 7, 49, 255, 1000, 4999]
    pe = sinusoidal_encoding(torch.tensor(positions), d, base)
    for row, p in enumerate(positions):
        for i in [0, 1, 5, 16, 31]:
            angle = p / base ** (2 * i / d)
            assert abs(pe[row, 2 * i].item() - math.sin(angle)) < 1e-6
            assert abs(pe[row, 2 * i + 1].item() - math.cos(angle)) < 1e-6


def test_positional_base_is_configurable():
    pe = sinusoidal_encoding(torch.tensor([3]), 8, base=100.0)
    assert abs(pe[0, 2].item() - math.sin(3 / 100.0 ** (2 / 8))) < 1e-6


def test_positional_encoding_has_no_length_limit_and_honours_offset():
    layer = PositionalEncoding(16, dropout=0.0).eval()
    x = torch.zeros(1, 3000, 16)  # longer than the initial table
    out = layer(x)
    assert torch.allclose(out[0], sinusoidal_encoding(torch.arange(3000), 16))
    step = layer(torch.zeros(1, 1, 16), offset=2999)
    assert torch.equal(step[0, 0], out[0, 2999])


def test_token_embedding_is_scaled_by_sqrt_d_model():
    emb = TokenEmbedding(10, 16)
    ids = torch.tensor([[1, 4]])
    assert torch.allclose(emb(ids)[0, 1], emb.weight[4] * 4.0)
    assert torch.count_nonzero(emb(torch.tensor([[0]]))) == 0  # padding row is zero


def test_the_marian_layout_is_marian_s_own_table_and_differs_from_transformers():
    from marian_models import marian_position_table

    ours = sinusoidal_encoding(torch.arange(200), 512, layout="marian")
    # Marian rounds p * exp(-i * step) in float32 (2e-5 off at position 190); nmt computes in float64.
    assert torch.allclose(ours, torch.from_numpy(marian_position_table(200, 512)), atol=1e-4)
    halves = sinusoidal_encoding(torch.arange(200), 512, layout="halves")  # transformers' Marian table
    assert (ours - halves).abs()[50].max() > 0.05  # not a rounding difference
