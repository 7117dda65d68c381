"""Several directions in one model: sampling by temperature, target tokens, validation per direction, resume."""

import argparse
import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from safetensors.torch import load_file

from nmt.cli.common import CommandError
from nmt.cli.main import main as cli_main
from nmt.cli.train import tune_decoding
from nmt.cli.translate import check_test_direction, target_of_test_set
from nmt.config import ConfigError, PairSpec, load_config
from nmt.data.batching import TokenBatchSampler
from nmt.data.pair_sampling import direction_shares
from nmt.inference.contract import EngineOptions
from nmt.model_dir import read_directions, read_languages, read_metrics
from nmt.server import ServerLimits, create_app, model_info
from nmt.server.service import model_routes
from nmt.training.multilingual import (
    capped_rows,
    direction_files,
    kept_rows,
    language_sample,
    load_multilingual_data,
)
from nmt.training.run import train
from nmt.translator import Translator

from conftest import TINY_TRAINING, read_head

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
        (
            ["data.pairs=[multi30k:de-en, multi30k:fr-en]", "tokenizer.src_vocab_size=500"],
            "needs tokenizer.joint=false",
        ),
        (["data.pairs=[multi30k:de-en, multi30k:fr-en]", "train.best_direction=cs-en"], "must be one of de-en, fr-en"),
        (
            ["data.pairs=[multi30k:de-en, multi30k:fr-en]", "train.best_direction=de-en", "train.best_metric=loss"],
            "train.best_direction picks by a direction's BLEU: it needs train.best_metric=bleu",
        ),
        (["data.pairs=[multi30k:de-en]", "data.temperature=0"], "data.temperature"),
    ],
)
def test_a_bad_pairs_config_is_one_error_naming_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_a_pair_entry_names_corpus_languages_and_cap():
    assert PairSpec.parse("multi30k:cs-en:3000") == PairSpec("multi30k", "cs", "en", 3000)
    assert PairSpec.parse("multi30k:de-en").name == "de-en"
    own = PairSpec.parse("../my data/gl-en/:gl-en:500")
    assert own == PairSpec("../my data/gl-en/", "gl", "en", 500) and own.is_directory
    assert not PairSpec.parse("multi30k:de-en").is_directory
    with pytest.raises(ConfigError, match="a registered name or a directory with a /"):
        PairSpec.parse("my data:gl-en")


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


def test_each_direction_is_aligned_apart_and_the_target_token_is_never_linked(tmp_path, data_home):
    model_dir = tmp_path / "en-xx"
    run(model_dir, ["multi30k:en-de:200", "multi30k:en-fr:200"], 2)
    assert json.loads((model_dir / "model.json").read_text())["alignment_heads"] == 1  # guided alignment: auto
    config = load_config(model_dir / "config.yaml", complete=True)
    data = load_multilingual_data(config.data, config.tokenizer, model_dir, aligned=True)
    assert len(data.train_links) == len(data.train) > 390  # 400, less what the length filter drops
    linked = 0
    for k in range(len(data.train)):
        pairs = np.asarray(data.train_links[k]).reshape(-1, 2)
        linked += len(pairs)
        assert (pairs[:, 0] >= 2).all()  # position 0 is BOS, 1 the >>xx<< token: no word
        assert (pairs[:, 0] < len(data.train.src[k]) - 1).all() and (pairs[:, 1] < len(data.train.tgt[k]) - 1).all()
    assert linked > 400 * 5


