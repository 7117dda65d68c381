"""--engine auto: which engine it picks and why, the export it keeps, and `nmt info`."""

import argparse
import dataclasses
import json
import shutil
import subprocess
import sys

import pytest

from nmt.inference import engine_choice
from nmt.inference.contract import EngineOptions
from nmt.inference.engine_choice import CACHE_KEY, EXPORT_CACHE, cached_export, choose_engine, export_status
from nmt.model_dir import MODEL_CONFIG, WEIGHTS


@pytest.fixture
def model_dir(tiny_model_dir, tmp_path):
    copy = tmp_path / "model"  # without the export other tests' `--engine auto` may have left in it
    shutil.copytree(tiny_model_dir, copy, ignore=shutil.ignore_patterns(EXPORT_CACHE))
    return copy


def test_auto_picks_nmt_where_ctranslate2_cannot_serve(model_dir, monkeypatch):
    gpu = choose_engine(model_dir, "cuda:0", None)
    assert gpu.engine == "torch" and "GPU" in gpu.reason
    assert choose_engine(model_dir, "cpu", "bf16").engine == "torch"
    shutil.copy(model_dir / WEIGHTS, model_dir / "other.safetensors")
    other = choose_engine(model_dir, "cpu", None, weights=model_dir / "other.safetensors")
    assert other.engine == "torch" and "--weights" in other.reason
    (model_dir / "imported_from.json").write_text('{"format": "marian"}')
    imported = choose_engine(model_dir, "cpu", None)
    assert imported.engine == "torch" and "imported Marian" in imported.reason
    (model_dir / "imported_from.json").unlink()
    monkeypatch.setattr(engine_choice, "ctranslate2_installed", lambda: False)
    missing = choose_engine(model_dir, "cpu", None)
    assert missing.engine == "torch" and "pip install ctranslate2" in missing.line()


def test_auto_picks_nmt_for_a_model_that_stops_its_beams_by_transformers_rule(model_dir):
    """CTranslate2 refuses transformers' stopping rule (decode.early_stopping false): auto takes nmt's
    engine for such a model, and `nmt info` says so."""
    pytest.importorskip("ctranslate2")
    choice = choose_engine(model_dir, "cpu", None, transformers_stopping=True)
    assert choice.engine == "torch" and "early_stopping" in choice.reason
    assert choose_engine(model_dir, "cpu", None, transformers_stopping=False).engine == "ctranslate2"


def test_auto_picks_ctranslate2_on_cpu_for_a_model_it_can_run(model_dir):
    pytest.importorskip("ctranslate2")
    assert choose_engine(model_dir, "cpu", None).engine == "ctranslate2"
    # --weights naming the directory's own file is the directory's model: its export stands
    assert choose_engine(model_dir, "cpu", None, weights=model_dir / ".." / model_dir.name / WEIGHTS).engine == (
        "ctranslate2"
    )
    assert choose_engine(model_dir, "cpu", "int8").engine == "ctranslate2"
    config = json.loads((model_dir / MODEL_CONFIG).read_text())
    (model_dir / MODEL_CONFIG).write_text(json.dumps({**config, "norm_position": "sandwich"}))
    odd = choose_engine(model_dir, "cpu", None)
    assert odd.engine == "torch" and "norm_position" in odd.reason and "'sandwich'" in odd.reason


def test_the_export_is_kept_and_made_again_only_when_the_weights_change(model_dir, monkeypatch):
    pytest.importorskip("ctranslate2")
    assert "not made yet" in export_status(model_dir)
    out = cached_export(model_dir)
    assert out == model_dir / EXPORT_CACHE and (out / CACHE_KEY).is_file()
    assert "made from the current files" in export_status(model_dir)
    calls = []
    real = engine_choice.export_ctranslate2
    monkeypatch.setattr(engine_choice, "export_ctranslate2", lambda *a, **k: calls.append(a) or real(*a, **k))
    assert cached_export(model_dir) == out and calls == []  # the same weights: the same export
    weights = model_dir / WEIGHTS
    shutil.copy(model_dir / WEIGHTS, model_dir / "old.safetensors")
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(weights))
    name = next(iter(tensors))
    tensors[name] = tensors[name] + 1.0
    save_file(tensors, str(weights))
    assert "stale" in export_status(model_dir)
    cached_export(model_dir)
    assert len(calls) == 1 and "made from the current files" in export_status(model_dir)
    metrics = model_dir / "metrics.jsonl"
    metrics.write_text('{"step": 1}\n')  # a training log is not part of the model
    cached_export(model_dir)
    assert len(calls) == 1
    config = model_dir / "config.yaml"  # e.g. `nmt tune-length-penalty --write`: the search, not the weights
    config.write_text(config.read_text().replace("length_penalty: 0.6", "length_penalty: 1.5"))
    cached_export(model_dir)
    assert len(calls) == 1 and "length_penalty: 1.5" in (out / "config.yaml").read_text()  # copied over


def test_an_export_without_the_vocabulary_map_is_made_again_when_the_shortlist_is_wanted(model_dir, monkeypatch):
    pytest.importorskip("ctranslate2")
    from nmt.inference.shortlist import SHORTLIST, VOCABULARY_MAP, build_model_shortlist

    build_model_shortlist(model_dir, [("Ein Hund läuft.", "A dog runs.")] * 20)
    out = cached_export(model_dir, shortlist=False)
    assert not (out / VOCABULARY_MAP).exists() and (model_dir / SHORTLIST).is_file()
    assert cached_export(model_dir, shortlist=False) == out  # still current for a run without it
    cached_export(model_dir, shortlist=True)
    assert (out / VOCABULARY_MAP).is_file()
    made = (out / CACHE_KEY).stat().st_mtime_ns
    cached_export(model_dir, shortlist=False)  # one with the map serves a run without it
    assert (out / CACHE_KEY).stat().st_mtime_ns == made


