import pytest

from nmt.model import PRESETS, ModelConfig


def test_presets_have_the_documented_sizes():
    expected = {"reference": (4, 128, 8, 512), "small": (3, 256, 4, 1024), "base": (6, 512, 8, 2048),
                "big": (6, 1024, 16, 4096)}
    assert set(PRESETS) == set(expected)
    for name, (layers, d, heads, d_ff) in expected.items():
        c = ModelConfig.preset(name)
        assert (c.encoder_layers, c.decoder_layers, c.d_model, c.num_heads, c.d_ff) == (layers, layers, d, heads, d_ff)


def test_invalid_combinations_name_the_problem():
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(d_model=100, num_heads=8)
    with pytest.raises(ValueError, match="joint vocabulary"):
        ModelConfig(src_vocab_size=10, tgt_vocab_size=20, sharing="all")
    with pytest.raises(ValueError, match="activation"):
        ModelConfig(activation="tanh")
    with pytest.raises(ValueError, match="unknown model preset"):
        ModelConfig.preset("huge")


def test_unknown_keys_list_the_valid_ones():
    with pytest.raises(ValueError, match="valid keys") as err:
        ModelConfig.from_dict({"d_modle": 3})
    assert "d_model" in str(err.value)


def test_dict_round_trip():
    c = ModelConfig.preset("small", src_vocab_size=100, tgt_vocab_size=120, sharing="tgt_out")
    assert ModelConfig.from_dict(c.to_dict()) == c
