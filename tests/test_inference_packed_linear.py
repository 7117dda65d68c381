"""The oneDNN-packed output projection computes what nn.Linear does, decodes the same, and is used where chosen."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from nmt.decoding import SearchLimits, beam_search, greedy_search
from nmt.inference.packed_linear import (
    PackedLinear,
    onednn_linear_available,
    pack_output_projection,
    unpack_output_projection,
)
from nmt.inference.precision import prepare_for_inference
from nmt.model import ModelConfig, Transformer
from nmt.translator import Translator

from conftest import read_head

needs_onednn = pytest.mark.skipif(not onednn_linear_available(), reason="this torch has no oneDNN linear ops")

AMD = {"vendor_id": "AuthenticAMD", "flags": "avx2 fma"}
INTEL = {"vendor_id": "GenuineIntel", "flags": "avx2 fma avx512f"}


def model_for(**overrides) -> Transformer:
    torch.manual_seed(0)
    config = dict(src_vocab_size=200, tgt_vocab_size=200, encoder_layers=2, decoder_layers=2)
    config.update(d_model=32, num_heads=4, d_ff=64, dropout=0.0)
    return Transformer(ModelConfig(**{**config, **overrides})).eval().requires_grad_(False)  # as Translator.load


@needs_onednn
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


@needs_onednn
def test_a_non_contiguous_input_is_multiplied_as_it_reads():
    linear = nn.Linear(16, 40).requires_grad_(False)
    x = torch.randn(16, 9).t()  # (9, 16), column-major
    assert not x.is_contiguous()
    with torch.inference_mode():
        torch.testing.assert_close(PackedLinear(linear)(x), linear(x), atol=1e-5, rtol=1e-5)


@needs_onednn
@pytest.mark.parametrize("sharing", ["all", "none"])
def test_packing_keeps_the_parameters_their_ties_and_the_state_dict(sharing):
    model = model_for(sharing=sharing)
    keys, weight = list(model.state_dict()), model.output.weight
    pack_output_projection(model)
    assert isinstance(model.output, PackedLinear)
    assert model.output.weight is weight and list(model.state_dict()) == keys
    if sharing == "all":
        assert model.output.weight is model.tgt_embed.weight
    first = model.output
    pack_output_projection(model)  # idempotent: not packed twice
    assert model.output is first
    unpack_output_projection(model)
    assert type(model.output) is nn.Linear and model.output.weight is weight and list(model.state_dict()) == keys


@needs_onednn
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


@needs_onednn
def test_fp32_packs_the_output_projection_only_on_the_cpus_where_it_was_measured_faster(monkeypatch):
    monkeypatch.setattr("nmt.inference.precision.cpu_info", lambda: INTEL)
    assert type(prepare_for_inference(model_for(), "fp32").output) is nn.Linear
    monkeypatch.setattr("nmt.inference.precision.cpu_info", lambda: AMD)
    assert isinstance(prepare_for_inference(model_for(), "fp32").output, PackedLinear)


@needs_onednn
def test_a_packed_model_can_still_be_quantised_and_bf16_never_runs_the_fp32_kernel(monkeypatch):
    monkeypatch.setattr("nmt.inference.precision.cpu_info", lambda: AMD)
    model = prepare_for_inference(model_for(), "fp32")
    prepare_for_inference(model, "int8")
    assert not isinstance(model.output, PackedLinear) and type(model.output) is not nn.Linear  # quantised
    monkeypatch.setattr("nmt.inference.precision.cpu_info", lambda: {**AMD, "flags": "avx512f amx_bf16 amx_tile"})
    model = prepare_for_inference(model_for(), "fp32")
    assert type(prepare_for_inference(model, "bf16").output) is nn.Linear


def test_the_intel_choice_needs_no_onednn(monkeypatch):
    monkeypatch.setattr("nmt.inference.precision.cpu_info", lambda: INTEL)
    assert type(prepare_for_inference(model_for(), "fp32").output) is nn.Linear


@needs_onednn
def test_a_model_in_training_is_not_packed(monkeypatch):
    """Validation between training steps translates the training model: it keeps its nn.Linear."""
    monkeypatch.setattr("nmt.inference.precision.cpu_info", lambda: AMD)
    training = model_for().requires_grad_(True)
    assert type(prepare_for_inference(training, "fp32").output) is nn.Linear


@needs_onednn
def test_the_packed_copy_follows_its_weight_and_gradients_take_the_plain_path():
    torch.manual_seed(3)
    linear = nn.Linear(8, 20).requires_grad_(False)
    packed, x = PackedLinear(linear), torch.randn(3, 8)
    packed(x)  # packs
    with torch.no_grad():
        linear.weight.mul_(-2.0)  # changed in place, as an optimizer or load_state_dict would
    torch.testing.assert_close(packed(x), linear(x))
    packed.load_state_dict({"weight": torch.randn(20, 8), "bias": torch.randn(20)}, assign=True)  # replaced
    torch.testing.assert_close(packed(x), F.linear(x, packed.weight, packed.bias))
    x.requires_grad_(True)
    packed(x).sum().backward()  # a gradient to compute: plain F.linear, differentiable
    torch.testing.assert_close(x.grad, packed.weight.sum(0).expand(3, 8))
    with torch.inference_mode():  # weights made in inference mode keep no version counter
        made_in_inference = nn.Linear(8, 20)
        torch.testing.assert_close(PackedLinear(made_in_inference)(x), made_in_inference(x))
    assert PackedLinear(linear).double()(x.double()).dtype == torch.float64  # another dtype: the plain path


@needs_onednn
def test_translator_load_packs_and_translates_as_before(monkeypatch, tiny_model_dir, multi30k_dir):
    sources = read_head(multi30k_dir / "data/task1/raw/val.de.gz", 12)
    monkeypatch.setattr("nmt.inference.precision.cpu_info", lambda: AMD)
    translator = Translator.load(tiny_model_dir, workers=2, threads=1)
    assert isinstance(translator.model.output, PackedLinear)
    monkeypatch.setattr("nmt.inference.precision.cpu_info", lambda: INTEL)
    plain = Translator.load(tiny_model_dir, workers=2, threads=1)
    assert type(plain.model.output) is nn.Linear
    for beam in (1, 3):
        assert translator.translate(sources, beam=beam) == plain.translate(sources, beam=beam)
