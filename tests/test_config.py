from pathlib import Path

import pytest

from nmt.config import ConfigError, ModelSection, load_config, parse_duration


def test_defaults_and_overrides_parse_as_yaml(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  max_steps: 10\nmodel:\n  preset: reference\n")
    config = load_config(path, ["train.max_steps=200", "model.dropout=0.3", "train.clip_norm=null"])
    assert config.train.max_steps == 200 and config.model.dropout == 0.3 and config.train.clip_norm is None
    assert config.model.preset == "reference" and config.train.seed == 1  # untouched default


def test_unknown_keys_and_sections_list_the_valid_ones():
    with pytest.raises(ConfigError, match="train.max_stpes.*valid keys.*max_steps"):
        load_config(None, ["train.max_stpes=1"])
    with pytest.raises(ConfigError, match="unknown section"):
        load_config(None, ["trian.max_steps=1"])


def test_wrong_types_and_bad_overrides_are_errors():
    with pytest.raises(ConfigError, match="train.max_steps must be int"):
        load_config(None, ["train.max_steps=abc"])
    with pytest.raises(ConfigError, match="section.key=value"):
        load_config(None, ["max_steps=3"])


def test_bad_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("train:\n  max_steps: [1,\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:\d+: not valid YAML"):
        load_config(path)


@pytest.mark.parametrize("override, message", [
    ("train.valid_every=0", "valid_every must be at least 1"),
    ("train.accumulate=0", "accumulate must be at least 1"),
    ("train.schedule=cosine", "schedule must be"),
    ("train.best_metric=chrf", "best_metric must be"),
    ("train.valid_bleu_sentences=0", "needs train.valid_bleu_sentences"),
    ("train.max_time=20 minutes", "not a duration"),
])
def test_settings_that_would_fail_mid_training_are_refused_up_front(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_durations():
    assert parse_duration("20m") == 1200 and parse_duration("1h30m") == 5400 and parse_duration("90") == 90
    assert parse_duration(None) is None


def test_separate_vocabularies_never_share_embeddings_across_languages():
    assert ModelSection().build(100, 100, joint_vocabulary=False).sharing == "tgt_out"  # same size, still apart
    assert ModelSection().build(100, 100, joint_vocabulary=True).sharing == "all"  # the preset's default
    with pytest.raises(ConfigError, match="tokenizer.joint"):
        ModelSection(sharing="all").build(100, 120, joint_vocabulary=False)


@pytest.mark.parametrize("path", sorted((Path(__file__).parents[1] / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_loads_and_builds_a_model_config(path):
    config = load_config(path)
    joint = config.tokenizer.joint
    model = config.model.build(config.tokenizer.vocab_size, config.tokenizer.vocab_size, joint_vocabulary=joint)
    assert model.d_model % model.num_heads == 0
    assert config.data.src_lang != config.data.tgt_lang