def test_a_folder_in_the_exports_place_is_never_replaced(model_dir):
    pytest.importorskip("ctranslate2")
    (model_dir / EXPORT_CACHE).mkdir()
    (model_dir / EXPORT_CACHE / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="is not a CTranslate2 export"):
        cached_export(model_dir)
    done = run_nmt("translate", "--model", str(model_dir), "--device", "cpu", stdin="Ein Hund.\n")
    assert done.returncode == 2 and "is not a CTranslate2 export" in done.stderr.splitlines()[-1]
    assert (model_dir / EXPORT_CACHE / "notes.txt").read_text() == "mine"


def run_nmt(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "nmt", *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=300)


def test_translate_says_which_engine_auto_chose_and_gives_the_torch_engines_output(model_dir):
    pytest.importorskip("ctranslate2")
    text = "Ein Hund läuft.\nZwei Kinder spielen im Park.\n"
    auto = run_nmt("translate", "--model", str(model_dir), "--device", "cpu", stdin=text)
    assert auto.returncode == 0, auto.stderr
    assert "engine auto: CTranslate2" in auto.stderr
    assert (model_dir / EXPORT_CACHE / CACHE_KEY).is_file()
    torch_run = run_nmt("translate", "--model", str(model_dir), "--engine", "torch", "--device", "cpu", stdin=text)
    assert torch_run.returncode == 0, torch_run.stderr
    assert auto.stdout == torch_run.stdout  # the same model, the same greedy/beam outputs
    # the export returns the attention alignments read: auto stays on CTranslate2, with torch's pairs
    aligned = run_nmt("translate", "--model", str(model_dir), "--alignments", stdin=text)
    assert aligned.returncode == 0, aligned.stderr
    assert "engine auto: CTranslate2" in aligned.stderr
    torch_aligned = run_nmt("translate", "--model", str(model_dir), "--alignments", "--engine", "torch", stdin=text)
    assert aligned.stdout == torch_aligned.stdout and all(" ||| " in line for line in aligned.stdout.splitlines())
    sampled = run_nmt("translate", "--model", str(model_dir), "--sample", "--seed", "1", stdin=text)
    assert sampled.returncode == 0 and "engine auto: nmt's engine, for sampling (--sample)" in sampled.stderr


def test_nmt_info_shows_the_model_and_the_engine_choice(model_dir):
    done = run_nmt("info", str(model_dir), "--device", "cpu", "--json")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["model"].startswith("2+2 layers, d_model 32")
    installed = engine_choice.ctranslate2_installed()
    assert info["engine auto"].startswith("CTranslate2" if installed else "nmt's engine")
    assert info["shortlist"].startswith("none")
    # the defaults, each search setting by its config name (nmt.search_settings.describe_search)
    assert info["decoding"].endswith("no_repeat_ngram_size 0, protect_numbers true, min_len 1, fp32 on CPU")
    assert "not made yet" in info["ctranslate2 export"]
    assert "train.precision=fp32 or bf16 forces either" in info["training here"]
    assert info["word alignments"].startswith("every head of decoder layer -1, averaged")  # no head trained
    assert info["nmt int8 here"].startswith("linear layers fbgemm")  # nmt.inference.precision.int8_here
    text = run_nmt("info", str(model_dir), "--device", "cpu")
    assert text.returncode == 0 and "engine auto" in text.stdout
    missing = run_nmt("info", str(model_dir / "nope"))
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert "MODEL_DIR: model directory" in missing.stderr  # the argument as --help names it (no --model here)


def test_weights_naming_the_directorys_own_file_keep_the_export(model_dir):
    pytest.importorskip("ctranslate2")
    from nmt.translator import Translator

    own = Translator.load(model_dir, engine="auto", weights=model_dir / WEIGHTS)
    shutil.copy(model_dir / WEIGHTS, model_dir / "copy.safetensors")
    other = Translator.load(model_dir, engine="auto", weights=model_dir / "copy.safetensors")
    try:
        assert own.engine.name == "ctranslate2" and other.engine.name == "torch"
        assert own.translate(["ein Hund"]) == other.translate(["ein Hund"])  # the same weights either way
    finally:
        own.close()
        other.close()


def command_line(**given) -> argparse.Namespace:
    """The namespace the CLI's engine options give, with the EngineOptions defaults and `given`."""
    values = {f.name: f.default for f in dataclasses.fields(EngineOptions)}
    return argparse.Namespace(**{**values, "device": "cpu", **given})


def test_a_named_stopping_rule_is_honoured_or_refused_never_a_warning():
    """--no-early-stopping: CTranslate2 has no such rule, so auto takes nmt's engine, and naming
    CTranslate2 is refused; leaving it out keeps auto's own choice."""
    from nmt.cli.common import CommandError, engine_options

    assert engine_options(command_line(engine="auto", early_stopping=False)).engine == "torch"
    assert engine_options(command_line(engine="auto", early_stopping=None)).engine == "auto"
    assert engine_options(command_line(engine="auto", early_stopping=True)).engine == "auto"
    with pytest.raises(CommandError, match=r"stopping rule \(--no-early-stopping\): the ctranslate2 engine cannot"):
        engine_options(command_line(engine="ctranslate2", early_stopping=False))
