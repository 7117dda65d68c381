import torch

from nmt.model.attention import MultiHeadAttention, explicit_attention, fused_attention
from nmt.model.masks import causal_mask, padding_mask


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 5, 32, generator=g)
    ids = torch.tensor([[5, 5, 5, 5, 5], [5, 5, 5, 0, 0], [5, 0, 0, 0, 0]])
    return x, padding_mask(ids)


def test_sdpa_path_equals_explicit_path_and_rows_sum_to_one():
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4).eval()
    x, mask = _inputs()
    for m in (mask, mask & causal_mask(5), None):
        q, k, v = mha.project_qkv(x)
        fast, none = mha.attend(q, k, v, m, need_weights=False)
        slow, weights = mha.attend(q, k, v, m, need_weights=True)
        assert none is None
        assert torch.allclose(fast, slow, atol=1e-5)
        assert weights.shape == (3, 4, 5, 5)  # (batch, heads, tgt_len, src_len)
        assert torch.allclose(weights.sum(-1), torch.ones(3, 4, 5), atol=1e-6)


def test_masked_keys_get_exactly_zero_weight():
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4).eval()
    x, mask = _inputs()
    q, k, v = mha.project_qkv(x)
    _, weights = mha.attend(q, k, v, mask, need_weights=True)
    assert torch.all(weights[1, :, :, 3:] == 0)
    assert torch.all(weights[2, :, :, 1:] == 0)


def test_explicit_attention_is_the_formula():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 1, 2, 4, generator=g) for _ in range(3))
    values, weights = explicit_attention(q, k, v)
    expected = torch.softmax(q[0, 0] @ k[0, 0].T / 2.0, dim=-1)  # sqrt(d_k) = 2
    assert torch.allclose(weights[0, 0], expected)
    assert torch.allclose(values[0, 0], expected @ v[0, 0])


def test_cross_attention_projections_are_blocks_of_the_fused_matrix():
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4)
    x, _ = _inputs()
    q, k, v = mha.project_qkv(x)
    k2, v2 = mha.project_kv(x)
    assert torch.allclose(q, mha.project_q(x), atol=1e-6)
    assert torch.allclose(k, k2, atol=1e-6) and torch.allclose(v, v2, atol=1e-6)


def test_bf16_attention_that_will_be_differentiated_on_cpu_runs_in_fp32_and_returns_bf16():
    # bf16 training takes the fp32 kernel (its backward is the fast one on CPU): values and
    # gradients must then be the fp32 ones rounded to bf16, not those of a bf16 computation.
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 7, 16) for _ in range(3))
    mask = causal_mask(7)
    reference = [t.clone().requires_grad_() for t in (q, k, v)]
    expected = fused_attention(*reference, mask)
    expected.sum().backward()
    low = [t.to(torch.bfloat16).requires_grad_() for t in (q, k, v)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        values = fused_attention(*low, mask)
    values.float().sum().backward()
    assert values.dtype == torch.bfloat16
    up = [t.detach().float().requires_grad_() for t in low]  # the bf16 inputs, computed in fp32
    in_fp32 = fused_attention(*up, mask)
    in_fp32.sum().backward()
    assert torch.equal(values, in_fp32.to(torch.bfloat16))
    for got, want in zip(low, up, strict=True):
        assert torch.equal(got.grad, want.grad.to(torch.bfloat16))
    assert torch.allclose(values.float(), expected, atol=0.05)
    with torch.no_grad():  # decoding keeps the bf16 kernel
        assert fused_attention(*low, mask).dtype == torch.bfloat16


def test_keys_and_values_kept_in_bf16_give_fp32_out_and_stay_close():
    """kv_dtype narrows what a decoding cache holds, not the projections around the attention."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4).eval()
    x, mask = _inputs()
    with torch.inference_mode():
        expected = [mha.attend(*mha.project_qkv(x), mask, need_weights=w) for w in (False, True)]
        mha.kv_dtype = torch.bfloat16
        q, k, v = mha.project_qkv(x)
        k2, v2 = mha.project_kv(x)
        assert q.dtype == torch.float32 and k.dtype == v.dtype == k2.dtype == v2.dtype == torch.bfloat16
        for need_weights, (want_values, want_weights) in zip((False, True), expected, strict=True):
            values, weights = mha.attend(q, k, v, mask, need_weights=need_weights)
            assert values.dtype == torch.float32
            torch.testing.assert_close(values, want_values, atol=3e-2, rtol=0)
            assert not torch.equal(values, want_values)  # bf16 did round something
            if need_weights:  # computed in fp32 from the rounded keys: close to fp32's, not bf16-rounded
                assert weights.dtype == torch.float32
                torch.testing.assert_close(weights, want_weights, atol=1e-3, rtol=0)
