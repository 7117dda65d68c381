"""Int8Linear: torch.ao's dynamic int8 layer called directly, with exactly torch.ao's numbers."""

import copy

import pytest
import torch
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

from nmt.inference.int8_linear import Int8Linear
from nmt.inference.precision import prepare_for_inference
from nmt.model import ModelConfig, Transformer


def model_for() -> Transformer:
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=300, tgt_vocab_size=300, encoder_layers=1, decoder_layers=2, d_model=64, num_heads=4, d_ff=128
    )
    return Transformer(config).eval()


def test_int8_layers_call_the_operator_directly_with_torch_ao_s_numbers():
    int8 = prepare_for_inference(model_for(), "int8")
    layers = [m for m in int8.modules() if isinstance(m, DynamicQuantizedLinear)]
    assert layers and all(type(m) is Int8Linear for m in layers)
    torch.manual_seed(1)
    with torch.inference_mode():
        for layer in layers:
            for rows in (1, 7, 300):  # the activation scale is per call: one row and many
                x = torch.randn(rows, 3, layer.in_features) * 4
                assert torch.equal(layer(x), DynamicQuantizedLinear.forward(layer, x))


needs_onednn = pytest.mark.skipif(
    "onednn" not in torch.backends.quantized.supported_engines, reason="this torch build has no oneDNN int8 kernels"
)


@needs_onednn
def test_large_calls_run_onednn_s_packing_of_the_same_weight_and_small_calls_fbgemm_s(monkeypatch):
    from nmt.inference import int8_linear

    monkeypatch.setattr(int8_linear, "ONEDNN_MIN_MACS", 1 << 18)  # tens of rows for these small layers
    both = prepare_for_inference(model_for(), "int8")
    layers = [m for m in both.modules() if isinstance(m, Int8Linear)]
    for layer in layers:
        layer.add_onednn_kernels()
    torch.manual_seed(1)
    with torch.inference_mode():
        for layer in layers:
            threshold = layer.onednn_rows
            assert (threshold - 1) * layer.in_features * layer.out_features < 1 << 18
            assert threshold * layer.in_features * layer.out_features >= 1 << 18
            small, large = torch.randn(threshold - 1, layer.in_features), torch.randn(threshold, layer.in_features)
            fbgemm = layer._packed_params._packed_params
            assert torch.equal(layer(small), torch.ops.quantized.linear_dynamic(small, fbgemm, True))
            assert torch.equal(layer(large), torch.ops.quantized.linear_dynamic(large, layer.onednn_packed, True))
            # The same int8 weight and activation scale: the libraries differ by float rounding, and
            # now and then by one step where an activation falls on a rounding tie.
            differ = (layer(large) - DynamicQuantizedLinear.forward(layer, large)).abs() > 1e-5
            assert differ.any(dim=-1).float().mean() <= 0.05


@needs_onednn
def test_onednn_kernels_are_as_close_to_fp32_as_fbgemm_s_and_survive_a_shortlist():
    from nmt.inference.precision import quantize_int8

    fp32 = model_for()
    fbgemm, both = quantize_int8(copy.deepcopy(fp32), onednn=False), quantize_int8(copy.deepcopy(fp32), onednn=True)
    layers = [layer for layer in both.modules() if isinstance(layer, Int8Linear)]
    assert layers and all(layer.onednn_packed is not None for layer in layers)
    for layer in layers:
        layer.onednn_rows = 1  # every call to oneDNN, whatever its size
    torch.manual_seed(0)
    errors = {"fbgemm": [], "onednn": []}
    for _ in range(20):
        src, tgt = torch.randint(4, 300, (6, 9)), torch.randint(4, 300, (6, 7))
        with torch.inference_mode():
            plain = fp32(src, tgt)  # (6, 7, 300) logits
            errors["fbgemm"].append((fbgemm(src, tgt) - plain).abs().mean().item())
            errors["onednn"].append((both(src, tgt) - plain).abs().mean().item())
    # Where an activation or the zero point of a call's activation scale falls on a rounding tie the
    # libraries round it apart, so some batches' logits differ; both stay int8's distance from fp32.
    assert sum(errors["onednn"]) == pytest.approx(sum(errors["fbgemm"]), rel=0.05)
    ids = torch.tensor([2, 5, 9, 23])
    rows = both.output.select_outputs(ids)
    assert rows.onednn_packed is not None
    rows.onednn_rows = 1
    x = torch.randn(4, 64)
    torch.testing.assert_close(rows(x), both.output(x)[:, ids], atol=1e-5, rtol=1e-5)
