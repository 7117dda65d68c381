import dataclasses
from pathlib import Path

import pytest

from nmt.config import ConfigError, ExperimentConfig, ModelSection, TrainConfig, load_config, parse_duration
from nmt.tokenizer import BOS_ID, EOS_ID, PAD_ID


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
    with pytest.raises(ConfigError, match=r"override 'train.adam_betas=\[0.9': the value is not valid YAML"):
        load_config(None, ["train.adam_betas=[0.9"])


# Each bad value is refused while the config is loaded, before any data is prepared, with one
# line that names the key. Most of these used to train (clip_norm=-1: gradient ascent) or to fail
# only mid-run (warmup=0: ZeroDivisionError at step 1).
BAD_VALUES = [
    # train: counts, rates and ranges
    ("train.max_steps=-5", "train.max_steps must be >= 1 or null, got -5"),
    ("train.max_steps=0", "train.max_steps must be >= 1 or null"),
    ("train.max_epochs=0", "train.max_epochs must be >= 1 or null"),
    ("train.max_time=0", "train.max_time must be more than 0 seconds"),
    ("train.max_time=-5", "train.max_time must be more than 0 seconds"),
    ("train.max_time=20 minutes", "not a duration"),
    ("train.max_time=true", "train.max_time must be str or float or null, got True"),
    ("train.seed=-1", "train.seed must be in"),
    ("train.batch_tokens=0", "train.batch_tokens must be >= 1, got 0"),
    ("train.accumulate=0", "train.accumulate must be >= 1, got 0"),
    ("train.threads=0", "train.threads must be >= 1 or null"),
    ("train.device=gpu", "train.device must be auto, cpu, cuda or cuda:N, got 'gpu'"),
    ("train.device=cuda:x", "train.device must be"),
    ("train.compile=1", "train.compile must be bool, got 1"),
    ("train.fsdp=yes please", "train.fsdp must be bool"),
    ("train.schedule=cosine", "train.schedule must be one of noam | inverse_sqrt, got 'cosine'"),
    ("train.lr_scale=-1", "train.lr_scale must be > 0, got -1"),
    ("train.lr_scale=0", "train.lr_scale must be > 0"),
    ("train.peak_lr=0", "train.peak_lr must be > 0"),
    ("train.warmup=0", "train.warmup must be >= 1, got 0"),
    ("train.warmup=-10", "train.warmup must be >= 1"),
    ("train.warmup=null", "train.warmup may not be null"),
    ("train.adam_betas=[0.9]", r"train.adam_betas must be two numbers in \[0, 1\), got \[0.9\]"),
    ("train.adam_betas=[0.9, 0.98, 0.99]", "train.adam_betas must be two numbers"),
    ("train.adam_betas=[0.9, 1.0]", "train.adam_betas must be two numbers in"),
    ("train.adam_betas=[a, b]", r"train.adam_betas\[0\] must be float, got 'a'"),
    ("train.adam_betas=0.9", "train.adam_betas must be list"),
    ("train.adam_eps=0", "train.adam_eps must be > 0"),
    ("train.weight_decay=-0.1", "train.weight_decay must be >= 0"),
    ("train.label_smoothing=1.5", r"train.label_smoothing must be in \[0, 1\), got 1.5"),
    ("train.label_smoothing=1", r"train.label_smoothing must be in \[0, 1\)"),
    ("train.label_smoothing=-0.1", "train.label_smoothing must be in"),
    ("train.clip_norm=-1", "train.clip_norm must be > 0 or null, got -1"),
    ("train.clip_norm=0", "train.clip_norm must be > 0 or null"),
    ("train.clip_norm=.nan", "train.clip_norm must be a finite number"),
    ("train.log_every=0", "train.log_every must be >= 1"),
    ("train.valid_every=0", "train.valid_every must be >= 1, got 0"),
    ("train.valid_bleu_sentences=-1", "train.valid_bleu_sentences must be >= 0"),
    ("train.valid_bleu_sentences=0", "needs train.valid_bleu_sentences"),  # with best_metric=bleu
    ("train.best_metric=chrf", "train.best_metric must be one of bleu | loss"),
    ("train.keep_last=0", "train.keep_last must be >= 1"),
    ("train.patience=0", "train.patience must be >= 1 or null"),
    ("train.max_bad_steps=0", "train.max_bad_steps must be >= 1"),
    ("train.max_steps=true", "train.max_steps must be int or null, got True"),  # a bool is no count
    ("train.max_steps=2.5", "train.max_steps must be int or null"),
    # decode
    ("decode.beam=0", "decode.beam must be between 1 and 256, got 0"),
    ("decode.length_penalty=-1", "decode.length_penalty must be >= 0"),
    ("decode.max_len_a=-1", "decode.max_len_a must be >= 0, got -1"),
    ("decode.max_len_b=-1", "decode.max_len_b must be >= 0"),
    ("decode.batch_tokens=0", "decode.batch_tokens must be >= 1"),
    ("decode.beam='5'", "decode.beam must be int, got '5'"),
    # data
    ("data.max_src_len=2", "data.max_src_len must be >= 3, got 2"),  # [START] + [END] + one token
    ("data.max_tgt_len=0", "data.max_tgt_len must be >= 3"),
    ("data.max_ratio=0.5", "data.max_ratio must be >= 1 or null"),
    ("data.src_lang=''", "data.src_lang must be a non-empty string"),
    ("data.tgt_lang=null", "data.tgt_lang may not be null"),
    ("data.corpus=null", "data.corpus is null: set data.train_src"),
    ("data.train_tgt=t.txt", "data.train_tgt needs data.train_src"),
    # tokenizer
    ("tokenizer.kind=char", "tokenizer.kind must be one of bpe | unigram | wordpiece, got 'char'"),
    ("tokenizer.vocab_size=100", "tokenizer.vocab_size 100 is too small"),
    ("tokenizer.vocab_size=true", "tokenizer.vocab_size must be int, got True"),
    ("tokenizer.min_frequency=0", "tokenizer.min_frequency must be >= 1"),
    ("tokenizer.joint=1", "tokenizer.joint must be bool, got 1"),
    ("tokenizer.lowercase=no thanks", "tokenizer.lowercase must be bool or null"),
    # model: the preset's name, and the ModelConfig rules applied to preset + overrides
    ("model.preset=huge", "model.preset must be one of reference | small | base | big, got 'huge'"),
    ("model.activation=tanh", "model.activation must be one of relu | gelu, got 'tanh'"),
    ("model.norm_position=middle", "model.norm_position must be one of post | pre"),
    ("model.sharing=some", "model.sharing must be one of none | tgt_out | all"),
    ("model.d_model=255", r"model.d_model \(255\) must be divisible by num_heads \(4\)"),
    ("model.num_heads=3", "must be divisible by num_heads"),
    ("model.d_model=0", "model.d_model must be >= 1"),
    ("model.encoder_layers=-1", "model.encoder_layers must be >= 1"),
    ("model.d_ff=[1024]", "model.d_ff must be int or null"),
    ("model.dropout=1.0", r"model.dropout must be in \[0, 1\)"),
    ("model.attention_dropout=-0.1", "model.attention_dropout must be in"),
    ("model.positional_base=0", "model.positional_base must be > 0"),
]