def test_a_one_to_many_model_validates_each_direction_and_writes_the_language_its_token_asks_for(
    tmp_path, data_home, monkeypatch, capsys
):
    model_dir = tmp_path / "en-xx"
    # 20 steps' model seldom ends a sentence: 5 pieces each keep `nmt evaluate` on the 1,014
    # sentences of multi30k's val to seconds (every check below compares like with like)
    capped = ("decode.max_len_a=0", "decode.max_len_b=5")
    run(model_dir, ["multi30k:en-de:300", "multi30k:en-fr:300"], 20, "train.valid_every=10", *capped)
    valid = [r for r in read_metrics(model_dir) if r["kind"] == "valid"]
    assert valid and all({"bleu_en-de", "bleu_en-fr", "chrf_en-de", "chrf_en-fr"} <= set(r) for r in valid)
    assert all(r["bleu"] == pytest.approx((r["bleu_en-de"] + r["bleu_en-fr"]) / 2) for r in valid)

    translator = Translator.load(model_dir)
    assert translator.target_languages == ["de", "fr"]
    german = translator.translate(SENTENCES, target_lang="de", beam=1)
    french = translator.translate(SENTENCES, target_lang="fr", beam=1)
    # The token reaches the model: each training source starts with its direction's token, and so
    # does each sentence translated into that language. (Whether a model learns to obey it is a
    # matter of training: the test below teaches one; 200 steps of this tiny one do not.)
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
    capsys.readouterr()
    assert cli_main([*evaluate[3:], "--test", "multi30k:val:de-fr"]) != 0
    assert "trained for en-de, en-fr, not de-fr (--zero-shot" in capsys.readouterr().err

    # the decoding settings chosen after training read every direction's validation set, token first
    seen = {}
    monkeypatch.setattr("nmt.tuning.choose_decoding", lambda out, sources, refs, **_: seen.update(sources=sources))
    with pytest.raises(AttributeError):  # the stand-in returns no choice to report: the sources are what counts
        tune = ["train.tune_decoding=true", "train.tune_min_bleu=0"]  # whatever this tiny model scored
        tune_decoding(model_dir, load_config(model_dir / "config.yaml", tune))
    assert len(seen["sources"]) == 2 * 1014
    assert seen["sources"][0].startswith(">>de<< ") and seen["sources"][-1].startswith(">>fr<< ")

    assert read_directions(model_dir) == [("en", "de"), ("en", "fr")]
    assert read_languages(model_dir) == ("en", None)
    with pytest.raises(ConfigError, match="'de' was not trained: this model translates en-de, en-fr"):
        translator.choose_source_language("de")
    # a mixed model's source and target are each known, but not every pairing of them was trained
    mixed = Translator(
        translator.engine, translator.src_tokenizer, translator.tgt_tokenizer, directions=[("en", "de"), ("de", "fr")]
    )
    mixed.choose_target_language("fr")
    with pytest.raises(ConfigError, match=r"en-fr is not a direction this model was trained for \(en-de, de-fr\)"):
        mixed.choose_source_language("en")
    mixed.choose_source_language("de")
    with pytest.raises(ConfigError, match="de-de is not a direction"):
        mixed.translate(SENTENCES, target_lang="de")
    assert mixed.translate(SENTENCES, beam=1) == french
    # a >>xx<< token in the text is the target, unless the call asks for another
    with pytest.raises(ConfigError, match="target_lang is 'de', but the text asks for >>fr<<"):
        translator.translate([f">>fr<< {SENTENCES[0]}"], target_lang="de")
    with pytest.raises(ConfigError, match="must be one of de, fr, got 'cs'"):
        translator.check_languages([f">>cs<< {SENTENCES[0]}"])

    # both servers refuse before the queue what the worker would refuse (there, a 500)
    app = create_app(translator, ServerLimits(), info=model_info(model_dir, translator))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        own = client.post("/translate", json={"text": [SENTENCES[0]], "target_lang": "fr", "source_lang": "de"})
        assert own.status_code == 422 and "'de' was not trained: this model translates en-de, en-fr" in own.text
        own = client.post("/translate", json={"text": [f">>cs<< {SENTENCES[0]}"]})
        assert own.status_code == 422 and "must be one of de, fr, got 'cs'" in own.text
        ok = client.post(
            "/translate", json={"text": [SENTENCES[0]], "target_lang": "fr", "source_lang": "en", "beam": 1}
        )
        assert ok.status_code == 200 and ok.json()["translations"][0]["text"] == french[0]
        for field in ("q", "format"):
            ask = {"q": f">>fr<< {SENTENCES[0]}", "source": "en", "target": "de"}
            if field == "format":
                ask["format"] = "html"
            libre = client.post("/translate", json=ask)
            assert libre.status_code == 400 and "the text asks for >>fr<<" in libre.json()["error"], libre.text
        cue = "1\n00:00:01,000 --> 00:00:02,000\n"
        for name, text in (("a.txt", ""), ("a.srt", cue)):  # a plain text file, and a document (nmt.formats)
            upload = {"file": (name, f"{text}>>fr<< {SENTENCES[0]}\n".encode(), "text/plain")}
            libre = client.post("/translate_file", data={"source": "en", "target": "de"}, files=upload)
            assert libre.status_code == 400 and "the text asks for >>fr<<" in libre.json()["error"], libre.text

    # the tuning commands take the target from --test too, and refuse a --target-lang that is not its
    args = argparse.Namespace(test="multi30k:val:en-fr", target_lang=None, model=str(model_dir), zero_shot=False)
    assert target_of_test_set(args, ["de", "fr"]) == "fr"
    zero_shot = argparse.Namespace(**{**vars(args), "zero_shot": True})
    assert (
        target_of_test_set(argparse.Namespace(**{**vars(zero_shot), "test": "multi30k:val:de-fr"}), ["de", "fr"])
        == "fr"
    )
    with pytest.raises(CommandError, match="writes de, fr \\(en-de, en-fr\\), not en"):  # it would score German
        check_test_direction(zero_shot, "fr", "en")
    with pytest.raises(CommandError, match="trained for en-de, en-fr, not de-fr \\(--zero-shot to try it anyway\\)"):
        check_test_direction(args, "de", "fr")
    assert target_of_test_set(argparse.Namespace(**{**vars(args), "target_lang": "fra"}), ["deu", "fra"]) == "fra"
    imported = Translator(translator.engine, translator.src_tokenizer, translator.tgt_tokenizer, source_lang="mul")
    imported.choose_source_language("de")  # a group's code ("mul", "roa") checks nothing
    imported = Translator(translator.engine, translator.src_tokenizer, translator.tgt_tokenizer, source_lang="en")
    with pytest.raises(ConfigError, match="'de' was not trained: this model translates from en"):
        imported.choose_source_language("de")
    with pytest.raises(CommandError, match="--target-lang de is not the language of multi30k:val:en-fr's references"):
        target_of_test_set(argparse.Namespace(**{**vars(args), "target_lang": "de"}), ["de", "fr"])
    for command in ("tune-length-penalty", "tune-precision", "evaluate"):
        wrong_target = ["--test", "multi30k:val:en-fr", "--target-lang", "de"]
        assert cli_main([command, "--model", str(model_dir), *wrong_target]) != 0
        assert "--target-lang de is not the language of" in capsys.readouterr().err, command
    info = {"model": "m", "src_lang": "en", "tgt_lang": None, "target_langs": ["de", "fr"]}
    assert model_routes([{**info, "directions": read_directions(model_dir)}]) == {
        ("en", "de"): (0, "de"),
        ("en", "fr"): (0, "fr"),
    }


