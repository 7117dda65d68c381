import json

import pytest

from nmt.model import PRESETS, ModelConfig


def test_presets_have_the_documented_sizes():
    expected = {
        "reference": (4, 128, 8, 512),
        "small": (3, 256, 4, 1024),
        "base": (6, 512, 8, 2048),
        "big": (6, 1024, 16, 4096),
        "student-6-2": ((6, 2), 256, 4, 1024),
        "student-6-1": ((6, 1), 256, 4, 1024),
        "student-6-2-narrow": ((6, 2), 192, 4, 768),
    }
    assert set(PRESETS) == set(expected)
    for name, (layers, d, heads, d_ff) in expected.items():
        encoder, decoder = layers if isinstance(layers, tuple) else (layers, layers)
        c = ModelConfig.preset(name)
        shape = (c.encoder_layers, c.decoder_layers, c.d_model, c.num_heads, c.d_ff)
        assert shape == (encoder, decoder, d, heads, d_ff), name


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


def test_model_json_from_before_the_special_ids_loads_with_the_ids_it_was_trained_with(tmp_path):
    """model.json files written before bos_id/eos_id existed were trained with [START]=2, [END]=3."""
    values = ModelConfig().to_dict()
    del values["bos_id"], values["eos_id"]
    (tmp_path / "model.json").write_text(json.dumps(values))
    config = ModelConfig.load(tmp_path / "model.json")
    assert (config.pad_id, config.bos_id, config.eos_id) == (0, 2, 3)


def test_dict_round_trip():
    c = ModelConfig.preset("small", src_vocab_size=100, tgt_vocab_size=120, sharing="tgt_out")
    assert ModelConfig.from_dict(c.to_dict()) == c


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("d_model", "256", "d_model must be int, got '256'"),
        ("d_model", [256], r"d_model must be int, got \[256\]"),
        ("d_model", 256.0, "d_model must be int, got 256.0"),
        ("encoder_layers", True, "encoder_layers must be int, got True"),  # JSON's true is no layer count
        ("d_model", -256, "d_model must be >= 1, got -256"),
        ("num_heads", 0, "num_heads must be >= 1"),
        ("num_heads", 3, r"d_model \(512\) must be divisible by num_heads \(3\)"),
        ("src_vocab_size", 0, "src_vocab_size must be >= 1"),
        ("dropout", 1.5, r"dropout must be in \[0, 1\), got 1.5"),
        ("dropout", "0.1", "dropout must be float, got '0.1'"),
        ("attention_dropout", -0.1, "attention_dropout must be in"),
        ("layer_norm_eps", 0, "layer_norm_eps must be > 0"),
        ("positional_base", float("nan"), "positional_base must be a finite number"),
        ("pad_id", -1, "pad_id must be a row of both vocabularies"),
        ("pad_id", 8192, "pad_id must be a row of both vocabularies"),
        ("eos_id", 8192, "eos_id must be a row of the target vocabulary"),
        ("bos_id", -1, "bos_id must be a row of the target vocabulary"),
        ("eos_id", 2, "eos_id must differ from pad_id and bos_id, got 2"),
        ("activation", "tanh", "activation must be one of relu | gelu, got 'tanh'"),
        ("norm_position", "middle", "norm_position must be one of post | pre"),
        ("sharing", "some", "sharing must be one of none | tgt_out | all"),
        ("sharing", None, "sharing must be str, got None"),
    ],
)
def test_model_json_with_a_bad_value_names_the_file_and_the_key(tmp_path, key, value, message):
    path = tmp_path / "model.json"
    path.write_text(json.dumps({**ModelConfig().to_dict(), key: value}))
    with pytest.raises(ValueError, match=f"model.json: {message}"):
        ModelConfig.load(path)
    with pytest.raises(ValueError, match=message):
        ModelConfig.from_dict({key: value})


def test_unreadable_model_json_names_the_file(tmp_path):
    path = tmp_path / "model.json"
    path.write_text('{"d_model": 256,\n')
    with pytest.raises(ValueError, match=r"model.json:2: not valid JSON"):
        ModelConfig.load(path)
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="model.json: a model config must be a mapping"):
        ModelConfig.load(path)
    path.write_bytes(b'{"activation": "r\xe9lu"}')
    with pytest.raises(ValueError, match="model.json: not valid UTF-8"):
        ModelConfig.load(path)
    path.write_text('{"d_modle": 256}')
    with pytest.raises(ValueError, match=r"model.json: unknown model config keys \['d_modle'\]"):
        ModelConfig.load(path)


def test_ints_are_accepted_where_floats_are_wanted(tmp_path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"dropout": 0, "positional_base": 10000}))
    config = ModelConfig.load(path)
    assert config.dropout == 0.0 and isinstance(config.dropout, float) and config.positional_base == 10000.0
