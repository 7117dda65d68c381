"""Every reader of a model directory's config.yaml checks it the same way."""

import shutil

import pytest

from nmt.config import ConfigError, ExperimentConfig
from nmt.model_dir import holds_training_run, read_decode_config, read_run_config
from nmt.translator import Translator


@pytest.fixture
def model_dir(tiny_model_dir, tmp_path):
    copy = tmp_path / "model"
    shutil.copytree(tiny_model_dir, copy)
    return copy


def test_saved_config_round_trips(model_dir):
    assert read_decode_config(model_dir).max_len_b == 5  # the fixture's setting, not the default
    assert read_run_config(model_dir) == ExperimentConfig(decode=read_decode_config(model_dir))


def test_cut_config_is_refused_not_replaced_by_defaults(model_dir):
    path = model_dir / "config.yaml"
    path.write_text(path.read_text()[: len(path.read_text()) // 2].rsplit("\n", 1)[0] + "\n")
    with pytest.raises(ConfigError, match=r"config\.yaml is incomplete .*cut short"):
        Translator.load(model_dir)


def test_unknown_decode_key_names_the_file_and_key(model_dir):
    path = model_dir / "config.yaml"
    path.write_text(path.read_text().replace("decode:\n", "decode:\n  beam_size: 4\n"))
    with pytest.raises(ConfigError, match=r"config\.yaml.*decode\.beam_size"):
        Translator.load(model_dir)


def test_no_config_means_library_defaults(model_dir):
    (model_dir / "config.yaml").unlink()
    assert read_run_config(model_dir) is None
    assert Translator.load(model_dir).decode.beam == ExperimentConfig().decode.beam


def test_a_run_is_its_records_or_checkpoints_not_its_tokenizer(model_dir, tmp_path):
    assert not holds_training_run(model_dir)
    (model_dir / "checkpoints").mkdir()
    (model_dir / "checkpoints" / "step_00000001.safetensors").write_bytes(b"")  # killed before `latest`
    assert holds_training_run(model_dir)