def test_a_many_to_one_model_has_no_target_token_and_resumes_mid_epoch_to_the_same_weights(
    tmp_path, data_home, monkeypatch, capsys
):
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
    # a client may name the one language it writes (as a LibreTranslate client names its target)
    assert translator.translate(SENTENCES, target_lang="en", beam=1) == translator.translate(SENTENCES, beam=1)
    with pytest.raises(ConfigError, match="'de' cannot be chosen: this model translates only into en"):
        translator.translate(SENTENCES, target_lang="de")
    assert read_languages(whole) == (None, "en") and read_directions(whole) == [("de", "en"), ("fr", "en")]
    capsys.readouterr()
    assert cli_main(["info", str(whole), "--device", "cpu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["languages"] == "de, fr -> en"  # each source, not "?"

    # --source-lang: German text is split as German ("3. Mai" is a date, not a sentence end; as
    # English it would be), and a source the model never read is refused, naming those it did
    read = []
    translate_detailed = Translator.translate_detailed
    monkeypatch.setattr(
        Translator,
        "translate_detailed",
        lambda self, texts, *a, **k: read.append(list(texts)) or translate_detailed(self, texts, *a, **k),
    )
    text, out = tmp_path / "de.txt", tmp_path / "en.txt"
    text.write_text("Er kam am 3. Mai an. Dann ging er.\n", encoding="utf-8")
    command = ["translate", "--model", str(whole), "--input", str(text), "--output", str(out), "--format", "text"]
    assert cli_main([*command, "--source-lang", "de", "--beam", "1"]) == 0
    assert cli_main([*command, "--beam", "1"]) == 0  # no language known: split as English
    assert [len(r) for r in read] == [2, 3] and read[0][0] == "Er kam am 3. Mai an."
    assert cli_main([*command, "--source-lang", "cs"]) != 0
    assert "--source-lang 'cs' was not trained: this model translates de-en, fr-en" in capsys.readouterr().err
    evaluate = ["evaluate", "--model", str(whole), "--src", str(text), "--ref", str(text), "--source-lang", "cs"]
    assert cli_main(evaluate) != 0  # the same check for a test set of one's own files
    assert "--source-lang 'cs' was not trained: this model translates de-en, fr-en" in capsys.readouterr().err


@pytest.mark.parametrize("best_direction, best_step", [(None, 2), ("fr-en", 4)])
def test_the_best_checkpoint_is_the_directions_mean_or_the_named_direction_s_and_the_log_says_which(
    tmp_path, data_home, monkeypatch, caplog, best_direction, best_step
):
    # validations 1, 2, 3 (steps 2, 4, 6: run() validates every 2) -> (de-en, fr-en) BLEU: the mean
    # is best at the first, fr-en's at the second
    scores = iter([(40.0, 30.0), (10.0, 50.0), (20.0, 20.0)])

    def scripted(model, data, **_):
        de, fr = next(scores)
        return {"loss": 1.0, "bleu_de-en": de, "bleu_fr-en": fr, "bleu": (de + fr) / 2}

    monkeypatch.setattr("nmt.training.trainer.validate", scripted)
    model_dir = tmp_path / "model"
    named = [] if best_direction is None else [f"train.best_direction={best_direction}"]
    with caplog.at_level("INFO", logger="nmt.training.trainer"):
        run(model_dir, ["multi30k:de-en:200", "multi30k:fr-en:200"], 6, "train.keep_last=3", *named)
    steps = {step: load_file(str(model_dir / f"checkpoints/step_{step:08d}.safetensors")) for step in (2, 4, 6)}
    best = load_file(str(model_dir / "model.safetensors"))
    assert [all(torch.equal(best[k], steps[step][k]) for k in best) for step in (2, 4, 6)] == [
        step == best_step for step in (2, 4, 6)
    ]
    marked = [m for m in caplog.messages if "(best by" in m]
    assert [m.split()[1] for m in marked] == ["2"] + (["4"] if best_direction else [])
    chose = "bleu, the mean of 2 directions" if best_direction is None else "bleu_fr-en"
    assert marked[0].endswith(f"(best by {chose})")


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def test_directions_come_from_one_s_own_files_in_either_naming_and_a_missing_one_is_named(
    tmp_path, data_home, multi30k_dir
):
    raw, corpora = multi30k_dir / "data/task1/raw", tmp_path / "corpora"
    corpora.mkdir()
    for lang in ("de", "en"):  # fairseq's naming: the direction in each name
        write_lines(corpora / f"train.de-en.{lang}", read_head(raw / f"train.{lang}.gz", 200))
        write_lines(corpora / f"valid.de-en.{lang}", read_head(raw / f"val.{lang}.gz", 30))
    for lang in ("fr", "en"):  # the plain naming, with dev for validation
        write_lines(corpora / f"train.{lang}", read_head(raw / f"train.{lang}.gz", 300)[200:])
        write_lines(corpora / f"dev.{lang}", read_head(raw / f"val.{lang}.gz", 50)[30:])
    pairs = f"data.pairs=[{corpora}/:de-en, {corpora}/:fr-en:40]"
    config = load_config(None, [*TINY_TRAINING, pairs])
    (tmp_path / "model").mkdir()
    data = load_multilingual_data(config.data, config.tokenizer, tmp_path / "model")
    assert [v.direction for v in data.valid_sets] == ["de-en", "fr-en"]
    assert data.valid_sets[0].references == read_head(raw / "val.en.gz", 30)
    assert data.valid_sets[1].references == read_head(raw / "val.en.gz", 50)[30:]
    de_en, fr_en = np.bincount(data.train_groups)
    assert 190 <= de_en <= 200 and 35 <= fr_en <= 40  # the cap, less what the length filters drop

    (corpora / "dev.fr").unlink()
    with pytest.raises(FileNotFoundError) as refused:
        load_multilingual_data(config.data, config.tokenizer, tmp_path / "model")
    assert str(refused.value) == (
        f"data.pairs: {corpora}/:fr-en: no valid files in {corpora}; looked for valid.fr-en.fr + "
        "valid.fr-en.en, valid.fr + valid.en, dev.fr-en.fr + dev.fr-en.en, dev.fr + dev.en (each also .gz)"
    )


def test_bpe_dropout_with_several_directions_resegments_the_same_pairs_and_keeps_each_token(tmp_path, data_home):
    settings = [*TINY_TRAINING, "data.pairs=[multi30k:en-de:200, multi30k:en-fr:100]", "data.bpe_dropout=0.4"]
    config = load_config(None, settings)
    data = load_multilingual_data(config.data, config.tokenizer, tmp_path)
    tokenizer, plain = data.src_tokenizer, data.train
    first, second = data.train_for_epoch(), data.train_for_epoch()
    assert len(first) == len(second) == len(plain)

    def text(corpus, side):
        return [tokenizer.decode(getattr(corpus, side)[i]) for i in range(len(corpus))]

    assert text(first, "tgt") == text(plain, "tgt") and text(first, "src") == text(plain, "src")  # same pairs
    assert [int(first.src[i][1]) for i in range(len(first))] == [int(plain.src[i][1]) for i in range(len(plain))]
    assert {tokenizer.lookup([int(plain.src[i][1])])[0] for i in range(len(plain))} == {">>de<<", ">>fr<<"}
    changed = [i for i in range(len(plain)) if len(first.src[i]) != len(plain.src[i])]
    assert len(changed) > len(plain) // 2  # most sources cut into more pieces
    assert any(len(first.src[i]) != len(second.src[i]) for i in range(len(first)))  # anew each epoch


def test_separate_vocabularies_give_the_output_layer_only_the_target_side_s_languages(tmp_path, data_home):
    # many-to-one: the source tokenizer reads German and French, the target one English alone
    separate = ["tokenizer.joint=false", "tokenizer.src_vocab_size=600"]
    separate += ["train.valid_bleu_sentences=0", "train.best_metric=loss"]
    pairs = ["multi30k:de-en:300", "multi30k:fr-en:300"]
    run(tmp_path / "xx-en", pairs, 4, *separate)
    translator = Translator.load(tmp_path / "xx-en")
    src, tgt = translator.src_tokenizer, translator.tgt_tokenizer
    assert src is not tgt and 500 < src.vocab_size <= 600 and tgt.vocab_size <= 400
    german = "Ein Mann mit einem orangefarbenen Hut"
    assert len(src.encode(german)) < len(tgt.encode(german))  # German is whole words on one side only
    weights = load_file(str(tmp_path / "xx-en" / "model.safetensors"))
    assert {tuple(w.shape) for name, w in weights.items() if "src_embed" in name} == {(src.vocab_size, 32)}
    assert len(translator.translate(SENTENCES, beam=1)) == 2

    config = load_config(None, [*TINY_TRAINING, f"data.pairs=[{', '.join(pairs)}]", *separate])
    train_files = {d.name: direction_files(config.data, d, "train") for d in config.data.directions}
    rows = {d.name: capped_rows(train_files[d.name].count(), d.max_pairs) for d in config.data.directions}
    english = language_sample(config.data, train_files, rows, budget=1000, sides=("tgt",))
    kept = {t for name, files in train_files.items() for i, (_, t) in enumerate(files.pairs()) if i in rows[name]}
    assert len(english) == len(set(english)) and set(english) == kept  # the kept captions, each once, no German
    assert language_sample(config.data, train_files, rows, budget=None, sides=("tgt",)) == english  # no cap

    # one-to-many: the target tokens are source pieces only, and steer as in a joint model
    run(tmp_path / "en-xx", ["multi30k:en-de:300", "multi30k:en-fr:300"], 4, *separate)
    translator = Translator.load(tmp_path / "en-xx")
    assert translator.target_languages == ["de", "fr"] and translator.tgt_tokenizer.target_languages == []
    assert (
        translator.encode_source(SENTENCES[0], "fr")[0][1]
        == translator.src_tokenizer.encode(">>fr<<", add_special=False)[0]
    )
    # resuming loads the two files as they were trained
    run(
        tmp_path / "en-xx",
        ["multi30k:en-de:300", "multi30k:en-fr:300"],
        6,
        *separate,
        "train.best_metric=loss",
        resume=True,
    )
    assert Translator.load(tmp_path / "en-xx").src_tokenizer.vocab_size == translator.src_tokenizer.vocab_size


def test_kept_rows_are_every_pair_or_the_capped_rows_that_the_reader_gave():
    assert kept_rows(4, None).tolist() == [0, 1, 2, 3]
    rows = capped_rows(10, 3)
    assert len(rows) == 3 and kept_rows(10, rows).tolist() == rows.tolist()
    assert kept_rows(3, (0, 2, 5, 9)).tolist() == [0, 2]  # rows 5 and 9: empty lines the reader skipped


COLOURS = {  # one English word -> its German and French word; no word shared between languages
    "red": ("rot", "rouge"),
    "blue": ("blau", "bleu"),
    "green": ("grün", "vert"),
    "black": ("schwarz", "noir"),
    "white": ("weiß", "blanc"),
    "small": ("klein", "petit"),
    "big": ("groß", "grand"),
    "old": ("alt", "vieux"),
}


def colour_lines(n, seed):
    rng = np.random.default_rng(seed)
    words = list(COLOURS)
    return [" ".join(rng.choice(words, size=rng.integers(2, 6))) for _ in range(n)]


def translate_words(sentence, side):
    """Word for word into German (side 0) or French (side 1)."""
    return " ".join(COLOURS[w][side] for w in sentence.split())


def test_the_target_token_steers_a_trained_model_into_the_language_it_names(tmp_path, data_home):
    corpora = tmp_path / "corpora"
    corpora.mkdir()
    for split, n, seed in (("train", 800, 0), ("valid", 20, 1)):
        english = colour_lines(n, seed)
        for lang, side in (("de", 0), ("fr", 1)):
            write_lines(corpora / f"{split}.en-{lang}.en", english)
            write_lines(corpora / f"{split}.en-{lang}.{lang}", [translate_words(s, side) for s in english])
    model_dir = tmp_path / "en-xx"
    # A tiny model's learning rate (d_model 32) is far above a real one's at the same lr_scale; a tenth
    # of it learns the task in a few hundred steps, and 800 leave a margin on every CPU.
    run(model_dir, [f"{corpora}/:en-de", f"{corpora}/:en-fr"], 800, "train.valid_every=800", "train.lr_scale=0.1")

    translator = Translator.load(model_dir)
    trained = set(colour_lines(800, 0))
    unseen = [s for s in colour_lines(40, 2) if s not in trained][:20]
    assert len(unseen) == 20
    german = translator.translate(unseen, target_lang="de", beam=1)
    french = translator.translate(unseen, target_lang="fr", beam=1)
    # One source, two tokens, two languages: each output is (nearly always) the word-for-word
    # rendering in the language its token names, and never holds a word of the other.
    assert sum(g == translate_words(s, 0) for s, g in zip(unseen, german, strict=True)) >= 0.75 * len(unseen), german
    assert sum(f == translate_words(s, 1) for s, f in zip(unseen, french, strict=True)) >= 0.75 * len(unseen), french
    german_words, french_words = (set(words) for words in zip(*COLOURS.values(), strict=True))
    assert not french_words & set(" ".join(german).split())
    assert not german_words & set(" ".join(french).split())

    # Exported for transformers, the same token steers it: OPUS-MT's multi-target usage, word for word.
    transformers = pytest.importorskip("transformers")
    exported = tmp_path / "hf"
    assert (
        subprocess.run(
            [*NMT, "export", "--model", str(model_dir), "--to", "huggingface", "--out", str(exported)]
        ).returncode
        == 0
    )
    model = transformers.MarianMTModel.from_pretrained(exported).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
    for lang, ours in (("de", german), ("fr", french)):
        inputs = tokenizer([f">>{lang}<< {s}" for s in unseen], return_tensors="pt", padding=True)
        with torch.no_grad():
            generated = model.generate(**inputs, num_beams=1, max_new_tokens=12)
        assert tokenizer.batch_decode(generated, skip_special_tokens=True) == ours, lang