@pytest.mark.parametrize("override, message", BAD_VALUES, ids=[o for o, _ in BAD_VALUES])
def test_bad_values_are_refused_naming_the_key(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["decode.max_len_a=0", "decode.max_len_b=0"], "decode.max_len_a and decode.max_len_b are both 0"),
        (["model.sharing=all", "tokenizer.joint=false"], "model.sharing=all .* needs tokenizer.joint=true"),
        (["train.best_metric=bleu", "train.valid_bleu_sentences=0"], "best_metric=bleu needs"),
    ],
)
def test_bad_combinations_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


@pytest.mark.parametrize(
    "override, key, expected",
    [
        ("train.max_time=90", "max_time", 90.0),  # plain seconds, as documented (YAML reads an int)
        ("train.max_time=90.5", "max_time", 90.5),
        ("train.max_time=1h30m", "max_time", "1h30m"),
        ("train.max_time='90'", "max_time", "90"),
        ("train.clip_norm=null", "clip_norm", None),
        ("train.clip_norm=5", "clip_norm", 5.0),  # an int where a float is wanted
        ("train.label_smoothing=0", "label_smoothing", 0.0),
        ("train.weight_decay=0", "weight_decay", 0.0),
        ("train.adam_betas=[0, 0.999]", "adam_betas", [0.0, 0.999]),
        ("train.device=cuda:1", "device", "cuda:1"),
        ("train.seed=0", "seed", 0),
        ("train.max_steps=1", "max_steps", 1),
        ("train.valid_bleu_sentences=0", "valid_bleu_sentences", 0),  # fine with best_metric=loss below
    ],
)
def test_good_edge_values_are_accepted(override, key, expected):
    config = load_config(None, ["train.best_metric=loss", override])
    assert getattr(config.train, key) == expected


