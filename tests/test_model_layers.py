import torch

from nmt.model import ModelConfig, Transformer
from nmt.model.layers import FeedForward


def test_activation_dropout_drops_hidden_units_in_training_only():
    torch.manual_seed(0)
    ff = FeedForward(d_model=8, d_ff=4096, activation="relu", activation_dropout=0.25)
    with torch.no_grad():  # every hidden unit active and equal: relu(0 + 1) = 1
        ff.w_1.weight.zero_()
        ff.w_1.bias.fill_(1.0)
    seen = []
    ff.dropout.register_forward_hook(lambda module, args, out: seen.append(out))
    x = torch.randn(2, 3, 8)

    ff.train()(x)
    hidden = seen[-1]
    dropped = (hidden == 0).float().mean().item()
    assert abs(dropped - 0.25) < 0.02  # about p of the units
    assert torch.allclose(hidden[hidden != 0], torch.tensor(1 / 0.75))  # the rest scaled by 1 / (1 - p)

    ff.eval()(x)
    assert torch.equal(seen[-1], torch.ones_like(seen[-1]))  # nothing dropped at inference


def test_a_model_with_activation_dropout_equals_one_without_at_inference():
    """The option adds no parameter and changes nothing in eval mode: the same seed builds the same weights."""
    config = dict(
        src_vocab_size=32,
        tgt_vocab_size=32,
        encoder_layers=2,
        decoder_layers=2,
        d_model=16,
        num_heads=2,
        d_ff=32,
        dropout=0.0,
    )
    torch.manual_seed(3)
    plain = Transformer(ModelConfig(**config)).eval()
    torch.manual_seed(3)
    regularised = Transformer(ModelConfig(**config, activation_dropout=0.3)).eval()
    src, tgt = torch.randint(4, 32, (2, 5)), torch.randint(4, 32, (2, 4))
    assert torch.equal(plain(src, tgt), regularised(src, tgt))
    regularised.train()
    assert not torch.equal(plain(src, tgt), regularised(src, tgt))  # in training it does drop


def _reference_ffn(ffn: FeedForward, x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.linear(torch.relu(ffn.w_1(x)), ffn.w_2.weight, ffn.w_2.bias)


def test_feed_forward_is_the_same_function_with_and_without_gradients():
    # Inference applies the ReLU in place (no new hidden tensor); training keeps the graph intact.
    torch.manual_seed(0)
    ffn = FeedForward(d_model=8, d_ff=32).eval()
    x = torch.randn(3, 5, 8)
    x_before = x.clone()
    with torch.inference_mode():
        inference = ffn(x)
    assert torch.equal(x, x_before)  # the input is not written over
    x_grad = x.clone().requires_grad_()
    training = ffn(x_grad)
    assert torch.equal(inference, training.detach())
    training.square().sum().backward()
    reference_x = x.clone().requires_grad_()
    _reference_ffn(ffn, reference_x).square().sum().backward()
    assert torch.allclose(x_grad.grad, reference_x.grad)
