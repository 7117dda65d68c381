"""MC dropout: a twin of the model with its dropout on, over the model's own weights, and seeded passes."""

import torch

from nmt.inference.mc_dropout import dropout_twin, seeded
from nmt.model import ModelConfig, Transformer


def small_model() -> Transformer:
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=30, tgt_vocab_size=30, d_model=16, num_heads=2, d_ff=32, encoder_layers=1, decoder_layers=1
    )
    return Transformer(config).eval()


def test_the_twin_drops_out_over_the_model_s_own_weights_and_leaves_the_model_as_it_was():
    model = small_model()
    twin = dropout_twin(model)
    assert twin.training and all(m.training for m in twin.modules())
    assert not any(m.training for m in model.modules())  # a search meanwhile keeps its dropout off
    mine, theirs = dict(model.named_parameters()), dict(twin.named_parameters())
    assert mine.keys() == theirs.keys()
    assert all(theirs[name] is tensor for name, tensor in mine.items())  # shared, not copied
    src = torch.tensor([[1, 5, 6, 7, 2]])
    with torch.inference_mode():
        assert torch.equal(model.encode(src).memory, model.encode(src).memory)  # the model: no dropout
        assert not torch.equal(twin.encode(src).memory, twin.encode(src).memory)  # the twin: dropout on


def test_a_seeded_pass_draws_the_same_masks_and_leaves_the_caller_s_random_stream_alone():
    twin = dropout_twin(small_model())
    src = torch.tensor([[1, 5, 6, 7, 2]])

    def encoded(seed: int) -> torch.Tensor:
        with seeded(seed, torch.device("cpu")), torch.inference_mode():
            return twin.encode(src).memory

    torch.manual_seed(42)
    expected_next = torch.rand(3)
    torch.manual_seed(42)
    a = encoded(1)
    assert torch.equal(torch.rand(3), expected_next)  # the seeded pass drew from a stream of its own
    assert torch.equal(encoded(1), a)
    assert not torch.equal(encoded(2), a)