def test_other_good_edge_values_are_accepted():
    config = load_config(
        None,
        [
            "model.dropout=0",
            "model.attention_dropout=0",
            "decode.length_penalty=0",
            "decode.max_len_a=0",
            "decode.beam=1",
            "data.max_src_len=3",
            "data.max_ratio=1",
            "data.max_ratio=null",
            "tokenizer.lowercase=null",
            "model.sharing=all",
        ],
    )
    assert config.model.dropout == 0.0 and config.decode.max_len_a == 0.0 and config.data.max_ratio is None
    paths = ["data.corpus=null", "data.train_src=a.tsv", "data.valid_src=b.de", "data.valid_tgt=b.en"]
    assert load_config(None, paths).data.train_tgt is None  # a TSV holds both sides


def test_a_run_s_files_and_pair_directories_are_kept_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pairs = "data.pairs=[corpora/:gl-en:300, multi30k:de-en, /own/:fr-en]"
    data = load_config(None, ["data.train_src=a.tsv", "data.valid_src=/x/b.de", "data.valid_tgt=b.en", pairs]).data
    absolute = data.with_absolute_paths()
    assert (absolute.train_src, absolute.valid_src, absolute.valid_tgt) == (
        str(tmp_path / "a.tsv"),
        "/x/b.de",
        str(tmp_path / "b.en"),
    )
    assert absolute.pairs == [f"{tmp_path}/corpora/:gl-en:300", "multi30k:de-en", "/own/:fr-en"]
    assert [d.max_pairs for d in absolute.directions] == [300, None, None]  # entries that parse as before
    assert absolute.with_absolute_paths() == absolute and data.train_src == "a.tsv"  # a copy


def test_sections_built_in_code_follow_the_same_rules():
    with pytest.raises(ConfigError, match="train.clip_norm must be > 0 or null, got -1"):
        TrainConfig(clip_norm=-1)
    assert TrainConfig(warmup=1, lr_scale=2).lr_scale == 2.0


