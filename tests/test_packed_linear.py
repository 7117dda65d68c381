"""The oneDNN-packed output projection computes what nn.Linear does, decodes the same, and is used where chosen."""

import pytest
import torch
from torch import nn

from nmt.decoding import SearchLimits, beam_search, greedy_search
from nmt.model import ModelConfig, Transformer
from nmt.packed_linear import PackedLinear, onednn_linear_available, pack_output_projection, unpack_output_projection
from nmt.precision import prepare_for_inference

pytestmark = pytest.mark.skipif(not onednn_linear_available(), reason="this torch has no oneDNN linear ops")

AMD = {"vendor_id": "AuthenticAMD", "flags": "avx2 fma"}
INTEL = {"vendor_id": "GenuineIntel", "flags": "avx2 fma avx512f"}


def model_for(**overrides) -> Transformer:
    torch.manual_seed(0)
    config = dict(src_vocab_size=200, tgt_vocab_size=200, encoder_layers=2, decoder_layers=2)
    config.update(d_model=32, num_heads=4, d_ff=64, dropout=0.0)
    return Transformer(ModelConfig(**{**config, **overrides})).eval().requires_grad_(False)  # as Translator.load


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(1,), (3,), (17,), (64,), (2, 5), (4, 1)])
def test_packed_linear_equals_the_linear_layer(bias, shape):
    torch.manual_seed(1)
    linear = nn.Linear(48, 300, bias=bias).requires_grad_(False)
    if bias:
        nn.init.normal_(linear.bias)
    x = torch.randn(*shape, 48)
    with torch.inference_mode():
        expected, got = linear(x), PackedLinear(linear)(x)
    assert got.shape == expected.shape == (*shape, 300)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_a_non_contiguous_input_is_multiplied_as_it_reads():
    linear = nn.Linear(16, 40).requires_grad_(False)
    x = torch.randn(16, 9).t()  # (9, 16), column-major
    assert not x.is_contiguous()
    with torch.inference_mode():
        torch.testing.assert_close(PackedLinear(linear)(x), linear(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("sharing", ["all", "none"])
def test_packing_keeps_the_parameters_their_ties_and_the_state_dict(sharing):
    model = model_for(sharing=sharing)
    keys, weight = list(model.state_dict()), model.output.weight
    pack_output_projection(model)
    assert isinstance(model.output, PackedLinear)
    assert model.output.weight is weight and list(model.state_dict()) == keys
    if sharing == "all":
        assert model.output.weight is model.tgt_embed.weight
    pack_output_projection(model)  # idempotent: not packed twice
    assert isinstance(model.output, PackedLinear) and model.output.weight is weight
    unpack_output_projection(model)
    assert type(model.output) is nn.Linear and model.output.weight is weight and list(model.state_dict()) == keys


def test_decoding_with_the_packed_projection_picks_the_same_tokens():
    plain, packed = model_for(), pack_output_projection(model_for())
    torch.manual_seed(2)
    src = torch.randint(4, 200, (6, 11))
    src[3, 7:] = plain.config.pad_id
    limits = SearchLimits(max_len_b=12)
    with torch.inference_mode():
        greedy = [greedy_search(m, src, limits=limits) for m in (plain, packed)]
        beam = [beam_search(m, src, beam_size=4, n_best=2, limits=limits) for m in (plain, packed)]
    expected, got = greedy[0] + sum(beam[0], []), greedy[1] + sum(beam[1], [])
    assert len(got) == 6 + 12 and [h.tokens for h in got] == [h.tokens for h in expected]
    torch.testing.assert_close(torch.tensor([h.score for h in got]), torch.tensor([h.score for h in expected]))


def test_fp32_packs_the_output_projection_only_on_the_cpus_where_it_was_measured_faster(monkeypatch):
    monkeypatch.setattr("nmt.precision.cpu_info", lambda: INTEL)
    assert type(prepare_for_inference(model_for(), "fp32").output) is nn.Linear
    monkeypatch.setattr("nmt.precision.cpu_info", lambda: AMD)
    model = prepare_for_inference(model_for(), "fp32")
    assert isinstance(model.output, PackedLinear)
    assert sum(isinstance(m, PackedLinear) for m in model.modules()) == 1  # the other layers stay in MKL


def test_a_packed_model_can_still_be_quantised_and_bf16_never_runs_the_fp32_kernel(monkeypatch):
    monkeypatch.setattr("nmt.precision.cpu_info", lambda: AMD)
    model = prepare_for_inference(model_for(), "fp32")
    prepare_for_inference(model, "int8")
    assert not isinstance(model.output, PackedLinear) and type(model.output) is not nn.Linear  # quantised
    monkeypatch.setattr("nmt.precision.cpu_info", lambda: {**AMD, "flags": "avx512f amx_bf16 amx_tile"})
    model = prepare_for_inference(model_for(), "fp32")
    assert type(prepare_for_inference(model, "bf16").output) is nn.Linear


def test_a_model_still_training_is_not_packed_and_a_packed_layer_follows_its_weights(monkeypatch):
    """Validation between training steps translates the training model: it must stay differentiable."""
    monkeypatch.setattr("nmt.precision.cpu_info", lambda: AMD)
    training = model_for().requires_grad_(True)
    assert type(prepare_for_inference(training, "fp32").output) is nn.Linear

    linear = nn.Linear(8, 20).requires_grad_(False)
    packed, x = PackedLinear(linear), torch.randn(3, 8)
    with torch.no_grad():
        linear.weight.mul_(-2.0)  # changed in place after packing, as load_state_dict or an optimizer would
    torch.testing.assert_close(packed(x), linear(x))
    linear.weight.requires_grad_(True)
    with pytest.raises(RuntimeError, match="frozen weights"):
        packed(x)
