import math

import pytest
import torch

from nmt.decoding.state import log_softmax_in_place


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
