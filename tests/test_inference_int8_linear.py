"""Int8Linear: torch.ao's dynamic int8 layer called directly, with exactly torch.ao's numbers."""

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