def test_errors_from_a_file_name_the_file(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("train:\n  clip_norm: -1\n")
    with pytest.raises(ConfigError, match=r"x.yaml: train.clip_norm must be > 0 or null, got -1$"):
        load_config(path)
    path.write_text("train:\n  clip_norm: 1\n")
    with pytest.raises(ConfigError, match=r"x.yaml: decode.beam must be between 1 and 256, got 0"):
        load_config(path, ["decode.beam=0"])


def test_bad_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("train:\n  max_steps: [1,\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:\d+: not valid YAML"):
        load_config(path)
    path.write_text("train:\n  max_steps: 1\n  max_steps: 2\n")  # plain YAML would keep the last, silently
    with pytest.raises(ConfigError, match=r"bad.yaml:3: not valid YAML: key 'max_steps' is given twice"):
        load_config(path)
    path.write_text("train:\n  max_steps: 1\x07\n")  # a control character: YAML's reader refuses it
    with pytest.raises(ConfigError, match=r"bad.yaml:2: not valid YAML"):
        load_config(path)
    path.write_text("- train\n- decode\n")
    with pytest.raises(ConfigError, match="bad.yaml: a config file must be a mapping of sections, got list"):
        load_config(path)


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("data:\n  src_lang: de\n  corpus: m\xfcller\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1.yaml:3: not valid UTF-8"):
        load_config(path)


def test_unreadable_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config .*missing.yaml"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path)  # a directory


def test_a_bare_section_takes_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n")
    assert load_config(path, ["train.max_steps=3"]).train.max_steps == 3


def test_saved_config_round_trips_and_a_cut_one_is_refused(tmp_path):
    path = tmp_path / "config.yaml"
    saved = load_config(None, ["train.max_time=1h", "train.clip_norm=null", "model.d_model=128"])
    saved.save(path)
    assert load_config(path, complete=True) == saved
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically: no temporary file left behind
    lines = path.read_text().splitlines(keepends=True)
    end = len(lines) * 2 // 3
    while lines[end].lstrip().startswith("- "):  # not inside a list: its key would read as null
        end += 1
    cut = lines[:end]  # a crash mid-write, or a copy cut short
    path.write_text("".join(cut))
    with pytest.raises(ConfigError, match=r"config.yaml is incomplete \(missing train\.\w+.*\): was it cut short"):
        load_config(path, complete=True)
    assert load_config(path).train.seed == saved.train.seed  # a user's partial config is fine
    path.write_text("".join(lines[:-1]))  # only the last key gone
    with pytest.raises(ConfigError, match=r"incomplete \(missing decode.batch_tokens\)"):
        load_config(path, complete=True)


def test_a_run_config_saved_by_an_earlier_nmt_still_loads():
    # A model directory's config.yaml from before train.keep_best (a 20-minute run's, as saved).
    # A field added since must be listed in ADDED_SINCE_SAVED, or every existing model directory
    # would be refused as "cut short" by translate, evaluate and --resume.
    old = Path(__file__).parent / "data" / "run_config_before_keep_best.yaml"
    config = load_config(old, complete=True)
    assert config.train.keep_best == 0 and config.train.keep_last == 3  # the default; the file's own value


def test_durations():
    assert parse_duration("20m") == 1200 and parse_duration("1h30m") == 5400 and parse_duration("90") == 90
    assert parse_duration(90) == 90.0 and parse_duration(None) is None


def test_separate_vocabularies_never_share_embeddings_across_languages():
    assert ModelSection().build(100, 100, joint_vocabulary=False).sharing == "tgt_out"  # same size, still apart
    assert ModelSection().build(100, 100, joint_vocabulary=True).sharing == "all"  # the preset's default
    built = ModelSection().build(100, 100, joint_vocabulary=True)
    assert (built.pad_id, built.bos_id, built.eos_id) == (PAD_ID, BOS_ID, EOS_ID)  # the tokenizer's, saved with it
    with pytest.raises(ConfigError, match="tokenizer.joint"):
        ModelSection(sharing="all").build(100, 120, joint_vocabulary=False)


def test_defaults_are_valid():
    assert ExperimentConfig() == load_config(None)


@pytest.mark.parametrize("path", sorted((Path(__file__).parents[1] / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_loads_and_builds_a_model_config(path):
    config = load_config(path)
    joint = config.tokenizer.joint
    model = config.model.build(config.tokenizer.vocab_size, config.tokenizer.vocab_size, joint_vocabulary=joint)
    assert model.d_model % model.num_heads == 0
    assert config.data.src_lang != config.data.tgt_lang


def test_model_section_overrides_every_model_config_field():
    """One source of truth: each ModelConfig field the vocabulary does not fix is a config override."""
    from nmt.model.config import ModelConfig

    from_vocabulary = {"src_vocab_size", "tgt_vocab_size", "pad_id", "bos_id", "eos_id"}
    from_training = {"alignment_layer", "alignment_heads", "alignment_shift"}  # train.guided_alignment sets them
    model_fields = {f.name for f in dataclasses.fields(ModelConfig)} - from_vocabulary - from_training
    assert {f.name for f in dataclasses.fields(ModelSection)} - {"preset"} == model_fields


def test_saved_config_without_a_key_added_since_still_loads(tmp_path):
    path = tmp_path / "config.yaml"
    ExperimentConfig().save(path)
    path.write_text(path.read_text().replace("  layer_norm_eps: null\n", ""))  # saved before the key existed
    assert load_config(path, complete=True).model.layer_norm_eps is None


def test_exponent_without_a_dot_is_a_number_in_files_and_overrides(tmp_path):
    # PyYAML (YAML 1.1) reads 1e-5 as a string; users and every other YAML reader mean a number.
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  peak_lr: 5e-4\n  schedule: inverse_sqrt\n")
    config = load_config(path, ["model.layer_norm_eps=1e-5", "train.adam_eps=1E-8"])
    assert (config.train.peak_lr, config.model.layer_norm_eps, config.train.adam_eps) == (5e-4, 1e-5, 1e-8)
