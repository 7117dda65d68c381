"""Several directions in one model: sampling by temperature, target tokens, validation per direction, resume."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from nmt.cli.train import tune_decoding
from nmt.config import ConfigError, PairSpec, load_config
from nmt.data.batching import TokenBatchSampler
from nmt.data.pair_sampling import direction_shares
from nmt.inference.contract import EngineOptions
from nmt.model_dir import read_directions, read_languages, read_metrics
from nmt.server.service import model_routes
from nmt.training.multilingual import capped_rows, direction_files, language_sample, load_multilingual_data
from nmt.training.run import train
from nmt.translator import Translator

from conftest import TINY_TRAINING

SENTENCES = ["A man rides a bike.", "Two dogs play in the snow."]
NMT = [sys.executable, "-m", "nmt"]


def test_temperature_one_keeps_the_data_s_proportions_and_a_high_one_tends_to_equal_shares():
    sizes = [9000, 900, 100]
    np.testing.assert_allclose(direction_shares(sizes, 1.0), [0.9, 0.09, 0.01])
    five = np.array([0.9, 0.09, 0.01]) ** 0.2
    np.testing.assert_allclose(direction_shares(sizes, 5.0), five / five.sum())
    np.testing.assert_allclose(direction_shares(sizes, 1000.0), [1 / 3] * 3, atol=0.01)
    with pytest.raises(ValueError, match="every direction needs pairs"):
        direction_shares([10, 0], 5.0)


def sampler(groups, temperature=5.0, **settings):
    lengths = np.random.default_rng(0).integers(3, 30, len(groups))
    return TokenBatchSampler(
        lengths, lengths, max_tokens=400, seed=7, groups=groups, temperature=temperature, **settings
    )


def test_an_epoch_holds_each_direction_in_its_share_and_repeats_a_small_one_evenly():
    groups = np.repeat([0, 1, 2], [9000, 900, 100])
    shares = direction_shares([9000, 900, 100], 5.0)
    for epoch in (0, 1):
        drawn = np.concatenate(sampler(groups).batches(epoch))
        assert len(drawn) == len(groups)  # an epoch keeps its size
        counts = np.bincount(groups[drawn], minlength=3)
        assert np.abs(counts - shares * len(groups)).max() <= 1
        small = np.bincount(drawn[groups[drawn] == 2], minlength=10_000)[9900:]
        assert small.max() - small.min() <= 1  # every pair of the small direction once before any twice
    proportional = np.concatenate(sampler(groups, temperature=1.0).batches(0))
    assert np.array_equal(np.sort(proportional), np.arange(len(groups)))  # T=1: each pair exactly once


def test_a_rebuilt_sampler_resumes_mid_epoch_with_the_same_draw():
    groups = np.repeat([0, 1], [500, 50])
    uninterrupted = sampler(groups).batches(3)
    resumed = [batch for _, batch in sampler(groups).iter_from(3, 5)]  # a new process, from batch 5 of epoch 3
    assert len(resumed) == len(uninterrupted) - 5
    assert all(np.array_equal(a, b) for a, b in zip(resumed, uninterrupted[5:], strict=True))
    other_epoch = sampler(groups).batches(4)
    assert not all(np.array_equal(a, b) for a, b in zip(other_epoch, uninterrupted, strict=False))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.pairs=[multi30k:de-en, multi30k]"], "data.pairs\\[1\\] must look like corpus:src-tgt"),
        (["data.pairs=[multi30k:de-de]"], "translates de into itself"),
        (["data.pairs=[multi30k:de-en, multi30k:de-en:10]"], "names a direction twice"),
        (["data.pairs=[multi30k:de-en, multi30k:fr-en]", "tokenizer.joint=false"], "needs tokenizer.joint=true"),
        (["data.pairs=[multi30k:de-en, multi30k:fr-en]", "train.best_direction=cs-en"], "must be one of de-en, fr-en"),
        (["data.pairs=[multi30k:de-en]", "data.temperature=0"], "data.temperature"),
    ],
)
def test_a_bad_pairs_config_is_one_error_naming_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_a_pair_entry_names_corpus_languages_and_cap():
    assert PairSpec.parse("multi30k:cs-en:3000") == PairSpec("multi30k", "cs", "en", 3000)
    assert PairSpec.parse("multi30k:de-en").name == "de-en"


@pytest.fixture
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("NMT_DATA_HOME", str(tmp_path / "data_home"))


def test_the_subword_sample_takes_each_language_s_distinct_lines_in_its_share(data_home, caplog):
    pairs = "data.pairs=[multi30k:de-en:300, multi30k:fr-en:300, multi30k:cs-en:60]"
    data = load_config(None, [pairs, "data.temperature=100"]).data
    train = {d.name: direction_files(data, d, "train") for d in data.directions}
    rows = {d.name: capped_rows(train[d.name].count(), d.max_pairs) for d in data.directions}
    with caplog.at_level("INFO", logger="nmt.training.multilingual"):
        lines = language_sample(data, train, rows, budget=400)
    assert len(lines) == len(set(lines))  # de-en and fr-en share their English (one corpus, many languages)
    taken = {m.split()[-2]: (int(m.split()[3]), int(m.split()[5])) for m in caplog.messages if "subword" in m}
    assert taken["cs"] == (60, 60)  # all it has: less than its share
    assert 300 < taken["en"][1] <= 360  # the same 300 captions twice, and cs-en's 60 others
    assert all(95 <= taken[lang][0] <= 105 for lang in ("de", "en", "fr"))  # near-equal shares of 400


def run(model_dir, pairs, steps, *extra, resume=False):
    settings = [*TINY_TRAINING, f"data.pairs=[{', '.join(pairs)}]", f"train.max_steps={steps}", "train.valid_every=2"]
    config = load_config(None, [*settings, *extra])
    return train(config, model_dir, resume=resume, progress_bar=False)


def test_a_one_to_many_model_validates_each_direction_and_writes_the_language_its_token_asks_for(
    tmp_path, data_home, monkeypatch
):
    model_dir = tmp_path / "en-xx"
    run(model_dir, ["multi30k:en-de:300", "multi30k:en-fr:300"], 200, "train.valid_every=100")
    valid = [r for r in read_metrics(model_dir) if r["kind"] == "valid"]
    assert valid and all({"bleu_en-de", "bleu_en-fr", "chrf_en-de", "chrf_en-fr"} <= set(r) for r in valid)
    assert all(r["bleu"] == pytest.approx((r["bleu_en-de"] + r["bleu_en-fr"]) / 2) for r in valid)

    translator = Translator.load(model_dir)
    assert translator.target_languages == ["de", "fr"]
    german = translator.translate(SENTENCES, target_lang="de", beam=1)
    french = translator.translate(SENTENCES, target_lang="fr", beam=1)
    # The token reaches the model: each training source starts with its direction's token, and so
    # does each sentence translated into that language. (Whether a model learns to obey it is a
    # matter of training: docs/results.md; 200 steps of this tiny one do not teach it.)
    config = load_config(model_dir / "config.yaml", complete=True)
    data = load_multilingual_data(config.data, config.tokenizer, model_dir)
    tokenizer = data.src_tokenizer
    token = {lang: tokenizer.encode(f">>{lang}<<", add_special=False)[0] for lang in ("de", "fr")}
    firsts = [data.train.src[i][1] for i in range(len(data.train))]
    assert firsts == [token["de" if g == 0 else "fr"] for g in data.train_groups]
    assert [translator.encode_source(SENTENCES[0], lang)[0][1] for lang in ("de", "fr")] == [token["de"], token["fr"]]
    assert translator.translate([f">>fr<< {s}" for s in SENTENCES], beam=1) == french  # written in the text
    with pytest.raises(ConfigError, match="must be one of de, fr, got 'cs'"):
        translator.translate(SENTENCES, target_lang="cs")

    exported = tmp_path / "ct2"  # the target token is a source piece: CTranslate2 reads it as any other
    assert (
        subprocess.run(
            [*NMT, "export", "--model", str(model_dir), "--to", "ctranslate2", "--out", str(exported)]
        ).returncode
        == 0
    )
    ct2 = Translator.load(exported, EngineOptions(engine="ctranslate2"))
    assert ct2.target_languages == ["de", "fr"]
    assert [ct2.translate(SENTENCES, target_lang=t, beam=1) for t in ("de", "fr")] == [german, french]

    evaluate = [sys.executable, "-m", "nmt", "evaluate", "--model", str(model_dir), "--beam", "1", "--json"]
    scored = subprocess.run([*evaluate, "--test", "multi30k:val:en-fr"], capture_output=True, text=True)
    assert scored.returncode == 0 and "bleu" in json.loads(scored.stdout), scored.stderr  # the target from --test
    refused = subprocess.run([*evaluate, "--test", "multi30k:val:de-fr"], capture_output=True, text=True)
    assert refused.returncode != 0 and "trained for en-de, en-fr, not de-fr (--zero-shot" in refused.stderr

    # the decoding settings chosen after training read every direction's validation set, token first
    seen = {}
    monkeypatch.setattr("nmt.tuning.choose_decoding", lambda out, sources, refs, **_: seen.update(sources=sources))
    with pytest.raises(AttributeError):  # the stand-in returns no choice to report: the sources are what counts
        tune_decoding(model_dir, load_config(model_dir / "config.yaml", ["train.tune_decoding=true"]))
    assert len(seen["sources"]) == 2 * 1014
    assert seen["sources"][0].startswith(">>de<< ") and seen["sources"][-1].startswith(">>fr<< ")

    assert read_directions(model_dir) == [("en", "de"), ("en", "fr")]
    assert read_languages(model_dir) == ("en", None)
    info = {"model": "m", "src_lang": "en", "tgt_lang": None, "target_langs": ["de", "fr"]}
    assert model_routes([{**info, "directions": read_directions(model_dir)}]) == {
        ("en", "de"): (0, "de"),
        ("en", "fr"): (0, "fr"),
    }


def test_a_many_to_one_model_has_no_target_token_and_resumes_mid_epoch_to_the_same_weights(tmp_path, data_home):
    pairs = ["multi30k:de-en:300", "multi30k:fr-en:200"]
    whole, halves = tmp_path / "whole", tmp_path / "halves"
    run(whole, pairs, 6, "train.valid_bleu_sentences=0", "train.best_metric=loss")
    run(halves, pairs, 4, "train.valid_bleu_sentences=0", "train.best_metric=loss")
    run(halves, pairs, 6, "train.valid_bleu_sentences=0", "train.best_metric=loss", resume=True)
    name = "checkpoints/step_00000006.safetensors"
    a, b = load_file(str(whole / name)), load_file(str(halves / name))
    assert all(torch.equal(a[k], b[k]) for k in a)
    translator = Translator.load(whole)
    assert translator.target_languages == [] and translator.translate(SENTENCES, beam=1)
    assert read_languages(whole) == (None, "en") and read_directions(whole) == [("de", "en"), ("fr", "en")]
