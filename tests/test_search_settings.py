"""The search settings are declared once (nmt.search_settings) and every edge is made from that list:
the command-line flags, the JSON API's request fields and its 422 shape, and the four reports."""

import json
import shutil

import pytest

from nmt.cli import main
from nmt.config_checks import ConfigError
from nmt.model_dir import read_decode_config, write_decode_settings
from nmt.search_settings import (
    API_SEARCH_FIELDS,
    SEARCH_FIELD_INFO,
    SEARCH_FIELDS,
    SearchRequest,
    SearchSettings,
    describe_search,
)

# A value other than the default for every setting, so that a report showing a default is caught.
CHOSEN = {
    "beam": 3,
    "length_penalty": 1.5,
    "length_normalization": "average",
    "early_stopping": False,
    "no_repeat_ngram_size": 3,
    "protect_numbers": False,
}


def test_the_chosen_values_cover_every_setting_and_differ_from_its_default():
    assert set(CHOSEN) == set(SEARCH_FIELDS)
    assert all(CHOSEN[name] != SEARCH_FIELD_INFO[name]["default"] for name in SEARCH_FIELDS)


@pytest.fixture(scope="module")
def chosen_dir(tiny_model_dir, tmp_path_factory):
    model_dir = shutil.copytree(tiny_model_dir, tmp_path_factory.mktemp("chosen") / "model")
    write_decode_settings(model_dir, **CHOSEN)
    assert read_decode_config(model_dir).search_settings() == CHOSEN
    return model_dir


def help_of(command: str, capsys) -> str:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", ["translate", "evaluate", "serve"])
def test_every_setting_is_a_flag_of_the_commands_that_search(command, capsys):
    said = help_of(command, capsys)
    for name in SEARCH_FIELDS:
        flag = "--" + name.replace("_", "-")
        assert flag in said, (command, flag)


def test_a_flag_sets_its_setting_for_the_call_and_leaves_the_others_to_the_model(chosen_dir, tmp_path, monkeypatch):
    """The flags of booleans, choices, ints and floats reach the request the CLI builds."""
    from nmt.translator import Translator

    seen, original = [], Translator.request

    def spy(self, **settings):
        seen.append(original(self, **settings))
        return seen[-1]

    monkeypatch.setattr(Translator, "request", spy)
    src = tmp_path / "in.de"
    src.write_text("Ein Mann.\n", encoding="utf-8")
    flags = [
        "--early-stopping",
        "--length-normalization",
        "gnmt",
        "--no-repeat-ngram-size",
        "2",
        "--length-penalty",
        "0",
        "--protect-numbers",
    ]
    assert main(["translate", "--model", str(chosen_dir), "--engine", "torch", "--input", str(src), *flags]) == 0
    request = seen[-1]
    assert request.early_stopping is True and request.length_normalization == "gnmt"
    assert request.no_repeat_ngram_size == 2 and request.length_penalty == 0 and request.protect_numbers is True
    assert request.beam == CHOSEN["beam"]  # not given: the model's own


def test_the_json_api_takes_the_settings_declared_for_it_and_states_them_in_its_422():
    from nmt.server.requests import EXPECTED_BODY, TranslateRequest

    assert API_SEARCH_FIELDS == ("beam", "no_repeat_ngram_size", "protect_numbers")
    fields = set(TranslateRequest.model_fields)
    for name in SEARCH_FIELDS:
        assert (name in fields) == (name in API_SEARCH_FIELDS), name
        assert (f'"{name}": ' in EXPECTED_BODY) == (name in API_SEARCH_FIELDS), name
    body = TranslateRequest.model_validate({"text": ["a"], "beam": 2, "no_repeat_ngram_size": 4})
    assert body.search_settings() == {"beam": 2, "no_repeat_ngram_size": 4, "protect_numbers": None}


def test_evaluate_json_reports_every_setting_the_model_searched_with(chosen_dir, tmp_path, capsys):
    src, ref = tmp_path / "src.de", tmp_path / "ref.en"
    src.write_text("Ein Mann.\nEin Hund.\n")
    ref.write_text("A man.\nA dog.\n")
    args = ["evaluate", "--model", str(chosen_dir), "--src", str(src), "--ref", str(ref), "--json"]
    assert main([*args, "--engine", "torch"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {name: report[name] for name in SEARCH_FIELDS} == CHOSEN


def test_info_names_every_setting_with_its_value(chosen_dir, capsys):
    assert main(["info", str(chosen_dir), "--device", "cpu", "--json"]) == 0
    decoding = json.loads(capsys.readouterr().out)["decoding"]
    assert decoding.startswith(describe_search(SearchSettings(**CHOSEN)))
    for name, value in CHOSEN.items():
        shown = str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else value
        assert f"{name} {shown}" in decoding


def test_health_reports_every_setting(chosen_dir):
    from nmt.server.service import model_info
    from nmt.translator import Translator

    info = model_info(chosen_dir, Translator.load(chosen_dir, device="cpu"))
    assert {name: info[name] for name in SEARCH_FIELDS} == CHOSEN


def test_generation_config_carries_each_setting_transformers_has_under_its_name(chosen_dir):
    from nmt.checkpoint import load_model_dir
    from nmt.pretrained.marian_export import generation_config

    model, decode = load_model_dir(chosen_dir), read_decode_config(chosen_dir)
    generation = generation_config(model, 512, decode, min_len=0)
    for name in SEARCH_FIELDS:
        hf_name = SEARCH_FIELD_INFO[name]["transformers"]
        if hf_name is None:  # transformers' length penalty is nmt's "average" only: what decides the rest;
            assert name in ("length_normalization", "protect_numbers")  # and it reads numbers as they are
        else:
            assert generation[hf_name] == CHOSEN[name], name
    # Under nmt's GNMT penalty transformers cannot run the beam search: greedy stays, the n-gram ban goes.
    gnmt = generation_config(model, 512, SearchSettings(**{**CHOSEN, "length_normalization": "gnmt"}), min_len=0)
    assert "num_beams" not in gnmt and gnmt["no_repeat_ngram_size"] == 3


def test_a_request_is_checked_by_the_rules_of_the_declaration():
    with pytest.raises(ConfigError, match="no_repeat_ngram_size"):
        SearchRequest(no_repeat_ngram_size=-1)
    with pytest.raises(ConfigError, match="length_normalization"):
        SearchRequest(length_normalization="sum")
    assert SearchRequest.of(SearchSettings(**CHOSEN), beam=None, n_best=2).search_settings() == CHOSEN
