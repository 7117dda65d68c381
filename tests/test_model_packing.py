"""The encoder packed (its position-wise work on real tokens only) computes what the padded one does."""

import pytest
import torch
from test_model_transformer import tiny_model

from nmt.decoding.greedy import greedy_search
from nmt.model.masks import padding_mask
from nmt.model.packing import TokenRows

LENGTHS = [9, 3, 7, 1, 5]


def padded_batch(pad_id: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 24, (len(LENGTHS), max(LENGTHS)), generator=g)
    for row, length in enumerate(LENGTHS):
        src[row, length:] = pad_id
    return src


def test_pack_then_unpack_keeps_the_real_positions_in_order_and_zeroes_the_padding():
    real = padding_mask(padded_batch(0), 0)[:, 0, 0]  # (batch, len)
    rows = TokenRows.worth_packing(real)
    x = torch.randn(*real.shape, 3)
    packed = rows.pack(x)
    assert packed.shape == (sum(LENGTHS), 3)
    assert torch.equal(packed, x[real])  # row-major order: sentence by sentence, position by position
    back = rows.unpack(packed)
    assert torch.equal(back[real], x[real])
    assert torch.count_nonzero(back[~real]) == 0


def test_only_a_batch_with_enough_padding_is_packed():
    assert TokenRows.worth_packing(torch.ones(4, 10, dtype=torch.bool), 0.0) is None  # none at all
    real = torch.ones(4, 10, dtype=torch.bool)
    real[0, -5:] = False  # 5 of 40 positions: 12.5%
    assert TokenRows.worth_packing(real, 0.15) is None
    assert TokenRows.worth_packing(real, 0.10) is not None
    real[1, -1] = False  # 6 of 40: 15%
    assert TokenRows.worth_packing(real, 0.15) is not None


def test_packed_encoding_equals_the_padded_one_and_each_sentence_alone():
    model = tiny_model()
    src = padded_batch(model.config.pad_id)
    with torch.no_grad():
        packed = model.encode(src, need_weights=True)
        model.pack_encoder_from = 2.0  # no batch is more than all padding: the padded path
        padded = model.encode(src, need_weights=True)
        alone = [model.encode(src[row : row + 1, :length]).memory[0] for row, length in enumerate(LENGTHS)]
    real = padded.src_mask[:, 0, 0]
    torch.testing.assert_close(packed.memory[real], padded.memory[real], rtol=1e-6, atol=1e-6)
    assert torch.count_nonzero(packed.memory[~real]) == 0  # what only the packed path leaves at padding
    assert torch.count_nonzero(padded.memory[~real]) > 0
    for row, length in enumerate(LENGTHS):
        torch.testing.assert_close(packed.memory[row, :length], alone[row], rtol=1e-5, atol=1e-5)
    for a, b in zip(packed.self_weights, padded.self_weights, strict=True):  # (batch, heads, len, len)
        queries = real[:, None, :, None]  # the rows of real queries; padding's queries are nobody's
        torch.testing.assert_close(a * queries, b * queries, rtol=1e-6, atol=1e-6)


def test_the_cross_attention_keys_of_a_packed_batch_are_the_padded_ones_at_real_tokens():
    model = tiny_model()
    src = padded_batch(model.config.pad_id)
    with torch.no_grad():
        packed = model.new_cache(model.encode(src))
        model.pack_encoder_from = 2.0  # no batch is more than all padding: the padded path
        padded_encoding = model.encode(src)
        padded = model.new_cache(padded_encoding)
    real = padded_encoding.src_mask[:, 0, 0]
    for a, b in zip(packed.layers, padded.layers, strict=True):  # (batch, heads, src_len, d_head)
        for x, y in ((a.cross_k, b.cross_k), (a.cross_v, b.cross_v)):
            torch.testing.assert_close(x.transpose(1, 2)[real], y.transpose(1, 2)[real], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_greedy_translations_are_the_same_packed_or_padded(norm_position):
    model = tiny_model(seed=3, norm_position=norm_position)
    src = padded_batch(model.config.pad_id, seed=4)
    with torch.no_grad():
        packed = greedy_search(model, src)
        model.pack_encoder_from = 2.0  # no batch is more than all padding: the padded path
        padded = greedy_search(model, src)
    assert [h.tokens for h in packed] == [h.tokens for h in padded]
    torch.testing.assert_close([h.log_prob for h in packed], [h.log_prob for h in padded])


def test_training_keeps_the_padded_layout():
    """Distributed training's tests compare gradients across batchings bit for bit: no packing there."""
    model = tiny_model().train()
    src = padded_batch(model.config.pad_id)
    encoded = model.encode(src)
    assert torch.count_nonzero(encoded.memory[src == model.config.pad_id]) > 0  # not packed: computed at padding
    encoded.memory.sum().backward()  # and the padded path still trains
    assert model.encoder_layers[0].feed_forward.w_1.weight.grad is not None
