import math

import torch

from nmt.model.dropout import Dropout, cpu_dropout


def test_cpu_dropout_keeps_the_right_fraction_and_scales():
    torch.manual_seed(0)
    x = torch.ones(1000, 1000)
    for p in (0.1, 0.3):
        y = cpu_dropout(x, p)
        kept = (y != 0).float().mean().item()
        expected = 1 - math.ceil(p * 65536) / 65536
        assert abs(kept - expected) < 0.002  # 1e6 draws: 5 standard deviations is ~0.0015
        assert torch.allclose(y[y != 0], torch.full_like(y[y != 0], 1 / (1 - p)))
        assert abs(y.mean().item() - 1.0) < 0.005  # unbiased


def test_cpu_dropout_is_seeded_and_its_gradient_is_the_mask():
    x = torch.randn(7, 13, requires_grad=True)
    torch.manual_seed(1)
    a = cpu_dropout(x, 0.5)
    torch.manual_seed(1)
    b = cpu_dropout(x, 0.5)
    assert torch.equal(a, b)
    a.sum().backward()
    assert torch.equal(x.grad, (a != 0).float() * 2.0)


def test_dropout_module_is_identity_in_eval_and_at_zero():
    x = torch.randn(4, 5)
    assert torch.equal(Dropout(0.5).eval()(x), x)
    assert torch.equal(Dropout(0.0).train()(x), x)
    assert not torch.equal(Dropout(0.5).train()(x), x)


def test_cpu_dropout_keeps_bf16_and_its_gradient_is_the_mask_in_bf16():
    x = torch.randn(64, 32).bfloat16().requires_grad_()
    torch.manual_seed(2)
    y = cpu_dropout(x, 0.2)
    assert y.dtype == torch.bfloat16
    kept = y != 0
    assert torch.equal(y[kept], (x[kept].float() * 1.25).bfloat16())  # x * 1 / (1 - p), rounded once
    y.sum().backward()
    assert x.grad.dtype == torch.bfloat16 and torch.equal(x.grad, kept.bfloat16() * 1.25)
